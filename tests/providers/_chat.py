"""The chat providers the contract suite runs, one entry each, and the harness a test drives.

An entry (`ChatProvider`) says how to start its wire-format server, build its model (through
the official SDK, as users run it), and write the suite's steps (an answer, a status, a dropped
connection...) in its server's terms. What a provider genuinely lacks is a capability it does
not declare (`capabilities`); the suite's tests that need one ask for it with `requires`, so a
provider without it is left out of the parameters, not skipped inside a test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

import pytest
from pydantic import SecretStr

from parley import Msg
from parley.models import ChatStream
from parley.models.base import ChatModel
from parley.models.retry import RetryPolicy
from parley.providers._server.scripted import ScriptedServer
from parley.providers.anthropic import AnthropicChatModel, AnthropicCredential
from parley.providers.anthropic import server as anthropic_server
from parley.providers.dashscope import DashScopeChatModel, DashScopeCredential
from parley.providers.dashscope import server as dashscope_server
from parley.providers.dashscope._server_wire import stream_events
from parley.providers.gemini import GeminiChatModel, GeminiCredential
from parley.providers.gemini import server as gemini_server
from parley.providers.ollama import OllamaChatModel, OllamaCredential
from parley.providers.ollama import server as ollama_server
from parley.providers.openai import (
    AzureOpenAIChatModel,
    OpenAIChatModel,
    OpenAICredential,
    OpenAIResponseModel,
)
from parley.providers.openai import server as openai_server
from parley.providers.openai._server_wire import chat_chunks, response_events
from tests._requires import require_module
from tests.providers._wording import CHECK_THE_BASE_URL, OLLAMA_SERVE

__all__ = [
    "CHAT_PROVIDERS",
    "HI",
    "TOOLS",
    "WEATHER_FUNCTION",
    "Call",
    "Chat",
    "ChatProvider",
    "Keys",
    "RecordingPolicy",
    "Remote",
    "chat_params",
    "read_into",
    "unset_keys",
]

HI = [Msg.user("Hi")]
"""The one-message conversation most tests send."""

TOOLS: list[dict[str, Any]] = [
    {"name": "weather", "description": "Weather.", "parameters": {"type": "object"}},
    {"name": "time", "description": "Time.", "parameters": {"type": "object"}},
]
"""Two tools to offer a model."""

WEATHER_FUNCTION = {
    "type": "function",
    "function": {"name": "weather", "description": "Weather.", "parameters": {"type": "object"}},
}
"""`TOOLS[0]` as the Chat Completions wire sends it (OpenAI's, DashScope's, Ollama's)."""


async def read_into(seen: list[str], stream: ChatStream) -> None:
    """Read `stream`, keeping each chunk's text in `seen` (those before a failure count)."""
    async for chunk in stream:
        seen.append(chunk.text)  # noqa: PERF401  (a comprehension would lose them on failure)


@dataclass(frozen=True)
class RecordingPolicy(RetryPolicy):
    """A fast backoff (at most 5 ms) that records each wait it chooses."""

    waits: list[float] = field(default_factory=list)

    def delay(self, attempt: int, error: BaseException) -> float:
        wait = super().delay(attempt, error)
        self.waits.append(wait)
        return wait


@dataclass(frozen=True)
class Call:
    """A tool call to script, in no provider's terms."""

    name: str
    arguments: dict[str, Any] | str
    id: str


# What a provider may lack (each test asks for what it needs):
STREAM_END_CHECKED = "stream_end_checked"
"""A stream that ends cleanly but without its last event is refused (`unfinished`)."""
ERROR_EVENT_RETRIED = "error_event_retried"
"""An error event before any chunk reached the caller is tried again."""
STREAMED_ARGUMENTS = "streamed_arguments"
"""Tool-call arguments arrive in pieces (else each call arrives whole in one chunk)."""
OWN_WAIT = "own_wait"
"""It asks for a wait in its own way too, beside `Retry-After` (`own_waits`)."""
FORCED_OUTPUT = "forced_output"
"""Structured output tries a forced call of its tool first, in the Chat Completions shape."""
TOOL_CHOICE = "tool_choice"
"""It takes a tool choice and parallel calls as parameters (`tool_fields`)."""
ON_AIOHTTP = "on_aiohttp"
"""Its client runs on aiohttp: a model never closed closes with its event loop (`unclosed`)."""
STRING_ARGUMENTS = "string_arguments"
"""Tool-call arguments come as JSON text, whole or streamed (broken text is kept raw)."""
STREAMED_USAGE = "streamed_usage"
"""A stream's last event counts the tokens (Azure's API versions before 2024-09 do not)."""
API_KEY = "api_key"
"""It takes an API key, from its credential or the environment (`ChatProvider.keys`)."""
DEFAULT_HOST = "default_host"
"""Its credential aims at a remote host by default, which tests may not reach (`remote`)."""


@dataclass(frozen=True)
class Remote:
    """A credential aimed at a provider's remote host, which tests may not reach."""

    credential: Callable[[], Any]
    host: str
    """The host as the refusal names it (a regex)."""


@dataclass(frozen=True)
class Keys:
    """How a provider takes its API key.

    Args:
        credential: Its credential class (built with `base_url=` and `api_key=`).
        kind: Its credential's `type` in stored settings (`CredentialFactory.from_dict`).
        variables: The environment variables a key is read from, the one read first first
            (a missing key's error names them all, joined by "or").
        header: The request header that carries the key.
        scheme: What stands before the key in that header.
        base_url_variable: The environment variable its endpoint is read from, if any.
    """

    credential: type[Any]
    kind: str
    variables: tuple[str, ...]
    header: str = "authorization"
    scheme: str = "Bearer "
    base_url_variable: str | None = None


@dataclass(frozen=True)
class ChatProvider:
    """One chat provider, as the contract suite drives it.

    Args:
        name: The parameter's id.
        provider: The model's `provider` (as its errors name it).
        module: Its server module (`HTTPError`, `Reset`, `Raw`, `Reply` and the server).
        server: Starts its server (not yet entered).
        build: Builds its model on a server, given the model's keyword arguments.
        model: The model name it is built with (and that answers carry).
        reply: Its `Reply` from the suite's words (text, calls, usage, faults).
        error: Its `HTTPError` for a status and a message.
        lead: Events a stream sends before its first text chunk (for faults at a chunk).
        error_event: The status and message of its servers' default error event.
        unfinished: A stream that ends cleanly without its last event (a `Raw` step).
        context_length: A status answer that means the prompt was too long.
        content_filter: A status answer that means the content was filtered.
        requires: Modules its SDK needs (skipped on a dev machine without, failed in CI).
        capabilities: What it has of what some providers lack (see the constants above).
        keys: How it takes its API key (with `API_KEY`).
        remote: A credential aimed at its remote host (with `DEFAULT_HOST`).
        unclosed: Python that binds `model` to the server at `sys.argv[1]` (with `ON_AIOHTTP`).
        tool_fields: Where its request carries tools and their choice (with `TOOL_CHOICE`):
            the fields, under the body's field `tools_at` if given.
        tools_at: The body's field that holds `tool_fields`, if not the body itself.
        own_waits: 429 answers that ask, in its own way, for a wait of 0.1 s (with `OWN_WAIT`).
        forced_choice: Its `tool_choice` that forces the structured tool (with `FORCED_OUTPUT`).
        hint: What its error says to do when nothing listens (the wording is `_wording`'s).
    """

    name: str
    provider: str
    module: ModuleType
    server: Callable[[], ScriptedServer]
    build: Callable[[Any, dict[str, Any]], ChatModel]
    model: str
    reply: Callable[..., Any]
    error: Callable[[int, str], Any]
    lead: int
    error_event: tuple[int, str]
    unfinished: Callable[[], Any] | None = None
    context_length: Any = None
    content_filter: Any = None
    requires: tuple[tuple[str, str], ...] = ()
    capabilities: frozenset[str] = field(default_factory=frozenset)
    keys: Keys | None = None
    remote: Remote | None = None
    unclosed: str = ""
    tool_fields: tuple[str, ...] = ()
    tools_at: str | None = None
    own_waits: tuple[Any, ...] = ()
    forced_choice: Any = None
    hint: str = CHECK_THE_BASE_URL


def replies(
    module: ModuleType,
    call: Callable[[Call], Any],
    calls_field: str = "tool_calls",
    usage: tuple[str, str] = ("input_tokens", "output_tokens"),
) -> Callable[..., Any]:
    """A provider's `reply`: the suite's words (text, `calls`, token counts, faults) in its
    server's `Reply`, its calls made by `call` and its token counts under the names in `usage`."""

    def reply(
        text: str = "",
        *,
        calls: Iterable[Call] = (),
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        **faults: Any,
    ) -> Any:
        counts = zip(usage, (input_tokens, output_tokens), strict=True)
        faults.update({name: count for name, count in counts if count is not None})
        faults[calls_field] = [call(c) for c in calls]
        return module.Reply(text=text, **faults)

    return reply


def builder(model_class: type, credential: str = "credential") -> Callable[..., Any]:
    """A provider's `build` (of a chat or embedding model): `model_class` on the server's
    credential (`credential` names the server's method), unless the test gives one."""

    def build(server: Any, kwargs: dict[str, Any]) -> Any:
        given = kwargs.pop("credential", None)
        return model_class(given or getattr(server, credential)(), **kwargs)

    return build


def _chat_unfinished() -> Any:
    """Chat Completions chunks with text but no finish reason, then a clean end."""
    chunks = chat_chunks(openai_server.Reply(text="abcd", chunk_size=2), "m", include_usage=False)
    body = b"".join(f"data: {chunk}\n\n".encode() for chunk in chunks[:3])
    return openai_server.Raw(body, content_type="text/event-stream")


def _responses_unfinished() -> Any:
    """A Responses stream without its `response.completed`, then a clean end."""
    events = response_events(openai_server.Reply(text="abcd", chunk_size=2), "m")[:-1]
    body = b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in events)
    return openai_server.Raw(body, content_type="text/event-stream")


def _dashscope_unfinished() -> Any:
    """A DashScope stream without its last event, then a clean end."""
    reply = dashscope_server.Reply(text="abcd", chunk_size=2)
    events = stream_events(reply, multimodal=False, incremental=True)[:-1]
    return dashscope_server.Raw(b"".join(events), content_type="text/event-stream")


OPENAI_KEYS = Keys(
    OpenAICredential, "openai", ("OPENAI_API_KEY",), base_url_variable="OPENAI_BASE_URL"
)
# As google-genai reads them: GOOGLE_API_KEY first.
GEMINI_KEYS = Keys(
    GeminiCredential,
    "gemini",
    ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "x-goog-api-key",
    scheme="",
    base_url_variable="GOOGLE_GEMINI_BASE_URL",
)
DASHSCOPE_KEYS = Keys(
    DashScopeCredential,
    "dashscope",
    ("DASHSCOPE_API_KEY",),
    base_url_variable="DASHSCOPE_HTTP_BASE_URL",
)
OPENAI_REMOTE = Remote(lambda: OpenAICredential(api_key=SecretStr("sk-x")), r"api\.openai\.com")
OLLAMA_REMOTE = Remote(
    lambda: OllamaCredential(host="https://ollama.example.com"), r"ollama\.example\.com"
)
GEMINI_REMOTE = Remote(
    lambda: GeminiCredential(api_key=SecretStr("k")), r"generativelanguage\.googleapis\.com"
)
DASHSCOPE_REMOTE = Remote(
    lambda: DashScopeCredential(api_key=SecretStr("sk-x")), r"dashscope\.aliyuncs\.com"
)

FORCED_CHOICE = {"type": "function", "function": {"name": "generate_response"}}

_EVERY = frozenset(
    {
        STREAM_END_CHECKED,
        ERROR_EVENT_RETRIED,
        STREAMED_ARGUMENTS,
        STREAMED_USAGE,
        API_KEY,
        DEFAULT_HOST,
        STRING_ARGUMENTS,
        TOOL_CHOICE,
    }
)

_OPENAI = ChatProvider(
    name="openai",
    provider="openai",
    module=openai_server,
    server=openai_server.OpenAIServer,
    build=builder(OpenAIChatModel),
    model="gpt-4o-mini",
    reply=replies(openai_server, lambda c: openai_server.ToolCall(c.name, c.arguments, c.id)),
    error=openai_server.HTTPError,
    lead=1,
    error_event=(500, "The server had an error"),
    unfinished=_chat_unfinished,
    context_length=openai_server.HTTPError(400, "too long", code="context_length_exceeded"),
    content_filter=openai_server.HTTPError(400, "filtered", code="content_filter"),
    requires=(("openai", "openai"),),
    capabilities=_EVERY | {OWN_WAIT, FORCED_OUTPUT},
    keys=OPENAI_KEYS,
    remote=OPENAI_REMOTE,
    # OpenAI refuses tool_choice and parallel_tool_calls when no tools are given.
    tool_fields=("tools", "tool_choice", "parallel_tool_calls"),
    own_waits=(openai_server.HTTPError.rate_limit(retry_after_ms=100),),
    forced_choice=FORCED_CHOICE,
)

CHAT_PROVIDERS = [
    _OPENAI,
    replace(
        _OPENAI,
        name="openai-responses",
        build=builder(OpenAIResponseModel),
        model="gpt-4.1",
        lead=3,
        unfinished=_responses_unfinished,
        context_length=None,
        content_filter=None,
        # Its tools have their own shape (tests/providers/openai/test_responses.py).
        capabilities=_OPENAI.capabilities - {FORCED_OUTPUT},
    ),
    replace(
        _OPENAI,
        name="azure-openai",
        provider="azure_openai",
        build=builder(AzureOpenAIChatModel, "azure_credential"),
        model="my-gpt",
        context_length=None,
        content_filter=None,
        # Its API version (2024-06-01) takes no `stream_options`: a stream counts no tokens.
        # Its key and endpoint: tests/providers/openai/test_azure.py.
        capabilities=(_EVERY - {STREAMED_USAGE, API_KEY, DEFAULT_HOST}) | {OWN_WAIT, FORCED_OUTPUT},
        keys=None,
        remote=None,
    ),
    ChatProvider(
        name="anthropic",
        provider="anthropic",
        module=anthropic_server,
        server=anthropic_server.AnthropicServer,
        build=builder(AnthropicChatModel),
        model="claude-sonnet-5-5",
        reply=replies(
            anthropic_server, lambda c: anthropic_server.ToolUse(c.name, c.arguments, c.id)
        ),
        error=anthropic_server.HTTPError,
        lead=3,
        error_event=(529, "Overloaded"),
        unfinished=lambda: anthropic_server.Raw(
            b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m",'
            b' "model": "x", "usage": {"input_tokens": 1, "output_tokens": 1}}}\n\n',
            content_type="text/event-stream",
        ),
        context_length=anthropic_server.HTTPError(
            400, "prompt is too long: 210000 tokens > 200000 maximum"
        ),
        content_filter=anthropic_server.HTTPError(
            400, "Output blocked by content filtering policy"
        ),
        requires=(("anthropic", "anthropic"), ("aiohttp", "anthropic")),
        # A whole answer carries a call's input as an object (streamed: test_chat.py).
        capabilities=(_EVERY - {STRING_ARGUMENTS}) | {ON_AIOHTTP},
        keys=Keys(AnthropicCredential, "anthropic", ("ANTHROPIC_API_KEY",)),
        remote=Remote(
            lambda: AnthropicCredential(api_key=SecretStr("sk-x")), r"api\.anthropic\.com"
        ),
        tool_fields=("tools", "tool_choice"),
        unclosed="""
from parley.providers.anthropic import AnthropicChatModel, AnthropicCredential
credential = AnthropicCredential(api_key="k", base_url=sys.argv[1])
model = AnthropicChatModel(credential, "claude-sonnet-5-5")
""",
    ),
    ChatProvider(
        name="gemini",
        provider="gemini",
        module=gemini_server,
        server=gemini_server.GeminiServer,
        build=builder(GeminiChatModel),
        model="gemini-2.5-flash",
        reply=replies(
            gemini_server,
            lambda c: gemini_server.FunctionCall(c.name, c.arguments, c.id),
            "function_calls",
        ),
        error=gemini_server.HTTPError,
        lead=0,
        error_event=(500, "500 INTERNAL: Internal error"),
        unfinished=lambda: gemini_server.Raw(
            b'data: {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}}]}'
            b"\r\n\r\n",
            content_type="text/event-stream",
        ),
        context_length=gemini_server.HTTPError(
            400,
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
        ),
        requires=(("google.genai", "gemini"),),
        # Gemini sends each function call whole, in one chunk, its arguments an object.
        capabilities=(_EVERY - {STREAMED_ARGUMENTS, STRING_ARGUMENTS}) | {OWN_WAIT},
        keys=GEMINI_KEYS,
        remote=GEMINI_REMOTE,
        tool_fields=("tools", "toolConfig"),
        own_waits=(gemini_server.HTTPError.rate_limit(retry_delay="0.1s"),),  # Google's RetryInfo
    ),
    ChatProvider(
        name="ollama",
        provider="ollama",
        module=ollama_server,
        server=ollama_server.OllamaServer,
        hint=OLLAMA_SERVE,
        build=builder(OllamaChatModel),
        model="qwen3",
        reply=replies(
            ollama_server,
            lambda c: ollama_server.ToolCall(c.name, c.arguments, c.id),
            usage=("prompt_eval_count", "eval_count"),
        ),
        error=ollama_server.HTTPError,
        lead=0,
        error_event=(500, "an error was encountered while running the model"),
        unfinished=lambda: ollama_server.Raw(
            b'{"model": "qwen3", "message": {"role": "assistant", "content": "Hi"},'
            b' "done": false}\n',
            content_type="application/x-ndjson",
        ),
        context_length=ollama_server.HTTPError(400, "the input length exceeds the context length"),
        requires=(("ollama", "ollama"), ("httpx_aiohttp", "ollama")),
        # Ollama sends each tool call whole, in one line; it takes headers, not a key, and no
        # tool choice (its headers, OLLAMA_API_KEY, its tools: tests/providers/ollama/).
        capabilities=(_EVERY - {STREAMED_ARGUMENTS, API_KEY, TOOL_CHOICE}) | {ON_AIOHTTP},
        remote=OLLAMA_REMOTE,
        unclosed="""
from parley.providers.ollama import OllamaChatModel, OllamaCredential
model = OllamaChatModel(OllamaCredential(host=sys.argv[1]), "qwen3")
""",
    ),
    ChatProvider(
        name="dashscope",
        provider="dashscope",
        module=dashscope_server,
        server=dashscope_server.DashScopeServer,
        build=builder(DashScopeChatModel),
        model="qwen-plus",
        reply=replies(
            dashscope_server, lambda c: dashscope_server.ToolCall(c.name, c.arguments, c.id)
        ),
        error=lambda status, message: dashscope_server.HTTPError(status, "InternalError", message),
        lead=0,
        error_event=(500, "An internal error has occured"),
        unfinished=_dashscope_unfinished,
        context_length=dashscope_server.HTTPError(
            400, "InvalidParameter", "Range of input length should be [1, 30720]"
        ),
        content_filter=dashscope_server.HTTPError(
            400, "DataInspectionFailed", "Input data may contain inappropriate content."
        ),
        requires=(("dashscope", "dashscope"),),
        capabilities=_EVERY | {ON_AIOHTTP, FORCED_OUTPUT},
        keys=DASHSCOPE_KEYS,
        remote=DASHSCOPE_REMOTE,
        tool_fields=("tools", "tool_choice", "parallel_tool_calls"),
        tools_at="parameters",
        forced_choice=FORCED_CHOICE,
        unclosed="""
from parley.providers.dashscope import DashScopeChatModel, DashScopeCredential
credential = DashScopeCredential(api_key="k", base_url=sys.argv[1])
model = DashScopeChatModel(credential, "qwen-plus")
""",
    ),
]
"""Every chat provider of parley's that has a wire-format server."""


def chat_params(*needs: str) -> list[Any]:
    """The `chat` fixture's parameters: the providers that have every capability in `needs`."""
    return [
        pytest.param(entry, id=entry.name)
        for entry in CHAT_PROVIDERS
        if set(needs) <= entry.capabilities
    ]


class Chat:
    """One provider's running server and the models built on it, for one test."""

    def __init__(self, entry: ChatProvider, server: Any) -> None:
        self.entry = entry
        self.server = server
        self.made: list[ChatModel] = []

    @property
    def name(self) -> str:
        """The model name the models are built with."""
        return self.entry.model

    def model(self, **kwargs: Any) -> Any:
        """A model on this server: fast backoff, `Retry-After` waits as the server asks."""
        kwargs.setdefault("max_retries", 2)
        kwargs.setdefault("model", self.entry.model)
        max_retries = kwargs["max_retries"]
        made = self.entry.build(self.server, kwargs)
        made.retry = RecordingPolicy(max_retries=max_retries, initial_delay=0.001, max_delay=0.005)
        self.made.append(made)
        return made

    def add(self, *steps: Any) -> None:
        """Script the server's next answers."""
        self.server.add(*steps)

    def reply(self, text: str = "", **fields: Any) -> Any:
        """An answer in the provider's wire format (`calls`, usage, faults as keywords)."""
        return self.entry.reply(text, **fields)

    def error(self, status: int, message: str = "scripted error") -> Any:
        """A status with the provider's error body."""
        return self.entry.error(status, message)

    def rate_limit(self, retry_after: float) -> Any:
        """A 429 that asks to wait `retry_after` seconds (`Retry-After`)."""
        return self.entry.module.HTTPError.rate_limit(retry_after=retry_after)

    def reset(self) -> Any:
        """The connection dropped without an answer."""
        return self.entry.module.Reset()

    def raw(self, body: bytes, content_type: str = "application/json") -> Any:
        """An answer sent as given."""
        return self.entry.module.Raw(body, content_type=content_type)

    def at(self, chunk: int) -> int:
        """The stream event at which the `chunk`-th text chunk (from 0) would be sent."""
        return self.entry.lead + chunk


def unset_keys(keys: Keys | None, monkeypatch: pytest.MonkeyPatch) -> Keys:
    """`keys` (a provider's, for the suites' key tests), with none of its variables set."""
    assert keys is not None
    for name in keys.variables:
        monkeypatch.delenv(name, raising=False)
    return keys


def require(entry: ChatProvider) -> None:
    """Skip (fail in CI) when the SDK of `entry` is not installed."""
    for module, extra in entry.requires:
        require_module(module, extra)
