"""agent-service-toolkit's API schema, and `Msg` to and from its `ChatMessage`.

The models match `src/schema/schema.py` of JoshuaC215/agent-service-toolkit field for field
(names, types, defaults, hence the JSON), so that the toolkit's own `AgentClient` and Streamlit
app work against parley's service. Only model names are typed loosely, as `str`: the toolkit
types them with its `AllModelEnum` (a union of `StrEnum`s such as `"gpt-5-nano"`, `"fake"`),
and its client validates `GET /info` against that enum, so a server must advertise model names
the client knows. The enum changes between releases (`gpt-4o-mini` left it in 2026): only
`fake` is in every release, and `openai-compatible` in every one since March 2025.

`Msg` to `ChatMessage`:

- role `user` → type `human`; `assistant` → `ai`; `tool` → `tool`, one ChatMessage per tool
  result (so a tool message with several results needs `msgs_to_chat_messages`); `system` →
  `custom`, marked by `custom_data["parley"]["role"] = "system"`.
- text blocks → `content`, their text joined by newlines; a tool result's output text →
  `content`, and its `tool_call_id` → `tool_call_id`.
- tool_call blocks → `tool_calls`: `{"name", "args": input, "id", "type": "tool_call"}`.
- usage → `response_metadata`, as LangChain reports it: `usage_metadata` (`input_tokens`,
  `output_tokens`, `total_tokens`, `input_token_details.cache_read`) and `token_usage` (OpenAI's
  `prompt_tokens`, `completion_tokens`, `total_tokens`, `prompt_tokens_details.cached_tokens`).
- what the toolkit cannot express goes to `custom_data["parley"]`, and only that: the message's
  `id`, `created_at`, `name`, `metadata`, a role its type does not imply, usage's `elapsed`, a
  tool result's tool name and `is_error`, and, when `content` and `tool_calls` cannot rebuild
  the blocks (thinking, media, several text blocks, block order, `raw_input`, a tool output
  given as a list), the block list with the fields those views already carry left out.

So `Msg` → `ChatMessage` → `Msg` is exact, through JSON too; given a `run_id`, the message
read back also records it (below). The toolkit's Streamlit app reads every `custom` message as
its `TaskData`, so a service should leave system messages out of what that app shows.

`ChatMessage` to `Msg` reads those back. What a ChatMessage holds that parley did not write
(`run_id`, other `response_metadata` and `custom_data` keys, a `custom` type on a message from
the agent, a `tool_call_id` outside a tool message) is kept in the message's
`metadata["service_toolkit"]` and written back from there, so nothing is lost either way.
A ChatMessage without parley's record maps `custom` to an assistant message; a tool call
without an id gets a new one; a tool result's tool name is looked up among earlier tool calls
by `chat_messages_to_msgs` (and is `""` when unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypedDict

from parley.errors import MessageError, ParleyError
from parley.messages import Msg, Role, new_id

__all__ = [
    "DEFAULT_MODEL",
    "PARLEY_KEY",
    "TOOLKIT_KEY",
    "AgentInfo",
    "ChatHistory",
    "ChatHistoryInput",
    "ChatMessage",
    "ChatMessageType",
    "Feedback",
    "FeedbackResponse",
    "ServiceMetadata",
    "StreamInput",
    "ToolCall",
    "UserInput",
    "chat_message_to_msg",
    "chat_messages_to_msgs",
    "msg_to_chat_message",
    "msgs_to_chat_messages",
]

PARLEY_KEY = "parley"
"""The `custom_data` key under which a ChatMessage keeps what only parley's `Msg` can hold."""

TOOLKIT_KEY = "service_toolkit"
"""The `Msg.metadata` key under which a Msg keeps what only a ChatMessage can hold."""

DEFAULT_MODEL = "gpt-4o-mini"
"""The model name the toolkit's clients before September 2025 sent with every request (their
`UserInput.model` default); newer ones send none (`null`), and newer enums lack the name."""

ChatMessageType = Literal["human", "ai", "tool", "custom"]

_UUID_EXAMPLE = "847c6285-8fc9-4560-a83f-4e6285809254"


# -- the toolkit's schema ------------------------------------------------------------------
# No model_config, as upstream: unknown keys are ignored, so newer clients still parse.


class AgentInfo(BaseModel):
    """Info about an available agent."""

    key: str = Field(description="Agent key.", examples=["research-assistant"])
    description: str = Field(
        description="Description of the agent.",
        examples=["A research assistant for generating research papers."],
    )


class ServiceMetadata(BaseModel):
    """Metadata about the service including available agents and models.

    `models` and `default_model` are `AllModelEnum` values upstream; the toolkit's client
    rejects names its enum does not list.
    """

    agents: list[AgentInfo] = Field(description="List of available agents.")
    models: list[str] = Field(description="List of available LLMs.")
    default_agent: str = Field(
        description="Default agent used when none is specified.", examples=["research-assistant"]
    )
    default_model: str = Field(description="Default model used when none is specified.")


class UserInput(BaseModel):
    """Basic user input for the agent.

    `model` is an `AllModelEnum` value upstream (validated by the toolkit's server, not by its
    client); here any name is accepted and the service decides. None: the service's default.
    """

    message: str = Field(
        description="User input to the agent.", examples=["What is the weather in Tokyo?"]
    )
    model: str | None = Field(
        title="Model",
        description="LLM Model to use for the agent. Defaults to the default model set in the "
        "settings of the service.",
        default=None,
        examples=["gpt-5-nano", "claude-haiku-4-5"],
    )
    thread_id: str | None = Field(
        description="Thread ID to persist and continue a multi-turn conversation.",
        default=None,
        examples=[_UUID_EXAMPLE],
    )
    user_id: str | None = Field(
        description="User ID to persist and continue a conversation across multiple threads.",
        default=None,
        examples=[_UUID_EXAMPLE],
    )
    agent_config: dict[str, Any] = Field(
        description="Additional configuration to pass through to the agent",
        default={},
        examples=[{"spicy_level": 0.8}],
    )


class StreamInput(UserInput):
    """User input for streaming the agent's response."""

    stream_tokens: bool = Field(
        description="Whether to stream LLM tokens to the client.", default=True
    )


class ToolCall(TypedDict):
    """Represents a request to call a tool (LangChain's tool call dict)."""

    name: str
    """The name of the tool to be called."""
    args: dict[str, Any]
    """The arguments to the tool call."""
    id: str | None
    """An identifier associated with the tool call."""
    type: NotRequired[Literal["tool_call"]]


class ChatMessage(BaseModel):
    """Message in a chat."""

    type: ChatMessageType = Field(
        description="Role of the message.", examples=["human", "ai", "tool", "custom"]
    )
    content: str = Field(description="Content of the message.", examples=["Hello, world!"])
    tool_calls: list[ToolCall] = Field(description="Tool calls in the message.", default=[])
    tool_call_id: str | None = Field(
        description="Tool call that this message is responding to.",
        default=None,
        examples=["call_Jja7J89XsjrOLA5r!MEOW!SL"],
    )
    run_id: str | None = Field(
        description="Run ID of the message.", default=None, examples=[_UUID_EXAMPLE]
    )
    response_metadata: dict[str, Any] = Field(
        description="Response metadata. For example: response headers, logprobs, token counts.",
        default={},
    )
    custom_data: dict[str, Any] = Field(description="Custom message data.", default={})

    def pretty_repr(self) -> str:
        """The message for a console: a title line 80 wide, a blank line, the content."""
        padded = f" {self.type.title()} Message "
        sep = "=" * ((80 - len(padded)) // 2)
        second_sep = sep + "=" if len(padded) % 2 else sep
        return f"{sep}{padded}{second_sep}\n\n{self.content}"

    def pretty_print(self) -> None:
        """Print `pretty_repr()`."""
        print(self.pretty_repr())  # noqa: T201


class Feedback(BaseModel):
    """Feedback for a run, to record to LangSmith."""

    run_id: str = Field(description="Run ID to record feedback for.", examples=[_UUID_EXAMPLE])
    key: str = Field(description="Feedback key.", examples=["human-feedback-stars"])
    score: float = Field(description="Feedback score.", examples=[0.8])
    kwargs: dict[str, Any] = Field(
        description="Additional feedback kwargs, passed to LangSmith.",
        default={},
        examples=[{"comment": "In-line human feedback"}],
    )


class FeedbackResponse(BaseModel):
    """The answer to a feedback request."""

    status: Literal["success"] = "success"


class ChatHistoryInput(BaseModel):
    """Input for retrieving chat history."""

    thread_id: str = Field(
        description="Thread ID to persist and continue a multi-turn conversation.",
        examples=[_UUID_EXAMPLE],
    )


class ChatHistory(BaseModel):
    """A thread's messages, in order."""

    messages: list[ChatMessage]


# -- the records each side keeps of the other ------------------------------------------------

_TYPE_OF_ROLE: dict[str, ChatMessageType] = {
    "user": "human",
    "assistant": "ai",
    "system": "custom",
    "tool": "tool",
}
# A toolkit `custom` message is data the agent sent during a run, so it reads as the agent's.
_ROLE_OF_TYPE: dict[str, Role] = {
    "human": "user",
    "ai": "assistant",
    "custom": "assistant",
    "tool": "tool",
}
_CALL_VIEW = frozenset({"id", "name", "input"})  # the tool_call fields `tool_calls` carries
_PLAIN_CALL = frozenset({"type", *_CALL_VIEW})
_PLAIN_TEXT = frozenset({"type", "text"})


class _Extras(BaseModel):
    """`custom_data["parley"]`: what a ChatMessage cannot hold of a Msg.

    A tool message with several results becomes several ChatMessages; the first carries the
    message's fields, the others only its `id` and their `part` number, to be joined back.
    """

    # The title names the record where it is in pydantic's errors.
    model_config = ConfigDict(extra="forbid", title=f"custom_data[{PARLEY_KEY!r}]")
    id: str | None = None
    created_at: str | None = None
    name: str | None = None
    role: Role | None = None
    metadata: dict[str, Any] | None = None
    elapsed: float | None = None
    content: list[dict[str, Any]] | None = None
    tool_name: str | None = None
    is_error: bool = False
    part: int = Field(default=0, ge=0)


class _Foreign(BaseModel):
    """`Msg.metadata["service_toolkit"]`: what a Msg cannot hold of a ChatMessage."""

    model_config = ConfigDict(extra="forbid", strict=True)
    type: ChatMessageType | None = None
    run_id: str | None = None
    tool_call_id: str | None = None
    response_metadata: dict[str, Any] = Field(default_factory=dict)
    custom_data: dict[str, Any] = Field(default_factory=dict)


_NO_FOREIGN = _Foreign()


# -- Msg to ChatMessage ----------------------------------------------------------------------


def msg_to_chat_message(msg: Msg, *, run_id: str | None = None) -> ChatMessage:
    """Convert a message to the toolkit's `ChatMessage`; `chat_message_to_msg` undoes it.

    Args:
        msg: The message. A tool message must hold one tool result.
        run_id: The run that produced the message, set by the service.

    Raises:
        MessageError: A tool message holds several results; use `msgs_to_chat_messages`.
    """
    messages = _to_chat_messages(msg, run_id)
    if len(messages) != 1:
        raise MessageError(
            f"this tool message holds {len(messages)} tool results, which make "
            f"{len(messages)} ChatMessages; convert it with msgs_to_chat_messages()"
        )
    return messages[0]


def msgs_to_chat_messages(msgs: Iterable[Msg], *, run_id: str | None = None) -> list[ChatMessage]:
    """Convert messages to `ChatMessage`s, one per tool result in tool messages.

    Args:
        msgs: The messages, in order.
        run_id: The run that produced them, set on every ChatMessage by the service.
    """
    return [chat for msg in msgs for chat in _to_chat_messages(msg, run_id)]


def _to_chat_messages(msg: Msg, run_id: str | None) -> list[ChatMessage]:
    foreign = _foreign_in(msg)
    messages = _encode(msg, foreign)
    if foreign is not None and not _decodes_to(messages, msg):
        # The record was not written by chat_message_to_msg (or was edited since) and would
        # not come back the same: keep it verbatim in parley's metadata instead.
        messages = _encode(msg, None)
    if run_id is not None:
        for message in messages:
            message.run_id = run_id
    return messages


def _foreign_in(msg: Msg) -> _Foreign | None:
    record = msg.metadata.get(TOOLKIT_KEY)
    if record is None:
        return None
    try:
        return _Foreign.model_validate(record)
    except ValidationError:
        return None


def _decodes_to(messages: list[ChatMessage], msg: Msg) -> bool:
    try:
        return chat_messages_to_msgs(messages) == [msg]
    except (ValidationError, ParleyError):
        return False


def _encode(msg: Msg, foreign: _Foreign | None) -> list[ChatMessage]:
    data = msg.model_dump(mode="json")
    metadata: dict[str, Any] = data["metadata"]
    if foreign is None:
        foreign = _NO_FOREIGN
    else:
        metadata = {key: value for key, value in metadata.items() if key != TOOLKIT_KEY}
    chat_type = foreign.type or _TYPE_OF_ROLE[data["role"]]
    if data["role"] == "tool":
        parts = [_result_fields(block) for block in data["content"]]
    else:
        parts = [_content_fields(data["content"])]
        parts[0][0]["tool_call_id"] = foreign.tool_call_id
    head = _head_extras(data, metadata)
    # Each part says its role when its type does not imply it: parts are read one by one.
    if data["role"] != _ROLE_OF_TYPE[chat_type]:
        head["role"] = data["role"]
    response_metadata = {**_usage_to_metadata(data.get("usage")), **foreign.response_metadata}
    (fields, extras), *rest = parts
    messages = [
        ChatMessage(
            type=chat_type,
            run_id=foreign.run_id,
            response_metadata=response_metadata,
            custom_data={**foreign.custom_data, PARLEY_KEY: {**head, **extras}},
            **fields,
        )
    ]
    # Later results of a tool message carry only the message id, to be joined back to it.
    for index, (part_fields, part_extras) in enumerate(rest, start=1):
        part = {"id": data["id"], "part": index, **part_extras}
        if "role" in head:
            part["role"] = head["role"]
        messages.append(
            ChatMessage(
                type=chat_type, run_id=foreign.run_id, custom_data={PARLEY_KEY: part}, **part_fields
            )
        )
    return messages


def _head_extras(data: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    extras: dict[str, Any] = {"id": data["id"], "created_at": data["created_at"]}
    if "name" in data:
        extras["name"] = data["name"]
    if metadata:
        extras["metadata"] = metadata
    usage = data.get("usage")
    if usage and usage["elapsed"]:
        extras["elapsed"] = usage["elapsed"]
    return extras


_Fields = tuple[dict[str, Any], dict[str, Any]]  # ChatMessage fields, and their extras


def _content_fields(blocks: list[dict[str, Any]]) -> _Fields:
    texts = [block["text"] for block in blocks if block["type"] == "text"]
    calls = [_tool_call(block) for block in blocks if block["type"] == "tool_call"]
    fields = {"content": "\n".join(texts), "tool_calls": calls}
    if _is_plain(blocks):
        return fields, {}
    return fields, {"content": _template(blocks, sole_text=len(texts) == 1)}


def _result_fields(block: dict[str, Any]) -> _Fields:
    fields: dict[str, Any] = {"tool_call_id": block["tool_call_id"]}
    extras: dict[str, Any] = {"tool_name": block["name"]}
    if block["is_error"]:
        extras["is_error"] = True
    output = block["output"]
    if isinstance(output, str):
        fields["content"] = output
    else:
        texts = [item["text"] for item in output if item["type"] == "text"]
        fields["content"] = "\n".join(texts)
        extras["content"] = _template(output, sole_text=len(texts) == 1)
    return fields, extras


def _tool_call(block: dict[str, Any]) -> ToolCall:
    return {"name": block["name"], "args": block["input"], "id": block["id"], "type": "tool_call"}


def _is_plain(blocks: list[dict[str, Any]]) -> bool:
    """Whether `content` and `tool_calls` alone rebuild the blocks: [text] + tool calls."""
    rest = blocks
    if blocks and blocks[0].keys() == _PLAIN_TEXT and blocks[0]["text"]:
        rest = blocks[1:]
    return all(block.keys() == _PLAIN_CALL for block in rest)


def _template(blocks: list[dict[str, Any]], *, sole_text: bool) -> list[dict[str, Any]]:
    """The blocks without what the views carry: a sole text's text, the tool calls' fields."""
    return [_hollow(block, sole_text=sole_text) for block in blocks]


def _hollow(block: dict[str, Any], *, sole_text: bool) -> dict[str, Any]:
    if block["type"] == "text" and sole_text:
        return {key: value for key, value in block.items() if key != "text"}
    if block["type"] == "tool_call":
        return {key: value for key, value in block.items() if key not in _CALL_VIEW}
    return block


def _usage_to_metadata(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    if usage is None:
        return {}
    prompt, completion, cached = (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["cached_tokens"],
    )
    usage_metadata: dict[str, Any] = {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
    }
    token_usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        usage_metadata["input_token_details"] = {"cache_read": cached}
        token_usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"token_usage": token_usage, "usage_metadata": usage_metadata}


# -- ChatMessage to Msg ----------------------------------------------------------------------


def chat_message_to_msg(chat_message: ChatMessage | Mapping[str, Any]) -> Msg:
    """Convert a toolkit `ChatMessage` (or its JSON object) to a message.

    Args:
        chat_message: The ChatMessage, or a dict to validate as one.

    Raises:
        pydantic.ValidationError: The dict is not a ChatMessage, `custom_data["parley"]` is
            malformed, or the result breaks a message rule (tool calls in a human message...).
        MessageError: A tool message without `tool_call_id` or with `tool_calls`, or parley's
            block list does not match `tool_calls`.
    """
    return _decode(_as_chat_message(chat_message), {})[0]


def chat_messages_to_msgs(chat_messages: Iterable[ChatMessage | Mapping[str, Any]]) -> list[Msg]:
    """Convert `ChatMessage`s to messages, joining the results of one tool message again.

    A tool result with no recorded tool name takes the name of the earlier tool call it answers.

    Raises:
        pydantic.ValidationError: As `chat_message_to_msg`.
        MessageError: As `chat_message_to_msg`.
    """
    msgs: list[Msg] = []
    tool_names: dict[str, str] = {}
    head: ChatMessage | None = None  # the ChatMessage the last message was read from
    for item in chat_messages:
        chat = _as_chat_message(item)
        msg, part = _decode(chat, tool_names)
        if part and head and _continues(msgs[-1], head, msg, chat):
            msgs[-1].content.extend(msg.content)
            continue
        msgs.append(msg)
        head = chat
        tool_names.update((call.id, call.name) for call in msg.tool_calls)
    return msgs


def _as_chat_message(value: ChatMessage | Mapping[str, Any]) -> ChatMessage:
    return value if isinstance(value, ChatMessage) else ChatMessage.model_validate(value)


def _continues(previous: Msg, head: ChatMessage, msg: Msg, chat: ChatMessage) -> bool:
    """Whether `msg`, read from `chat`, a later part of a tool message, belongs to `previous`.

    `head` is the ChatMessage `previous` was read from; a part repeats its type and run id
    and holds nothing else of the toolkit's.
    """
    if previous.role != "tool" or msg.role != "tool" or previous.id != msg.id:
        return False
    if (chat.type, chat.run_id) != (head.type, head.run_id):
        return False
    record = msg.metadata.get(TOOLKIT_KEY, {})
    return (
        msg.metadata.keys() <= {TOOLKIT_KEY}
        and isinstance(record, dict)
        and record.keys() <= {"type", "run_id"}
    )


def _decode(chat: ChatMessage, tool_names: Mapping[str, str]) -> tuple[Msg, int]:
    extras = _Extras.model_validate(chat.custom_data.get(PARLEY_KEY, {}))
    role = extras.role or _ROLE_OF_TYPE[chat.type]
    if role == "tool":
        content = [_result_block(chat, extras, tool_names)]
    else:
        content = _content_blocks(chat, extras)
    usage = _usage_from_metadata(chat.response_metadata, extras.elapsed)
    metadata = dict(extras.metadata or {})
    if foreign := _foreign_of(chat, role, _usage_to_metadata(usage)):
        metadata[TOOLKIT_KEY] = foreign
    data: dict[str, Any] = {"role": role, "content": content, "metadata": metadata}
    if usage is not None:
        data["usage"] = usage
    for key in ("id", "created_at", "name"):
        if (value := getattr(extras, key)) is not None:
            data[key] = value
    return Msg.model_validate(data), extras.part


def _content_blocks(chat: ChatMessage, extras: _Extras) -> list[dict[str, Any]]:
    calls = (_call_block(call) for call in chat.tool_calls)
    if extras.content is None:
        text = [{"type": "text", "text": chat.content}] if chat.content else []
        return text + list(calls)
    blocks = [_fill(item, chat.content, calls) for item in extras.content]
    if next(calls, None) is not None:
        raise MessageError(
            f"custom_data[{PARLEY_KEY!r}]['content'] lists fewer tool calls than tool_calls"
        )
    return blocks


def _result_block(
    chat: ChatMessage, extras: _Extras, tool_names: Mapping[str, str]
) -> dict[str, Any]:
    if chat.tool_call_id is None:
        raise MessageError("a tool ChatMessage needs the tool_call_id of the call it answers")
    if chat.tool_calls:
        raise MessageError("a tool ChatMessage cannot hold tool_calls; only an ai message can")
    output: str | list[dict[str, Any]] = chat.content
    if extras.content is not None:
        output = [_fill(item, chat.content, iter(())) for item in extras.content]
    name = extras.tool_name
    return {
        "type": "tool_result",
        "tool_call_id": chat.tool_call_id,
        "name": tool_names.get(chat.tool_call_id, "") if name is None else name,
        "output": output,
        "is_error": extras.is_error,
    }


def _call_block(call: ToolCall) -> dict[str, Any]:
    # LangChain allows a tool call without an id; parley's blocks need one to pair results.
    call_id = call["id"] if call["id"] is not None else new_id()
    return {"type": "tool_call", "id": call_id, "name": call["name"], "input": call["args"]}


def _fill(item: dict[str, Any], text: str, calls: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """Put back into a block of parley's list what the ChatMessage's views carry."""
    kind = item.get("type")
    if kind == "text" and "text" not in item:
        return {**item, "text": text}
    if kind == "tool_call" and "id" not in item:
        call = next(calls, None)
        if call is None:
            raise MessageError(
                f"custom_data[{PARLEY_KEY!r}]['content'] lists more tool calls than tool_calls"
            )
        return {**item, **call}
    return item


def _foreign_of(chat: ChatMessage, role: str, derived: dict[str, Any]) -> dict[str, Any]:
    """What the ChatMessage holds that parley did not write there."""
    foreign: dict[str, Any] = {}
    if chat.type != _TYPE_OF_ROLE[role]:
        foreign["type"] = chat.type
    if chat.run_id is not None:
        foreign["run_id"] = chat.run_id
    if role != "tool" and chat.tool_call_id is not None:
        foreign["tool_call_id"] = chat.tool_call_id
    missing = object()
    response_metadata = {
        key: value
        for key, value in chat.response_metadata.items()
        if derived.get(key, missing) != value
    }
    if response_metadata:
        foreign["response_metadata"] = response_metadata
    custom_data = {key: value for key, value in chat.custom_data.items() if key != PARLEY_KEY}
    if custom_data:
        foreign["custom_data"] = custom_data
    return foreign


def _usage_from_metadata(
    response_metadata: Mapping[str, Any], elapsed: float | None
) -> dict[str, Any] | None:
    counts = _counts(
        response_metadata.get("usage_metadata"),
        ("input_tokens", "output_tokens", "input_token_details", "cache_read"),
    ) or _counts(
        response_metadata.get("token_usage"),
        ("prompt_tokens", "completion_tokens", "prompt_tokens_details", "cached_tokens"),
    )
    if counts is None and elapsed is None:
        return None
    prompt, completion, cached = counts or (0, 0, 0)
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "cached_tokens": cached,
        "elapsed": elapsed or 0.0,
    }


def _counts(section: Any, keys: Sequence[str]) -> tuple[int, int, int] | None:
    """Input, output and cached tokens from a usage dict; None unless they are all counts."""
    if not isinstance(section, dict):
        return None
    prompt_key, completion_key, details_key, cached_key = keys
    details = section.get(details_key)
    cached = details.get(cached_key, 0) if isinstance(details, dict) else 0
    prompt, completion = section.get(prompt_key), section.get(completion_key)
    if _is_count(prompt) and _is_count(completion) and _is_count(cached):
        return prompt, completion, cached
    return None


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
