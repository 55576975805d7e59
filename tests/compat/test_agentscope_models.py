"""AgentScope's model layer under its own names: snippets of AgentScope 2.x's model usage.

Each test is a snippet as AgentScope's README, examples and model tests write it, with only
`agentscope` imports changed to `parley.compat.agentscope`, against a `parley.testing`
stand-in server (the credential's `base_url` points there). They check the requests the
server got and the answers in AgentScope's shapes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from parley.agents import Agent
from parley.compat.agentscope.credential import (
    AnthropicCredential,
    DashScopeCredential,
    DeepSeekCredential,
    GeminiCredential,
    OllamaCredential,
    OpenAICredential,
)
from parley.compat.agentscope.embedding import (
    DashScopeEmbeddingModel,
    EmbeddingModelBase,
    EmbeddingResponse,
    EmbeddingUsage,
    FileEmbeddingCache,
    OllamaEmbeddingModel,
    OpenAIEmbeddingModel,
)
from parley.compat.agentscope.formatter import OpenAIChatFormatter
from parley.compat.agentscope.message import (
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from parley.compat.agentscope.model import (
    AnthropicChatModel,
    ChatModelBase,
    ChatResponse,
    DashScopeChatModel,
    DeepSeekChatModel,
    GeminiChatModel,
    OllamaChatModel,
    OpenAIChatModel,
    OpenAIResponseModel,
    StructuredResponse,
)
from parley.compat.agentscope.tool import ToolChoice
from parley.compat.agentscope.tts import OpenAITTSModel
from parley.errors import UserError
from parley.providers.anthropic.server import AnthropicServer
from parley.providers.anthropic.server import Reply as AnthropicReply
from parley.providers.dashscope.server import DashScopeServer
from parley.providers.dashscope.server import Embeddings as DashScopeEmbeddings
from parley.providers.gemini.server import GeminiServer
from parley.providers.gemini.server import Reply as GeminiReply
from parley.providers.ollama.server import Embeddings as OllamaEmbeddings
from parley.providers.ollama.server import OllamaServer
from parley.providers.ollama.server import Reply as OllamaReply
from parley.providers.openai.server import (
    Embeddings,
    HTTPError,
    OpenAIServer,
    RecordedRequest,
    Reply,
    Speech,
    ToolCall,
    speech_pcm,
    vector_for,
)
from tests.compat._agentscope_support import (
    TIME_TOOL,
    WEATHER_TOOL,
    collect,
    paris_weather_steps,
    user,
)

# -- chat: each provider --------------------------------------------------------------------


async def test_readme_dashscope_model_streams_by_default() -> None:
    # AgentScope's README: DashScopeChatModel(credential=DashScopeCredential(api_key=...),
    # model="qwen3.6-plus"), consumed as a stream (its default).
    with OpenAIServer([Reply(text="Hello! I am Friday.", chunk_size=5)]) as server:
        model = DashScopeChatModel(
            credential=DashScopeCredential(api_key="sk-test", base_url=server.url),
            model="qwen3.6-plus",
        )
        chunks = await collect(await model([user("Hi!")]))
        await model.aclose()
    assert model.stream is True
    assert [c.is_last for c in chunks] == [False] * (len(chunks) - 1) + [True]
    deltas = "".join(c.content[0].text for c in chunks[:-1])  # type: ignore[union-attr]
    final = chunks[-1]
    assert deltas == final.content[0].text == "Hello! I am Friday."  # type: ignore[union-attr]
    assert {c.content[0].id for c in chunks} == {final.content[0].id}  # one block, one id
    assert final.usage is not None
    assert final.usage.output_tokens > 0
    body = server.bodies()[0]
    assert body["model"] == "qwen3.6-plus"
    assert body["stream"] is True
    # AgentScope's DashScope model sends enable_thinking on every call (False by default).
    assert body["enable_thinking"] is False
    assert body["messages"][-1]["content"] == "Hi!"


async def test_dashscope_parameters_and_thinking() -> None:
    with OpenAIServer([Reply(text="42", reasoning="Let me think.")]) as server:
        model = DashScopeChatModel(
            credential=DashScopeCredential(api_key="sk-test", base_url=server.url),
            model="qwen3.6-plus",
            parameters=DashScopeChatModel.Parameters(
                thinking_enable=True, thinking_budget=512, temperature=0.3, top_k=20
            ),
            stream=False,
        )
        response = await model([user("What is six times seven?")])
        await model.aclose()
    assert isinstance(response, ChatResponse)
    assert [b.type for b in response.content] == ["thinking", "text"]
    assert response.content[0].thinking == "Let me think."  # type: ignore[union-attr]
    body = server.bodies()[0]
    assert body["enable_thinking"] is True
    assert (body["thinking_budget"], body["temperature"], body["top_k"]) == (512, 0.3, 20)
    # Unlike AgentScope, the request streams even for a whole answer: DashScope answers
    # thinking models only when streamed (parley's DashScopeCompatibleChatModel).
    assert body["stream"] is True


async def test_openai_whole_answer_and_per_call_parameters() -> None:
    with OpenAIServer([Reply(text="Paris.", input_tokens=12, output_tokens=2)]) as server:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="gpt-4.1",
            parameters=OpenAIChatModel.Parameters(max_tokens=100, temperature=0.5),
            stream=False,
        )
        response = await model(
            [
                Msg(name="system", role="system", content="You are concise."),
                user("Capital of France?"),
            ],
            top_p=0.9,
        )
        await model.aclose()
    assert isinstance(response, ChatResponse)
    assert response.is_last
    assert response.content[0].text == "Paris."
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 2)
    assert response.usage.time >= 0
    assert response["content"] is response.content  # AgentScope's responses read as dicts
    body = server.bodies()[0]
    assert body["max_completion_tokens"] == 100
    assert (body["temperature"], body["top_p"]) == (0.5, 0.9)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


async def test_deepseek_thinking_switch_and_effort() -> None:
    with OpenAIServer(
        [Reply(text="Sure.", reasoning="Hmm.", reasoning_field="reasoning_content")]
    ) as server:
        model = DeepSeekChatModel(
            credential=DeepSeekCredential(api_key="sk-test", base_url=server.url),
            model="deepseek-v4-pro",
            parameters=DeepSeekChatModel.Parameters(
                thinking_enable=True, reasoning_effort="max", max_tokens=300
            ),
        )
        chunks = await collect(await model([user("Think.")]))
        await model.aclose()
    assert [b.type for b in chunks[-1].content] == ["thinking", "text"]
    body = server.bodies()[0]
    assert body["thinking"] == {"type": "enabled"}
    assert body["reasoning_effort"] == "max"
    assert body["max_tokens"] == 300


async def test_openai_responses_api() -> None:
    steps = [Reply(text="Use a map.", tool_calls=[ToolCall(name="get_weather", id="c9")])]
    with OpenAIServer(steps) as server:
        model = OpenAIResponseModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="o4-mini",
            parameters=OpenAIResponseModel.Parameters(
                max_tokens=200, thinking_enable=True, reasoning_effort="low"
            ),
        )
        chunks = await collect(await model([user("Where?")], tools=[WEATHER_TOOL]))
        await model.aclose()
    text, call = chunks[-1].content
    assert text.text == "Use a map."  # type: ignore[union-attr]
    assert isinstance(call, ToolCallBlock)
    assert call.name == "get_weather"
    assert isinstance(call.input, str)
    (request,) = server.requests
    assert request.path == "/v1/responses"
    assert request.json["max_output_tokens"] == 200
    assert request.json["reasoning"] == {"effort": "low"}


async def test_anthropic_thinking_parameters_as_agentscope_sends_them() -> None:
    reply = AnthropicReply(text="Done.", thinking="Plan first.")
    with AnthropicServer([reply]) as server:
        model = AnthropicChatModel(
            credential=AnthropicCredential(api_key="sk-ant-test", base_url=server.url),
            model="claude-sonnet-4-5",
            parameters=AnthropicChatModel.Parameters(thinking_enable=True, thinking_budget=1024),
        )
        chunks = await collect(await model([user("Plan a trip.")]))
        await model.aclose()
    final = chunks[-1]
    assert final.is_last
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "Plan first."  # type: ignore[union-attr]
    assert getattr(final.content[0], "signature", None)  # Anthropic's signature kept, extra
    body = server.bodies()[0]
    # AgentScope: max_tokens 8192 unless set; thinking with the budget asked for.
    assert body["max_tokens"] == 8192
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["stream"] is True


async def test_gemini_chat() -> None:
    with GeminiServer([GeminiReply(text="Bonjour !")]) as server:
        model = GeminiChatModel(
            credential=GeminiCredential(api_key="test-key", base_url=server.url),
            model="gemini-2.5-flash",
            parameters=GeminiChatModel.Parameters(max_tokens=64, thinking_enable=True),
            stream=False,
        )
        response = await model([user("Say hello in French.")])
        await model.aclose()
    assert isinstance(response, ChatResponse)
    assert response.content[0].text == "Bonjour !"  # type: ignore[union-attr]
    config = server.bodies()[0]["generationConfig"]
    assert config["maxOutputTokens"] == 64
    # AgentScope: thinking on means thoughts included, with a budget of 1024 by default.
    assert config["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 1024}


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-an-image").decode()


async def test_media_in_and_out_are_data_blocks() -> None:
    image_part = {"inlineData": {"mimeType": "image/png", "data": PNG}}
    with GeminiServer([GeminiReply(text="Here:", parts=[image_part])]) as server:
        model = GeminiChatModel(
            credential=GeminiCredential(api_key="test-key", base_url=server.url),
            model="gemini-2.5-flash-image",
            stream=False,
        )
        picture = DataBlock(source=Base64Source(data=PNG, media_type="image/png"))
        response = await model(
            [Msg(name="user", role="user", content=[TextBlock(text="Edit this:"), picture])]
        )
        await model.aclose()
    assert isinstance(response, ChatResponse)
    _text, image = response.content
    assert isinstance(image, DataBlock)
    assert isinstance(image.source, Base64Source)
    assert (image.source.media_type, image.source.data) == ("image/png", PNG)
    sent = server.bodies()[0]["contents"][0]["parts"]
    assert sent[1] == {"inlineData": {"mimeType": "image/png", "data": PNG}}


async def test_ollama_chat_streams_and_sends_think() -> None:
    with OllamaServer([OllamaReply(text="Hi from Ollama.")]) as server:
        model = OllamaChatModel(
            credential=OllamaCredential(host=server.url),
            model="qwen3:14b",
            parameters=OllamaChatModel.Parameters(max_tokens=50, temperature=0.1),
        )
        chunks = await collect(await model([user("Hi")]))
        await model.aclose()
    assert chunks[-1].is_last
    assert chunks[-1].content[0].text == "Hi from Ollama."
    assert len(chunks) > 1
    body = server.bodies()[0]
    assert body["think"] is False  # AgentScope sends it on every call
    assert body["options"]["num_predict"] == 50
    assert body["options"]["temperature"] == 0.1


# -- tool calls -----------------------------------------------------------------------------


async def test_tool_call_input_is_a_json_string_and_results_go_back() -> None:
    with OpenAIServer(paris_weather_steps("It is sunny in Paris.")) as server:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="gpt-4.1",
            stream=False,
        )
        msgs = [user("Weather in Paris?")]
        response = await model(msgs, tools=[WEATHER_TOOL, TIME_TOOL])
        assert isinstance(response, ChatResponse)
        (call,) = response.content
        assert isinstance(call, ToolCallBlock)
        assert (call.id, call.name) == ("c1", "get_weather")
        assert isinstance(call.input, str)
        assert json.loads(call.input) == {"city": "Paris"}
        # The loop AgentScope's agent runs: the call and its result in the assistant's reply.
        reply = Msg(
            name="Friday",
            role="assistant",
            content=[
                call,
                ToolResultBlock(id="c1", name="get_weather", output="Sunny", state="success"),
            ],
        )
        final = await model([*msgs, reply], tools=[WEATHER_TOOL, TIME_TOOL])
        await model.aclose()
    assert isinstance(final, ChatResponse)
    assert final.content[0].text == "It is sunny in Paris."  # type: ignore[union-attr]
    second = server.bodies()[1]["messages"]
    assert second[1]["tool_calls"][0]["id"] == "c1"
    assert json.loads(second[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert second[2] == {"role": "tool", "tool_call_id": "c1", "content": "Sunny"}


async def test_streamed_tool_call_deltas_carry_argument_pieces() -> None:
    call = ToolCall(name="get_weather", arguments='{"city": "Paris"}', id="c1")
    with OpenAIServer([Reply(tool_calls=[call])]) as server:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="gpt-4.1",
        )
        chunks = await collect(await model([user("Weather?")], tools=[WEATHER_TOOL]))
        await model.aclose()
    pieces = [b.input for c in chunks[:-1] for b in c.content if isinstance(b, ToolCallBlock)]
    assert "".join(pieces) == '{"city": "Paris"}'
    assert len(pieces) > 1
    (whole,) = chunks[-1].content
    assert isinstance(whole, ToolCallBlock)
    assert whole.input == '{"city": "Paris"}'


async def test_tool_choice_forces_and_narrows() -> None:
    steps = [Reply(tool_calls=[ToolCall(name="get_time", id="c1")]), Reply(text="ok")]
    with OpenAIServer(steps) as server:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="gpt-4.1",
            stream=False,
        )
        tools = [WEATHER_TOOL, TIME_TOOL]
        await model([user("Time?")], tools=tools, tool_choice=ToolChoice(mode="get_time"))
        await model(
            [user("Time?")], tools=tools, tool_choice=ToolChoice(mode="auto", tools=["get_time"])
        )
        with pytest.raises(UserError, match="not among the tools"):
            await model([user("x")], tools=tools, tool_choice=ToolChoice(mode="auto", tools=["x"]))
        await model.aclose()
    first, second = server.bodies()
    assert first["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    assert len(first["tools"]) == 2
    assert second["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in second["tools"]] == ["get_time"]


# -- structured output ----------------------------------------------------------------------


class Weather(BaseModel):
    city: str = Field(description="The city.")
    temperature: int = Field(description="Degrees Celsius.")


def forced_answer(request: RecordedRequest) -> Reply:
    body = request.json
    name = body["tool_choice"]["function"]["name"]
    return Reply(tool_calls=[ToolCall(name=name, arguments={"city": "Paris", "temperature": 21})])


async def test_generate_structured_output_with_structured_model() -> None:
    with OpenAIServer([forced_answer]) as server:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="gpt-4.1",
        )
        result = await model.generate_structured_output(
            [user("Weather in Paris?")], structured_model=Weather
        )
        await model.aclose()
    assert isinstance(result, StructuredResponse)
    assert result.content == {"city": "Paris", "temperature": 21}
    assert result.usage is not None
    assert result.usage.input_tokens > 0
    (body,) = server.bodies()
    (tool,) = body["tools"]
    assert tool["function"]["parameters"]["properties"]["temperature"]["type"] == "integer"


# -- the constructor's knobs ----------------------------------------------------------------


async def test_retry_delay_and_max_retries() -> None:
    with OpenAIServer([HTTPError(500), Reply(text="second try")]) as server:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="gpt-4.1",
            stream=False,
            max_retries=1,
            retry_delay=0.01,
        )
        response = await model([user("Hi")])
        await model.aclose()
    assert response.content[0].text == "second try"  # type: ignore[union-attr]
    assert len(server.requests) == 2
    assert (model.max_retries, model.retry_delay) == (1, 0.01)


async def test_client_kwargs_base_url_and_extra_body() -> None:
    with OpenAIServer([Reply(text="a"), Reply(text="b")]) as server:
        # AgentScope's note: an OpenAI-compatible server through client_kwargs' base_url.
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test"),
            model="qwen3-8b",
            stream=False,
            client_kwargs={"base_url": server.url, "timeout": 30},
            extra_body={"enable_thinking": False},
        )
        await model([user("Hi")])
        await model([user("Hi")], extra_body={"custom_option": "value"})
        await model.aclose()
    first, second = server.bodies()
    assert first["enable_thinking"] is False
    assert "custom_option" not in first
    assert second["enable_thinking"] is False
    assert second["custom_option"] == "value"
    with pytest.raises(UserError, match="http_client"):
        OpenAIChatModel(OpenAICredential(api_key="k"), "gpt-4.1", client_kwargs={"http_client": 1})


def test_parameters_are_the_inner_class_with_agentscope_defaults() -> None:
    parameters = OpenAIChatModel.Parameters()
    assert parameters.parallel_tool_calls is True
    assert parameters.thinking_enable is False
    model = OpenAIChatModel(OpenAICredential(api_key="k"), "gpt-4.1")
    assert isinstance(model.parameters, OpenAIChatModel.Parameters)
    assert (model.stream, model.max_retries, model.retry_delay) == (True, 3, 1.0)
    assert model.context_size == 128000
    assert DashScopeChatModel(DashScopeCredential(api_key="k"), "qwen-plus").context_size == 131072
    anthropic = AnthropicChatModel(AnthropicCredential(api_key="k"), "claude-sonnet-4-5")
    assert anthropic.context_size == 200000
    assert OpenAITTSModel.Parameters().model_dump() == {
        "voice": "alloy",
        "response_format": "mp3",
        "instructions": None,
    }
    assert isinstance(model, ChatModelBase)
    with pytest.raises(UserError, match="voice"):
        OpenAIChatModel(
            OpenAICredential(api_key="k"),
            "gpt-audio-mini",
            parameters=OpenAIChatModel.Parameters(voice="alloy"),
        )


async def test_formatter_formats_agentscope_messages() -> None:
    formatter = OpenAIChatFormatter()
    source = {"type": "url", "url": "https://e.org/a.png", "media_type": "image/png"}
    image = DataBlock.model_validate({"source": source})
    formatted = await formatter.format(
        [Msg(name="user", role="user", content=[TextBlock(text="What is this?"), image])]
    )
    assert formatted[0]["role"] == "user"
    parts = formatted[0]["content"]
    assert parts[0] == {"type": "text", "text": "What is this?"}
    assert parts[1]["image_url"]["url"] == "https://e.org/a.png"
    # AgentScope's shorthands, None meaning the default, as its examples call them.
    (shorthand,) = await formatter.format([UserMsg("alice", "Hi", id=None, metadata=None)])
    assert shorthand == {"role": "user", "content": "Hi", "name": "alice"}


# -- a custom provider, AgentScope's way ----------------------------------------------------


class EchoModel(ChatModelBase):
    """A custom model: `_call_api` yields deltas only, and fails once."""

    class Parameters(BaseModel):
        pass

    failures = 0

    @classmethod
    def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
        return (ConnectionError,)

    async def _call_api(self, model_name: str, messages: list[Any], **kwargs: Any) -> Any:
        if EchoModel.failures == 0:
            EchoModel.failures += 1
            raise ConnectionError("flaky")

        async def deltas() -> Any:
            for piece in ("ec", "ho"):
                yield ChatResponse(content=[TextBlock(text=piece, id="t")], is_last=False)

        return deltas()


async def test_custom_model_retries_and_gets_a_whole_answer() -> None:
    model = EchoModel(None, "echo", EchoModel.Parameters(), retry_delay=0.0)
    chunks = await collect(await model([user("hi")]))
    assert [c.is_last for c in chunks] == [False, False, True]
    assert chunks[-1].content[0].text == "echo"  # type: ignore[union-attr]
    assert EchoModel.failures == 1


class WeatherModel(ChatModelBase):
    """A custom model answering with a tool call, recording what it was called with."""

    class Parameters(BaseModel):
        pass

    calls: list[dict[str, Any]] = []

    async def _call_api(
        self,
        model_name: str,
        messages: list[Any],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> ChatResponse:
        WeatherModel.calls.append({"messages": messages, "tools": tools, "choice": tool_choice})
        assert tools is not None
        assert tool_choice is not None
        name = tool_choice.mode
        call = ToolCallBlock(id="c1", name=name, input='{"city": "Oslo", "temperature": -3}')
        return ChatResponse(content=[call])


async def test_custom_model_gets_structured_output_through_parley() -> None:
    model = WeatherModel(None, "weather", WeatherModel.Parameters(), stream=False)
    result = await model.generate_structured_output(
        [user("Weather in Oslo?")], structured_model=Weather
    )
    assert result.content == {"city": "Oslo", "temperature": -3}
    (call,) = WeatherModel.calls
    assert isinstance(call["messages"][0], Msg)
    assert call["messages"][0].get_text_content() == "Weather in Oslo?"
    (tool,) = call["tools"]
    assert call["choice"].mode == tool["function"]["name"]
    assert model.to_parley() is model.to_parley()


def get_weather(city: str) -> str:
    """Get the weather of a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}"


async def test_wrapped_model_drives_a_parley_agent() -> None:
    with OpenAIServer(paris_weather_steps("Sunny in Paris.")) as server:
        model = DashScopeChatModel(
            credential=DashScopeCredential(api_key="sk-test", base_url=server.url),
            model="qwen3.6-plus",
        )
        agent = Agent("Friday", model.to_parley(), tools=[get_weather])
        answer = await agent.reply("Weather in Paris?")
        await model.aclose()
    assert answer.text == "Sunny in Paris."
    second = server.bodies()[1]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "c1", "content": "Sunny in Paris"}


# -- embeddings -----------------------------------------------------------------------------


async def test_embeddings_with_dimensions_and_a_file_cache(tmp_path: Path) -> None:
    with OpenAIServer([Embeddings()]) as server:
        model = OpenAIEmbeddingModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="text-embedding-3-small",
            dimensions=256,
            embedding_cache=FileEmbeddingCache(cache_dir=str(tmp_path)),
        )
        first = await model(["hello", TextBlock(text="world")])
        second = await model(["hello", "world"])
        await model.aclose()
    assert isinstance(first, EmbeddingResponse)
    assert first.embeddings == [vector_for("hello", 256), vector_for("world", 256)]
    assert first.source == "api"
    assert second.source == "cache"
    assert second.embeddings == first.embeddings
    (body,) = server.bodies()  # the second call came from the cache
    assert body["dimensions"] == 256
    assert body["encoding_format"] == "float"
    assert any(tmp_path.iterdir())


async def test_rag_example_dashscope_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    # examples/rag/index_and_search.py: the key only; the native API's URL comes from the
    # environment, as the dashscope SDK reads it for AgentScope.
    with DashScopeServer([DashScopeEmbeddings()]) as server:
        monkeypatch.setenv("DASHSCOPE_HTTP_BASE_URL", server.url)
        embedding_model = DashScopeEmbeddingModel(
            credential=DashScopeCredential(api_key="sk-test"),
            model="text-embedding-v4",
            dimensions=1024,
        )
        response = await embedding_model(["AgentScope is a framework.", "Qwen is a model."])
        await embedding_model.aclose()
    assert response.embeddings == [
        vector_for("AgentScope is a framework.", 1024),
        vector_for("Qwen is a model.", 1024),
    ]
    (request,) = server.requests
    assert request.path.endswith("/services/embeddings/text-embedding/text-embedding")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json["parameters"]["dimension"] == 1024


async def test_ollama_embeddings_send_dimensions() -> None:
    with OllamaServer([OllamaEmbeddings()]) as server:
        model = OllamaEmbeddingModel(
            credential=OllamaCredential(host=server.url),
            model="qwen3-embedding:0.6b",
            dimensions=64,
        )
        response = await model(["first", "second"])
        await model.aclose()
    assert response.embeddings == [vector_for("first", 64), vector_for("second", 64)]
    (body,) = server.bodies("/api/embed")
    assert body["input"] == ["first", "second"]
    assert body["dimensions"] == 64


def test_embedding_dimensions_are_required_and_pass_dimensions_off() -> None:
    with pytest.raises(UserError, match="dimensions is required"):
        OpenAIEmbeddingModel(OpenAICredential(api_key="k"), "text-embedding-3-small", None)
    legacy = OpenAIEmbeddingModel.Parameters(dimensions=512)  # an older config's shape
    model = OpenAIEmbeddingModel(
        OpenAICredential(api_key="k"), "text-embedding-3-small", None, parameters=legacy
    )
    assert model.dimensions == 512
    assert FileEmbeddingCache().cache_dir == Path("./.cache/embeddings")


async def test_embeddings_without_passing_dimensions() -> None:
    with OpenAIServer([Embeddings()]) as server:
        model = OpenAIEmbeddingModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="my-embedder",
            dimensions=8,
            pass_dimensions=False,
        )
        response = await model(["a"])
        await model.aclose()
    assert "dimensions" not in server.bodies()[0]
    assert len(response.embeddings[0]) == 8  # the server's own size


class CountingEmbedder(EmbeddingModelBase):
    """A custom embedding model, AgentScope's way: `_call_api` for one batch."""

    async def _call_api(self, inputs: list[Any], **kwargs: Any) -> EmbeddingResponse:
        vectors = [[float(len(text))] * self.dimensions for text in inputs]
        return EmbeddingResponse(embeddings=vectors, usage=EmbeddingUsage(tokens=len(inputs)))


async def test_custom_embedding_model_batches_in_order() -> None:
    model = CountingEmbedder(None, "count", 2, None, 512, 2, 0, 0.0)
    response = await model(["a", "bb", "ccc", TextBlock(text="dddd")])
    assert response.embeddings == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]
    assert response.usage is not None
    assert response.usage.tokens == 4


# -- speech ---------------------------------------------------------------------------------


async def test_openai_tts_streams_incremental_pieces() -> None:
    with OpenAIServer([Speech(chunk_size=64)]) as server:
        model = OpenAITTSModel(
            credential=OpenAICredential(api_key="sk-test", base_url=server.url),
            model="gpt-4o-mini-tts",
            parameters=OpenAITTSModel.Parameters(voice="alloy", response_format="pcm"),
        )
        pieces = [piece async for piece in await model.synthesize("Hi there")]
        empty = await model.synthesize("")
        await model.aclose()
    assert [p.is_last for p in pieces] == [False] * (len(pieces) - 1) + [True]
    assert len(pieces) > 1
    audio = b"".join(base64.b64decode(p.content.source.data) for p in pieces)  # type: ignore[union-attr]
    assert audio == speech_pcm("Hi there")
    assert pieces[0].content.source.media_type.startswith("audio/pcm")  # type: ignore[union-attr]
    assert empty.content is None  # type: ignore[union-attr]
    body = server.bodies()[0]
    assert (body["voice"], body["response_format"], body["input"]) == ("alloy", "pcm", "Hi there")
