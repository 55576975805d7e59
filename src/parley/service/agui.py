"""parley's runs as AG-UI events, and AG-UI's messages as parley's (`ag-ui-protocol`'s types).

A run's events become, in order::

    RUN_STARTED                                     the input's threadId and runId
    REASONING_START, REASONING_MESSAGE_*, ..._END   thinking (before the answer or a call)
    TEXT_MESSAGE_START, _CONTENT..., _END           answer text, role assistant
    TOOL_CALL_START, _ARGS..., _END                 a call, its parent the turn's message
    TOOL_CALL_RESULT                                each result of the tools the service ran
    CUSTOM on_interrupt                             calls parked for approval (the toolkit's)
    MESSAGES_SNAPSHOT                               the thread as stored, with parley's ids
    RUN_FINISHED                                    outcome: success, interrupt or cancelled

or end with `RUN_ERROR` (nothing after it) when the run fails. What is open (a text, a
reasoning message, a tool call) is closed before anything else starts and before the end, so
the stream keeps every rule an AG-UI client's verifier checks. Streamed messages get ids of
their own (parley names a message only once it is whole); the snapshot at the end carries
the stored ids, and replaces the client's copy, so the next request sends those back. It is
read as the run ends, before the thread's lock is released (`RunManager.start(snapshot=True)`),
so no message of a later run on the thread can slip into it.

An approval is one AG-UI interrupt per awaiting call, its id `<interrupt_id>:<call_id>`,
answered by a later run's `resume` entries (`resolved`, optionally with a payload
`{"approved": false}`, or `cancelled`), or, as the toolkit's LangGraph agents take it, by
`forwardedProps.command.resume` holding `/approvals`' `approved` (true, false, or per call id).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    DataSource,
    FunctionCall,
    ImagePart,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from ag_ui.encoder import EventEncoder

from parley.agents import events as ev
from parley.errors import MessageError
from parley.messages import (
    Base64Source,
    Block,
    ImageBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    new_id,
)
from parley.service.openai_messages import tool_call_blocks
from parley.service.runs import RunHandle
from parley.service.sse import interrupt_of

__all__ = [
    "INTERRUPT_EVENT",
    "AguiEvents",
    "agui_frames",
    "input_messages",
    "snapshot_messages",
    "split_interrupt_id",
]

INTERRUPT_EVENT = "on_interrupt"
"""The CUSTOM event naming a parked run's interrupt, as the toolkit's LangGraph agents send."""

_MAX_MESSAGE_ID = 64  # the store's column


class AguiEvents:
    """Turns one run's parley events into AG-UI events, keeping open what is open."""

    def __init__(self, handle: RunHandle, given: RunAgentInput) -> None:
        self.handle = handle
        self.given = given
        self.turn = new_id()  # the assistant message the model is writing
        self.turn_used = False  # whether an event named it yet
        self.text: str | None = None
        self.reasoning: str | None = None
        self.calls: dict[str, bool] = {}  # open tool calls: whether their arguments came
        self.interrupts: list[Interrupt] = []
        self.failed = False

    def started(self) -> RunStartedEvent:
        """The run's first event."""
        return RunStartedEvent(
            thread_id=self.given.thread_id, run_id=self.given.run_id, metadata=self._parley()
        )

    def events(self, event: ev.AgentEvent) -> list[BaseEvent]:  # noqa: PLR0911 - one per kind
        """The AG-UI events for one parley event (none after the run failed)."""
        if self.failed:
            return []
        if isinstance(event, ev.TextDelta):
            return [*self._close_reasoning(), *self._open_text(), self._text(event.text)]
        if isinstance(event, ev.ThinkingDelta):
            return [*self._close_text(), *self._open_reasoning(), self._thought(event.text)]
        if isinstance(event, ev.ToolCallStarted):
            return [*self._close_content(), *self._start_call(event.call_id, event.name)]
        if isinstance(event, ev.ToolCallArgumentsDelta):
            return self._arguments(event.call_id, event.delta)
        if isinstance(event, ev.ToolCallEnded):
            return [*self._close_content(), *self._end_call(event.call)]
        if isinstance(event, ev.MessageCompleted) and event.msg.role == "assistant":
            closing = [*self._close_content(), *self._close_calls()]
            self.turn, self.turn_used = new_id(), False
            return closing
        if isinstance(event, ev.ToolResult):
            return [_result_event(event.result)]
        if isinstance(event, ev.ApprovalRequested):
            return [self._interrupt(event)]
        if isinstance(event, ev.RunError):
            self.failed = True
            return [*self._close_all(), RunErrorEvent(message=event.message, code=event.kind)]
        return []

    def ended(self, ended: ev.RunEnded, thread: Sequence[Msg] | None) -> list[BaseEvent]:
        """The run's last events: the thread's snapshot and `RUN_FINISHED` (or `RUN_ERROR`).

        `thread` is the snapshot's messages; None leaves the snapshot out (the thread could
        not be read: the client keeps its own copy).
        """
        if self.failed:
            return []
        if ended.status == "error":  # no RunError came: still, the run failed
            self.failed = True
            return [*self._close_all(), RunErrorEvent(message="the run failed", code="error")]
        usage = ended.usage
        snapshot = [] if thread is None else [snapshot_event(thread)]
        return [
            *self._close_all(),
            *snapshot,
            RunFinishedEvent(
                thread_id=self.given.thread_id,
                run_id=self.given.run_id,
                outcome=self._outcome(ended),
                usage=[
                    TokenUsage(
                        input_tokens=usage.input_tokens,
                        output_tokens=usage.output_tokens,
                        total_tokens=usage.input_tokens + usage.output_tokens,
                        cached_input_tokens=usage.cached_tokens or None,
                    )
                ],
                metadata=self._parley(status=ended.status),
            ),
        ]

    # -- pieces ----------------------------------------------------------------------------

    def _parley(self, **more: Any) -> dict[str, Any]:
        return {"parley": {"run_id": self.handle.run_id, **more}}

    def _outcome(self, ended: ev.RunEnded) -> RunFinishedOutcome:
        if ended.status == "awaiting_approval" and self.interrupts:
            return RunFinishedInterruptOutcome(interrupts=self.interrupts)
        if ended.status == "interrupted":
            return RunFinishedCancelledOutcome()
        return RunFinishedSuccessOutcome()

    def _open_text(self) -> list[BaseEvent]:
        if self.text is not None:
            return []
        # The turn's first text is the turn's message (its tool calls' parent); more text
        # after a call is a message of its own.
        self.text = new_id() if self.turn_used else self.turn
        self.turn_used = True
        return [TextMessageStartEvent(message_id=self.text, role="assistant")]

    def _text(self, delta: str) -> TextMessageContentEvent:
        assert self.text is not None
        return TextMessageContentEvent(message_id=self.text, delta=delta)

    def _open_reasoning(self) -> list[BaseEvent]:
        if self.reasoning is not None:
            return []
        self.reasoning = new_id()
        return [
            ReasoningStartEvent(message_id=self.reasoning),
            ReasoningMessageStartEvent(message_id=self.reasoning),
        ]

    def _thought(self, delta: str) -> ReasoningMessageContentEvent:
        assert self.reasoning is not None
        return ReasoningMessageContentEvent(message_id=self.reasoning, delta=delta)

    def _close_text(self) -> list[BaseEvent]:
        if self.text is None:
            return []
        text, self.text = self.text, None
        return [TextMessageEndEvent(message_id=text)]

    def _close_reasoning(self) -> list[BaseEvent]:
        if self.reasoning is None:
            return []
        reasoning, self.reasoning = self.reasoning, None
        return [
            ReasoningMessageEndEvent(message_id=reasoning),
            ReasoningEndEvent(message_id=reasoning),
        ]

    def _close_content(self) -> list[BaseEvent]:
        return [*self._close_text(), *self._close_reasoning()]

    def _start_call(self, call_id: str, name: str) -> list[BaseEvent]:
        self.calls[call_id] = False
        self.turn_used = True
        return [
            ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=name, parent_message_id=self.turn
            )
        ]

    def _arguments(self, call_id: str, delta: str) -> list[BaseEvent]:
        if call_id not in self.calls:
            return []  # a call already ended: its arguments went whole
        self.calls[call_id] = True
        return [ToolCallArgsEvent(tool_call_id=call_id, delta=delta)]

    def _end_call(self, call: ToolCallBlock) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if call.id not in self.calls:  # a model that streamed no call delta
            out += self._start_call(call.id, call.name)
        if not self.calls.pop(call.id):
            arguments = call.raw_input or json.dumps(call.input, ensure_ascii=False)
            out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=arguments))
        out.append(ToolCallEndEvent(tool_call_id=call.id))
        return out

    def _close_calls(self) -> list[BaseEvent]:
        calls, self.calls = list(self.calls), {}
        return [ToolCallEndEvent(tool_call_id=call_id) for call_id in calls]

    def _close_all(self) -> list[BaseEvent]:
        return [*self._close_content(), *self._close_calls()]

    def _interrupt(self, event: ev.ApprovalRequested) -> CustomEvent:
        handle = self.handle
        parked = interrupt_of(event, thread_id=handle.thread_id, run_id=handle.run_id)
        self.interrupts = [
            Interrupt(
                id=f"{event.interrupt_id}:{call.id}",
                reason="tool_approval",
                message=f"Allow the call of {call.name} with {json.dumps(call.input)}?",
                tool_call_id=call.id,
                response_schema=_APPROVAL_SCHEMA,
            )
            for call in event.calls
        ]
        return CustomEvent(name=INTERRUPT_EVENT, value=parked.model_dump(mode="json"))


_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean", "default": True}},
}


def _result_event(result: ToolResultBlock) -> ToolCallResultEvent:
    return ToolCallResultEvent(
        message_id=new_id(),
        tool_call_id=result.tool_call_id,
        content=_output_text(result),
        role="tool",
    )


def _output_text(result: ToolResultBlock) -> str:
    if isinstance(result.output, str):
        return result.output
    return "\n".join(block.text for block in result.output if isinstance(block, TextBlock))


def split_interrupt_id(agui_id: str) -> tuple[str, str]:
    """An AG-UI interrupt id's parley interrupt id and call id (`("", "")` if it is no such id)."""
    interrupt_id, colon, call_id = agui_id.partition(":")
    return (interrupt_id, call_id) if colon else ("", "")


async def agui_frames(
    handle: RunHandle, given: RunAgentInput, encoder: EventEncoder
) -> AsyncIterator[str]:
    """The SSE frames of a run's AG-UI events, encoded by `encoder`.

    The run is one started with `snapshot=True`: its thread, read as it ended, is the
    `MESSAGES_SNAPSHOT`.
    """
    events = AguiEvents(handle, given)
    yield encoder.encode(events.started())
    while (event := await handle.next_event()) is not None:
        if isinstance(event, ev.RunEnded):
            for last in events.ended(event, handle.snapshot):
                yield encoder.encode(last)
            return
        for out in events.events(event):
            yield encoder.encode(out)


# -- messages -----------------------------------------------------------------------------------


def snapshot_event(thread: Sequence[Msg]) -> MessagesSnapshotEvent:
    """The `MESSAGES_SNAPSHOT` of a thread's messages (see `snapshot_messages`)."""
    return MessagesSnapshotEvent(messages=snapshot_messages(thread))


def snapshot_messages(thread: Sequence[Msg]) -> list[Message]:
    """A thread's messages as AG-UI's, with their stored ids (system messages left out).

    A tool message becomes one AG-UI tool message per result: the first keeps the message's
    id, the others `<id>:<n>`.
    """
    out: list[Message] = []
    for msg in thread:
        if msg.role == "user":
            out.append(UserMessage(id=msg.id, content=_user_parts(msg), name=msg.name))
        elif msg.role == "assistant":
            out.append(_assistant_message(msg))
        elif msg.role == "tool":
            out.extend(
                ToolMessage(
                    id=msg.id if index == 0 else f"{msg.id}:{index}",
                    content=_output_text(result),
                    tool_call_id=result.tool_call_id,
                    error=_output_text(result) if result.is_error else None,
                )
                for index, result in enumerate(msg.tool_results)
            )
    return out


def _user_parts(msg: Msg) -> str | list[Any]:
    images = msg.get_blocks("image")
    if not images:
        return msg.text
    parts: list[Any] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, ImageBlock):
            source = block.source
            if isinstance(source, Base64Source):
                parts.append(
                    ImagePart(source=DataSource(value=source.data, mime_type=source.media_type))
                )
            else:
                parts.append(ImagePart(source=UrlSource(value=str(source.url))))
    return parts


def _assistant_message(msg: Msg) -> AssistantMessage:
    calls = [
        ToolCall(
            id=call.id,
            function=FunctionCall(
                name=call.name,
                arguments=call.raw_input or json.dumps(call.input, ensure_ascii=False),
            ),
        )
        for call in msg.tool_calls
    ]
    return AssistantMessage(
        id=msg.id, content=msg.text or None, tool_calls=calls or None, name=msg.name
    )


def input_messages(messages: Sequence[Message]) -> list[Msg]:
    """AG-UI messages as parley's (ids kept when the store can hold them).

    System and developer messages become system messages; activity and reasoning messages
    (a client's own view) are left out; consecutive tool messages join into one.

    Raises:
        MessageError: A message parley cannot take (an image that is not an `http(s)://` or
            inline one, a tool result that answers no earlier call, other media parts).
    """
    msgs: list[Msg] = []
    names: dict[str, str] = {}  # tool call id -> tool name
    for index, message in enumerate(messages):
        msg = _msg(message, f"messages[{index}]", names)
        if msg is None:
            continue
        if msg.role == "tool" and msgs and msgs[-1].role == "tool":
            msgs[-1] = msgs[-1].model_copy(update={"content": [*msgs[-1].content, *msg.content]})
        else:
            msgs.append(msg)
    return msgs


def _msg(message: Message, where: str, names: dict[str, str]) -> Msg | None:
    fields: dict[str, Any] = {}
    if 0 < len(message.id) <= _MAX_MESSAGE_ID:
        fields["id"] = message.id
    if isinstance(message, UserMessage):
        return Msg.user(*_user_content(message.content, where), name=message.name, **fields)
    if isinstance(message, SystemMessage) or message.role == "developer":
        return Msg.system(str(getattr(message, "content", "")), **fields)
    if isinstance(message, AssistantMessage):
        calls = tool_call_blocks(message.tool_calls or [], names)
        texts = [message.content] if message.content else []
        return Msg.assistant(*texts, *calls, name=message.name, **fields)
    if isinstance(message, ToolMessage):
        name = names.get(message.tool_call_id)
        if name is None:
            raise MessageError(
                f"{where}: tool_call_id {message.tool_call_id!r} answers no tool call of an "
                "earlier assistant message"
            )
        content = message.content if isinstance(message.content, str) else _joined(message.content)
        return Msg.tool_result(
            message.tool_call_id, content, name=name, is_error=message.error is not None, **fields
        )
    return None  # activity and reasoning messages: the client's view, not the conversation


def _joined(parts: Sequence[Any]) -> str:
    return "\n".join(part.text for part in parts if isinstance(part, TextPart))


def _user_content(content: str | Sequence[Any], where: str) -> list[str | Block]:
    if isinstance(content, str):
        return [content]
    out: list[str | Block] = []
    for index, part in enumerate(content):
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, ImagePart):
            out.append(_image(part, f"{where}.content[{index}]"))
        else:
            raise MessageError(
                f"{where}.content[{index}]: a {part.type} part is not taken here (text and "
                "images only)"
            )
    return out


def _image(part: ImagePart, where: str) -> ImageBlock:
    source = part.source
    if isinstance(source, DataSource):
        return ImageBlock(source=Base64Source(media_type=source.mime_type, data=source.value))
    if isinstance(source, UrlSource) and source.value.lower().startswith(
        ("http://", "https://", "data:")
    ):
        return ImageBlock.from_url(source.value, source.mime_type)
    # Never a path or a file:// URL: the server would read its own files for the client.
    raise MessageError(f"{where}: an image is inline data, or an http(s):// or data: URL")
