"""OpenAI's Chat Completions and Models JSON, as far as `parley.service.openai_compat` speaks it.

Requests are read leniently where OpenAI's API is (unknown fields, such as sampling
parameters, are accepted and ignored) and strictly where a mistake would change the answer
(roles, content parts, tool calls). Responses carry OpenAI's fields, plus one object of
parley's own, `parley`, on a completion and on a stream's last choice chunk (clients ignore
fields they do not know).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

__all__ = [
    "UNION_TAGS",
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionRequest",
    "Choice",
    "ChunkChoice",
    "ChunkDelta",
    "CompletionUsage",
    "ErrorBody",
    "ErrorResponse",
    "FilePart",
    "FinishReason",
    "ImagePart",
    "InputAudioPart",
    "MessageToolCall",
    "ModelCard",
    "ModelList",
    "OutputMessage",
    "ParleyRun",
    "RefusalPart",
    "RequestMessage",
    "StreamOptions",
    "SystemMessage",
    "TextPart",
    "ToolMessage",
    "UserMessage",
    "UserPart",
]


FinishReason = Literal["stop", "length"]
"""Why an answer ended: the agent's final answer (`stop`) or its iteration limit (`length`)."""


# -- models ------------------------------------------------------------------------------------


class ModelCard(BaseModel):
    """One model: here, one agent (`id` is its key)."""

    id: str
    object: Literal["model"] = "model"
    created: int = Field(description="Unix time; parley reports when the service started.")
    owned_by: str = "parley"


class ModelList(BaseModel):
    """`GET /v1/models`: every agent, as a model."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


# -- the request ---------------------------------------------------------------------------------


class TextPart(BaseModel):
    """A text content part."""

    type: Literal["text"]
    text: str


class ImageURL(BaseModel):
    """Where an image is: an `http(s)://` URL or a `data:` URL."""

    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(BaseModel):
    """An image content part (user messages)."""

    type: Literal["image_url"]
    image_url: ImageURL


class InputAudio(BaseModel):
    """Base64 audio and its format (`wav`, `mp3`, ...)."""

    data: str
    format: str


class InputAudioPart(BaseModel):
    """An audio content part (user messages)."""

    type: Literal["input_audio"]
    input_audio: InputAudio


class FileData(BaseModel):
    """A file sent inline (`file_data`, a `data:` URL); uploaded files (`file_id`) are not kept."""

    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(BaseModel):
    """A file content part (user messages)."""

    type: Literal["file"]
    file: FileData


class RefusalPart(BaseModel):
    """A refusal content part (assistant messages)."""

    type: Literal["refusal"]
    refusal: str


UserPart = Annotated[TextPart | ImagePart | InputAudioPart | FilePart, Field(discriminator="type")]
"""What a user message's content list may hold."""
AssistantPart = Annotated[TextPart | RefusalPart, Field(discriminator="type")]
"""What an assistant message's content list may hold."""


class FunctionCall(BaseModel):
    """A tool call's function: its name and its JSON argument string."""

    name: str
    arguments: str


class MessageToolCall(BaseModel):
    """A tool call an earlier assistant turn made."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemMessage(BaseModel):
    """Instructions (`developer` is OpenAI's newer name for `system`)."""

    role: Literal["system", "developer"]
    content: str | list[TextPart]
    name: str | None = None


class UserMessage(BaseModel):
    """A user turn: text, or parts (text, images, audio, files)."""

    role: Literal["user"]
    content: str | list[UserPart]
    name: str | None = None


class AssistantMessage(BaseModel):
    """An earlier assistant turn: text, tool calls, or both."""

    role: Literal["assistant"]
    content: str | list[AssistantPart] | None = None
    name: str | None = None
    refusal: str | None = None
    tool_calls: list[MessageToolCall] | None = None


class ToolMessage(BaseModel):
    """A tool's result, answering the call `tool_call_id` of an earlier assistant turn."""

    role: Literal["tool"]
    content: str | list[TextPart]
    tool_call_id: str


RequestMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
"""Any message of a request, told apart by `role`."""

UNION_TAGS = frozenset(
    {"system", "developer", "user", "assistant", "tool"}
    | {"text", "image_url", "input_audio", "file", "refusal"}
)
"""The tags of the unions above: pydantic puts the chosen one in an error's location."""


class StreamOptions(BaseModel):
    """Streaming options: whether a last chunk reports the usage."""

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """`POST /v1/chat/completions`: `model` names an agent; `messages` is the conversation.

    Fields the agent cannot honour but that change nothing in its answer (`temperature`,
    `top_p`, `max_tokens`, `seed`, ...) are accepted and ignored: the agent's model has its
    own settings. Fields that would change the answer's form (`tools`, `n` above 1, a JSON
    `response_format`, ...) are refused with a 400.
    """

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="An agent's key (`GET /v1/models`).")
    messages: list[RequestMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(
        None, description="Accepted and ignored: the caller is who the API key says."
    )
    n: int | None = None
    tools: list[dict[str, Any]] | None = None
    functions: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = None


# -- the answer ----------------------------------------------------------------------------------


class CachedTokens(BaseModel):
    """The part of the prompt a provider served from its cache."""

    cached_tokens: int = 0


class CompletionUsage(BaseModel):
    """Tokens the run used, summed over all its model calls."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: CachedTokens | None = None


class ParleyRun(BaseModel):
    """parley's own account of the run behind an answer (OpenAI clients ignore it)."""

    thread_id: str
    run_id: str
    status: str = Field(
        description="How the run ended: `completed`, `max_iters`, `interrupted`, or "
        "`awaiting_approval` (answer `interrupt_id` at `/approvals/{interrupt_id}/...`)."
    )
    interrupt_id: str | None = None


class OutputMessage(BaseModel):
    """The agent's answer."""

    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class Choice(BaseModel):
    """The one answer (parley makes one, `n` is 1)."""

    index: int = 0
    message: OutputMessage
    finish_reason: FinishReason
    logprobs: None = None


class ChatCompletion(BaseModel):
    """A whole answer: `chat.completion`."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    system_fingerprint: None = None
    parley: ParleyRun


class ChunkDelta(BaseModel):
    """What a chunk adds: the role (first chunk), or more answer text."""

    role: Literal["assistant"] | None = None
    content: str | None = None

    @model_serializer
    def _present_fields(self) -> dict[str, str]:
        # OpenAI's deltas hold only what they add; the last one is `{}`.
        fields = {"role": self.role, "content": self.content}
        return {key: value for key, value in fields.items() if value is not None}


class ChunkChoice(BaseModel):
    """The one answer's delta in a chunk."""

    index: int = 0
    delta: ChunkDelta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    """One server-sent event of a streamed answer: `chat.completion.chunk`."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None
    system_fingerprint: None = None
    parley: ParleyRun | None = None


# -- errors --------------------------------------------------------------------------------------


class ErrorBody(BaseModel):
    """What went wrong, as OpenAI words it: a message, a type, the field, a code."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """Every error of `/v1/...`, and a stream's error frame."""

    error: ErrorBody
