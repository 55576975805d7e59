"""`OpenAITTSModel` through the real `openai` SDK against the local wire-format server.

The server's voice says each character as a fixed run of samples (`speech_pcm`), so every
test knows the exact audio an input must give.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from tests._requires import require_module
from tests.providers._fixtures import model_fixtures

from parley.errors import (
    ConfigurationError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    RateLimitError,
    UserError,
)
from parley.providers.openai import OpenAICredential
from parley.providers.openai.server import HTTPError, OpenAIServer, Speech, speech_pcm
from parley.providers.openai.speech import OpenAITTSModel
from parley.tts import PCMFormat, TTSResponse, read_wav

require_module("openai", "openai")

TEXT = "Hello there. This sentence is long enough to arrive in several pieces."
PCM = speech_pcm(TEXT)
ModelFactory = Callable[..., OpenAITTSModel]


server, make_model = model_fixtures(OpenAIServer, OpenAITTSModel, "gpt-4o-mini-tts")


async def pieces_of(model: OpenAITTSModel, text: str = TEXT, **overrides: Any) -> list[TTSResponse]:
    return [piece async for piece in model.synthesize_stream(text, **overrides)]


def joined(pieces: list[TTSResponse]) -> bytes:
    return b"".join(piece.audio_bytes for piece in pieces)


# -- audio --------------------------------------------------------------------------------------


async def test_a_whole_answer_is_a_wav_file_of_exactly_the_samples(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Speech(chunk_size=1001))
    response = await make_model().synthesize(TEXT)
    assert isinstance(response, TTSResponse)
    assert response.media_type == "audio/wav"
    samples, fmt = read_wav(response.audio_bytes)
    assert fmt == PCMFormat(24000)
    assert samples == PCM
    assert response.usage is not None
    assert response.usage.time > 0
    server.assert_consumed()


async def test_pieces_arrive_while_the_server_is_still_speaking(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    step = Speech(chunk_size=4800, chunk_delay=0.03)
    server.add(step)
    stream = await make_model(stream=True).synthesize(TEXT)
    assert not isinstance(stream, TTSResponse)
    first_at = None
    pieces = []
    async for piece in stream:
        if first_at is None:
            first_at = time.perf_counter()
        pieces.append(piece)
    assert first_at is not None
    assert step.finished_at is not None
    assert first_at < step.finished_at  # the first piece came before the server's last byte
    assert len(pieces) > 2
    assert pieces[-1].is_last
    assert pieces[-1].content is None
    assert {p.media_type for p in pieces[:-1]} == {"audio/pcm;rate=24000"}
    assert joined(pieces) == PCM


async def test_streamed_pieces_are_whole_samples_even_when_chunks_split_them(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Speech(chunk_size=777))
    pieces = await pieces_of(make_model())
    assert all(len(p.audio_bytes) % 2 == 0 for p in pieces)
    assert joined(pieces) == PCM


async def test_the_request_carries_the_model_voice_and_options(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Speech())
    parameters = {"voice": "coral", "instructions": "Speak cheerfully.", "speed": 1.5}
    model = make_model(parameters=parameters)
    response = await model.synthesize_whole("Hi!")
    assert server.bodies() == [
        {
            "model": "gpt-4o-mini-tts",
            "input": "Hi!",
            "voice": "coral",
            "instructions": "Speak cheerfully.",
            "speed": 1.5,
            "response_format": "pcm",
        }
    ]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert read_wav(response.audio_bytes)[0] == speech_pcm("Hi!", 1.5)


async def test_the_default_voice_is_the_card_s_first(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Speech(), Speech())
    model = make_model("tts-1")
    await model.synthesize_whole("a")
    await model.synthesize_whole("b", voice="onyx")
    assert [body["voice"] for body in server.bodies()] == ["alloy", "onyx"]


@pytest.mark.parametrize(
    ("response_format", "media_type", "magic"),
    [
        ("mp3", "audio/mpeg", b"ID3"),
        ("flac", "audio/flac", b"fLaC"),
        ("opus", "audio/ogg", b"OggS"),
    ],
)
async def test_a_compressed_format_is_handed_on_as_sent(
    server: OpenAIServer,
    make_model: ModelFactory,
    response_format: str,
    media_type: str,
    magic: bytes,
) -> None:
    server.add(Speech(chunk_size=1000), Speech(chunk_size=1000))
    model = make_model(parameters={"response_format": response_format})
    whole = await model.synthesize_whole(TEXT)
    assert whole.media_type == media_type
    assert whole.audio_bytes == magic + PCM
    pieces = await pieces_of(model)
    assert {p.media_type for p in pieces[:-1]} == {media_type}
    assert joined(pieces) == magic + PCM
    assert server.bodies()[0]["response_format"] == response_format


async def test_a_wav_file_asked_for_comes_back_as_it_is(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Speech())
    response = await make_model().synthesize_whole(TEXT, response_format="wav")
    assert response.media_type == "audio/wav"
    assert read_wav(response.audio_bytes) == (PCM, PCMFormat(24000))


# -- faults -------------------------------------------------------------------------------------


async def test_a_429_is_retried_after_its_retry_after(
    server: OpenAIServer, make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # The backoff waits near zero, so a wait of 0.15 s can only be the header's.
    server.add(HTTPError.rate_limit(retry_after=0.15), Speech())
    with caplog.at_level(logging.WARNING, logger="parley.models"):
        response = await make_model().synthesize_whole(TEXT)
    assert read_wav(response.audio_bytes)[0] == PCM
    assert len(server.requests) == 2
    assert "openai speech (gpt-4o-mini-tts) failed" in caplog.text
    assert "retry 1 of 3 in 0.15s" in caplog.text


async def test_a_500_is_retried_then_surfaced(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(500, "The server had an error"), Speech())
    assert read_wav((await make_model().synthesize_whole(TEXT)).audio_bytes)[0] == PCM
    server.add(HTTPError(503, "overloaded"), HTTPError(503, "overloaded"))
    with pytest.raises(ModelHTTPError, match="overloaded") as caught:
        await make_model(max_retries=1).synthesize_whole(TEXT)
    assert caught.value.status_code == 503
    assert len(server.requests) == 4


async def test_a_rate_limit_that_persists_is_a_rate_limit_error(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError.rate_limit(retry_after=0), HTTPError.rate_limit(retry_after=0))
    with pytest.raises(RateLimitError):
        await make_model(max_retries=1).synthesize_whole(TEXT)


@pytest.mark.parametrize("reset", [True, False])
async def test_a_cut_stream_is_resumed_with_nothing_lost_or_repeated(
    server: OpenAIServer, make_model: ModelFactory, reset: bool
) -> None:
    # Cut at an odd byte, mid-sample, after several pieces were handed out.
    server.add(Speech(chunk_size=3001, cut_after=10001, reset=reset), Speech(chunk_size=999))
    requests_seen: list[int] = []
    pieces = []
    async for piece in make_model().synthesize_stream(TEXT):
        requests_seen.append(len(server.requests))
        pieces.append(piece)
    assert joined(pieces) == PCM
    assert requests_seen[0] == 1  # audio was handed out before the cut
    assert len(server.requests) == 2
    assert server.bodies()[0] == server.bodies()[1]
    server.assert_consumed()


async def test_a_cut_compressed_stream_fails_rather_than_repeat_audio(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Speech(chunk_size=1000, cut_after=3000), Speech())
    model = make_model(parameters={"response_format": "mp3"})
    with pytest.raises(ModelError, match="cannot be resumed"):
        await pieces_of(model)


async def test_a_slow_start_past_the_timeout_is_retried(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Speech(delay=2.0), Speech())
    response = await make_model(timeout=0.3).synthesize_whole(TEXT)
    assert read_wav(response.audio_bytes)[0] == PCM
    assert len(server.requests) == 2


async def test_a_cut_that_outlasts_the_retries_is_a_connection_error(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(*[Speech(cut_after=2000)] * 2)
    with pytest.raises(ModelConnectionError):
        await make_model(max_retries=1).synthesize_whole(TEXT)


async def test_a_401_fails_at_once_with_the_server_s_message(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(401, "Incorrect API key provided: sk-bad.", code="invalid_api_key"))
    with pytest.raises(ModelHTTPError, match="401: Incorrect API key provided") as caught:
        await make_model(credential=server.credential("sk-bad")).synthesize_whole(TEXT)
    assert caught.value.status_code == 401
    assert len(server.requests) == 1


async def test_the_server_s_400_message_surfaces(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    # A model parley has no card for: its voices are the server's to check.
    with pytest.raises(ModelHTTPError, match=r"Invalid value: 'bob'\. Supported values") as caught:
        await make_model("my-tts", parameters={"voice": "bob"}).synthesize_whole(TEXT)
    assert caught.value.status_code == 400
    with pytest.raises(ModelHTTPError, match=r"string too long.*length 4097"):
        await make_model().synthesize_whole("a" * 4097)
    assert len(server.requests) == 2  # neither retried


# -- checked before any request -----------------------------------------------------------------


async def test_a_voice_the_card_does_not_list_is_refused_locally(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    with pytest.raises(UserError, match=r"tts-1 has no voice 'ballad'; its voices: alloy, ash"):
        make_model("tts-1", parameters={"voice": "ballad"})
    model = make_model("tts-1")
    with pytest.raises(UserError, match="no voice 'marin'"):
        await model.synthesize_whole(TEXT, voice="marin")
    with pytest.raises(UserError, match="tts-1 does not take instructions"):
        await model.synthesize_whole(TEXT, instructions="whisper")
    with pytest.raises(UserError, match="speed"):
        await model.synthesize_whole(TEXT, speed=5)
    assert server.requests == []


async def test_a_model_without_a_card_needs_a_voice(make_model: ModelFactory) -> None:
    with pytest.raises(UserError, match="needs a voice"):
        await make_model("my-tts").synthesize_whole(TEXT)


async def test_requests_to_openai_itself_are_blocked_in_the_suite() -> None:
    model = OpenAITTSModel(OpenAICredential(api_key="sk-x"), "tts-1")
    with pytest.raises(UserError, match="blocked"):
        await model.synthesize_whole(TEXT)


# -- the credential -----------------------------------------------------------------------------


def test_the_credential_lists_the_speech_models() -> None:
    assert OpenAICredential.tts_model_classes() == [OpenAITTSModel]
    assert OpenAICredential.get_tts_model_classes() == [OpenAITTSModel]
    cards = {card.name: card for card in OpenAICredential.list_tts_models()}
    assert sorted(cards) == ["gpt-4o-mini-tts", "tts-1", "tts-1-hd"]
    assert len(cards["gpt-4o-mini-tts"].voices) == 13
    assert {"marin", "cedar", "ballad", "verse"} <= set(cards["gpt-4o-mini-tts"].voices)
    for name in ("tts-1", "tts-1-hd"):
        card = cards[name]
        assert card.voices[0] == "alloy"
        assert len(card.voices) == 9
        assert "instructions" not in card.parameter_schema["properties"]
    for card in cards.values():
        assert card.realtime is False
        assert card.produces("audio/pcm;rate=24000")
        assert card.produces("audio/mpeg")
        speed = card.parameter_schema["properties"]["speed"]
        assert (speed["anyOf"][0]["minimum"], speed["anyOf"][0]["maximum"]) == (0.25, 4.0)


async def test_the_key_and_an_openai_compatible_base_url_come_from_the_environment(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    server.add(Speech())
    model = OpenAITTSModel(model="tts-1")
    try:
        assert read_wav((await model.synthesize_whole(TEXT)).audio_bytes)[0] == PCM
    finally:
        await model.aclose()
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        await OpenAITTSModel(model="tts-1").synthesize_whole(TEXT)


def test_the_sync_twin(server: OpenAIServer) -> None:
    server.add(Speech())
    model = OpenAITTSModel(server.credential(), "tts-1-hd", parameters={"voice": "sage"})
    try:
        assert read_wav(model.synthesize_sync(TEXT).audio_bytes)[0] == PCM
    finally:
        model.close_sync()


async def test_speech_goes_through_the_sdk_s_aiohttp_client(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    from openai import DefaultAioHttpClient  # noqa: PLC0415  (the openai extra installs it)

    model = make_model()
    assert isinstance(model.client()._client, DefaultAioHttpClient)
    server.add(Speech(chunk_size=333), Speech(chunk_size=4800))
    assert joined(await pieces_of(model)) == PCM
    assert read_wav((await model.synthesize_whole(TEXT)).audio_bytes)[0] == PCM
    assert len({request.client_port for request in server.requests}) == 1  # one connection


async def test_without_aiohttp_speech_goes_through_the_sdk_s_own_client(
    server: OpenAIServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openai import DefaultAioHttpClient  # noqa: PLC0415

    monkeypatch.setitem(sys.modules, "aiohttp", None)
    model = make_model()
    assert not isinstance(model.client()._client, DefaultAioHttpClient)
    server.add(Speech(chunk_size=333))
    assert joined(await pieces_of(model)) == PCM


_UNCLOSED = """
import asyncio, gc, sys
from parley.providers.openai import OpenAICredential
from parley.providers.openai.speech import OpenAITTSModel
model = OpenAITTSModel(OpenAICredential(api_key="k", base_url=sys.argv[1]), "tts-1")
async def streamed():
    return b"".join([piece.audio_bytes async for piece in model.synthesize_stream("Hi")])
print(len(asyncio.run(model.synthesize_whole("Hi")).audio_bytes))
print(len(asyncio.run(streamed())))
print(len(model.synthesize_sync("Hi").audio_bytes))
if sys.argv[2] == "dropped":
    del model
    gc.collect()
"""


@pytest.mark.parametrize("ending", ["dropped", "kept"])
def test_connections_close_with_their_event_loop(server: OpenAIServer, ending: str) -> None:
    # Each `asyncio.run` ends its loop, which closes the aiohttp connections opened on it; the
    # sync twins' loop runs to the exit, which closes them there if the model is still alive.
    server.add(Speech(), Speech(), Speech())
    ran = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", _UNCLOSED, server.url, ending],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    trouble = ("Unclosed", "ResourceWarning", "never awaited", "destroyed but it is pending")
    assert not [word for word in trouble if word in ran.stderr], ran.stderr
    wav = 44 + len(speech_pcm("Hi"))
    assert [int(size) for size in ran.stdout.split()] == [wav, len(speech_pcm("Hi")), wav]


# -- the server's own checks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"model": "tts-1", "voice": "alloy"}, "input", "missing_required_parameter"),
        ({"model": "tts-1", "input": "hi"}, "voice", "missing_required_parameter"),
        ({"model": "tts-1", "input": "hi", "voice": "cedar"}, "voice", "invalid_value"),
        (
            {"model": "tts-1", "input": "x" * 4097, "voice": "ash"},
            "input",
            "string_above_max_length",
        ),
        ({"model": "tts-1", "input": "hi", "voice": "ash", "speed": 9}, "speed", "invalid_value"),
        (
            {"model": "tts-1", "input": "hi", "voice": "ash", "response_format": "ogg"},
            "response_format",
            "invalid_value",
        ),
    ],
)
def test_the_server_refuses_bad_requests_as_openai_does(
    server: OpenAIServer, body: dict[str, Any], param: str, code: str
) -> None:
    answer = httpx.post(f"{server.url}/audio/speech", json=body, timeout=5)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert error["message"]
    server.assert_consumed()  # no step was needed


def test_the_server_streams_chunked_audio_to_the_raw_sdk(server: OpenAIServer) -> None:
    from openai import OpenAI  # noqa: PLC0415

    server.add(Speech(chunk_size=500))
    with OpenAI(api_key="sk-test", base_url=server.url, max_retries=0) as client:
        speech = client.audio.speech.with_streaming_response
        with speech.create(model="tts-1", voice="nova", input="Hi", response_format="pcm") as r:
            assert r.headers["transfer-encoding"] == "chunked"
            assert b"".join(r.iter_bytes()) == speech_pcm("Hi")


async def test_a_stream_left_early_closes_its_connection(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Speech(chunk_size=1000, chunk_delay=0.02))
    stream = make_model().synthesize_stream(TEXT * 4)
    async for _ in stream:
        break
    await stream.aclose()
    for _ in range(250):  # at most 5 s
        if server.requests[0].disconnected:
            break
        await asyncio.sleep(0.02)
    assert server.requests[0].disconnected
