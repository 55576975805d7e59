"""llama.cpp in-process: models loaded once per process, generations run in a worker thread.

A loaded model (`Engine`) is shared by every `LocalChatModel` that names the same file,
context size and thread count. llama.cpp's context serves one generation at a time, so each
engine has a lock; a generation runs in its own worker thread, which hands deltas to the
event loop through `loop.call_soon_threadsafe`, and the loop never blocks on the model.

Generations go through llama-cpp-python's chat handlers (the GGUF's own chat template, or
`chatml-function-calling` for tools of models whose template knows none), or, for tools in
the model's own format, through `_native` (the template renders, a grammar constrains the
call). Both are given a stand-in for the `Llama` (`_LlamaProxy`) whose
`create_completion` adds what the handlers do not pass on: a stopping criterion that ends
the generation when the caller stops listening, a cap on `max_tokens` (the automatic
tool-choice path asks for unlimited tokens), the seed (which `chatml-function-calling` drops),
and token counting for usage.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from parley.errors import (
    ConfigurationError,
    ContextLengthError,
    MissingDependencyError,
    ModelError,
    ParleyError,
)
from parley.models.accumulator import Delta, MetaDelta, TextDelta, ToolCallDelta
from parley.models.response import ChatUsage, FinishReason
from parley.providers.local._native import NativeCall, generate_native

if TYPE_CHECKING:
    from types import ModuleType

    import numpy as np
    import numpy.typing as npt
    from llama_cpp.llama import Llama

__all__ = ["Engine", "EngineKey", "Job", "close_engines", "get_engine", "stream_job"]

PROVIDER = "local"


def import_llama_cpp() -> ModuleType:
    """`llama_cpp`, imported on first use.

    Raises:
        MissingDependencyError: llama-cpp-python is not installed (extra `local`).
    """
    try:
        import llama_cpp  # noqa: PLC0415  (heavy, optional)
    except ImportError:
        raise MissingDependencyError("llama_cpp", "local") from None
    _keep_process_output()
    return llama_cpp


class _KeepOutput(contextlib.AbstractContextManager[None]):
    """llama-cpp-python's `suppress_stdout_stderr`, doing nothing (`_keep_process_output`)."""

    def __init__(self, disable: bool = True) -> None:
        del disable  # its argument, unused: there is nothing to turn off

    def __exit__(self, *_: object) -> None:
        return None


def _keep_process_output() -> None:
    """Stop llama-cpp-python from silencing the whole process while a model loads.

    With `verbose=False` it points file descriptors 1 and 2 (and `sys.stdout`, `sys.stderr`)
    at /dev/null around a model's load: every thread's output is lost meanwhile (a served
    request's access line, a warning, a traceback), and two loads at once can leave them
    pointed there for good (abetlen/llama-cpp-python#1874). llama.cpp's own lines go through
    the log callback llama-cpp-python installs, which with `verbose=False` prints errors
    only: without the redirection nothing more is printed.
    """
    import llama_cpp._internals  # noqa: PLC0415 - imported with llama_cpp already
    import llama_cpp.llama  # noqa: PLC0415
    import llama_cpp.llama_chat_format  # noqa: PLC0415

    for module in (llama_cpp.llama, llama_cpp._internals, llama_cpp.llama_chat_format):
        if hasattr(module, "suppress_stdout_stderr"):
            setattr(module, "suppress_stdout_stderr", _KeepOutput)  # noqa: B010 - a module's


@dataclass(frozen=True)
class EngineKey:
    """What makes two loaded models the same: the file, context size and threads."""

    path: str
    n_ctx: int
    n_threads: int


@dataclass
class Engine:
    """A loaded model and the lock that lets one generation use it at a time."""

    key: EngineKey
    llama: Llama
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False


_engines: dict[EngineKey, Engine] = {}
_engines_lock = threading.Lock()
_running: set[threading.Event] = set()
"""The stop events of the generations under way, set at exit."""


def get_engine(key: EngineKey) -> Engine:
    """The engine for `key`, loading the model the first time (blocking: call it in a thread).

    Raises:
        MissingDependencyError: llama-cpp-python is not installed.
        ConfigurationError: llama.cpp cannot load the file.
    """
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            if not _engines:
                atexit.register(close_engines)
            engine = _engines[key] = Engine(key, _load(key))
        return engine


def close_engines(wait: float = 2.0) -> None:
    """Stop the generations under way and free every loaded model.

    Runs at exit too: llama-cpp-python frees a model in `__del__`, which fails noisily when it
    runs during interpreter shutdown, after the modules it needs are gone.
    """
    for stop in list(_running):
        stop.set()
    with _engines_lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        # A worker still inside llama.cpp must not have the model freed under it.
        if engine.lock.acquire(timeout=wait):
            try:
                engine.closed = True
                engine.llama.close()
            finally:
                engine.lock.release()


def _load(key: EngineKey) -> Llama:
    llama_cpp = import_llama_cpp()
    try:
        return cast(
            "Llama",
            llama_cpp.Llama(
                model_path=key.path,
                n_ctx=key.n_ctx,
                n_threads=key.n_threads,
                # Prompt processing too (llama-cpp-python would take every core for it).
                n_threads_batch=key.n_threads,
                # llama.cpp's other attention path (0.3.36, x86-64-v3 build) garbles prompts
                # evaluated in batches: SmolLM2 then answers "What is the capital of France?"
                # with "La femme de France..." (token by token it says Paris). Flash attention
                # computes them right, and is the faster path on CPUs anyway.
                flash_attn=True,
                verbose=False,
            ),
        )
    except ValueError as exc:  # llama-cpp-python's "Failed to load model from file"
        raise ConfigurationError(f"llama.cpp cannot load {key.path}: {exc}") from None


def map_error(error: BaseException, model: str) -> BaseException:
    """llama.cpp's failures as parley errors: the one place they are mapped."""
    if isinstance(error, ParleyError):
        return error
    text = str(error)
    if isinstance(error, ValueError) and "exceed context window" in text:
        return ContextLengthError(text, model=model, provider=PROVIDER)
    if isinstance(error, Exception):
        return ModelError(f"llama.cpp failed: {error!r}", model=model, provider=PROVIDER)
    return error


@dataclass
class Job:
    """One generation, in llama-cpp-python's terms."""

    messages: list[dict[str, Any]]
    chat_format: str | None
    """None: the Llama's own (the GGUF's template); else a registered handler's name."""
    stream: bool
    max_tokens: int
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    seed: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    """Sampling options and `response_format`, passed to `create_chat_completion`."""
    native: NativeCall | None = None
    """Tools in the model's own format (`_native`): then `messages` and `chat_format` are unused."""


class _LlamaProxy:
    """Stands in for the `Llama` inside a chat handler: stops, caps and counts completions."""

    def __init__(self, llama: Llama, job: Job, stop: threading.Event, model: str) -> None:
        self._llama = llama
        self._model = model
        self._stop = stop
        self._max_tokens = job.max_tokens
        self._seed = job.seed
        # Read by `Llama.create_chat_completion` to pick the handler.
        self.chat_format = job.chat_format or llama.chat_format
        self.chat_handler = llama.chat_handler if job.chat_format is None else None
        self.prompt_tokens = 0
        self.sampled = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, prompt: str | list[int], **kwargs: Any) -> Any:
        from llama_cpp.llama import StoppingCriteriaList  # noqa: PLC0415

        size = len(prompt) if isinstance(prompt, list) else self._count(prompt)
        self.prompt_tokens = max(self.prompt_tokens, size)
        window = self._llama.n_ctx()
        if size >= window:
            raise ContextLengthError(
                f"the prompt has {size} tokens; the context window holds {window}",
                model=self._model,
                provider=PROVIDER,
            )
        if kwargs.get("max_tokens") is None:
            kwargs["max_tokens"] = self._max_tokens
        if kwargs.get("seed") is None:  # `chatml-function-calling` drops the seed
            kwargs["seed"] = self._seed
        criteria = StoppingCriteriaList([self._should_stop])
        if kwargs.get("stopping_criteria"):
            criteria.extend(kwargs["stopping_criteria"])
        kwargs["stopping_criteria"] = criteria
        # llama.cpp asks the criteria once per sampled token and once more at the end.
        self.sampled -= 1
        return self._llama.create_completion(prompt, **kwargs)

    def _count(self, prompt: str) -> int:
        return len(self._llama.tokenize(prompt.encode("utf-8"), special=True))

    def _should_stop(self, input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        self.sampled += 1
        return self._stop.is_set()

    def usage(self) -> ChatUsage:
        return ChatUsage(input_tokens=self.prompt_tokens, output_tokens=max(self.sampled, 0))


_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


def _chunk_deltas(chunk: Mapping[str, Any], named: set[int]) -> Iterator[Delta]:
    choice = chunk["choices"][0]
    delta: Mapping[str, Any] = choice.get("delta") or {}
    if content := delta.get("content"):
        yield TextDelta(content)
    for call in delta.get("tool_calls") or ():
        key = int(call.get("index", 0))
        function: Mapping[str, Any] = call.get("function") or {}
        first = key not in named
        named.add(key)
        # The handler repeats the id and name in every chunk; the accumulator takes the first.
        yield ToolCallDelta(
            key,
            id=call.get("id") if first else None,
            name=function.get("name") if first else None,
            arguments=function.get("arguments") or "",
        )


def _message_deltas(message: Mapping[str, Any]) -> Iterator[Delta]:
    if content := message.get("content"):
        yield TextDelta(content)
    for key, call in enumerate(message.get("tool_calls") or ()):
        function: Mapping[str, Any] = call["function"]
        yield ToolCallDelta(key, call.get("id"), function["name"], function.get("arguments") or "")


def generate(engine: Engine, job: Job, stop: threading.Event, model: str) -> Iterator[Delta]:
    """Run `job` on `engine` (in the calling thread), yielding deltas, then a `MetaDelta`.

    The caller holds `engine.lock`. Setting `stop` ends the generation at the next token.
    """
    from llama_cpp.llama import Llama  # noqa: PLC0415

    llama = engine.llama
    proxy = _LlamaProxy(llama, job, stop, model)
    if job.native is not None:
        yield from generate_native(
            proxy, job.native, {**job.options, "max_tokens": job.max_tokens}, stop
        )
        return
    result = Llama.create_chat_completion(
        cast("Llama", proxy),
        messages=cast("Any", job.messages),
        tools=cast("Any", job.tools),
        tool_choice=cast("Any", job.tool_choice),
        stream=job.stream,
        **job.options,
    )
    finish: str | None = None
    response_id: str | None = None
    if job.stream:
        chunks = cast("Iterator[Mapping[str, Any]]", result)
        named: set[int] = set()
        try:
            for chunk in chunks:
                if stop.is_set():
                    return
                response_id = chunk.get("id")
                yield from _chunk_deltas(chunk, named)
                finish = chunk["choices"][0].get("finish_reason") or finish
        finally:
            closer = getattr(chunks, "close", None)
            if closer is not None:
                closer()
    else:
        response = cast("Mapping[str, Any]", result)
        response_id = response.get("id")
        choice = response["choices"][0]
        yield from _message_deltas(choice["message"])
        finish = choice.get("finish_reason")
    yield MetaDelta(
        usage=proxy.usage(),
        finish_reason=_FINISH.get(finish or "stop", "stop"),
        response_id=response_id,
    )


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_DONE = object()


async def stream_job(engine: Engine, job: Job, model: str) -> AsyncIterator[Delta]:
    """Run `job` in a worker thread and stream its deltas to the event loop.

    Leaving the iteration early (the caller cancelled, or stopped reading) stops the worker
    at its next token and frees the engine for the next generation.

    Raises:
        ModelError: llama.cpp failed (mapped by `map_error`).
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    stop = threading.Event()

    def emit(item: object) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            stop.set()

    def work() -> None:
        try:
            with engine.lock:
                if stop.is_set():
                    return
                if engine.closed:
                    raise ModelError("the model was closed", model=model, provider=PROVIDER)
                for delta in generate(engine, job, stop, model):
                    emit(delta)
        except BaseException as error:  # handed to the event loop, raised there
            emit(_Failed(error))
        finally:
            emit(_DONE)

    _running.add(stop)
    threading.Thread(target=work, name="parley-local-model", daemon=True).start()
    try:
        while (item := await queue.get()) is not _DONE:
            if isinstance(item, _Failed):
                mapped = map_error(item.error, model)
                raise mapped from (None if mapped is item.error else item.error)
            yield item
    finally:
        stop.set()
        _running.discard(stop)
