"""Delta chunks: cheap to keep by the thousand, and otherwise like any `ChatResponse`.

A caller that keeps every delta (a UI, a logger) keeps each chunk's GC-tracked objects, and
the garbage collector's passes over them grow with the stream; so a delta is built of as few
tracked objects as its content needs (issue 13, `benchmarks/models.py`).
"""

from __future__ import annotations

import copy
import gc
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from parley.messages import TextBlock, ThinkingBlock, ToolCallBlock
from parley.models import ChatResponse, ChatUsage, StreamAccumulator
from parley.models.accumulator import Delta, TextDelta, ThinkingDelta, ToolCallDelta

TRACKED_PER_CHUNK = 3 if sys.version_info < (3, 13) else 4
"""The chunk, its content list, its block; no fields sets of their own, and no `__dict__`s:
the fields are in inline values, which Python 3.13 gives only to classes whose bases have no
`__slots__` (pydantic's `BaseModel` has some), so there the chunk's fields are in a dict."""


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


def _deltas(kind: str, count: int) -> list[Delta]:
    if kind == "text":
        return [TextDelta(f" word{i}") for i in range(count)]
    if kind == "thinking":
        return [ThinkingDelta(f" step{i}") for i in range(count)]
    return [ToolCallDelta(0, "call-1", "get_weather")] + [
        ToolCallDelta(0, arguments=f'"{i}",') for i in range(count - 1)
    ]


_MEASURE = """
import gc, sys
from parley.models import StreamAccumulator
from tests.models.test_delta_chunks import _deltas, _tracked
kind, count = sys.argv[1], 500
deltas = _deltas(kind, count)
accumulator = StreamAccumulator("m")
before = _tracked()
kept = [accumulator.add(delta) for delta in deltas]
assert all(chunk is not None for chunk in kept)
print(_tracked() - before)
"""


_STREAM = """
import asyncio
from parley import Msg
from parley.models.testing import ScriptedModel
from tests.models.test_delta_chunks import _tracked
short, long = 400, 1200


async def main():
    model = ScriptedModel(["x" * short, "x" * long], chunk_size=1)
    held, kept = [], []
    for count in (short, long):
        before = _tracked()
        kept.append([chunk async for chunk in model.chat_stream([Msg.user("hi")])])
        held.append(_tracked() - before)
        assert len(kept[-1]) == count + 1, len(kept[-1])
        assert kept[-1][-1].is_last
        assert kept[-1][-1].text == "x" * count
        assert kept[-1][-1].usage is not None
    print((held[1] - held[0]) / (long - short))


asyncio.run(main())
"""


def _in_a_fresh_interpreter(script: str, *args: str) -> str:
    """What `script` prints, run where no earlier test has shaped CPython's instance layouts.

    Whether CPython keeps a class's instances' fields inline depends on how every earlier
    instance of it was filled (a test that builds blocks field by field in other orders turns
    it off for the rest of the process, and a chunk then holds one more object: its
    `__dict__`); so what a chunk holds is measured where no other test ran.
    """
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("kind", ["text", "thinking", "tool_call"])
def test_a_kept_delta_chunk_holds_few_tracked_objects(kind: str) -> None:
    held, count = int(_in_a_fresh_interpreter(_MEASURE, kind)), 500
    # The list holding them and the accumulator's first slot, besides the chunks.
    assert held <= TRACKED_PER_CHUNK * count + 5, f"{held / count:.2f} tracked per chunk"


def test_a_kept_stream_holds_few_tracked_objects_per_chunk() -> None:
    # Two streams' difference: what one more chunk holds, the stream's own objects apart.
    per_chunk = float(_in_a_fresh_interpreter(_STREAM))
    assert per_chunk <= TRACKED_PER_CHUNK + 0.02, f"{per_chunk:.2f} tracked per chunk"


def _one_of_each() -> list[ChatResponse]:
    accumulator = StreamAccumulator("m")
    deltas: list[Delta] = [
        TextDelta("It is "),
        ThinkingDelta("hmm", "sig", {"kind": "summary"}),
        ToolCallDelta(0, "c1", "get_weather", '{"city": '),
    ]
    chunks = [accumulator.add(delta) for delta in deltas]
    assert all(chunk is not None for chunk in chunks)
    return [chunk for chunk in chunks if chunk is not None]


def test_delta_chunks_equal_and_dump_as_validated_ones() -> None:
    blocks = [
        TextBlock(text="It is "),
        ThinkingBlock(thinking="hmm", signature="sig", extra={"kind": "summary"}),
        ToolCallBlock(id="c1", name="get_weather", raw_input='{"city": '),
    ]
    for chunk, block in zip(_one_of_each(), blocks, strict=True):
        built = ChatResponse(content=[block], is_last=False, id=chunk.id, model="m")
        assert chunk == built
        assert chunk.model_dump() == built.model_dump()
        assert chunk.model_dump_json() == built.model_dump_json()
        assert ChatResponse.model_validate_json(chunk.model_dump_json()) == chunk
        assert copy.deepcopy(chunk) == chunk
        assert pickle.loads(pickle.dumps(chunk)) == chunk
        assert (chunk["is_last"], chunk.get("model"), chunk.metadata) == (False, "m", {})
        assert str(chunk) == str(built)


def test_changing_one_delta_chunk_leaves_the_others_alone() -> None:
    first, second = (StreamAccumulator("m").add(TextDelta(text)) for text in ("one", "two"))
    assert first is not None
    assert second is not None
    untouched = second.model_dump()
    first.metadata["seen"] = True
    first.usage = ChatUsage(output_tokens=1)
    first.content.append(TextBlock(text="!"))
    first.content[0].text = "changed"
    first["model"] = "other"
    assert first.text == "changed!"
    assert first.model_dump()["usage"]["output_tokens"] == 1
    assert second.model_dump() == untouched
    assert second.model_fields_set == set(ChatResponse.model_fields)
    copied = second.model_copy(update={"finish_reason": "stop"})
    assert (copied.finish_reason, second.finish_reason) == ("stop", None)


def test_a_thinking_delta_does_not_share_the_providers_extra() -> None:
    extra = {"kind": "summary"}
    chunk = StreamAccumulator().add(ThinkingDelta("hmm", extra=extra))
    assert chunk is not None
    extra["kind"] = "changed"
    block = chunk.content[0]
    assert isinstance(block, ThinkingBlock)
    assert block.extra == {"kind": "summary"}


def test_a_delta_of_the_wrong_type_is_still_refused() -> None:
    with pytest.raises(ValueError, match="thinking"):
        StreamAccumulator().add(ThinkingDelta(42))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="text"):
        StreamAccumulator().add(TextDelta(42))  # type: ignore[arg-type]
