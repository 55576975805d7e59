"""`DashScopeChatModel`: Qwen models on DashScope's native API through the `dashscope` SDK.

Requests go through the SDK's 2.0 `AsyncClient` (see `_sdk`): the SDK builds the request
(`protocol.build_chat_request`: the endpoint, `result_format: "message"`, the SSE header)
and sends it on its transport (auth, base URL, workspace, error statuses), over an httpx
client whose connections are aiohttp's; parley reads the raw answer itself (`_wire`), as the
OpenAI adapter does, which keeps the SDK's per-chunk pydantic models off a stream's hot path.

Quirks, from Model Studio's guides: thinking streams only, and QwQ, QVQ, the Omni models and
Qwen3's open models (thinking by default) answer only streamed calls, so their whole answers
are streamed and gathered; `tool_choice` takes `auto`, `none` or one function, not
`required` (with one tool it is named, with several `auto` is sent and a warning logged);
forcing a tool is refused while thinking, so structured output turns thinking off next; a
stream repeats the whole text in every event unless `incremental_output` is set, which
parley sets unless told otherwise.

Not read (yet): audio output (Qwen-Omni's `modalities`), web search sources
(`output.search_info`), and the thinking tokens apart (`output_tokens` counts them; parley's
`Usage` has no field for the breakdown).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from parley.models._wire import read_json
from parley.models.accumulator import Delta, StreamAccumulator
from parley.models.base import ChatModel, ChatRequest
from parley.models.credentials import Credential
from parley.models.formatter import Formatter
from parley.models.parameters import Parameters
from parley.models.response import ChatResponse
from parley.providers.dashscope._errors import dashscope_errors
from parley.providers.dashscope._sdk import DashScopeClients
from parley.providers.dashscope._upload import OSS_RESOLVE_HEADER, Uploader
from parley.providers.dashscope._wire import StreamReader, completion_deltas
from parley.providers.dashscope.credentials import DashScopeCredential
from parley.providers.dashscope.formatter import (
    DashScopeChatFormatter,
    DashScopeMultiAgentFormatter,
    has_media,
)
from parley.providers.dashscope.parameters import DashScopeChatParameters

if TYPE_CHECKING:
    from pathlib import Path


__all__ = ["DashScopeChatModel", "is_multimodal_model", "is_stream_only"]

logger = logging.getLogger("parley.models")

_MULTIMODAL = re.compile(r"-vl(-|$)|^qvq|omni|-audio|^qwen3\.[5-9]")
_STREAM_ONLY = re.compile(r"^(qwq|qvq)|omni|-thinking($|-)")
# Qwen3's open models on Model Studio: qwen3-0.6b, -1.7b, -4b ... -32b, -30b-a3b, -235b-a22b.
_HYBRID_OPEN = re.compile(r"^qwen3-\d+(\.\d+)?b(-a\d+b)?$")


def is_multimodal_model(name: str) -> bool:
    """Whether a model is served by multimodal generation (Qwen-VL, Qwen-Omni, QVQ, Qwen3.5+).

    Model Studio's docs: the VL, Omni, QVQ and audio families, and the Qwen3.5 series (whose
    text models too are called through the multimodal API).
    """
    return bool(_MULTIMODAL.search(name.lower()))


def is_stream_only(name: str, enable_thinking: bool | None) -> bool:
    """Whether a model answers only streamed calls (DashScope refuses a whole answer).

    QwQ, QVQ, the Omni models and thinking-only models stream only; so do Qwen3's open
    models while thinking, which they do by default; and thinking in general is streamed
    (the deep-thinking guide), so a call asking for it streams.
    """
    lower = name.lower()
    if enable_thinking or _STREAM_ONLY.search(lower):
        return True
    return bool(_HYBRID_OPEN.match(lower)) and enable_thinking is None


@dataclass
class _Call:
    """One request as sent: the endpoint, the body, the headers, how to read a stream."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    incremental: bool = True


class DashScopeChatModel(DashScopeClients, ChatModel):
    """A Qwen model on DashScope's native API (text generation and multimodal generation).

    Text models (`qwen-plus`, `qwen-max`, `qwen3-max`, `qwq-plus`...) go to text generation;
    Qwen-VL, Qwen-Omni, QVQ and the Qwen3.5 series to multimodal generation, as does any call
    whose messages hold images, audio or video. Thinking streams as `reasoning_content`;
    streams ask for `incremental_output` (a stream without it repeats the whole text in
    every event; both are read right). Whole answers from models that only stream are
    streamed and gathered.

    Example:
        >>> model = DashScopeChatModel(DashScopeCredential(api_key="sk-..."), "qwen-plus")
        >>> response = await model([Msg.user("Hi!")])  # doctest: +SKIP

    Args:
        credential: The key and endpoint (`DashScopeCredential`); from the environment when
            None.
        model: The model's name at DashScope.
        parameters: `DashScopeChatParameters`, or a dict of them.
        stream: Whether calling the model (`await model(...)`) streams.
        max_retries: Tries after the first on retryable failures.
        context_size: The context window in tokens; from the model card when not given.
        formatter: Overrides how messages become the payload.
        multimodal: Force (True) or forbid (False) the multimodal endpoint; by default it is
            chosen from the model's name and the messages.
        upload_files: Upload local media to DashScope's temporary storage, as the SDK does,
            instead of sending them inline (see `_upload`).
        cache_dir: Turns on the on-disk response cache in this folder.
        timeout: Seconds to wait for the provider to answer.
    """

    multi_agent_formatter_class = DashScopeMultiAgentFormatter

    provider: ClassVar[str] = "dashscope"
    credential_class: ClassVar[type[Credential] | None] = DashScopeCredential
    parameters_class: ClassVar[type[Parameters]] = DashScopeChatParameters
    cards_location: ClassVar[str | None] = "parley.providers.dashscope"
    # Forced tool choice is refused while thinking: retry with thinking off; then the JSON
    # schema response format, which some Qwen models take.
    structured_strategies: ClassVar[tuple[str, ...]] = (
        "forced",
        "thinking_off",
        "native",
        "auto",
        "text",
    )
    thinking_off: ClassVar[dict[str, Any]] = {"enable_thinking": False}

    def __init__(
        self,
        credential: Credential | None = None,
        model: str = "",
        parameters: Parameters | Mapping[str, Any] | None = None,
        stream: bool = False,
        max_retries: int = 3,
        context_size: int | None = None,
        formatter: Formatter | None = None,
        *,
        multimodal: bool | None = None,
        upload_files: bool = False,
        cache_dir: str | Path | None = None,
        timeout: float = 120.0,
    ) -> None:
        super().__init__(
            credential,
            model,
            parameters,
            stream,
            max_retries,
            context_size,
            formatter,
            cache_dir=cache_dir,
            timeout=timeout,
        )
        self.multimodal = multimodal
        self.upload_files = upload_files

    # -- the client -----------------------------------------------------------------------

    # -- the request ----------------------------------------------------------------------

    def default_formatter(self, *, multimodal: bool) -> Formatter:
        """The formatter used when none was given."""
        return DashScopeChatFormatter(
            multimodal=multimodal, inline_local_files=not self.upload_files
        )

    def uses_multimodal(self, request: ChatRequest) -> bool:
        """Whether a call goes to multimodal generation."""
        if self.multimodal is not None:
            return self.multimodal
        return is_multimodal_model(self.model) or has_media(request.messages)

    def _formatter(self, multimodal: bool) -> Formatter:
        formatter = self.formatter
        if formatter is None:
            return self.default_formatter(multimodal=multimodal)
        if isinstance(formatter, DashScopeChatFormatter | DashScopeMultiAgentFormatter):
            return formatter.for_endpoint(
                multimodal=multimodal, inline_local_files=not self.upload_files
            )
        return formatter

    def wire_parameters(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The request's `parameters` (besides the SDK's `result_format`)."""
        fields = request.parameters.to_kwargs()
        extra = fields.pop("extra_parameters", None) or {}
        if stream:
            fields.setdefault("incremental_output", True)
        else:
            fields.pop("incremental_output", None)
        if request.tools:
            fields["tools"] = [spec.openai() for spec in request.tools]
            if (choice := self._tool_choice(request)) is not None:
                fields["tool_choice"] = choice
        else:
            fields.pop("parallel_tool_calls", None)
        if fields.pop("json_object", None):
            fields["response_format"] = {"type": "json_object"}
        if request.response_format is not None:
            schema = {"name": "response", "schema": request.response_format}
            fields["response_format"] = {"type": "json_schema", "json_schema": schema}
        fields.update(extra)
        return fields

    def _tool_choice(self, request: ChatRequest) -> Any:
        choice = request.tool_choice
        if choice in (None, "auto", "none"):
            return choice
        if choice == "required":
            # DashScope takes `auto`, `none` or one named function, not `required`: with one
            # tool, naming it means the same; with several, the model is left to choose.
            if len(request.tools) == 1:
                choice = request.tools[0].name
            else:
                logger.warning("DashScope has no tool_choice 'required'; sending 'auto'")
                return "auto"
        return {"type": "function", "function": {"name": choice}}

    async def prepare(self, request: ChatRequest, *, stream: bool) -> _Call:
        """The request as it will be sent (local media uploaded first when asked)."""
        multimodal = self.uses_multimodal(request)
        messages = self._formatter(multimodal).format(request.messages)
        parameters = self.wire_parameters(request, stream=stream)
        client = self.client()
        protocol = client.protocol
        built = protocol.build_chat_request(
            model=self.model,
            messages=messages,
            stream=stream,
            extra_parameters=parameters,
            path=protocol.MULTIMODAL_PATH if multimodal else None,
        )
        call = _Call(built.path, built.body, dict(built.headers))
        call.incremental = built.body["parameters"].get("incremental_output", True) is not False
        if self.upload_files and await self._uploader().upload(built.body["input"]["messages"]):
            call.headers.update(OSS_RESOLVE_HEADER)
        return call

    def _uploader(self) -> Uploader:
        credential = self.dashscope_credential
        return Uploader(
            model=self.model,
            api_key=self._api_key(),
            base_url=self.endpoint(),
            workspace=credential.workspace,
            timeout=self.timeout,
            check_host=self.check_allowed,
            provider=self.provider,
        )

    # -- calling --------------------------------------------------------------------------

    def errors(self) -> AbstractContextManager[None]:
        """Map SDK and transport errors raised inside the block to parley's."""
        return dashscope_errors(self.model, self.provider)

    def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        return self._events(request)

    async def _events(self, request: ChatRequest) -> AsyncIterator[Delta]:
        self.check_allowed(self.endpoint())
        call = await self.prepare(request, stream=True)
        reader = StreamReader(
            model=self.model, provider=self.provider, incremental=call.incremental
        )
        client = self.client()
        with self.errors():
            response = await client.transport.open_stream(
                "POST",
                call.path,
                json=call.body,
                headers=call.headers,
                base_url=client.config.protocol_base_url,
                sdk_module="aigc",
            )
            try:
                # Read to the end, past the last event: a connection whose body was read
                # whole goes back to the pool for the next call.
                async for chunk in response.aiter_bytes():
                    for delta in reader.read(chunk):
                        yield delta
                    if reader.failure is not None:
                        raise reader.failure
                for delta in reader.end():
                    yield delta
            finally:
                await response.aclose()
        if not reader.complete:
            raise reader.incomplete()

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        enable_thinking = getattr(request.parameters, "enable_thinking", None)
        if is_stream_only(self.model, enable_thinking):
            return await super()._complete(request)
        self.check_allowed(self.endpoint())
        call = await self.prepare(request, stream=False)
        client = self.client()
        with self.errors():
            response = await client.transport.request(
                "POST",
                call.path,
                json=call.body,
                headers=call.headers or None,
                base_url=client.config.protocol_base_url,
                sdk_module="aigc",
            )
            if response.status_code >= 400:
                from dashscope.v2.errors import response_error  # noqa: PLC0415

                error = response_error(response)
                if error is not None:
                    raise error
        body = read_json(response.content, model=self.model, provider=self.provider)
        accumulator = StreamAccumulator(self.model)
        for delta in completion_deltas(body, model=self.model, provider=self.provider):
            accumulator.add(delta)
        return accumulator.final()
