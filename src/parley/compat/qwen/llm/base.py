"""Qwen-Agent's model interface (`qwen_agent.llm.base`): `BaseChatModel`, its registry, errors.

`BaseChatModel.chat(messages, functions=None, stream=True, delta_stream=False,
extra_generate_cfg=None)` answers as Qwen-Agent's does: with `stream`, an iterator of the
whole response so far (a reasoning message, a content message, one message per function call
with `extra["function_id"]`), else the list; dicts in give dicts out, `Message`s give
`Message`s. `delta_stream=True` yields only what is new in each step (text only, as in
Qwen-Agent: with `functions` it raises `NotImplementedError`).

Two kinds of models answer:

- the model types Qwen-Agent has (`oai`, `qwen_dashscope`, ..., see `parley.compat.qwen.llm`)
  are `ParleyChatModel`s: the config is read into a parley `ChatModel`
  (`parley.compat.qwen._llm_config`) and each call is made by it (`parley.compat.qwen._llm`),
  with its retries, response cache, timeouts and context budget;
- a class a user registers (`@register_llm("mine")`) implements Qwen-Agent's hooks
  `_chat_stream`, `_chat_no_stream` and, for functions, `_chat_with_functions` (or inherits
  `BaseFnCallModel`'s, which writes the functions into the prompt); `chat` prepares the
  messages and settings for them, retries a `ModelServiceError` up to `max_retries`, and
  converts the result, as Qwen-Agent's `chat` does.

A model failure raises `ModelServiceError` (a parley `ModelError` too), with `code` (the HTTP
status as a string, when there was one) and `message`.
"""

from __future__ import annotations

import abc
import copy
import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from parley._sync import iterate_sync, run_sync
from parley.agents.prompted import PromptedToolsModel
from parley.compat.qwen._llm import budget_for, merge_generate_cfgs, prepare_call
from parley.compat.qwen._llm_config import LLMConfig, config_for
from parley.compat.qwen._response import QwenMessages, QwenResponse, output
from parley.compat.qwen.convert import as_dicts_like
from parley.compat.qwen.llm._text_only import TEXT_ONLY_TYPES, as_text_messages
from parley.compat.qwen.schema import (
    ASSISTANT,
    DEFAULT_SYSTEM_MESSAGE,
    SYSTEM,
    USER,
    Message,
)
from parley.errors import ConfigurationError, MessageError, ModelError, ModelHTTPError
from parley.models.base import ChatModel

__all__ = [
    "LLM_REGISTRY",
    "BaseChatModel",
    "ModelServiceError",
    "ParleyChatModel",
    "has_chinese",
    "register_llm",
]

logger = logging.getLogger("parley.compat.qwen")

T = TypeVar("T")
M = TypeVar("M", bound="type[BaseChatModel]")

_CHINESE = re.compile(r"[\u4e00-\u9fff]")

LLM_REGISTRY: dict[str, type[BaseChatModel]] = {}
"""The model classes by model type, as `get_chat_model` picks them."""


def register_llm(model_type: str) -> Callable[[M], M]:
    """Register a model class under a model type (a decorator), as Qwen-Agent's does."""

    def decorator(cls: M) -> M:
        LLM_REGISTRY[model_type] = cls
        return cls

    return decorator


def has_chinese(messages: Sequence[Message]) -> bool:
    """Whether a system or user message holds Chinese, which makes Qwen-Agent's `lang` `zh`."""
    return any(
        m.role in (SYSTEM, USER) and _CHINESE.search(str(m.content)) is not None for m in messages
    )


class ModelServiceError(ModelError):
    """A model call failed (Qwen-Agent's `ModelServiceError`; also a parley `ModelError`).

    Args:
        exception: The error underneath, when there is one (its text is this error's).
        code: An error code: the HTTP status as a string (`'400'`), or the provider's code.
        message: What went wrong.
        extra: Anything else the service said.
    """

    def __init__(
        self,
        exception: BaseException | None = None,
        code: str | None = None,
        message: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        text = str(exception) if exception is not None else f"\nError code: {code}. "
        if exception is None:
            text += f"Error message: {message}"
        model = getattr(exception, "model", None)
        provider = getattr(exception, "provider", None)
        super().__init__(text, model=model, provider=provider)
        self.exception = exception
        self.code = code
        self.message = message
        self.extra = extra

    @classmethod
    def from_error(cls, error: ModelError) -> ModelServiceError:
        """The `ModelServiceError` of a parley model error (itself, if it is one)."""
        if isinstance(error, ModelServiceError):
            return error
        code = str(error.status_code) if isinstance(error, ModelHTTPError) else None
        made = cls(exception=error, code=code, message=str(error))
        made.__cause__ = error
        return made


def service_errors(responses: Iterator[T]) -> Iterator[T]:
    """`responses`, a parley `ModelError` while iterating raised as a `ModelServiceError`."""
    try:
        yield from responses
    except ModelError as exc:
        raise ModelServiceError.from_error(exc) from exc


class BaseChatModel(abc.ABC):
    """Qwen-Agent's model base class (see the module docs).

    Args:
        cfg: The llm config: `model`, `model_type`, `generate_cfg` (its `max_retries` and
            `use_raw_api` are read here, the rest is the calls' settings).

    Attributes:
        model: The model's name.
        model_type: The model type.
        generate_cfg: The settings for every call (without `max_retries` and `use_raw_api`).
        max_retries: How often a failed call is retried (Qwen-Agent's default: 0).
        use_raw_api: Whether functions go to the service natively.
    """

    @property
    def support_multimodal_input(self) -> bool:
        """Whether the model reads images, audio and video itself."""
        return False

    @property
    def support_multimodal_output(self) -> bool:
        """Whether the model answers with more than text."""
        return False

    @property
    def support_audio_input(self) -> bool:
        """Whether the model reads audio itself."""
        return False

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        self.model: str = str(cfg.get("model") or "").strip()
        generate_cfg = copy.deepcopy(dict(cfg.get("generate_cfg") or {}))
        self.max_retries: int = generate_cfg.pop("max_retries", 0)
        self.model_type: str = str(cfg.get("model_type") or "")
        self.use_raw_api: bool = bool(generate_cfg.pop("use_raw_api", False))
        self.generate_cfg: dict[str, Any] = generate_cfg
        self.cache: Any = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, model_type={self.model_type!r})"

    # -- Qwen-Agent's interface ------------------------------------------------------------------

    def chat(
        self,
        messages: QwenMessages,
        functions: Sequence[Mapping[str, Any]] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: Mapping[str, Any] | None = None,
    ) -> Iterator[QwenResponse] | QwenResponse:
        """Call the model: the response so far after each step, or (`stream=False`) whole.

        Args:
            messages: The conversation (`Message`s or dicts; dicts in give dicts out).
            functions: Function descriptions the model may call (Qwen-Agent's or OpenAI's
                form).
            stream: Whether to stream.
            delta_stream: Stream only what is new in each step (text only).
            extra_generate_cfg: Settings for this call, over the config's `generate_cfg`.

        Raises:
            MessageError: No messages, or messages parley cannot hold.
            ConfigurationError: A setting, parameter or function description the model
                cannot use (a `ValueError`, as Qwen-Agent raises).
            NotImplementedError: `delta_stream` with `functions`.
            ModelServiceError: The model failed (after `max_retries`); while iterating, with
                `stream`.
        """
        as_dicts = as_dicts_like(messages)
        given = [Message.model_validate(copy.deepcopy(m)) for m in messages]
        if not given:
            raise MessageError("messages can not be empty")
        if stream and delta_stream and functions:
            raise NotImplementedError(
                "delta_stream=True is not available with functions: use stream=True, "
                "delta_stream=False (whole responses per step), as Qwen-Agent asks"
            )
        cfg = merge_generate_cfgs(self.generate_cfg, extra_generate_cfg)
        return self._generic_chat(given, functions, stream, delta_stream, cfg, as_dicts)

    def quick_chat(self, prompt: str) -> str:
        """One user message in, the answer's text out."""
        *_, responses = self.chat([Message(USER, prompt)])
        answer = [m for m in responses if isinstance(m, Message) and m.content]
        if len(answer) != 1 or not isinstance(answer[0].content, str):
            raise ModelServiceError(code="500", message=f"expected one text answer: {responses}")
        return answer[0].content

    def quick_chat_oai(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Chat in OpenAI's message format: OpenAI-shaped responses, one per step.

        Qwen-Agent's temporary interface: dict messages (`tool_calls`, `tool` results), text
        only, streamed; each step is `{"choices": [{"message": ...}], "usage": ...}` with the
        whole message so far (`content`, `reasoning_content`, `tool_calls`).
        """
        from parley.compat.qwen.llm._oai_dialect import from_oai, to_oai  # noqa: PLC0415

        functions = [dict(t["function"]) for t in tools] if tools else None
        steps = self.chat(from_oai(messages), functions=functions, stream=True)
        for response in cast("Iterator[QwenResponse]", steps):
            yield to_oai(response)

    async def close(self) -> None:  # noqa: B027  (optional: a model holding nothing)
        """Close the model's connections, on the running loop (a parley addition)."""

    def close_sync(self) -> None:
        """`close`, from synchronous code (what `chat` opened is closed on its own loop)."""
        run_sync(self.close())

    # -- the hooks of Qwen-Agent's subclasses ----------------------------------------------------

    @abc.abstractmethod
    def _chat_stream(
        self, messages: list[Message], delta_stream: bool, generate_cfg: dict[str, Any]
    ) -> Iterator[list[Message]]:
        """Stream an answer (no functions): the whole response so far, or the new part."""

    @abc.abstractmethod
    def _chat_no_stream(
        self, messages: list[Message], generate_cfg: dict[str, Any]
    ) -> list[Message]:
        """The whole answer (no functions)."""

    @abc.abstractmethod
    def _chat_with_functions(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]],
        stream: bool,
        delta_stream: bool,
        generate_cfg: dict[str, Any],
        lang: str,
    ) -> Iterator[list[Message]] | list[Message]:
        """An answer that may call `functions`."""

    # -- chat through the hooks ------------------------------------------------------------------

    def _generic_chat(
        self,
        messages: list[Message],
        functions: Sequence[Mapping[str, Any]] | None,
        stream: bool,
        delta_stream: bool,
        cfg: dict[str, Any],
        as_dicts: bool,
    ) -> Iterator[QwenResponse] | QwenResponse:
        lang = cfg.pop("lang", None) or ("zh" if has_chinese(messages) else "en")
        cfg.pop("max_input_tokens", None)
        if DEFAULT_SYSTEM_MESSAGE and messages[0].role != SYSTEM:
            messages = [Message(SYSTEM, DEFAULT_SYSTEM_MESSAGE), *messages]
        choice = cfg.get("function_choice")
        named = [f.get("name") or f.get("name_for_model") for f in functions or ()]
        if choice is not None and choice not in ["auto", "none", *named]:
            raise ConfigurationError(
                f"function_choice must be one of {['auto', 'none', *named]}, got {choice!r}"
            )
        with_functions = bool(functions) and choice != "none"
        if not with_functions:
            for key in ("parallel_function_calls", "function_choice", "thought_in_content"):
                cfg.pop(key, None)

        def call() -> Iterator[list[Message]] | list[Message]:
            if with_functions:
                return self._chat_with_functions(
                    messages, [dict(f) for f in functions or ()], stream, delta_stream, cfg, lang
                )
            if stream:
                return self._chat_stream(messages, delta_stream, cfg)
            return self._chat_no_stream(messages, cfg)

        if not stream:
            answer = _retrying(call, self.max_retries)
            assert isinstance(answer, list)
            return output(answer, as_dicts)
        return (output(r, as_dicts) for r in _retrying_stream(call, self.max_retries) if r)


class ParleyChatModel(BaseChatModel):
    """A model type Qwen-Agent has, on a parley `ChatModel` (see the module docs).

    Args:
        cfg: The llm config (read by `parley.compat.qwen._llm_config`).

    Attributes:
        llm_config: What the config comes to: the parley model and the agent's settings.
        chat_model: The parley chat model (`PromptedToolsModel` when functions go in the
            prompt).
    """

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        super().__init__(cfg)
        self._attach(config_for(cfg))

    @classmethod
    def from_chat_model(cls, model: ChatModel | None) -> ParleyChatModel:
        """A parley model (None: the embedded local model) as a Qwen-Agent model.

        Tools go to it as it takes them: natively, unless it is a `PromptedToolsModel`.
        """
        made = cls.__new__(cls)
        BaseChatModel.__init__(made, {"model": model.model if model is not None else ""})
        made._attach(config_for(model))
        return made

    def _attach(self, config: LLMConfig) -> None:
        self.llm_config = config
        self.chat_model: ChatModel = config.model
        self.model = self.model or config.model.model
        self.model_type = self.model_type or config.model_type
        self.use_raw_api = config.use_raw_api
        inner = config.model
        inner = inner.inner if isinstance(inner, PromptedToolsModel) else inner
        self.max_retries = inner.retry.max_retries  # the wrapper retries nothing itself
        self.cache = inner.cache
        # One for all calls: it remembers what each message counts.
        self._budget = budget_for(config.model, config.max_input_tokens)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.chat_model!r})"

    async def close(self) -> None:
        """Close the parley model's connections (a later call opens them again)."""
        model = self.chat_model
        model = model.inner if isinstance(model, PromptedToolsModel) else model
        # Models holding connections (the OpenAI family, DashScope's) offer `aclose`.
        aclose = getattr(model, "aclose", None)
        if callable(aclose):
            await aclose()

    def chat(
        self,
        messages: QwenMessages,
        functions: Sequence[Mapping[str, Any]] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: Mapping[str, Any] | None = None,
    ) -> Iterator[QwenResponse] | QwenResponse:
        """Call the model (see `BaseChatModel.chat`)."""
        if stream and delta_stream and functions:
            return super().chat(messages, functions, stream, delta_stream, extra_generate_cfg)
        return self.call(messages, functions, stream, extra_generate_cfg, delta=delta_stream)

    def call(
        self,
        messages: QwenMessages,
        functions: Sequence[Mapping[str, Any]] | None = None,
        stream: bool = True,
        call_cfg: Mapping[str, Any] | None = None,
        agent_cfg: Mapping[str, Any] | None = None,
        *,
        delta: bool = False,
    ) -> Iterator[QwenResponse] | QwenResponse:
        """`chat`, with an agent's `extra_generate_cfg` under the call's own.

        An agent's `function_choice` naming a function forces the first call after the
        latest user message only (see `parley.compat.qwen._llm`).
        """
        if self.model_type in TEXT_ONLY_TYPES:
            as_dicts = as_dicts_like(messages)
            text = as_text_messages([Message.model_validate(m) for m in messages])
            messages = [m.model_dump() for m in text] if as_dicts else text
        prepared = prepare_call(
            self.llm_config, self._budget, agent_cfg, messages, functions, call_cfg
        )
        if not stream:
            try:
                return run_sync(prepared.complete())
            except ModelError as exc:
                raise ModelServiceError.from_error(exc) from exc
        steps = service_errors(iterate_sync(prepared.stream()))
        return _deltas(steps, prepared.as_dicts) if delta else steps

    def _chat_stream(
        self, messages: list[Message], delta_stream: bool, generate_cfg: dict[str, Any]
    ) -> Iterator[list[Message]]:
        steps = cast("Iterator[QwenResponse]", self.call(messages, None, True, generate_cfg))
        if delta_stream:
            steps = _deltas(steps, as_dicts=False)
        return ([Message.model_validate(m) for m in s] for s in steps)

    def _chat_no_stream(
        self, messages: list[Message], generate_cfg: dict[str, Any]
    ) -> list[Message]:
        answer = cast("QwenResponse", self.call(messages, None, False, generate_cfg))
        return [Message.model_validate(m) for m in answer]

    def _chat_with_functions(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]],
        stream: bool,
        delta_stream: bool,
        generate_cfg: dict[str, Any],
        lang: str,
    ) -> Iterator[list[Message]] | list[Message]:
        generate_cfg = {**generate_cfg, "lang": lang}
        answer = self.call(messages, functions, stream, generate_cfg)
        if stream:
            steps = cast("Iterator[QwenResponse]", answer)
            return ([Message.model_validate(m) for m in s] for s in steps)
        return [Message.model_validate(m) for m in cast("QwenResponse", answer)]


def _deltas(steps: Iterator[QwenResponse], as_dicts: bool) -> Iterator[QwenResponse]:
    """Qwen-Agent's `delta_stream`: only the reasoning and text new in each step."""
    seen = {"reasoning_content": 0, "content": 0}
    for step in steps:
        messages = [Message.model_validate(m) for m in step]
        new = []
        for key, length in seen.items():
            text = "".join(str(getattr(m, key) or "") for m in messages if not m.function_call)
            if len(text) > length:
                piece = text[length:]
                seen[key] = len(text)
                if key == "content":
                    new.append(Message(ASSISTANT, piece))
                else:
                    new.append(Message(ASSISTANT, "", reasoning_content=piece))
        if new:
            yield output(new, as_dicts)


def _retrying(call: Callable[[], Any], max_retries: int) -> Any:
    retries, delay = 0, 1.0
    while True:
        try:
            return call()
        except ModelServiceError as exc:
            retries, delay = _retry_or_raise(exc, retries, delay, max_retries)


def _retrying_stream(
    call: Callable[[], Iterator[list[Message]] | list[Message]], max_retries: int
) -> Iterator[list[Message]]:
    retries, delay = 0, 1.0
    while True:
        try:
            answer = call()
            yield from [answer] if isinstance(answer, list) else answer
            return
        except ModelServiceError as exc:
            retries, delay = _retry_or_raise(exc, retries, delay, max_retries)


def _retry_or_raise(
    error: ModelServiceError, retries: int, delay: float, max_retries: int
) -> tuple[int, float]:
    """Qwen-Agent's rule: bad requests and refused content fail at once; others back off."""
    if max_retries <= 0 or error.code in ("400", "DataInspectionFailed"):
        raise error
    if "inappropriate content" in str(error) or "maximum context length" in str(error):
        raise error
    if retries >= max_retries:
        raise ModelServiceError(
            exception=Exception(f"Maximum number of retries ({max_retries}) exceeded.")
        ) from error
    logger.warning("ModelServiceError - %s", str(error).strip())
    delay = min(delay * 2, 300.0) * (1 + random.random())
    time.sleep(delay)
    return retries + 1, delay
