"""TTSMiddleware on real agents (the scripted chat model) and the real local voice."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from parley.agents import (
    Agent,
    AgentEvent,
    AgentEventAdapter,
    AgentRun,
    AudioDelta,
    AudioEnded,
    AudioStarted,
    MessageCompleted,
    RunEnded,
    TextDelta,
    ToolCallStarted,
)
from parley.agents.speech import TTSMiddleware
from parley.errors import UserError
from parley.messages import TextBlock, ThinkingBlock
from parley.models import ChatResponse
from parley.models.testing import ScriptedModel
from parley.providers.local.speech import LocalRealtimeTTSModel, LocalTTSModel
from parley.tts import TTSParameters, read_wav
from parley.tts.realtime import RealtimeSession
from tests._requires import require_module, require_program
from tests.sample_tools import add

FIXED = {"variation": 0}  # Piper renders the same text to the same samples
ANSWER = "The sum is five. Five is a small number, and it is odd."


@pytest.fixture(autouse=True)
def _piper() -> None:
    require_module("piper", "the extra tts-piper")


@pytest.fixture
def espeak_ng() -> None:
    """For a test that speaks with espeak-ng (Debian's package, not a Python one)."""
    require_program("espeak-ng")


async def events_of(run: AgentRun) -> list[AgentEvent]:
    return [event async for event in run]


def audio_by_block(events: list[AgentEvent]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for event in events:
        if isinstance(event, AudioDelta):
            out[event.block_id] = out.get(event.block_id, b"") + base64.b64decode(event.data)
    return out


async def whole_pcm(text: str) -> bytes:
    voice = LocalTTSModel(model="piper-joe", parameters=FIXED)
    pcm, _ = read_wav((await voice.synthesize_whole(text)).audio_bytes)
    return pcm


def agent(steps: list[Any], middleware: TTSMiddleware, **kwargs: Any) -> Agent:
    model = ScriptedModel(steps, stream=True, chunk_size=6, **kwargs)
    return Agent("speaker", model, tools=[add], middleware=[middleware])


async def test_audio_events_round_trip_as_json() -> None:
    for event in [
        AudioStarted(block_id="b", media_type="audio/pcm;rate=22050"),
        AudioDelta(block_id="b", data="AAA=", media_type="audio/pcm;rate=22050"),
        AudioEnded(block_id="b", seconds=1.5, text="Hi.", error="boom"),
    ]:
        assert AgentEventAdapter.validate_json(event.model_dump_json()) == event


async def test_a_plain_voice_speaks_each_text_block_after_it_ends() -> None:
    voice = LocalTTSModel(model="piper-joe", parameters=FIXED)
    first = ChatResponse(
        content=[
            ThinkingBlock(thinking="I should add the numbers first."),
            TextBlock(text="Let me add them."),
            *ScriptedModel.tool_call("add", {"a": 2, "b": 3}).content,
        ],
        finish_reason="tool_calls",
    )
    run = agent([first, ANSWER], TTSMiddleware(voice)).stream("What is 2 + 3?")
    events = await events_of(run)

    ended = [e for e in events if isinstance(e, AudioEnded)]
    assert [e.text for e in ended] == ["Let me add them.", ANSWER]  # thinking not spoken
    assert all(e.error is None for e in ended)
    audio = audio_by_block(events)
    assert audio[ended[0].block_id] == await whole_pcm("Let me add them.")
    assert audio[ended[1].block_id] == await whole_pcm(ANSWER)
    assert 3.0 < ended[1].seconds < 8.0  # thirteen words at a speaking pace

    kinds = [type(e) for e in events]
    # The first block's audio comes after its text and before the tool call that ended it.
    first_start = kinds.index(AudioStarted)
    assert kinds.index(TextDelta) < first_start < kinds.index(ToolCallStarted)
    assert kinds.index(AudioEnded) < kinds.index(ToolCallStarted)
    # No audio between a block's start and its last text: the plain voice waits for the end.
    last_text = max(i for i, k in enumerate(kinds) if k is TextDelta)
    assert kinds.index(AudioDelta, kinds.index(AudioEnded) + 1) > last_text
    assert kinds[-1] is RunEnded
    # Audio is events only: memory holds the text.
    assert run.final is not None
    assert run.final.text == ANSWER
    assert all(block.type != "audio" for msg in await run.memory.get() for block in msg.content)


async def test_a_realtime_voice_speaks_while_the_answer_is_written() -> None:
    voice = LocalRealtimeTTSModel(model="piper-joe", parameters=FIXED)
    sentences = [
        "The sum is five. ",
        "Five is a small number. ",
        "It is odd, and it is prime. ",
        "It comes after four. ",
        "That is all I know about it.",
    ]
    answer = "".join(sentences)  # 24 deltas, 2.4 s of writing: the first sentence is heard
    run = agent([answer], TTSMiddleware(voice), chunk_delay=0.1).stream("Tell me.")
    events = await events_of(run)

    kinds = [type(e) for e in events]
    completed = kinds.index(MessageCompleted, kinds.index(TextDelta))
    first_audio = kinds.index(AudioDelta)
    assert first_audio < completed
    # Heard before the text was all written: the first sentence's audio, mid-answer.
    assert any(k is TextDelta for k in kinds[first_audio:completed])

    [ended] = [e for e in events if isinstance(e, AudioEnded)]
    assert ended.error is None
    assert ended.text == answer
    expected = b"".join([await whole_pcm(s) for s in sentences])
    assert audio_by_block(events)[ended.block_id] == expected
    assert not voice.connected  # the run spoke through a clone, closed at its end


class _RecordingRealtime(LocalRealtimeTTSModel):
    """The local realtime voice, remembering the sessions it opened."""

    sessions: ClassVar[list[RealtimeSession]] = []

    async def _open_session(self, parameters: TTSParameters) -> RealtimeSession:
        session = await super()._open_session(parameters)
        self.sessions.append(session)
        return session


async def test_leaving_mid_answer_closes_the_voice_and_keeps_the_partial_answer() -> None:
    voice = _RecordingRealtime(model="piper-joe", parameters=FIXED)
    _RecordingRealtime.sessions.clear()
    long_answer = " ".join(f"Sentence number {n} is here." for n in range(30))
    run = agent([long_answer], TTSMiddleware(voice), chunk_delay=0.02).stream("Talk.")
    async for event in run:
        if isinstance(event, AudioDelta):
            break
    await run.aclose()
    [session] = _RecordingRealtime.sessions
    assert session._worker.done()  # type: ignore[attr-defined]  # the voice stopped
    assert run.status == "interrupted"
    assert run.final is not None
    assert run.final.metadata.get("interrupted") is True


class _BrokenVoice(LocalTTSModel):
    """The local voice whose engine fails."""

    def _pcm(self, text: str, parameters: TTSParameters) -> AsyncIterator[bytes]:
        raise RuntimeError("the engine broke")


class _BrokenRealtimeVoice(LocalRealtimeTTSModel):
    def _pcm(self, text: str, parameters: TTSParameters) -> AsyncIterator[bytes]:
        raise RuntimeError("the engine broke")


@pytest.mark.parametrize("voice_class", [_BrokenVoice, _BrokenRealtimeVoice])
async def test_a_failing_voice_leaves_the_answer_intact(voice_class: type[LocalTTSModel]) -> None:
    voice = voice_class(model="piper-joe")
    run = agent([ANSWER], TTSMiddleware(voice)).stream("Tell me.")
    events = await events_of(run)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
    [ended] = [e for e in events if isinstance(e, AudioEnded)]
    assert ended.error is not None
    assert "the engine broke" in ended.error
    assert not any(isinstance(e, AudioDelta) for e in events)
    ends = [e for e in events if isinstance(e, RunEnded)]
    assert [e.status for e in ends] == ["completed"]


@pytest.mark.usefixtures("espeak_ng")
async def test_a_run_takes_middleware_before_it_is_read_only() -> None:
    voice = LocalTTSModel(model="espeak-ng")
    model = ScriptedModel(["Hello there."], stream=True)
    run = Agent("plain", model).stream("Hi.").use(TTSMiddleware(voice))
    events = await events_of(run)
    assert any(isinstance(e, AudioDelta) for e in events)
    with pytest.raises(UserError, match="before the run's events are read"):
        run.use(TTSMiddleware(voice))
    with pytest.raises(UserError, match="wrap"):
        Agent("bad", model, middleware=[object()])  # type: ignore[list-item]
