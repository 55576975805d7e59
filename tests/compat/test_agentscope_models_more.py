"""AgentScope's Moonshot, xAI, Gemini embedding and speech models under their own names.

As in test_agentscope_models: snippets in AgentScope's style with only `agentscope` imports
changed to `parley.compat.agentscope`, against `parley.testing` stand-in servers, checking
the request the server got and the answer in AgentScope's shapes.
"""

from __future__ import annotations

import base64
import inspect
import json
import struct
from collections.abc import Iterator

import pytest

from parley.compat.agentscope import model as agentscope_model
from parley.compat.agentscope.credential import (
    DashScopeCredential,
    GeminiCredential,
    MoonshotCredential,
    XAICredential,
)
from parley.compat.agentscope.embedding import EmbeddingResponse, GeminiEmbeddingModel
from parley.compat.agentscope.message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
)
from parley.compat.agentscope.model import ChatResponse, MoonshotChatModel, XAIChatModel
from parley.compat.agentscope.tts import (
    DashScopeRealtimeTTSModel,
    DashScopeTTSModel,
    TTSResponse,
)
from parley.errors import UserError
from parley.providers.dashscope.realtime_server import DashScopeRealtimeServer, render
from parley.providers.dashscope.server import DashScopeServer
from parley.providers.dashscope.server import Speech as DashScopeSpeech
from parley.providers.gemini.server import Embeddings as GeminiEmbeddings
from parley.providers.gemini.server import GeminiServer
from parley.providers.gemini.server import vector_for as gemini_vector_for
from parley.providers.openai.server import OpenAIServer, Reply, ToolCall
from parley.tts import PCMFormat, read_wav
from tests._requires import require_module
from tests.compat._agentscope_support import WEATHER_TOOL, collect, user

# -- the constructors ----------------------------------------------------------------------

CONTEXT_SIZES = {
    "AnthropicChatModel": 200000,
    "DashScopeChatModel": 131072,
    "DeepSeekChatModel": 65536,
    "GeminiChatModel": 1048576,
    "MoonshotChatModel": 131072,
    "OllamaChatModel": 32768,
    "OpenAIChatModel": 128000,
    "OpenAIResponseModel": 200000,
    "XAIChatModel": 131072,
}


@pytest.mark.parametrize(("name", "context_size"), sorted(CONTEXT_SIZES.items()))
def test_each_model_shows_its_own_constructor_defaults(name: str, context_size: int) -> None:
    # One constructor serves the classes; help() and inspect show each one's, as AgentScope's.
    shown = inspect.signature(getattr(agentscope_model, name)).parameters
    assert list(shown)[:9] == [
        "credential",
        "model",
        "parameters",
        "stream",
        "max_retries",
        "retry_delay",
        "context_size",
        "formatter",
        "client_kwargs",
    ]
    assert shown["context_size"].default == context_size
    assert shown["parameters"].annotation == f"{name}.Parameters | None"
    assert shown["stream"].default is True


# -- Moonshot -------------------------------------------------------------------------------


async def test_moonshot_streams_and_sends_the_thinking_switch() -> None:
    reply = Reply(text="Kimi here.", reasoning="Greet back.", reasoning_field="reasoning_content")
    with OpenAIServer([reply]) as server:
        model = MoonshotChatModel(
            credential=MoonshotCredential(api_key="sk-test", base_url=server.url),
            model="kimi-k2.6",
            parameters=MoonshotChatModel.Parameters(
                thinking_enable=True, max_tokens=256, temperature=0.6
            ),
        )
        chunks = await collect(await model([user("Hello")]))
        await model.aclose()
    assert model.stream is True
    assert model.context_size == 131072
    final = chunks[-1]
    assert final.is_last
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "Greet back."  # type: ignore[union-attr]
    assert final.content[1].text == "Kimi here."  # type: ignore[union-attr]
    body = server.bodies()[0]
    assert body["model"] == "kimi-k2.6"
    assert body["stream"] is True
    assert body["thinking"] == {"type": "enabled"}
    assert (body["max_tokens"], body["temperature"]) == (256, 0.6)


async def test_moonshot_sends_thinking_disabled_by_default_and_tool_input_as_json() -> None:
    steps = [Reply(tool_calls=[ToolCall(name="get_weather", arguments={"city": "Beijing"})])]
    with OpenAIServer(steps) as server:
        model = MoonshotChatModel(
            credential=MoonshotCredential(api_key="sk-test", base_url=server.url),
            model="kimi-k2-0905-preview",
            stream=False,
        )
        response = await model([user("Weather in Beijing?")], tools=[WEATHER_TOOL])
        await model.aclose()
    assert isinstance(response, ChatResponse)
    (call,) = response.content
    assert isinstance(call, ToolCallBlock)
    assert call.name == "get_weather"
    assert isinstance(call.input, str)  # AgentScope holds tool input as a JSON string
    assert json.loads(call.input) == {"city": "Beijing"}
    body = server.bodies()[0]
    # AgentScope's Moonshot model switches thinking off unless asked, on every call.
    assert body["thinking"] == {"type": "disabled"}
    assert body["tools"][0]["function"]["name"] == "get_weather"


async def test_moonshot_kimi_k3_takes_effort_and_max_completion_tokens() -> None:
    with OpenAIServer([Reply(text="Done.")]) as server:
        model = MoonshotChatModel(
            credential=MoonshotCredential(api_key="sk-test", base_url=server.url),
            model="kimi-k3",
            parameters=MoonshotChatModel.Parameters(reasoning_effort="high", max_tokens=500),
        )
        await collect(await model([user("Go.")]))
        await model.aclose()
    body = server.bodies()[0]
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 500
    assert "max_tokens" not in body
    assert "thinking" not in body


# -- xAI ------------------------------------------------------------------------------------


async def test_xai_streams_with_effort_only_when_thinking() -> None:
    reply = Reply(text="42.", reasoning="Count.", reasoning_field="reasoning_content")
    with OpenAIServer([reply, Reply(text="Again 42.")]) as server:
        thinking = XAIChatModel(
            credential=XAICredential(api_key="xai-test", base_url=server.url),
            model="grok-3-mini",
            parameters=XAIChatModel.Parameters(
                thinking_enable=True, reasoning_effort="medium", top_p=0.9
            ),
        )
        chunks = await collect(await thinking([user("Answer?")]))
        plain = XAIChatModel(
            credential=XAICredential(api_key="xai-test", base_url=server.url),
            model="grok-3-mini",
            parameters=XAIChatModel.Parameters(reasoning_effort="high"),
            stream=False,
        )
        response = await plain([user("Answer?")])
        await thinking.aclose()
        await plain.aclose()
    assert [b.type for b in chunks[-1].content] == ["thinking", "text"]
    assert isinstance(response, ChatResponse)
    assert response.content[0].text == "Again 42."  # type: ignore[union-attr]
    first, second = server.bodies()
    assert first["model"] == "grok-3-mini"
    assert first["stream"] is True
    assert (first["reasoning_effort"], first["top_p"]) == ("medium", 0.9)
    # As AgentScope: the effort goes only with thinking_enable.
    assert "reasoning_effort" not in second
    assert server.requests[0].headers["authorization"] == "Bearer xai-test"


def test_xai_defaults_are_agentscope_s() -> None:
    model = XAIChatModel(credential=XAICredential(api_key="k"), model="grok-4")
    assert (model.stream, model.max_retries, model.retry_delay) == (True, 3, 1.0)
    assert model.context_size == 131072
    assert model.parameters == XAIChatModel.Parameters()


# -- Gemini embeddings ----------------------------------------------------------------------


async def test_gemini_embeddings_send_dimensions_and_a_call_s_task_type() -> None:
    require_module("google.genai", "gemini")
    with GeminiServer([GeminiEmbeddings()]) as server:
        model = GeminiEmbeddingModel(
            credential=GeminiCredential(api_key="test-key", base_url=server.url),
            model="gemini-embedding-001",
            dimensions=768,
        )
        response = await model(
            ["What is AgentScope?", TextBlock(text="A framework.")], task_type="RETRIEVAL_QUERY"
        )
        await model.aclose()
    assert isinstance(response, EmbeddingResponse)
    assert response.embeddings == [
        gemini_vector_for("What is AgentScope?", 768),
        gemini_vector_for("A framework.", 768),
    ]
    assert model.context_size == 8192
    assert model.supports_multimodal is False
    (request,) = server.embedding_requests()
    assert request.path.endswith("/models/gemini-embedding-001:batchEmbedContents")
    assert request.headers["x-goog-api-key"] == "test-key"
    first, second = request.json["requests"]
    assert first["content"] == {"parts": [{"text": "What is AgentScope?"}]}
    assert second["content"] == {"parts": [{"text": "A framework."}]}
    assert (first["outputDimensionality"], first["taskType"]) == (768, "RETRIEVAL_QUERY")


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-an-image").decode()


async def test_gemini_embedding_2_takes_data_blocks_and_001_refuses_them() -> None:
    require_module("google.genai", "gemini")
    image = DataBlock(source=Base64Source(data=PNG, media_type="image/png"))
    with GeminiServer([GeminiEmbeddings()]) as server:
        credential = GeminiCredential(api_key="test-key", base_url=server.url)
        model = GeminiEmbeddingModel(credential, "gemini-embedding-2", 256)
        response = await model(["a cat", image])
        await model.aclose()
        text_only = GeminiEmbeddingModel(credential, "gemini-embedding-001", 256)
        with pytest.raises(UserError, match="takes text only, not a DataBlock"):
            await text_only([image])
        await text_only.aclose()
    assert model.supports_multimodal is True
    assert response.embeddings == [gemini_vector_for("a cat", 256), gemini_vector_for(PNG, 256)]
    (request,) = server.embedding_requests()  # the refused call sent nothing
    parts = [r["content"]["parts"] for r in request.json["requests"]]
    assert parts == [[{"text": "a cat"}], [{"inlineData": {"mimeType": "image/png", "data": PNG}}]]


# -- speech ---------------------------------------------------------------------------------


async def test_dashscope_tts_streams_wav_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    # AgentScope's DashScopeTTSModel: the compatible mode's credential, the native API's URL
    # from the environment (as the dashscope SDK reads it).
    with DashScopeServer([DashScopeSpeech(chunk_size=2)]) as server:
        monkeypatch.setenv("DASHSCOPE_HTTP_BASE_URL", server.url)
        model = DashScopeTTSModel(credential=DashScopeCredential(api_key="sk-test"))
        pieces = [piece async for piece in await model.synthesize("abcde")]
        empty = await model.synthesize(None)
        await model.aclose()
    assert (model.model, model.parameters.voice, model.stream) == (
        "qwen3-tts-flash",
        "Cherry",
        True,
    )
    assert [p.is_last for p in pieces] == [False, False, True]
    assert all(p.content is not None for p in pieces)
    assert {p.content.source.media_type for p in pieces} == {"audio/wav"}  # type: ignore[union-attr]
    audio = b"".join(base64.b64decode(p.content.source.data) for p in pieces)  # type: ignore[union-attr]
    header, pcm = audio[:44], audio[44:]
    assert header[:4] == b"RIFF"
    assert header[8:16] == b"WAVEfmt "
    assert struct.unpack("<HHI", header[20:28]) == (1, 1, 24000)  # PCM, mono, 24 kHz
    assert header[36:40] == b"data"
    assert pcm == render("abcde")
    last = pieces[-1]
    assert last.usage is not None
    assert last.usage.output_tokens == 5
    assert empty.content is None  # type: ignore[union-attr]
    (request,) = server.generation_requests()
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json == {
        "model": "qwen3-tts-flash",
        "input": {"text": "abcde", "voice": "Cherry"},
    }


async def test_dashscope_tts_whole_answer_is_one_wav(monkeypatch: pytest.MonkeyPatch) -> None:
    with DashScopeServer([DashScopeSpeech()]) as server:
        monkeypatch.setenv("DASHSCOPE_HTTP_BASE_URL", server.url)
        model = DashScopeTTSModel(
            credential=DashScopeCredential(api_key="sk-test"),
            model="qwen3-tts-flash",
            parameters=DashScopeTTSModel.Parameters(voice="Ethan"),
            stream=False,
        )
        response = await model.synthesize("Hello there", language_type="English")
        await model.aclose()
    assert isinstance(response, TTSResponse)
    assert response.is_last
    assert response.content is not None
    assert response.content.source.media_type == "audio/wav"
    pcm, fmt = read_wav(base64.b64decode(response.content.source.data))  # type: ignore[union-attr]
    assert pcm == render("Hello there")
    assert fmt == PCMFormat(24000)
    assert server.bodies()[0]["input"] == {
        "text": "Hello there",
        "voice": "Ethan",
        "language_type": "English",
    }


def _wav_stream(audio: bytes) -> bytes:
    """The PCM after a streaming WAV header (checked: mono 16-bit 24 kHz, sizes unknown)."""
    header = audio[:44]
    assert header[:4] == b"RIFF"
    assert header[8:16] == b"WAVEfmt "
    assert struct.unpack("<HHI", header[20:28]) == (1, 1, 24000)
    assert header[36:40] == b"data"
    assert struct.unpack("<I", header[40:44]) == (0xFFFFFFFF,)  # length not known
    return audio[44:]


@pytest.fixture
def realtime_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[DashScopeRealtimeServer]:
    """A DashScope realtime speech stand-in, where DashScope's native endpoints point."""
    require_module("websockets", "dashscope")
    with DashScopeRealtimeServer() as server:
        monkeypatch.setenv("DASHSCOPE_HTTP_BASE_URL", server.url)
        monkeypatch.delenv("DASHSCOPE_WEBSOCKET_BASE_URL", raising=False)
        yield server


async def test_dashscope_realtime_tts_push_then_synthesize(
    realtime_server: DashScopeRealtimeServer,
) -> None:
    model = DashScopeRealtimeTTSModel(credential=DashScopeCredential(api_key="sk-test"))
    assert model.realtime is True
    async with model:
        first = await model.push("Hell")
        rest = [piece async for piece in await model.synthesize("o!")]
    await model.aclose()
    (connection,) = realtime_server.accepted()
    pieces = ([first] if first.content is not None else []) + rest
    assert first.is_last is False
    assert [p.is_last for p in rest][-1] is True
    assert {p.content.source.media_type for p in pieces} == {"audio/wav"}  # type: ignore[union-attr]
    audio = b"".join(base64.b64decode(p.content.source.data) for p in pieces)  # type: ignore[union-attr]
    assert _wav_stream(audio) == render("Hello!")  # one header, at the start
    assert rest[-1].usage is not None
    assert connection.path == "/api-ws/v1/realtime?model=qwen3-tts-flash-realtime"
    assert connection.headers["authorization"] == "Bearer sk-test"
    (update,) = connection.of_type("session.update")
    assert update["session"]["voice"] == "Cherry"  # AgentScope's default voice
    assert connection.text == "Hello!"


async def test_dashscope_realtime_tts_each_whole_utterance_is_a_wav_stream(
    realtime_server: DashScopeRealtimeServer,
) -> None:
    model = DashScopeRealtimeTTSModel(
        credential=DashScopeCredential(api_key="sk-test"),
        parameters=DashScopeRealtimeTTSModel.Parameters(voice="Ethan"),
        stream=False,
    )
    one = await model.synthesize("one")
    two = await model.synthesize("two")
    with pytest.raises(UserError, match="set per connection"):
        await model.push("three", language_type="English")
    await model.aclose()
    texts = [c.text for c in realtime_server.accepted()]
    for answer, text in ((one, "one"), (two, "two")):
        assert isinstance(answer, TTSResponse)
        assert answer.is_last
        assert answer.content is not None
        assert _wav_stream(base64.b64decode(answer.content.source.data)) == render(text)  # type: ignore[union-attr]
    assert texts == ["one", "two"]
