"""A run's events as LangGraph's stream parts, and those parts as server-sent events.

One parley run is a graph of two nodes as LangGraph's prebuilt agents have it: `model` (an
assistant message) and `tools` (the tools' results). For each event of the run, in order:

- `RunStarted` -> `metadata` `{"run_id", "attempt"}` (always first, whatever the modes), then
  `values` (the thread as the run starts: its question in it). A takeover's `RunStarted`
  (attempt 2, 3...) gives them again: a new `metadata` with its attempt, and `values` with
  the messages stored so far (the dead attempt's unfinished message dropped).
- `TextDelta`, `ToolCallStarted`, `ToolCallArgumentsDelta` -> `messages` `[AIMessageChunk,
  metadata]` (`messages-tuple`); all chunks of one message share an id.
- `MessageCompleted` -> `messages` (the message's last chunk with its usage, or the whole
  message when nothing of it streamed; a tool's result whole), `updates`
  `{"model"|"tools": {"messages": [...]}}`, `values` (the whole thread).
- `ApprovalRequested` -> `updates` `{"__interrupt__": [...]}` and `values` with
  `__interrupt__` (sent even without `values` mode, as LangGraph does).
- `RunError` -> `error` `{"error", "message"}`.
- `custom` carries parley's events that LangGraph's modes have no place for (thinking,
  audio, the iteration limit), each as its parley JSON.

Ids: each frame of event N has the id `N`, `N.1`, `N.2`...: a client that reconnects with
the last id it saw gets exactly the frames after it (`parley.service.sse.parse_frame_id`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from parley.agents import events as ev
from parley.messages import Msg, ToolCallBlock
from parley.service.langgraph.convert import (
    ai_chunk,
    message_dicts,
    messages_of,
    tool_call_dict,
    usage_metadata,
)

__all__ = [
    "LANGGRAPH_MODES",
    "SUPPORTED_MODES",
    "Frame",
    "FrameMaker",
    "interrupt_dicts",
    "sse",
]

SUPPORTED_MODES = frozenset({"values", "messages-tuple", "updates", "custom"})
"""The stream modes parley sends."""
LANGGRAPH_MODES = SUPPORTED_MODES | {
    "messages",
    "events",
    "debug",
    "tasks",
    "checkpoints",
    "tools",
}
"""Every mode LangGraph's SDKs name: the others are accepted and send nothing."""

_CUSTOM = (ev.ThinkingDelta, ev.AudioStarted, ev.AudioDelta, ev.AudioEnded, ev.MaxItersReached)


@dataclass(frozen=True)
class Frame:
    """One stream part: its SSE event name, its data, and its id."""

    event: str
    data: Any
    id: str


def sse(frame: Frame, *, with_id: bool = True) -> str:
    """A frame as LangGraph's server writes it (CRLF, one-line JSON, `id:` after `data:`)."""
    data = json.dumps(frame.data, ensure_ascii=False, separators=(",", ":"))
    # A line break JSON leaves raw (U+2028...) would split the line for some readers.
    data = data.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")
    tail = f"id: {frame.id}\r\n" if with_id else ""
    return f"event: {frame.event}\r\ndata: {data}\r\n{tail}\r\n"


def interrupt_dicts(interrupt_id: str, calls: Sequence[ToolCallBlock]) -> list[dict[str, Any]]:
    """A parked run's approval as LangGraph's `__interrupt__` list.

    Its `value` is parley's approval: the interrupt's id and the calls awaiting a verdict;
    a run with `command.resume` (true, false, or `{call_id: bool}`) answers it.
    """
    value = {"interrupt_id": interrupt_id, "calls": [tool_call_dict(c) for c in calls]}
    return [{"value": value, "id": interrupt_id}]


@dataclass
class FrameMaker:
    """Turns one run's events, in order, into its stream parts for the modes asked.

    `initial` is the thread as the run starts; the values it sends grow with the run's
    messages. Every event must be given (from the first), even those whose frames the reader
    has seen: they make the values.
    """

    run_id: str
    thread_id: str
    assistant_id: str
    graph_id: str
    modes: frozenset[str]
    initial: list[Msg]
    attempt: int = 1
    _msgs: list[Msg] = field(init=False)
    _step: int = field(default=0, init=False)
    _chunk_id: str | None = field(default=None, init=False)
    _chunks: int = field(default=0, init=False)
    _call_index: dict[str, int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._msgs = list(self.initial)

    def values(self) -> dict[str, Any]:
        """The thread's values as the run has them now."""
        return {"messages": messages_of(self._msgs)}

    def frames(self, seq: int, event: ev.AgentEvent) -> list[Frame]:
        """The frames of the run's event number `seq`."""
        parts = list(self._parts(event))
        return [
            Frame(name, data, f"{seq}.{n}" if n else str(seq))
            for n, (name, data) in enumerate(parts)
        ]

    def _parts(self, event: ev.AgentEvent) -> Iterable[tuple[str, Any]]:
        if isinstance(event, ev.RunStarted):
            # A takeover starts the run again (attempt 2, 3...): the dead attempt's
            # unfinished message is dropped (its messages stored whole stay in the values).
            self.attempt = event.attempt
            self._chunk_id, self._chunks = None, 0
            self._call_index.clear()
            yield "metadata", {"run_id": self.run_id, "attempt": self.attempt}
            yield from self._mode("values", self.values())
        elif isinstance(event, ev.TextDelta):
            yield from self._chunk(content=event.text)
        elif isinstance(event, ev.ToolCallStarted):
            index = self._call_index.setdefault(event.call_id, len(self._call_index))
            piece = {"name": event.name, "args": "", "id": event.call_id, "index": index}
            call = {"name": event.name, "args": {}, "id": event.call_id, "type": "tool_call"}
            yield from self._chunk(
                tool_calls=[call], tool_call_chunks=[piece | {"type": "tool_call_chunk"}]
            )
        elif isinstance(event, ev.ToolCallArgumentsDelta):
            index = self._call_index.setdefault(event.call_id, len(self._call_index))
            piece = {"name": None, "args": event.delta, "id": None, "index": index}
            yield from self._chunk(tool_call_chunks=[piece | {"type": "tool_call_chunk"}])
        elif isinstance(event, ev.MessageCompleted):
            yield from self._completed(event.msg)
        elif isinstance(event, ev.ApprovalRequested):
            interrupts = interrupt_dicts(event.interrupt_id, event.calls)
            yield from self._mode("updates", {"__interrupt__": interrupts})
            yield "values", self.values() | {"__interrupt__": interrupts}
        elif isinstance(event, ev.RunError):
            yield "error", {"error": event.kind, "message": event.message}
        elif isinstance(event, _CUSTOM):
            yield from self._mode("custom", event.model_dump(mode="json"))

    def _mode(self, mode: str, data: Any) -> Iterable[tuple[str, Any]]:
        if mode in self.modes:
            yield mode, data

    def _metadata(self, node: str) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "graph_id": self.graph_id,
            "assistant_id": self.assistant_id,
            "run_attempt": self.attempt,
            "langgraph_step": self._step + 1,
            "langgraph_node": node,
            "langgraph_triggers": [],
            "langgraph_path": ["__pregel_pull", node],
            "langgraph_checkpoint_ns": "",
            "checkpoint_ns": "",
        }

    def _chunk(self, **fields: Any) -> Iterable[tuple[str, Any]]:
        if self._chunk_id is None:
            self._chunk_id = f"lc_run--{self.run_id}-{self._step}"
            if self.attempt > 1:  # not the dead attempt's unfinished message continued
                self._chunk_id += f"-{self.attempt}"
        self._chunks += 1
        if "messages-tuple" in self.modes:
            yield "messages", [ai_chunk(self._chunk_id, **fields), self._metadata("model")]

    def _completed(self, msg: Msg) -> Iterable[tuple[str, Any]]:
        node = "model" if msg.role == "assistant" else "tools"
        dicts = message_dicts(msg)
        if "messages-tuple" in self.modes:
            yield from self._message_parts(msg, dicts, node)
        self._msgs.append(msg)
        self._step += 1
        self._chunk_id, self._chunks = None, 0
        self._call_index.clear()
        yield from self._mode("updates", {node: {"messages": dicts}})
        yield from self._mode("values", self.values())

    def _message_parts(
        self, msg: Msg, dicts: list[dict[str, Any]], node: str
    ) -> Iterable[tuple[str, Any]]:
        meta = self._metadata(node)
        if msg.role != "assistant":
            for data in dicts:
                yield "messages", [data, meta]
        elif self._chunks and self._chunk_id is not None:
            last = ai_chunk(self._chunk_id, usage=usage_metadata(msg), last=True)
            yield "messages", [last, meta]
        else:  # nothing of it streamed: the whole message as its one chunk
            whole = dicts[0] | {"type": "AIMessageChunk", "chunk_position": "last"}
            whole["tool_call_chunks"] = []
            yield "messages", [whole, meta]
