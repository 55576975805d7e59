"""What calls cost: prices on model cards, `Usage.cost` on every priced call, summed by runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.agents import Agent
from parley.messages import Msg, Usage
from parley.models.cards import Pricing
from parley.models.local import LocalChatModel
from parley.models.openai import OpenAIChatModel, OpenAICredential
from parley.models.testing import ScriptedModel
from parley.testing.openai_server import OpenAIServer, Reply

# Fixtures of its own, not `pytest_plugins = ["tests.models.openai_fixtures"]`: a module's
# plugins register for the whole session, and registered here (before test_ollama's) the
# other providers' `server` and `make_model` would shadow OpenAI's in test_openai.


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


ModelFactory = Callable[..., Any]


@pytest.fixture
async def make_model(server: OpenAIServer) -> AsyncIterator[ModelFactory]:
    made: list[OpenAIChatModel] = []

    def make(cls: type[OpenAIChatModel], model: str) -> OpenAIChatModel:
        made.append(cls(server.credential(), model, max_retries=0))
        return made[-1]

    yield make
    for model in made:
        await model.aclose()


HI = [Msg.user("Hi")]
MINI = Pricing(input=0.15, output=0.60, cached_input=0.075)


def test_a_price_counts_cached_input_at_its_own_rate() -> None:
    # 800 fresh input tokens, 200 from the cache, 500 out.
    assert MINI.cost(1000, 500, cached_tokens=200) == pytest.approx(
        (800 * 0.15 + 200 * 0.075 + 500 * 0.60) / 1e6
    )
    # Without a cached price the cache's tokens cost as input.
    assert Pricing(input=1, output=2).cost(1000, 10, 400) == pytest.approx((1000 + 20) / 1e6)
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Pricing(input=-1, output=0)


def test_costs_add_up_and_unknown_costs_count_as_nothing() -> None:
    priced = Usage(input_tokens=1, cost=0.25)
    unknown = Usage(input_tokens=2)
    assert (priced + unknown).cost == 0.25
    assert (unknown + unknown).cost is None
    assert sum([priced, priced, unknown], Usage()).cost == 0.5


def test_cards_carry_list_prices() -> None:
    cards = {card.name: card for card in OpenAICredential.list_models()}
    pricing = cards["gpt-4o-mini"].pricing
    assert pricing is not None
    assert (pricing.input, pricing.output, pricing.cached_input) == (0.15, 0.60, 0.075)
    assert pricing.currency == "USD"
    local = LocalChatModel.list_models()[0].pricing
    assert local is not None
    assert (local.input, local.output) == (0, 0)


async def test_a_call_s_usage_carries_its_cost(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="Hello!", input_tokens=1200, output_tokens=300, cached_tokens=200))
    server.add(Reply(text="Hello, world", chunk_size=5, input_tokens=1000, output_tokens=100))
    model = make_model(OpenAIChatModel, "gpt-4o-mini")
    whole = await model.chat(HI)
    assert whole.usage is not None
    assert whole.usage.cost == pytest.approx(MINI.cost(1200, 300, 200))
    chunks = [chunk async for chunk in model.chat_stream(HI)]
    final = chunks[-1].usage
    assert final is not None
    assert final.cost == pytest.approx(MINI.cost(1000, 100))


async def test_a_model_without_a_price_reports_none_and_a_price_can_be_set(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="a", input_tokens=10, output_tokens=10))
    server.add(Reply(text="b", input_tokens=10, output_tokens=10))
    model = make_model(OpenAIChatModel, "my-fine-tune")
    assert model.pricing is None
    first = await model.chat(HI)
    assert first.usage is not None
    assert first.usage.cost is None
    model.pricing = Pricing(input=100, output=100)
    second = await model.chat(HI)
    assert second.usage is not None
    assert second.usage.cost == pytest.approx(20 * 100 / 1e6)


async def test_a_run_sums_its_calls_costs() -> None:
    model = ScriptedModel(["one answer"])
    model.pricing = Pricing(input=1_000_000, output=2_000_000)  # a dollar a token in, two out
    agent = Agent("a", model)
    run = agent.stream("hello there")
    async for _ in run:
        pass
    assert run.usage.cost == pytest.approx(run.usage.input_tokens + 2 * run.usage.output_tokens)
    assert run.usage.cost > 0
