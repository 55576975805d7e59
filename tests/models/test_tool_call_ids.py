"""Tool-call ids: the provider's are kept whenever they arrive; generated ones never repeat.

Generated ids are compared across real processes: two interpreters started apart, and a
child forked from this one (which inherits the parent's id state and must not reuse it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from typing import Any

from parley import Msg
from parley.agents import (
    Agent,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallStarted,
    ToolResult,
)
from parley.messages import new_id
from parley.models.accumulator import MetaDelta, StreamAccumulator, TextDelta, ToolCallDelta
from parley.providers.openai.server import OpenAIServer, Raw, Reply
from tests.sample_tools import add

pytest_plugins = ["tests.models.openai_fixtures"]

IDS_SCRIPT = """
import json
from parley.messages import new_id
from parley.models.accumulator import StreamAccumulator, ToolCallDelta
calls = []
for _ in range(50):
    accumulator = StreamAccumulator()
    accumulator.add(ToolCallDelta(0, name="weather", arguments="{}"))
    calls.append(accumulator.final().tool_calls[0].id)
print(json.dumps({"calls": calls, "ids": [new_id() for _ in range(50)]}))
"""


def generated_ids() -> dict[str, list[str]]:
    """What IDS_SCRIPT prints, from this process."""
    calls = []
    for _ in range(50):
        accumulator = StreamAccumulator()
        accumulator.add(ToolCallDelta(0, name="weather", arguments="{}"))
        calls.append(accumulator.final().tool_calls[0].id)
    return {"calls": calls, "ids": [new_id() for _ in range(50)]}


def ids_from_a_new_interpreter() -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", IDS_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


def ids_from_a_forked_child() -> dict[str, list[str]]:
    read, write = os.pipe()
    with warnings.catch_warnings():
        # The child only makes ids and exits: none of the threads fork warns about matter.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, json.dumps(generated_ids()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    result: dict[str, list[str]] = json.loads(data)
    return result


def all_ids(*batches: dict[str, list[str]]) -> list[str]:
    return [i for batch in batches for i in batch["calls"] + batch["ids"]]


def test_generated_ids_never_repeat_across_processes() -> None:
    here_before = generated_ids()
    forked = ids_from_a_forked_child()
    here_after = generated_ids()
    first, second = ids_from_a_new_interpreter(), ids_from_a_new_interpreter()
    ids = all_ids(here_before, forked, here_after, first, second)
    assert len(ids) == len(set(ids)) == 5 * 100


def test_generated_ids_are_unique_and_in_order_within_a_process() -> None:
    ids = [new_id() for _ in range(1000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    calls = generated_ids()["calls"]
    assert len(set(calls)) == len(calls)
    assert all(call.startswith("call_") for call in calls)


def test_a_provider_id_arriving_after_the_first_fragment_is_kept() -> None:
    accumulator = StreamAccumulator()
    first = accumulator.add(ToolCallDelta(0, name="weather", arguments='{"city": '))
    later = accumulator.add(ToolCallDelta(0, id="call_provider", arguments='"Paris"}'))
    # Held back until its id came, the call is shown once, under that id, with all so far.
    assert first is None
    assert later is not None
    [shown] = later.tool_calls
    assert (shown.id, shown.name, shown.raw_input) == (
        "call_provider",
        "weather",
        '{"city": "Paris"}',
    )
    next_part = accumulator.add(ToolCallDelta(0, arguments=" "))
    assert next_part is not None
    assert next_part.tool_calls[0].id == "call_provider"
    [call] = accumulator.final().tool_calls
    assert (call.id, call.name, call.input) == ("call_provider", "weather", {"city": "Paris"})


def test_a_call_whose_id_never_comes_is_shown_once_something_else_comes() -> None:
    accumulator = StreamAccumulator()
    assert accumulator.add(ToolCallDelta(0, name="a", arguments="{}")) is None
    assert accumulator.add(MetaDelta(response_id="r")) is None  # not an answer's part
    # The next call comes: the first one is shown before it, under a generated id.
    chunk = accumulator.add(ToolCallDelta(1, name="b", arguments="{}"))
    assert chunk is not None
    [first] = chunk.tool_calls
    assert (first.name, first.raw_input, first.id.startswith("call_")) == ("a", "{}", True)
    # The second has no id either: held until the stream ends.
    held = accumulator.release()
    assert held is not None
    assert [c.name for c in held.tool_calls] == ["b"]
    assert accumulator.release() is None
    assert [c.name for c in accumulator.final().tool_calls] == ["a", "b"]


def test_text_after_a_held_call_comes_after_it() -> None:
    accumulator = StreamAccumulator()
    accumulator.add(ToolCallDelta(0, name="a", arguments="{}"))
    chunk = accumulator.add(TextDelta("done"))
    assert chunk is not None
    assert [b.type for b in chunk.content] == ["tool_call", "text"]


def test_the_first_provider_id_wins_over_a_later_one() -> None:
    accumulator = StreamAccumulator()
    accumulator.add(ToolCallDelta(0, id="call_first", name="weather"))
    accumulator.add(ToolCallDelta(0, id="call_other", arguments="{}"))
    assert accumulator.final().tool_calls[0].id == "call_first"


def _sse(*payloads: Any) -> bytes:
    return b"".join(f"data: {json.dumps(p)}\n\n".encode() for p in payloads) + b"data: [DONE]\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [choice],
    }


def late_id_stream() -> Raw:
    """A server that names the call and starts its arguments first, then sends its id."""
    first = {"index": 0, "type": "function", "function": {"name": "add", "arguments": '{"a": 2,'}}
    with_id = {"index": 0, "id": "call_late", "function": {"arguments": ' "b"'}}
    body = _sse(
        _chunk({"role": "assistant", "content": None, "tool_calls": [first]}),
        _chunk({"tool_calls": [with_id]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 2}"}}]}),
        _chunk({}, "tool_calls"),
    )
    return Raw(body, content_type="text/event-stream")


async def test_a_late_id_from_an_openai_compatible_server_is_kept(
    server: OpenAIServer, make_model: Any
) -> None:
    server.add(late_id_stream())
    stream = make_model().chat_stream([Msg.user("Hi")])
    shown = [c.id for chunk in [chunk async for chunk in stream] for c in chunk.tool_calls]
    assert set(shown) == {"call_late"}  # every chunk, the final one too, names one call
    assert stream.response is not None
    [call] = stream.response.tool_calls
    assert (call.id, call.name, call.input) == ("call_late", "add", {"a": 2, "b": 2})


async def test_an_agent_announces_a_call_with_a_late_id_once(
    server: OpenAIServer, make_model: Any
) -> None:
    server.add(late_id_stream())
    server.add(Reply(text="It is 4."))
    events = [e async for e in Agent("calc", make_model(), tools=[add]).stream("2+2?")]

    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(e.call_id, e.name) for e in started] == [("call_late", "add")]
    deltas = [e for e in events if isinstance(e, ToolCallArgumentsDelta)]
    assert {e.call_id for e in deltas} == {"call_late"}
    assert json.loads("".join(e.delta for e in deltas)) == {"a": 2, "b": 2}
    [ended] = [e for e in events if isinstance(e, ToolCallEnded)]
    assert (ended.call.id, ended.call.input) == ("call_late", {"a": 2, "b": 2})
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert (result.result.tool_call_id, result.result.output) == ("call_late", "4")
    # The id the server gave is the one sent back with the result.
    sent = server.bodies()[-1]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] == "call_late"


async def test_a_call_that_never_gets_an_id_is_announced_before_the_stream_ends(
    server: OpenAIServer, make_model: Any
) -> None:
    # A server that sends no id at all: the call is held to the end, then shown once.
    no_id = {"index": 0, "type": "function", "function": {"name": "add", "arguments": "{}"}}
    body = _sse(_chunk({"role": "assistant", "tool_calls": [no_id]}), _chunk({}, "tool_calls"))
    server.add(Raw(body, content_type="text/event-stream"), Reply(text="Done."))
    events = [e async for e in Agent("calc", make_model(), tools=[add]).stream("add")]
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolCallStarted") < kinds.index("ToolCallEnded")
    [started] = [e for e in events if isinstance(e, ToolCallStarted)]
    [ended] = [e for e in events if isinstance(e, ToolCallEnded)]
    assert started.call_id == ended.call.id
    assert started.call_id.startswith("call_")  # parley's own, standing in
