"""A custom provider written as seed 003's three steps say: credential, chat model, `_models/`.

The provider is a package of its own, written to a temporary folder and imported, so that its
cards sit beside its module exactly as a user's would.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

from parley.agents import Agent
from parley.models import ChatModel, ChatResponse, credentials
from parley.models.credentials import CredentialFactory
from parley.models.spec import model_from_spec
from parley.tools import tool

PROVIDER = '''
"""A provider of a user's own, in seed 003's three steps."""
from collections.abc import AsyncIterator
from typing import Literal

from pydantic import Field

from parley.messages import TextBlock, ThinkingBlock, ToolCallBlock
from parley.models import ChatModel, ChatResponse, ChatUsage
from parley.models.base import ChatRequest
from parley.models.credentials import APIKeyCredential
from parley.models.parameters import Parameters


# Step 1: the credential, with a unique type, naming its chat model.
class MyProviderCredential(APIKeyCredential):
    type: Literal["myprovider"] = "myprovider"
    env_key = "MYPROVIDER_API_KEY"

    @classmethod
    def get_chat_model_class(cls):
        return MyProviderChatModel


# Step 2: the chat model, with an inner Parameters class, implementing _call_api.
class MyProviderChatModel(ChatModel):
    provider = "myprovider"
    credential_class = MyProviderCredential

    class Parameters(Parameters):
        temperature: float | None = Field(default=None, ge=0, le=2)
        shout: bool = Field(default=False, description="Answer in capitals.")

    async def _call_api(self, request: ChatRequest):
        question = request.messages[-1].text
        if request.tool_choice not in (None, "auto", "none") and request.tools:
            tool = next(t for t in request.tools if t.name == request.tool_choice)
            return self._call_tool(tool.name, question)
        if request.tools and request.tool_choice != "none" and "weather" in question:
            return self._stream_tool_call(request.tools[0].name)
        answer = f"you said: {question}"
        if request.parameters.shout:
            answer = answer.upper()
        return self._chunks(answer)

    def _call_tool(self, name: str, question: str) -> ChatResponse:
        words = question.split()
        arguments = {"word": words[-1], "count": len(words)}
        block = ToolCallBlock(id="call_1", name=name, input=arguments)
        return ChatResponse(content=[block], finish_reason="tool_calls")

    async def _stream_tool_call(self, name: str) -> AsyncIterator[ChatResponse]:
        for piece in ('{"city": ', '"Paris"}'):
            block = ToolCallBlock(id="call_w", name=name, input={}, raw_input=piece)
            yield ChatResponse(content=[block], is_last=False)
        yield ChatResponse(content=[], is_last=False, finish_reason="tool_calls")

    async def _chunks(self, answer: str) -> AsyncIterator[ChatResponse]:
        yield ChatResponse(content=[ThinkingBlock(thinking="echo it")], is_last=False)
        for word in answer.split(" "):
            yield ChatResponse(content=[TextBlock(text=word + " ")], is_last=False)
        usage = ChatUsage(input_tokens=3, output_tokens=len(answer.split()))
        yield ChatResponse(content=[], is_last=False, usage=usage, finish_reason="stop")
'''

# Step 3: model cards, one YAML file per model in `_models/` beside the module.
CARD = """
name: my-model-1
label: My Model 1
status: active
input_types: [text/plain]
output_types: [text/plain, application/x-thinking]
context_size: 32000
output_size: 4096
parameter_overrides:
  temperature: {maximum: 1}
  shout: {hidden: true}
"""


# The seed's embedding and TTS providers: a model class each, linked from the credential
# by overriding `get_embedding_model_class()` and `get_tts_model_classes()`, with cards in a
# `_models/` folder beside each module.
EMBEDDING = """
from parley.embeddings import EmbeddingBatch, EmbeddingModel, EmbeddingParameters


class MyProviderEmbeddingModel(EmbeddingModel[str]):
    provider = "myprovider"

    async def _call_api(self, batch: list[str], parameters: EmbeddingParameters) -> EmbeddingBatch:
        return EmbeddingBatch([[float(len(text))] for text in batch], tokens=len(batch))
"""

EMBEDDING_CARD = """
name: my-embed-1
label: My Embed 1
context_size: 512
parameter_overrides:
  dimensions: {enum: [1], default: 1}
"""

TTS = """
from parley.tts import AudioChunk, TTSModel, TTSParameters


class MyProviderTTSModel(TTSModel):
    provider = "myprovider"

    async def _call_api(self, text: str, parameters: TTSParameters):
        yield AudioChunk(b"\\x00\\x01" * len(text), "audio/pcm;rate=16000")
"""

TTS_CARD = """
name: my-voice-1
label: My Voice 1
realtime: false
voices: [Ann, Bob]
"""

LINKS = """

class MyProviderCredentialWithMore(MyProviderCredential):
    type: Literal["myprovider-more"] = "myprovider-more"

    @classmethod
    def get_embedding_model_class(cls):
        from myprovider.embedding import MyProviderEmbeddingModel

        return MyProviderEmbeddingModel

    @classmethod
    def get_tts_model_classes(cls):
        from myprovider.tts import MyProviderTTSModel

        return [MyProviderTTSModel]
"""


def _write(folder: Path, source: str, card_name: str, card: str) -> None:
    (folder / "_models").mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(source))
    (folder / "_models" / f"{card_name}.yaml").write_text(card)


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[ModuleType]:
    package = tmp_path / "myprovider"
    _write(package, PROVIDER + LINKS, "my-model-1", CARD)
    _write(package / "embedding", EMBEDDING, "my-embed-1", EMBEDDING_CARD)
    _write(package / "tts", TTS, "my-voice-1", TTS_CARD)
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("myprovider")
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("myprovider", "myprovider.embedding", "myprovider.tts"):
            sys.modules.pop(name, None)
        # Registered by its class statement: gone with its module, or a later test listing
        # every provider's cards would import what is no longer there.
        for kind, cls in list(credentials._REGISTRY.items()):
            if cls.__module__.split(".")[0] == "myprovider":
                del credentials._REGISTRY[kind]


def test_the_credential_names_its_model_and_cards(provider: ModuleType) -> None:
    credential_cls = provider.MyProviderCredential
    model_cls = provider.MyProviderChatModel
    assert credential_cls.get_chat_model_class() is model_cls
    assert credential_cls.chat_model_classes() == [model_cls]
    assert credential_cls.get_embedding_model_class() is None
    assert credential_cls.embedding_model_classes() == []
    assert credential_cls.get_tts_model_classes() == []

    built = CredentialFactory.from_dict({"type": "myprovider", "api_key": "k"})
    assert isinstance(built, credential_cls)
    assert "myprovider" in CredentialFactory.known_types()

    [card] = credential_cls.list_models()
    assert card == model_cls.list_models()[0]
    assert (card.name, card.label, card.context_size) == ("my-model-1", "My Model 1", 32000)
    properties = card.parameter_schema["properties"]
    assert properties["temperature"]["maximum"] == 1  # the card's override on the inner class
    assert properties["shout"]["hidden"] is True
    assert model_cls.parameters_class is model_cls.Parameters


def test_cards_from_another_folder(provider: ModuleType, tmp_path: Path) -> None:
    # The seed's `custom_yaml_dir`: cards kept apart from the module (an app's own registry).
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / "my-model-2.yaml").write_text(CARD.replace("my-model-1", "my-model-2"))
    model_cls = provider.MyProviderChatModel
    [card] = model_cls.list_models(custom_yaml_dir=registry)
    assert card.name == "my-model-2"
    assert card.parameter_schema["properties"]["temperature"]["maximum"] == 1
    assert [c.name for c in model_cls.list_models()] == ["my-model-1"]  # its own, unchanged


async def test_embedding_and_tts_models_linked_from_the_credential(provider: ModuleType) -> None:
    from myprovider.embedding import MyProviderEmbeddingModel  # noqa: PLC0415
    from myprovider.tts import MyProviderTTSModel  # noqa: PLC0415

    credential_cls = provider.MyProviderCredentialWithMore
    assert credential_cls.get_chat_model_class() is provider.MyProviderChatModel
    assert credential_cls.get_embedding_model_class() is MyProviderEmbeddingModel
    assert credential_cls.embedding_model_classes() == [MyProviderEmbeddingModel]
    assert credential_cls.get_tts_model_classes() == [MyProviderTTSModel]
    assert credential_cls.tts_model_classes() == [MyProviderTTSModel]
    built = CredentialFactory.from_dict({"type": "myprovider-more"})
    assert isinstance(built, credential_cls)

    # Each family's cards come from the `_models/` beside its own module.
    [embedding_card] = credential_cls.list_embedding_models()
    assert (embedding_card.name, embedding_card.context_size) == ("my-embed-1", 512)
    assert embedding_card.default_dimensions() == 1
    [voice_card] = credential_cls.list_tts_models()
    assert (voice_card.name, voice_card.voices) == ("my-voice-1", ["Ann", "Bob"])
    assert [c.name for c in credential_cls.list_models()] == ["my-model-1"]

    embedder = MyProviderEmbeddingModel(credential_cls(), "my-embed-1")
    assert (await embedder(["ab", "abc"])).embeddings == [[2.0], [3.0]]
    voice = MyProviderTTSModel(credential_cls(), "my-voice-1")
    spoken = await voice.synthesize("hi")
    assert spoken.is_last
    assert spoken.audio_bytes


async def test_the_model_answers_streams_and_calls_tools(provider: ModuleType) -> None:
    model = provider.MyProviderChatModel(provider.MyProviderCredential(), "my-model-1")
    assert model.context_size == 32000

    whole = await model.chat([{"role": "user", "content": "hello there"}], shout=True)
    assert whole.text.strip() == "YOU SAID: HELLO THERE"
    assert whole.thinking == "echo it"
    assert whole.finish_reason == "stop"
    assert whole.usage is not None
    assert (whole.usage.input_tokens, whole.usage.output_tokens) == (3, 4)

    chunks = [chunk async for chunk in model.chat_stream([{"role": "user", "content": "hi"}])]
    assert [c.is_last for c in chunks].count(True) == 1
    assert "".join(c.text for c in chunks[:-1]) == chunks[-1].text == "you said: hi "

    @tool
    def weather(city: str) -> str:
        """The weather.

        Args:
            city: Where.
        """
        return f"sunny in {city}"

    called = await model.chat([{"role": "user", "content": "the weather?"}], tools=[weather])
    [call] = called.tool_calls
    assert (call.id, call.name, call.input) == ("call_w", "weather", {"city": "Paris"})


async def test_structured_output_and_an_agent_work_on_it(provider: ModuleType) -> None:
    class Word(BaseModel):
        word: str
        count: int

    model = model_from_spec("myprovider:my-model-1")
    assert isinstance(model, provider.MyProviderChatModel)
    structured = await model.generate_structured_output(
        [{"role": "user", "content": "pick the last word"}], Word
    )
    assert structured.parsed == Word(word="word", count=4)

    @tool
    def weather(city: str) -> str:
        """The weather.

        Args:
            city: Where.
        """
        return f"sunny in {city}"

    agent = Agent("mine", model, tools=[weather], max_iters=3)
    answer = await agent.reply("what is the weather")
    history = await agent.memory.get()
    assert history[2].tool_results[0].output == "sunny in Paris"
    assert answer.text.startswith("you said:")


def test_a_model_class_must_implement_one_hook() -> None:
    class Nothing(ChatModel):
        provider = "nothing"

    with pytest.raises(TypeError, match="implements neither _stream nor _call_api"):
        Nothing(None, "x")
    assert isinstance(ChatResponse(), ChatResponse)
