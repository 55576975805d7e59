"""OpenAI's request messages as parley's, and the errors `/v1` words itself.

Shared by the agent and model paths of `parley.service.openai_compat`: `request_messages`
for an agent (the last message is the user's, the run's input), `conversation` for a served
model (any conversation: it may end with tool results for the model to read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from pydantic import ValidationError

from parley.errors import MessageError, ServiceError
from parley.messages import (
    AudioBlock,
    Base64Source,
    Block,
    FileBlock,
    ImageBlock,
    Msg,
    OutputBlock,
    TextBlock,
    ToolCallBlock,
    source_from_str,
)
from parley.models.accumulator import parse_arguments
from parley.service.openai_schema import (
    AssistantMessage,
    ErrorBody,
    FilePart,
    ImagePart,
    InputAudioPart,
    RequestMessage,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
    UserPart,
)

__all__ = [
    "OpenAIError",
    "bad_request",
    "conversation",
    "error_body",
    "request_messages",
    "tool_call_blocks",
]


class OpenAIError(ServiceError):
    """An error this API words itself, with OpenAI's `param` and `code`.

    Args:
        message: What went wrong.
        status_code: The HTTP status.
        param: The request field at fault.
        code: OpenAI's error code (`model_not_found`, ...).
        headers: Headers of the answer (`Retry-After` on a 429).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.param = param
        self.code = code
        self.headers = dict(headers or {})
        super().__init__(message, status_code=status_code)


def bad_request(param: str, reason: str) -> OpenAIError:
    """A 400 naming the field at fault (`param`) and what is wrong with it."""
    return OpenAIError(f"{param}: {reason}", status_code=400, param=param)


_TYPES = {401: "invalid_request_error", 403: "permission_error", 429: "rate_limit_error"}
_CODES = {401: "invalid_api_key"}


def error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> ErrorBody:
    """OpenAI's error object for a status: its `type` from the status, `code` if known."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return ErrorBody(message=message, type=kind, param=param, code=code or _CODES.get(status))


# -- messages ------------------------------------------------------------------------------------


def request_messages(messages: Sequence[RequestMessage]) -> tuple[list[Msg], Msg]:
    """A request's messages as parley's: those before the last, and the last (the user's).

    Consecutive tool messages become one tool message, as parley keeps a round of results.

    Raises:
        OpenAIError: The last message is not the user's, or a message cannot be taken (a
            tool result that answers no call, an image by a `file://` URL, ...): 400.
    """
    last = len(messages) - 1
    if messages[last].role != "user":
        raise bad_request(
            f"messages[{last}].role", "the last message must be the user's: the agent answers it"
        )
    msgs = conversation(messages)
    return msgs[:-1], msgs[-1]


def conversation(messages: Sequence[RequestMessage]) -> list[Msg]:
    """A request's messages as parley's, in order (what a served model is given).

    Consecutive tool messages become one tool message, as parley keeps a round of results.

    Raises:
        OpenAIError: A message cannot be taken (a tool result that answers no call, an image
            by a `file://` URL, ...): 400.
    """
    msgs: list[Msg] = []
    call_names: dict[str, str] = {}  # tool call id -> tool name, for the tool messages
    for index, message in enumerate(messages):
        msg = _msg(message, f"messages[{index}]", call_names)
        if msg.role == "tool" and msgs and msgs[-1].role == "tool":
            msgs[-1] = Msg(role="tool", content=[*msgs[-1].content, *msg.content])
        else:
            msgs.append(msg)
    return msgs


def _msg(message: RequestMessage, where: str, call_names: dict[str, str]) -> Msg:
    try:
        if isinstance(message, SystemMessage):
            return Msg.system(*_texts(message.content))
        if isinstance(message, UserMessage):
            return Msg.user(*_user_content(message.content, where), name=message.name)
        if isinstance(message, AssistantMessage):
            return _assistant(message, call_names)
        return _tool(message, where, call_names)
    except (ValidationError, MessageError) as exc:
        raise bad_request(where, _reason(exc)) from None


def _reason(exc: ValidationError | MessageError) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(error["msg"] for error in exc.errors())
    return str(exc)


def _texts(content: str | Sequence[TextPart]) -> list[str]:
    return [content] if isinstance(content, str) else [part.text for part in content]


def _assistant(message: AssistantMessage, call_names: dict[str, str]) -> Msg:
    content = message.content
    texts = [content] if isinstance(content, str) else []
    if isinstance(content, list):
        texts = [part.text if isinstance(part, TextPart) else part.refusal for part in content]
    if message.refusal:
        texts.append(message.refusal)
    calls = tool_call_blocks(message.tool_calls or [], call_names)
    return Msg.assistant(*texts, *calls, name=message.name)


class _Function(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str: ...


class _ToolCall(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def function(self) -> _Function: ...


def tool_call_blocks(calls: Iterable[_ToolCall], call_names: dict[str, str]) -> list[ToolCallBlock]:
    """An assistant message's OpenAI-shaped tool calls (OpenAI's or AG-UI's) as blocks.

    Each call's name is noted in `call_names` under its id, for the tool results that answer it.
    """
    blocks = []
    for call in calls:
        arguments, raw = parse_arguments(call.function.arguments)
        blocks.append(
            ToolCallBlock(id=call.id, name=call.function.name, input=arguments, raw_input=raw)
        )
        call_names[call.id] = call.function.name
    return blocks


def _tool(message: ToolMessage, where: str, call_names: dict[str, str]) -> Msg:
    name = call_names.get(message.tool_call_id)
    if name is None:
        raise bad_request(
            f"{where}.tool_call_id",
            f"{message.tool_call_id!r} answers no tool call of an earlier assistant message",
        )
    output: str | list[OutputBlock] = (
        message.content
        if isinstance(message.content, str)
        else [TextBlock(text=part.text) for part in message.content]
    )
    return Msg.tool_result(message.tool_call_id, output, name=name)


def _user_content(content: str | Sequence[UserPart], where: str) -> list[str | Block]:
    if isinstance(content, str):
        return [content]
    return [_user_part(part, f"{where}.content[{index}]") for index, part in enumerate(content)]


_AUDIO_TYPES = {"mp3": "audio/mpeg"}
"""Media types of `input_audio` formats that are not `audio/<format>`."""


def _user_part(part: UserPart, where: str) -> str | Block:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ImagePart):
        return _image(part, where)
    if isinstance(part, InputAudioPart):
        audio = part.input_audio
        media_type = _AUDIO_TYPES.get(audio.format, f"audio/{audio.format}")
        return AudioBlock(source=Base64Source(media_type=media_type, data=audio.data))
    return _file(part, where)


def _image(part: ImagePart, where: str) -> ImageBlock:
    url = part.image_url.url
    # Never a path or a file:// URL: the server would read its own files for the client.
    if not url.lower().startswith(("http://", "https://", "data:")):
        raise bad_request(f"{where}.image_url.url", "an image is an http(s):// URL or a data: URL")
    return ImageBlock.from_url(url)


def _file(part: FilePart, where: str) -> FileBlock:
    data = part.file.file_data
    if data is None or not data.startswith("data:"):
        raise bad_request(
            f"{where}.file.file_data",
            "a file goes inline, as a data: URL (uploaded files, file_id, are not kept here)",
        )
    return FileBlock(source=source_from_str(data), filename=part.file.filename)
