"""Answers spoken by the service's voice: `"speak": true` on a stream (the real local voice)."""

from __future__ import annotations

import array
import base64
import math
from typing import Any

import httpx
import pytest

from parley.agents import Agent, AudioDelta, AudioEnded
from parley.client import AsyncAgentClient
from parley.models.testing import ScriptedModel
from parley.tts import pcm_format
from tests._requires import require_module
from tests.service._support import frames
from tests.service.conftest import MakeService

ANSWER = "Paris is the capital of France. It lies on the Seine."


@pytest.fixture(autouse=True)
def _piper() -> None:
    require_module("piper", "the extra tts-piper")


def _agent() -> Agent:
    model = ScriptedModel([ANSWER, ANSWER], stream=True, chunk_size=5, chunk_delay=0.01)
    return Agent("assistant", model)


async def _stream(service: MakeService, **body: Any) -> list[dict[str, Any]]:
    svc = await service(_agent())
    response = await svc.client.post("/stream", json={"message": "Where is Paris?", **body})
    assert response.status_code == 200
    return [e for e in frames(response.text) if isinstance(e, dict)]


async def test_a_stream_asking_for_speech_carries_the_answers_audio(
    service: MakeService,
) -> None:
    events = await _stream(service, events="parley", speak=True)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_ended"
    assert kinds.index("audio_started") < kinds.index("audio_delta") < kinds.index("audio_ended")
    assert kinds.index("audio_ended") < kinds.index("run_ended")
    deltas = [e for e in events if e["type"] == "audio_delta"]
    fmt = pcm_format(deltas[0]["media_type"])
    assert fmt is not None
    pcm = b"".join(base64.b64decode(e["data"]) for e in deltas)
    assert 2.0 < fmt.duration(len(pcm)) < 8.0  # eleven words at a speaking pace
    samples = array.array("h", pcm)
    assert math.sqrt(sum(s * s for s in samples) / len(samples)) > 300  # not silence
    [ended] = [e for e in events if e["type"] == "audio_ended"]
    assert ended["text"] == ANSWER
    assert "error" not in ended
    assert all(e["run_id"] == events[0]["run_id"] for e in events)


async def test_without_speak_or_in_toolkit_frames_there_is_no_audio(
    service: MakeService,
) -> None:
    quiet = await _stream(service, events="parley")
    assert not any(e["type"].startswith("audio_") for e in quiet)
    toolkit = await _stream(service, speak=True)  # the toolkit's frames: text only
    assert {e["type"] for e in toolkit} <= {"token", "message"}
    assert "".join(e["content"] for e in toolkit if e["type"] == "token") == ANSWER


async def test_speak_must_be_a_json_boolean(service: MakeService) -> None:
    svc = await service(_agent())
    response = await svc.client.post("/stream", json={"message": "hi", "speak": "yes"})
    assert response.status_code == 422


async def test_the_client_asks_for_speech_and_yields_the_audio_events(
    service: MakeService,
) -> None:
    svc = await service(_agent())
    transport = httpx.ASGITransport(app=svc.app)
    async with AsyncAgentClient(
        "http://127.0.0.1", get_info=False, agent="assistant", transport=transport
    ) as client:
        events = [e async for e in client.stream_events("Where is Paris?", speak=True)]
        quiet = [e async for e in client.stream_events("And again?", thread_id=None)]
    assert any(isinstance(e, AudioDelta) for e in events)
    [ended] = [e for e in events if isinstance(e, AudioEnded)]
    assert ended.text == ANSWER
    assert ended.seconds > 2.0
    assert not any(isinstance(e, AudioDelta | AudioEnded) for e in quiet)
