"""CosyVoice v3 over DashScope's duplex WebSocket API, against a local server speaking it.

The server cuts text into sentences as the real one does and renders each character to a
fixed run of samples, so the audio every utterance must give is known to the byte."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from tests._requires import require_module

require_module("websockets", "dashscope")

from parley.errors import (  # noqa: E402
    ConfigurationError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    UserError,
)
from parley.providers.dashscope.cosyvoice_server import CosyVoiceServer, render, sentences  # noqa: E402
from parley.providers.dashscope.credentials import DashScopeCredential  # noqa: E402
from parley.providers.dashscope.speech.cosyvoice import (  # noqa: E402
    DashScopeCosyVoiceRealtimeTTSModel,
)
from parley.tts import TTSResponse, read_wav  # noqa: E402

MODEL = "cosyvoice-v3-flash"


@pytest.fixture
def server() -> Iterator[CosyVoiceServer]:
    with CosyVoiceServer() as running:
        yield running
        assert not running.errors


def voice(server: CosyVoiceServer, **kwargs: object) -> DashScopeCosyVoiceRealtimeTTSModel:
    kwargs.setdefault("retry_delay", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return DashScopeCosyVoiceRealtimeTTSModel(server.credential(), MODEL, **kwargs)  # type: ignore[arg-type]


async def hear(model: DashScopeCosyVoiceRealtimeTTSModel, size: int) -> bytes:
    """`size` bytes of audio, from as many `receive()` calls as it takes."""
    heard = b""
    while len(heard) < size:
        heard += (await model.receive()).audio_bytes
    return heard


async def test_a_partial_sentence_gives_no_audio_and_a_complete_one_does(
    server: CosyVoiceServer,
) -> None:
    async with voice(server) as model:
        assert (await model.push("Hello there")).content is None
        await model.push(". How")
        first = await model.receive()  # the first sentence, once the server saw its end
        assert first.media_type == "audio/pcm;rate=24000"
        heard = first.audio_bytes + await hear(
            model, len(render("Hello there.")) - len(first.audio_bytes)
        )
        assert heard == render("Hello there.")
        rest = await model.synthesize(" are you")  # no sentence end: finish-task forces it
        assert isinstance(rest, TTSResponse)
        assert rest.audio_bytes == render(" How are you")
        assert rest.usage is not None
        assert rest.usage.input_tokens == len("Hello there. How are you")


async def test_a_later_push_returns_audio_that_arrived_meanwhile(server: CosyVoiceServer) -> None:
    async with voice(server) as model:
        heard = (await model.push("One.")).audio_bytes
        for _ in range(200):  # push() never waits: poll it until the sentence is heard
            if len(heard) >= len(render("One.")):
                break
            await asyncio.sleep(0.01)
            heard += (await model.push("")).audio_bytes
        assert heard == render("One.")
        rest = await model.synthesize(" Two")
    assert isinstance(rest, TTSResponse)
    assert rest.audio_bytes == render(" Two")


async def test_synthesize_speaks_the_unfinished_rest_as_a_stream(server: CosyVoiceServer) -> None:
    async with voice(server, stream=True) as model:
        await model.push("Not ended")
        stream = await model.synthesize()
        pieces = [piece async for piece in stream]  # type: ignore[union-attr]
    assert pieces[-1].is_last
    assert pieces[-1].content is None
    assert b"".join(p.audio_bytes for p in pieces) == render("Not ended")


async def test_one_connection_carries_utterance_after_utterance(server: CosyVoiceServer) -> None:
    model = voice(server)
    await model.connect()
    assert model.connected
    first = await model.synthesize("First one. And more")
    second = await model.synthesize("Second!")
    await model.close()
    assert not model.connected
    assert isinstance(first, TTSResponse)
    assert isinstance(second, TTSResponse)
    assert first.audio_bytes == render("First one. And more")
    assert second.audio_bytes == render("Second!")
    [connection] = server.connections
    assert connection.actions() == ["run-task", "continue-task", "finish-task"] * 2
    run_ids = [
        m["header"]["task_id"] for m in connection.messages if m["header"]["action"] == "run-task"
    ]
    assert len(set(run_ids)) == 2  # a new task id per task


async def test_a_connection_closed_while_idle_is_replaced_on_the_next_push(
    server: CosyVoiceServer,
) -> None:
    server.close_when_idle = True
    async with voice(server) as model:
        await model.synthesize("One.")
        again = await model.synthesize("Two.")
    assert isinstance(again, TTSResponse)
    assert again.audio_bytes == render("Two.")
    assert len(server.connections) == 2


async def test_synthesize_whole_is_a_wav_file(server: CosyVoiceServer) -> None:
    async with voice(server, parameters={"sample_rate": 16000}) as model:
        whole = await model.synthesize_whole("Hi. Bye.")
    pcm, fmt = read_wav(whole.audio_bytes)
    assert pcm == render("Hi. Bye.")
    assert fmt.rate == 16000


async def test_cold_start_holds_text_until_enough_is_pushed(server: CosyVoiceServer) -> None:
    async with voice(server, cold_start_length=12, cold_start_words=3) as model:
        await model.push("Hi.")
        await model.push(" there")
        assert server.messages() == []  # nothing sent: 9 characters, 2 words
        await model.push(" you all.")
        await model.synthesize()
    [connection] = server.connections
    assert connection.texts() == ["Hi. there you all."]


async def test_run_task_carries_the_voice_and_parameters(server: CosyVoiceServer) -> None:
    parameters = {
        "voice": "longanhuan",
        "sample_rate": 48000,
        "volume": 80,
        "rate": 1.5,
        "pitch": 0.8,
    }
    async with voice(server, parameters=parameters) as model:
        response = await model.synthesize("Hi.")
    assert isinstance(response, TTSResponse)
    assert response.media_type == "audio/pcm;rate=48000"
    run = server.messages()[0]
    assert run["header"]["action"] == "run-task"
    assert run["header"]["streaming"] == "duplex"
    assert run["payload"] == {
        "task_group": "audio",
        "task": "tts",
        "function": "SpeechSynthesizer",
        "model": MODEL,
        "parameters": {"text_type": "PlainText", "format": "pcm", **parameters},
        "input": {},
    }
    headers = server.connections[0].headers
    assert headers["authorization"] == "bearer sk-test"


async def test_a_workspace_is_sent_at_the_handshake(server: CosyVoiceServer) -> None:
    model = DashScopeCosyVoiceRealtimeTTSModel(server.credential(workspace="ws-1"), MODEL)
    async with model:
        await model.synthesize("Hi.")
    assert server.connections[0].headers["x-dashscope-workspace"] == "ws-1"


async def test_a_drop_mid_utterance_reconnects_and_nothing_is_lost_or_repeated(
    server: CosyVoiceServer,
) -> None:
    text = "The first sentence is long enough. The second one too. And a tail"
    server.drop_after(5)  # the first connection is cut after 5 frames; the next behaves
    async with voice(server) as model:
        heard = (await model.push(text[:40])).audio_bytes
        heard += await hear(model, 20 * 16 - len(heard))  # into the first sentence, at least
        response = await model.synthesize(text[40:])
    assert isinstance(response, TTSResponse)
    assert heard + response.audio_bytes == render(text)
    assert len(server.connections) == 2
    assert "".join(server.connections[1].texts()) == text  # the utterance was sent again


async def test_a_drop_while_finishing_resends_the_finish(server: CosyVoiceServer) -> None:
    server.drop_after(2, times=2)
    async with voice(server) as model:
        response = await model.synthesize("Several words, no end, spoken only at the finish")
    assert isinstance(response, TTSResponse)
    assert response.audio_bytes == render("Several words, no end, spoken only at the finish")
    assert len(server.connections) == 3
    assert server.connections[2].actions() == ["run-task", "continue-task", "finish-task"]


async def test_reconnection_gives_up_after_max_retries(server: CosyVoiceServer) -> None:
    server.drop_after(1, times=3)
    model = voice(server, max_retries=2)
    with pytest.raises(ModelConnectionError, match="2 reconnections"):
        await model.synthesize("A sentence long enough for several frames.")
    assert len(server.connections) == 3
    assert not model.connected


async def test_a_refused_handshake_is_retried_when_it_is_the_server_s_fault(
    server: CosyVoiceServer,
) -> None:
    server.refuse_next(503, times=2)
    async with voice(server, max_retries=2) as model:
        response = await model.synthesize("Hi.")
    assert isinstance(response, TTSResponse)
    assert response.audio_bytes == render("Hi.")


async def test_a_bad_key_is_refused_at_once(server: CosyVoiceServer) -> None:
    model = DashScopeCosyVoiceRealtimeTTSModel(server.credential(api_key="sk-wrong"), MODEL)
    with pytest.raises(ModelHTTPError) as caught:
        await model.connect()
    assert caught.value.status_code == 401
    assert server.connections == []


async def test_a_slow_server_is_waited_for_within_the_timeout(server: CosyVoiceServer) -> None:
    server.frame_delay = 0.02
    async with voice(server, timeout=1.0) as model:
        response = await model.synthesize("Slow but steady.")
    assert isinstance(response, TTSResponse)
    assert response.audio_bytes == render("Slow but steady.")


async def test_a_server_slower_than_the_timeout_fails(server: CosyVoiceServer) -> None:
    server.frame_delay = 0.5
    model = voice(server, timeout=0.1)
    with pytest.raises(ModelTimeoutError, match="no audio"):
        await model.synthesize("Too slow.")
    await model.close()


async def test_task_failed_raises_the_code_and_message(server: CosyVoiceServer) -> None:
    server.fail_next("InvalidParameter", "voice not found for this model")
    model = voice(server)
    with pytest.raises(ModelError, match="InvalidParameter: voice not found") as caught:
        await model.synthesize("Hi.")
    assert isinstance(caught.value, ModelHTTPError)
    assert caught.value.status_code == 400
    assert not model.connected
    # The model is usable again: the next utterance opens a new connection.
    response = await model.synthesize("Hi.")
    await model.close()
    assert isinstance(response, TTSResponse)
    assert response.audio_bytes == render("Hi.")


def test_the_cards_are_realtime_and_suggest_their_voices() -> None:
    cards = {card.name: card for card in DashScopeCosyVoiceRealtimeTTSModel.list_models()}
    assert set(cards) == {"cosyvoice-v3-flash", "cosyvoice-v3-plus"}
    for card in cards.values():
        assert card.realtime
        field = card.parameter_schema["properties"]["voice"]
        assert card.custom_voices  # cloned voices' ids are the user's own
        assert field["examples"] == card.voices
        assert field["default"] == "longanyang"
        assert card.parameter_schema["properties"]["sample_rate"]["enum"] == [
            8000,
            16000,
            22050,
            24000,
            44100,
            48000,
        ]
    model = DashScopeCosyVoiceRealtimeTTSModel(DashScopeCredential(api_key="k"), MODEL)
    assert model.parameters.voice == "longanyang"
    cloned = DashScopeCosyVoiceRealtimeTTSModel(
        DashScopeCredential(api_key="k"), MODEL, parameters={"voice": "cosyvoice-v3-mine-1a2b"}
    )
    assert cloned.parameters.voice == "cosyvoice-v3-mine-1a2b"
    with pytest.raises(UserError, match="volume"):
        DashScopeCosyVoiceRealtimeTTSModel(
            DashScopeCredential(api_key="k"), MODEL, parameters={"volume": 101}
        )


def test_the_websocket_url_follows_the_credential_then_the_sdk_s_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DASHSCOPE_WEBSOCKET_BASE_URL", raising=False)
    monkeypatch.delenv("DASHSCOPE_HTTP_BASE_URL", raising=False)
    assert (
        DashScopeCredential(api_key="k").websocket_endpoint("inference")
        == "wss://dashscope.aliyuncs.com/api-ws/v1/inference"
    )
    intl = DashScopeCredential(api_key="k", base_url="https://dashscope-intl.aliyuncs.com/api/v1")
    assert (
        intl.websocket_endpoint("inference")
        == "wss://dashscope-intl.aliyuncs.com/api-ws/v1/inference"
    )
    monkeypatch.setenv("DASHSCOPE_WEBSOCKET_BASE_URL", "ws://proxy.test/api-ws/v1/inference")
    assert (
        DashScopeCredential(api_key="k").websocket_endpoint("inference")
        == "ws://proxy.test/api-ws/v1/inference"
    )
    assert intl.websocket_endpoint("inference").startswith(
        "wss://dashscope-intl"
    )  # the credential's own wins
    with pytest.raises(ConfigurationError, match="/api/v1"):
        DashScopeCredential(api_key="k", base_url="https://example.test/").websocket_endpoint(
            "inference"
        )


async def test_no_api_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    model = DashScopeCosyVoiceRealtimeTTSModel(model=MODEL)
    with pytest.raises(ConfigurationError, match="no API key"):
        await model.connect()


def test_the_test_voice_segments_like_the_server() -> None:
    assert sentences("One. Two! Three") == (["One.", " Two!"], " Three")
    assert sentences("你好。世界") == (["你好。"], "世界")
    assert render("ab") != render("ba")
    assert len(render("ab")) == 2 * len(render("a"))
