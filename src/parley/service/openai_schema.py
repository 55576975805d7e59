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
    "FunctionDelta",
    "ImagePart",
    "InputAudioPart",
    "MessageToolCall",
    "ModelCard",
    "ModelKind",
    "ModelList",
    "OutputMessage",
    "ParleyRun",
    "RefusalPart",
    "RequestMessage",
    "StreamOptions",
    "SystemMessage",
    "TextPart",
    "ToolCallDelta",
    "ToolMessage",
    "UserMessage",
    "UserPart",
]


FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]
"""Why an answer ended: an agent's final answer (`stop`) or its iteration limit (`length`); a
model's end (`stop`), token limit (`length`), tool calls for the client to run (`tool_calls`),
or a content filter (`content_filter`)."""


# -- models ------------------------------------------------------------------------------------


class ModelKind(BaseModel):
    """parley's account of a model entry: an agent, or a model served as itself."""

    kind: Literal["agent", "model"] = Field(
        description="`agent`: a parley agent (its own tools, run here; client `tools` are "
        "refused); `model`: a chat model answering as itself (client `tools` passed through)."
    )
    description: str = ""


class ModelCard(BaseModel):
    """One entry: an agent (`id` is its key) or a served model (`id` is its name)."""

    id: str
    object: Literal["model"] = "model"
    created: int = Field(description="Unix time; parley reports when the service started.")
    owned_by: str = Field(
        "parley", description="`parley` for an agent; a served model's provider (`local`, ...)."
    )
    parley: ModelKind


class ModelList(BaseModel):
    """`GET /v1/models`: every agent and every served model."""

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
    """`POST /v1/chat/completions`: `model` names an agent or a served model.

    For an agent, fields it cannot honour but that change nothing in its answer
    (`temperature`, `top_p`, `max_tokens`, `seed`, ...) are accepted and ignored: the agent's
    model has its own settings; fields that would change the answer's form (`tools`, `n`
    above 1, a JSON `response_format`, ...) are refused with a 400. A served model takes the
    tools, `tool_choice`, `response_format` and the sampling parameters its provider has.
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
    parallel_tool_calls: bool | None = None


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
    """The answer: an agent's text, or a model's text and tool calls."""

    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: None = None
    tool_calls: list[MessageToolCall] | None = None
    reasoning_content: str | None = Field(
        None, description="A served model's reasoning, as DeepSeek and vLLM name it."
    )

    @model_serializer(mode="wrap")
    def _without_absent_extras(self, handler: Any) -> dict[str, Any]:
        # `tool_calls` and `reasoning_content` only when there are some, as OpenAI answers.
        fields: dict[str, Any] = handler(self)
        for name in ("tool_calls", "reasoning_content"):
            if fields.get(name) is None:
                fields.pop(name, None)
        return fields


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
    parley: ParleyRun | None = Field(None, description="The run behind an agent's answer.")

    @model_serializer(mode="wrap")
    def _parley_when_run(self, handler: Any) -> dict[str, Any]:
        fields: dict[str, Any] = handler(self)
        if fields.get("parley") is None:
            fields.pop("parley", None)  # a served model's answer: no run behind it
        return fields


class FunctionDelta(BaseModel):
    """Part of a streamed tool call's function: its name (first part), argument text."""

    name: str | None = None
    arguments: str = ""

    @model_serializer
    def _present_fields(self) -> dict[str, str]:
        fields = {"name": self.name, "arguments": self.arguments}
        return {key: value for key, value in fields.items() if value is not None}


class ToolCallDelta(BaseModel):
    """Part of a streamed tool call: the first part has its id, type and name."""

    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionDelta

    @model_serializer(mode="wrap")
    def _present_fields(self, handler: Any) -> dict[str, Any]:
        fields: dict[str, Any] = handler(self)
        return {key: value for key, value in fields.items() if value is not None}


class ChunkDelta(BaseModel):
    """What a chunk adds: the role (first chunk), more answer text, reasoning or tool calls."""

    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None

    @model_serializer(mode="wrap")
    def _present_fields(self, handler: Any) -> dict[str, Any]:
        # OpenAI's deltas hold only what they add; the last one is `{}`.
        fields: dict[str, Any] = handler(self)
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
