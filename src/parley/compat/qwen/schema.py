"""Qwen-Agent's message schema (`qwen_agent.llm.schema`, 0.0.34), behaviour for behaviour.

`Message`, `ContentItem` and `FunctionCall` construct, validate, read and dump as Qwen-Agent's
do: positional construction, dict-style access (`m["role"]`, `m.get(key, default)` giving the
default for a missing *or falsy* value, `m[key] = value`), dumps that leave out `None`, and
`str()`/`repr()` showing that dump. `Usage` and `ModelResponse` and the helper methods
(`is_multimodal`, `get_parsed_arguments`, ...) come from the Qwen-Agent data-structure notes
(seed 001) and are not in the library itself.

Where seed 001 is stricter than Qwen-Agent 0.0.34, the seed is followed: `Message.content`
defaults to `""`, a `function` message must have a `name`, a `FunctionCall` built from input
has a stripped, non-empty name and JSON arguments (`FunctionCall.partial` builds a call still
streaming, or as a model wrote it), and `Usage` sums count an unknown cost as 0.

Deliberate differences, all about malformed input:

- Qwen-Agent overrides `__init__` with fixed parameters, so a missing or unknown field given
  to `model_validate` escapes as a `TypeError`. Here such input raises pydantic's
  `ValidationError`: unknown keys are rejected in `ContentItem` and `FunctionCall` and, as in
  Qwen-Agent, dropped silently in `Message`.
- `ContentItem.get_type_and_value()` returns the one provided field even when an empty field
  sits beside it (`ContentItem(text="a", image="")`), where Qwen-Agent fails to unpack.
- `Message.extra` must have string keys (a JSON object), where Qwen-Agent takes any `dict`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import ConfigDict, field_validator, model_validator

from parley.errors import MessageError, ToolArgumentsError
from parley.messages import DictLikeModel

__all__ = [
    "ASSISTANT",
    "AUDIO",
    "CONTENT",
    "DEFAULT_SYSTEM_MESSAGE",
    "FILE",
    "FUNCTION",
    "IMAGE",
    "NAME",
    "REASONING_CONTENT",
    "ROLE",
    "SYSTEM",
    "TEXT",
    "USER",
    "VIDEO",
    "BaseModelCompatibleDict",
    "ContentItem",
    "ContentType",
    "FunctionCall",
    "Message",
    "ModelResponse",
    "Usage",
]

DEFAULT_SYSTEM_MESSAGE = ""

ROLE = "role"
CONTENT = "content"
REASONING_CONTENT = "reasoning_content"
NAME = "name"

SYSTEM = "system"
USER = "user"
ASSISTANT = "assistant"
FUNCTION = "function"

# Qwen-Agent itself defines no TEXT constant; the schema documentation (seed 000) lists one.
TEXT = "text"
FILE = "file"
IMAGE = "image"
AUDIO = "audio"
VIDEO = "video"

ContentType = Literal["text", "image", "file", "audio", "video"]
"""The kind of a `ContentItem`: the name of its one provided field."""

_ROLES = (USER, ASSISTANT, SYSTEM, FUNCTION)
_MEDIA_FIELDS: tuple[ContentType, ...] = ("image", "file", "audio", "video")


def _is_property(cls: type, key: str) -> bool:
    return not key.startswith("_") and isinstance(getattr(cls, key, None), property)


class BaseModelCompatibleDict(DictLikeModel):
    """A pydantic model that reads and writes like a dict, as Qwen-Agent's base class.

    `obj["field"]` reads a field (or a public property such as `ContentItem.type`);
    a missing key raises an error that is both a `KeyError` and an `AttributeError`.
    `obj.get(key, default)` returns `default` for a missing or falsy value. `obj[key] = value`
    sets a field without validation, as Qwen-Agent does; an unknown key raises a `ValueError`
    (`MessageError`) with Qwen-Agent's text. Dumps leave out `None` fields unless
    `exclude_none=False` is passed, and `str()` is the dump.

    Subclasses list their fields in `_positional` to accept them positionally, as Qwen-Agent's
    classes do (`Message("user", "hi")`).
    """

    _positional: ClassVar[tuple[str, ...]] = ()

    if not TYPE_CHECKING:
        # Pydantic passes the input of `model_validate` to a custom `__init__` as keywords, so
        # taking `*args, **data` keeps malformed input inside pydantic's validation (a
        # ValidationError) instead of a TypeError from a Python signature. Subclasses declare
        # their typed signatures for type checkers only.
        def __init__(self, /, *args: Any, **data: Any) -> None:
            if args:
                data = _merge_positional(type(self), args, data)
            super().__init__(**data)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        # Pydantic's signature makes every field keyword-only; show the positional ones.
        cls.__signature__ = _signature(cls)

    def __getitem__(self, key: str) -> Any:
        if _is_property(type(self), key):
            return getattr(self, key)
        return super().__getitem__(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in type(self).model_fields:
            raise MessageError(f'"{type(self).__name__}" object has no field "{key}"')
        setattr(self, key, value)

    def get(self, key: str, default: Any = None) -> Any:
        """Return the value of `key`, or `default` when it is missing or falsy (as Qwen-Agent)."""
        if _is_property(type(self), key):
            value = getattr(self, key)
            return value if value else default
        return super().get(key, default)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_dump()})"


_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD
_KEYWORD = inspect.Parameter.KEYWORD_ONLY


def _signature(cls: type[BaseModelCompatibleDict]) -> inspect.Signature:
    params = []
    for name, field in cls.model_fields.items():
        kind = _POSITIONAL if name in cls._positional else _KEYWORD
        default = inspect.Parameter.empty if field.is_required() else field.default
        params.append(inspect.Parameter(name, kind, default=default, annotation=field.annotation))
    if cls.model_config.get("extra") != "forbid":
        params.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def _merge_positional(
    cls: type[BaseModelCompatibleDict], args: tuple[Any, ...], data: dict[str, Any]
) -> dict[str, Any]:
    names = cls._positional
    if len(args) > len(names):
        raise TypeError(
            f"{cls.__name__}() takes at most {len(names)} positional arguments ({len(args)} given)"
        )
    for name, value in zip(names, args, strict=False):
        if name in data:
            raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
        data[name] = value
    return data


class FunctionCall(BaseModelCompatibleDict):
    """A function call proposed by the model: its `name` and its `arguments` as a JSON string.

    Seed 001's validators hold for the calls you build (`FunctionCall(name, arguments)`,
    `model_validate`, a dict in a `Message`): `name` is stripped and must not be empty, and
    `arguments` must be valid JSON. A call still streaming holds only a prefix of its
    arguments, so the calls of a response in progress (and of a model's own output, which
    may be malformed) are built with `FunctionCall.partial`, which checks the types only.
    """

    model_config = ConfigDict(extra="forbid")
    _positional: ClassVar[tuple[str, ...]] = ("name", "arguments")

    name: str
    arguments: str

    if TYPE_CHECKING:

        def __init__(self, name: str, arguments: str) -> None: ...

    @field_validator("name")
    @classmethod
    def validate_name(cls, value: str) -> str:
        """Strip the name; an empty one is refused (seed 001)."""
        if not value.strip():
            raise MessageError(f"a function call needs the function's name, got {value!r}")
        return value.strip()

    @field_validator("arguments")
    @classmethod
    def validate_arguments(cls, value: str) -> str:
        """Check that the arguments are JSON (seed 001)."""
        try:
            json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise MessageError(
                f"a function call's arguments must be a JSON string, got {value[:80]!r} ({exc});"
                " a call still streaming is built with FunctionCall.partial(name, arguments)"
            ) from None
        return value

    @classmethod
    def partial(cls, name: str, arguments: str) -> FunctionCall:
        """A call as it stands mid-stream, or as a model wrote it: not checked beyond types.

        Raises:
            MessageError: `name` or `arguments` is not a string.
        """
        if not (isinstance(name, str) and isinstance(arguments, str)):
            raise MessageError("a function call's name and arguments are strings")
        return cls.model_construct(name=name, arguments=arguments)

    def get_parsed_arguments(self) -> dict[str, Any]:
        """Parse `arguments` into a dict.

        Raises:
            ToolArgumentsError: The arguments are not valid JSON or not a JSON object (seed 001
                lets `json.JSONDecodeError` escape; parley raises its own tool error).
        """
        try:
            parsed = json.loads(self.arguments)
        except (ValueError, RecursionError) as exc:
            raise ToolArgumentsError(
                f"arguments of {self.name!r} are not valid JSON: {exc}", tool_name=self.name
            ) from exc
        if not isinstance(parsed, dict):
            raise ToolArgumentsError(
                f"arguments of {self.name!r} must be a JSON object, got {type(parsed).__name__}",
                tool_name=self.name,
            )
        return parsed

    def add_argument(self, key: str, value: Any) -> FunctionCall:
        """Return a new call with `key` set to `value` in the arguments (this one is unchanged).

        Raises:
            ToolArgumentsError: The current arguments are not a JSON object.
        """
        arguments = {**self.get_parsed_arguments(), key: value}
        return FunctionCall(self.name, json.dumps(arguments, ensure_ascii=False))


class ContentItem(BaseModelCompatibleDict):
    """One piece of content: exactly one of `text`, `image`, `file`, `audio` or `video`.

    As in Qwen-Agent, `text` counts as provided whenever it is not `None` (so `text=""` is
    valid), the other fields only when non-empty. Media are strings (a URL, `oss://` and other
    storage locations included, a `data:` URL or a local path); audio may also be a dict
    (`{"data": ..., "format": "wav"}`), and video a list of frames or of source dicts.
    """

    model_config = ConfigDict(extra="forbid")
    _positional: ClassVar[tuple[str, ...]] = ("text", "image", "file", "audio", "video")

    text: str | None = None
    image: str | None = None
    file: str | None = None
    audio: str | dict[Any, Any] | None = None
    video: str | list[Any] | None = None

    if TYPE_CHECKING:

        def __init__(
            self,
            text: str | None = None,
            image: str | None = None,
            file: str | None = None,
            audio: str | dict[Any, Any] | None = None,
            video: str | list[Any] | None = None,
        ) -> None: ...

    def _provided(self) -> list[ContentType]:
        provided: list[ContentType] = ["text"] if self.text is not None else []
        return provided + [name for name in _MEDIA_FIELDS if getattr(self, name)]

    @model_validator(mode="after")
    def check_exclusivity(self) -> Self:
        """Check that exactly one field is provided (Qwen-Agent's rule and message)."""
        if len(self._provided()) != 1:
            raise MessageError(
                "Exactly one of 'text', 'image', 'file', 'audio', or 'video' must be provided."
            )
        return self

    def get_type_and_value(self) -> tuple[ContentType, str | dict[Any, Any] | list[Any]]:
        """Return the provided field's name and value, e.g. `("image", "https://...")`."""
        provided = self._provided()
        if len(provided) != 1:  # only reachable through model_construct or assignment
            raise MessageError(f"ContentItem must hold exactly one field, holds {provided}")
        value: str | dict[Any, Any] | list[Any] = getattr(self, provided[0])
        return provided[0], value

    @property
    def type(self) -> ContentType:
        """The provided field's name: `text`, `image`, `file`, `audio` or `video`."""
        return self.get_type_and_value()[0]

    @property
    def value(self) -> str | dict[Any, Any] | list[Any]:
        """The provided field's value."""
        return self.get_type_and_value()[1]

    def is_media_content(self) -> bool:
        """Whether this is an image, audio or video (a file does not count, as in seed 001)."""
        return bool(self.image or self.audio or self.video)

    def get_file_extension(self) -> str | None:
        """The lower-cased text after the last `.` of an image or file string, else None."""
        kind, value = self.get_type_and_value()
        if kind in ("image", "file") and isinstance(value, str) and "." in value:
            return value.rsplit(".", 1)[-1].lower()
        return None


class Message(BaseModelCompatibleDict):
    """A Qwen-Agent message.

    `role` is `system`, `user`, `assistant` or `function`; `content` is a string or a list of
    `ContentItem`s (`""` when not given, as seed 001 has it; `None` becomes `""`);
    a `function` message must have a `name`; `reasoning_content` holds the model's reasoning;
    `name` names a function message's function (or a speaker); `function_call` is an
    assistant's call; `extra` holds anything else, such as `{"function_id": ...}` pairing a
    call with its result. Unknown keys are dropped, as in Qwen-Agent.
    """

    _positional: ClassVar[tuple[str, ...]] = (
        "role",
        "content",
        "reasoning_content",
        "name",
        "function_call",
        "extra",
    )

    role: str
    content: str | list[ContentItem] = ""
    reasoning_content: str | list[ContentItem] | None = None
    name: str | None = None
    function_call: FunctionCall | None = None
    extra: dict[str, Any] | None = None

    if TYPE_CHECKING:

        def __init__(
            self,
            role: str,
            content: str | Sequence[ContentItem | dict[str, Any]] | None = "",
            reasoning_content: str | Sequence[ContentItem | dict[str, Any]] | None = None,
            name: str | None = None,
            function_call: FunctionCall | dict[str, Any] | None = None,
            extra: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> None: ...

    @field_validator("role")
    @classmethod
    def role_checker(cls, value: str) -> str:
        """Check the role, with Qwen-Agent's message."""
        if value not in _ROLES:
            raise MessageError(f"{value} must be one of {','.join(_ROLES)}")
        return value

    @field_validator("content", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value

    @model_validator(mode="after")
    def check_function_message(self) -> Self:
        """A function message names its function (seed 001)."""
        if self.role == FUNCTION and not self.name:
            raise MessageError(
                "a function message must have a name: the function whose result it holds"
            )
        return self

    def is_multimodal(self) -> bool:
        """Whether the content holds an image, audio, video or file."""
        if isinstance(self.content, str):
            return False
        return any(item.image or item.audio or item.video or item.file for item in self.content)

    def get_text_content(self) -> str:
        """The content's text: the string, or the non-empty text items joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(item.text for item in self.content if item.text)


class Usage(BaseModelCompatibleDict):
    """Token counts and cost of a model call (seed 001); usages add up with `+` and `sum()`.

    As seed 001 adds them, an unknown (None) cost counts as 0 in a sum, so a sum always has
    a cost: `(Usage() + Usage()).cost == 0`.
    """

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        # Seed 001's rule: an unknown cost counts as 0, so a sum always has a cost.
        cost = (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost=cost,
        )

    def __radd__(self, other: int) -> Usage:
        # `sum()` starts from 0.
        if other == 0:
            return self
        return NotImplemented


class ModelResponse(BaseModelCompatibleDict):
    """A model's answer: its messages, usage and response metadata (seed 001)."""

    model_config = ConfigDict(extra="forbid")

    messages: list[Message]
    usage: Usage | None = None
    model: str | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    created: int | None = None

    def get_content(self) -> str:
        """The text of the last message, or `""` when there is none."""
        return self.messages[-1].get_text_content() if self.messages else ""

    def get_function_calls(self) -> list[FunctionCall]:
        """The function calls of all messages, in order."""
        return [msg.function_call for msg in self.messages if msg.function_call]
