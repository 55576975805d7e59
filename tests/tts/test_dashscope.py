"""Qwen-TTS on DashScope, driven against local servers that speak its wire protocols: the
native multimodal-generation stream (`DashScopeServer`'s `Speech`) and the realtime
WebSocket protocol (`DashScopeRealtimeServer`). Their voice renders each character to a
known tone (`render`), so the audio a text must give is compared byte for byte."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from tests._requires import require_module

from parley.errors import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    RateLimitError,
    UserError,
)
from parley.providers.dashscope import DashScopeCredential
from parley.providers.dashscope.realtime_server import Behaviour, DashScopeRealtimeServer, render
from parley.providers.dashscope.server import DashScopeServer, HTTPError, Speech
from parley.providers.dashscope.speech import DashScopeRealtimeTTSModel, DashScopeTTSModel
from parley.tts import PCMFormat, TTSResponse, read_wav

require_module("dashscope", "dashscope")
require_module("websockets", "dashscope")

PCM_24K = "audio/pcm;rate=24000"
REALTIME = "qwen3-tts-flash-realtime"


@pytest.fixture
def server() -> Iterator[DashScopeServer]:
    with DashScopeServer() as running:
        yield running
        running.assert_consumed()


@pytest.fixture
def realtime() -> Iterator[DashScopeRealtimeServer]:
    with DashScopeRealtimeServer() as running:
        yield running
        running.assert_consumed()


def realtime_model(server: DashScopeRealtimeServer, **kwargs: object) -> DashScopeRealtimeTTSModel:
    kwargs.setdefault("retry_delay", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return DashScopeRealtimeTTSModel(server.credential(), REALTIME, **kwargs)  # type: ignore[arg-type]


# -- the HTTP model ----------------------------------------------------------------------------


async def test_whole_synthesis_is_a_wav_of_the_streamed_audio(server: DashScopeServer) -> None:
    server.add(Speech())
    model = DashScopeTTSModel(server.credential(), "qwen3-tts-flash", {"voice": "Ethan"})
    response = await model.synthesize("Hello there")
    assert isinstance(response, TTSResponse)
    assert response.media_type == "audio/wav"
    pcm, fmt = read_wav(response.audio_bytes)
    assert pcm == render("Hello there")
    assert fmt == PCMFormat(24000)
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 11)
    [request] = server.generation_requests()
    assert request.path == "/api/v1/services/aigc/multimodal-generation/generation"
    assert request.headers["x-dashscope-sse"] == "enable"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json == {
        "model": "qwen3-tts-flash",
        "input": {"text": "Hello there", "voice": "Ethan"},
    }
    await model.aclose()


async def test_streamed_pieces_concatenate_to_the_whole(server: DashScopeServer) -> None:
    server.add(Speech(chunk_size=2))
    model = DashScopeTTSModel(
        server.credential(), "qwen3-tts-flash", {"language_type": "English"}, stream=True
    )
    stream = await model.synthesize("abcde")
    assert not isinstance(stream, TTSResponse)
    pieces = [piece async for piece in stream]
    assert [p.is_last for p in pieces] == [False, False, False, True]
    assert [p.media_type for p in pieces[:-1]] == [PCM_24K] * 3
    assert pieces[0].audio_bytes == render("ab")
    assert b"".join(p.audio_bytes for p in pieces) == render("abcde")
    assert pieces[-1].usage is not None
    assert pieces[-1].usage.output_tokens == 5
    assert server.bodies()[0]["input"] == {
        "text": "abcde",
        "voice": "Cherry",
        "language_type": "English",
    }
    await model.aclose()


async def test_a_429_is_retried_after_its_retry_after(server: DashScopeServer) -> None:
    server.add(HTTPError.rate_limit(retry_after=0.3), Speech())
    model = DashScopeTTSModel(server.credential(), "qwen3-tts-flash", retry_delay=0.001)
    started = time.monotonic()
    response = await model.synthesize_whole("hi")
    assert time.monotonic() - started >= 0.3  # the server's wait, not the 1 ms retry delay
    assert read_wav(response.audio_bytes)[0] == render("hi")
    assert len(server.generation_requests()) == 2
    await model.aclose()


async def test_a_429_that_persists_ends_as_a_rate_limit_error(server: DashScopeServer) -> None:
    server.add(*[HTTPError.rate_limit(retry_after=0.01)] * 2)
    model = DashScopeTTSModel(server.credential(), "qwen3-tts-flash", max_retries=1)
    with pytest.raises(RateLimitError):
        await model.synthesize_whole("hi")
    await model.aclose()


async def test_a_wrong_key_is_not_retried_and_says_why(server: DashScopeServer) -> None:
    server.add(HTTPError(401, "InvalidApiKey", "Invalid API-key provided."))
    model = DashScopeTTSModel(server.credential(), "qwen3-tts-flash", retry_delay=0.001)
    with pytest.raises(ModelHTTPError, match="401: InvalidApiKey: Invalid API-key") as caught:
        await model.synthesize_whole("hi")
    assert caught.value.status_code == 401
    assert len(server.generation_requests()) == 1
    await model.aclose()


async def test_a_stream_cut_midway_resumes_without_repeating_audio(
    server: DashScopeServer,
) -> None:
    server.add(Speech(chunk_size=2, cut_after=2), Speech(chunk_size=3))
    model = DashScopeTTSModel(server.credential(), "qwen3-tts-flash", retry_delay=0.001)
    pieces = [p async for p in model.synthesize_stream("abcdefgh")]
    assert b"".join(p.audio_bytes for p in pieces) == render("abcdefgh")
    await model.aclose()


async def test_an_error_event_in_the_stream_is_raised(server: DashScopeServer) -> None:
    error = {"code": "InvalidParameter", "message": "bad text"}
    server.add(Speech(error_at=1, error=error, error_status=400))
    model = DashScopeTTSModel(server.credential(), "qwen3-tts-flash")
    with pytest.raises(ModelHTTPError, match="InvalidParameter: bad text"):
        await model.synthesize_whole("abcdef")
    await model.aclose()


def test_a_voice_the_model_lacks_is_refused() -> None:
    credential = DashScopeCredential(api_key="k")
    with pytest.raises(UserError, match=r"no voice 'Nobody'.*Cherry, Ethan"):
        DashScopeTTSModel(credential, "qwen3-tts-flash", {"voice": "Nobody"})
    with pytest.raises(UserError, match="no voice 'Nofish'"):
        DashScopeRealtimeTTSModel(credential, "qwen-tts-realtime", {"voice": "Nofish"})
    with pytest.raises(UserError, match="language_type"):
        DashScopeTTSModel(credential, "qwen3-tts-flash", {"language_type": "Klingon"})


# -- cards ---------------------------------------------------------------------------------------


def test_cards_carry_voices_as_an_enum_and_the_realtime_flag() -> None:
    plain = {card.name: card for card in DashScopeTTSModel.list_models()}
    live = {card.name: card for card in DashScopeRealtimeTTSModel.list_models()}
    assert "qwen3-tts-flash" in plain
    assert not plain["qwen3-tts-flash"].realtime
    assert {"qwen3-tts-flash-realtime", "qwen-tts-realtime"} <= live.keys()
    assert all(card.realtime for card in live.values())
    voice = plain["qwen3-tts-flash"].parameter_schema["properties"]["voice"]
    assert voice["enum"][:7] == [
        "Cherry",
        "Ethan",
        "Nofish",
        "Jennifer",
        "Ryan",
        "Katerina",
        "Elias",
    ]
    assert voice["default"] == "Cherry"
    assert "mode" in live[REALTIME].parameter_schema["properties"]
    assert "audio/wav" in plain["qwen3-tts-flash"].output_types


def test_the_credential_lists_both_kinds() -> None:
    names = [card.name for card in DashScopeCredential.list_tts_models()]
    assert "qwen3-tts-flash" in names
    assert REALTIME in names
    assert len(names) == len(set(names))
    classes = DashScopeCredential.tts_model_classes()
    assert classes[:2] == [DashScopeTTSModel, DashScopeRealtimeTTSModel]


def test_the_websocket_endpoint_follows_the_http_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DASHSCOPE_WEBSOCKET_BASE_URL", raising=False)
    intl = DashScopeCredential(base_url="https://dashscope-intl.aliyuncs.com/api/v1")
    assert (
        intl.websocket_endpoint("realtime")
        == "wss://dashscope-intl.aliyuncs.com/api-ws/v1/realtime"
    )
    assert (
        DashScopeCredential().websocket_endpoint()
        == "wss://dashscope.aliyuncs.com/api-ws/v1/inference"
    )
    monkeypatch.setenv("DASHSCOPE_WEBSOCKET_BASE_URL", "wss://proxy.example/api-ws/v1/inference")
    assert (
        DashScopeCredential().websocket_endpoint("realtime")
        == "wss://proxy.example/api-ws/v1/realtime"
    )


# -- the realtime model ---------------------------------------------------------------------


async def test_push_returns_audio_at_token_granularity(realtime: DashScopeRealtimeServer) -> None:
    model = realtime_model(realtime, parameters={"voice": "Ethan", "language_type": "English"})
    async with model:
        first = await model.push("Hell")
        heard = first.audio_bytes + (await model.receive()).audio_bytes
        # The server speaks a token (2 characters) at a time, before the text is finished.
        assert heard
        assert len(heard) % len(render("He")) == 0
        assert render("Hell").startswith(heard)
        rest = await model.synthesize("o!")
    assert isinstance(rest, TTSResponse)
    assert heard + rest.audio_bytes == render("Hello!")
    assert rest.usage is not None
    assert rest.usage.input_tokens == 6
    [connection] = realtime.accepted()
    assert connection.path == f"/api-ws/v1/realtime?model={REALTIME}"
    assert connection.headers["authorization"] == "Bearer sk-test"
    [update] = connection.of_type("session.update")
    assert update["session"] == {
        "mode": "server_commit",
        "response_format": "pcm",
        "sample_rate": 24000,
        "voice": "Ethan",
        "language_type": "English",
    }
    kinds = [event["type"] for _, event in connection.events]
    assert kinds[0] == "session.update"
    assert kinds[-1] == "session.finish"
    assert connection.text == "Hello!"
    assert not model.connected


async def test_streamed_drain_yields_the_rest(realtime: DashScopeRealtimeServer) -> None:
    model = realtime_model(realtime, stream=True)
    await model.connect()
    stream = await model.synthesize("abcdefg")
    assert not isinstance(stream, TTSResponse)
    pieces = [piece async for piece in stream]
    assert pieces[-1].is_last
    assert pieces[-1].usage is not None
    assert b"".join(p.audio_bytes for p in pieces) == render("abcdefg")
    assert not model.connected  # the server closes the connection with the utterance
    await model.close()


async def test_two_utterances_each_get_a_connection(realtime: DashScopeRealtimeServer) -> None:
    model = realtime_model(realtime)
    first = await model.synthesize_whole("one")
    second = await model.synthesize_whole("two")
    assert read_wav(first.audio_bytes)[0] == render("one")
    assert read_wav(second.audio_bytes)[0] == render("two")
    assert [c.text for c in realtime.accepted()] == ["one", "two"]


async def test_cold_start_holds_text_until_enough_arrived(
    realtime: DashScopeRealtimeServer,
) -> None:
    model = realtime_model(realtime, cold_start_length=10, cold_start_words=3)
    async with model:
        assert (await model.push("Hi ")).content is None
        assert (await model.push("there ")).content is None
        await asyncio.sleep(0.1)
        [connection] = realtime.accepted()
        assert connection.of_type("input_text_buffer.append") == []
        await model.push("my ")  # 12 characters, 3 words: sent as one piece
        await model.push("friend")
        rest = await model.synthesize()
    assert isinstance(rest, TTSResponse)
    appended = [e["text"] for e in connection.of_type("input_text_buffer.append")]
    assert appended == ["Hi there my ", "friend"]


async def test_a_dropped_connection_reconnects_without_losing_or_repeating_audio(
    realtime: DashScopeRealtimeServer,
) -> None:
    realtime.add(Behaviour(drop_after=3, token_size=2), Behaviour(drop_after=5, token_size=3))
    model = realtime_model(realtime)
    async with model:
        heard = (await model.push("The quick ")).audio_bytes
        heard += (await model.receive()).audio_bytes
        rest = await model.synthesize("brown fox jumps")
    assert isinstance(rest, TTSResponse)
    assert heard + rest.audio_bytes == render("The quick brown fox jumps")
    connections = realtime.accepted()
    assert len(connections) == 3
    # Each new connection was told the utterance's whole text so far, and the voice again.
    assert connections[-1].text == "The quick brown fox jumps"
    assert all(c.of_type("session.update")[0]["session"]["voice"] == "Cherry" for c in connections)


async def test_reconnection_gives_up_after_max_retries(realtime: DashScopeRealtimeServer) -> None:
    realtime.add(*[Behaviour(drop_after=1)] * 3)
    model = realtime_model(realtime, max_retries=2)
    with pytest.raises(ModelConnectionError, match="after 2 reconnections"):
        await model.synthesize_whole("abcdefgh")
    assert len(realtime.accepted()) == 3
    assert not model.connected


async def test_a_slow_server_still_completes(realtime: DashScopeRealtimeServer) -> None:
    realtime.add(Behaviour(delta_delay=0.05, token_size=1))
    model = realtime_model(realtime, timeout=2.0)
    started = time.monotonic()
    response = await model.synthesize_whole("slow")
    assert time.monotonic() - started >= 0.2
    assert read_wav(response.audio_bytes)[0] == render("slow")


async def test_an_error_event_raises_the_server_s_code_and_message(
    realtime: DashScopeRealtimeServer,
) -> None:
    error = {"code": "InvalidParameter", "message": "text contains unsupported characters"}
    realtime.add(Behaviour(error_after=1, error=error))
    model = realtime_model(realtime)
    with pytest.raises(ModelError, match="InvalidParameter: text contains unsupported") as caught:
        await model.synthesize_whole("abcdef")
    assert not isinstance(caught.value, ModelConnectionError)
    assert len(realtime.accepted()) == 1  # not retried
    assert not model.connected


async def test_a_refused_handshake_says_why_and_is_not_retried(
    realtime: DashScopeRealtimeServer,
) -> None:
    model = DashScopeRealtimeTTSModel(realtime.credential("sk-wrong"), REALTIME, retry_delay=0.01)
    with pytest.raises(ModelHTTPError, match="401: InvalidApiKey") as caught:
        await model.push("hello")
    assert caught.value.status_code == 401
    assert [c.refused for c in realtime.connections] == [401]


async def test_a_busy_server_s_refusal_is_retried(realtime: DashScopeRealtimeServer) -> None:
    realtime.add(Behaviour(refuse=503))
    model = realtime_model(realtime)
    response = await model.synthesize_whole("ok")
    assert read_wav(response.audio_bytes)[0] == render("ok")
    assert [c.refused for c in realtime.connections] == [503, None]


async def test_commit_mode_speaks_at_the_end(realtime: DashScopeRealtimeServer) -> None:
    model = realtime_model(realtime, parameters={"mode": "commit"})
    async with model:
        assert (await model.push("abcd")).content is None
        await asyncio.sleep(0.1)
        assert (await model.push("ef")).content is None  # held by the server until commit
        rest = await model.synthesize()
    assert isinstance(rest, TTSResponse)
    assert rest.audio_bytes == render("abcdef")
    [connection] = realtime.accepted()
    kinds = [event["type"] for _, event in connection.events]
    assert kinds[-2:] == ["input_text_buffer.commit", "session.finish"]
