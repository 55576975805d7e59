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
from parley.models import ChatModel, ChatResponse
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


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[ModuleType]:
    package = tmp_path / "myprovider"
    (package / "_models").mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(PROVIDER))
    (package / "_models" / "my-model-1.yaml").write_text(CARD)
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("myprovider")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("myprovider", None)


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
