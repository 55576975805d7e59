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
from parley.messages import new_id
from parley.models.accumulator import StreamAccumulator, ToolCallDelta
from parley.testing.openai_server import OpenAIServer, Raw

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
    assert first is not None
    assert later is not None
    assert later.tool_calls[0].id == "call_provider"
    [call] = accumulator.final().tool_calls
    assert (call.id, call.name, call.input) == ("call_provider", "weather", {"city": "Paris"})


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


async def test_a_late_id_from_an_openai_compatible_server_is_kept(
    server: OpenAIServer, make_model: Any
) -> None:
    # A server that names the call first and sends its id with the arguments.
    body = _sse(
        _chunk({"role": "assistant", "tool_calls": [{"index": 0, "function": {"name": "f"}}]}),
        _chunk({"tool_calls": [{"index": 0, "id": "call_late", "function": {"arguments": "{}"}}]}),
        _chunk({}, "tool_calls"),
    )
    server.add(Raw(body, content_type="text/event-stream"))
    final = await make_model().chat_stream([Msg.user("Hi")]).collect()
    assert [(c.id, c.name) for c in final.tool_calls] == [("call_late", "f")]
