"""`FrameMaker`: a takeover's second start in a run's log, as LangGraph's stream shows it."""

from __future__ import annotations

from typing import Any

from parley.agents.events import AgentEvent, MessageCompleted, RunStarted, TextDelta
from parley.messages import Msg
from parley.service.langgraph.streams import FrameMaker


def _frames(maker: FrameMaker, events: list[AgentEvent]) -> list[tuple[str, Any, str]]:
    return [
        (f.event, f.data, f.id)
        for seq, event in enumerate(events, 1)
        for f in maker.frames(seq, event)
    ]


def test_a_takeover_starts_again_with_its_attempt_and_the_stored_messages() -> None:
    question = Msg.user("go")
    first = Msg.assistant("first answer")
    maker = FrameMaker(
        run_id="r1",
        thread_id="t1",
        assistant_id="a1",
        graph_id="echo",
        modes=frozenset({"values", "messages-tuple"}),
        initial=[question],
    )
    log: list[AgentEvent] = [
        RunStarted(run_id="r1", agent="echo"),
        TextDelta(text="first "),
        MessageCompleted(msg=first),  # stored whole before its worker died
        TextDelta(text="never finis"),  # the dead attempt's unfinished message
        RunStarted(run_id="r1", agent="echo", attempt=2),
        TextDelta(text="again"),
    ]
    frames = _frames(maker, log)
    metadata = [(data, fid) for name, data, fid in frames if name == "metadata"]
    assert metadata == [
        ({"run_id": "r1", "attempt": 1}, "1"),
        ({"run_id": "r1", "attempt": 2}, "5"),
    ]
    after = frames[[fid for _, _, fid in frames].index("5") :]
    assert after[1][0] == "values"  # the thread as the takeover starts it: no partial message
    assert [m["content"] for m in after[1][1]["messages"]] == ["go", "first answer"]
    chunk, meta = after[2][1]
    assert chunk["content"] == "again"
    assert meta["run_attempt"] == 2
    partial = next(d for n, d, fid in frames if fid == "4")[0]
    assert chunk["id"] != partial["id"]  # a new message, not the dead one's continued
