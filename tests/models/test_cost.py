"""What calls cost: prices on model cards, `Usage.cost` on every priced call, summed by runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.agents import Agent
from parley.messages import Msg, Usage
from parley.models.cards import Pricing, PromptTier
from parley.models.testing import ScriptedModel
from parley.providers.anthropic import AnthropicChatModel
from parley.providers.anthropic import server as anthropic_server
from parley.providers.local import LocalChatModel
from parley.providers.openai import OpenAIChatModel, OpenAICredential
from parley.providers.openai.server import OpenAIServer, Reply
from tests._requires import require_module

# Fixtures of its own, not `pytest_plugins = ["tests.models.openai_fixtures"]`: a module's
# plugins register for the whole session, and registered here (before test_ollama's) the
# other providers' `server` and `make_model` would shadow OpenAI's in test_openai.


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


ModelFactory = Callable[..., Any]


@pytest.fixture
def claude_server() -> Iterator[anthropic_server.AnthropicServer]:
    """Anthropic's wire format, for the official `anthropic` SDK (named apart from `server`)."""
    require_module("anthropic", "anthropic")
    require_module("aiohttp", "anthropic")
    with anthropic_server.AnthropicServer() as running:
        yield running


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


def test_a_price_counts_cache_writes_at_their_own_rate() -> None:
    claude = Pricing(input=2, output=10, cached_input=0.2, cache_write=2.5)
    # 1000 input tokens: 600 fresh, 300 read from the cache, 100 written to it; 50 out.
    assert claude.cost(1000, 50, cached_tokens=300, cache_write_tokens=100) == pytest.approx(
        (600 * 2 + 300 * 0.2 + 100 * 2.5 + 50 * 10) / 1e6
    )
    # Without a write price the writes cost as input, as before there was one.
    assert Pricing(input=2, output=10).cost(1000, 0, 0, 400) == pytest.approx(2000 / 1e6)
    # Reads and writes are parts of the input: never more of them than there are tokens.
    assert claude.cost(100, 0, cached_tokens=80, cache_write_tokens=80) == pytest.approx(
        (80 * 0.2 + 20 * 2.5) / 1e6
    )


def test_a_long_prompt_costs_its_tier_on_every_token() -> None:
    haiku = Pricing(
        input=0.1,
        output=0.5,
        cache_write=0.125,
        long_prompt=PromptTier(above=100_000, input=0.5, output=2.5, cache_write=0.625),
    )
    # The prompt's length counts its cache writes: 100,000 is not over, 100,001 is.
    assert haiku.cost(100_000, 1000, cache_write_tokens=40_000) == pytest.approx(
        (60_000 * 0.1 + 40_000 * 0.125 + 1000 * 0.5) / 1e6
    )
    assert haiku.cost(100_001, 1000, cache_write_tokens=40_000) == pytest.approx(
        (60_001 * 0.5 + 40_000 * 0.625 + 1000 * 2.5) / 1e6
    )
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        PromptTier(above=0, input=1, output=1)


def test_cache_writes_add_up_and_are_dumped_only_when_there_are_some() -> None:
    first, second = Usage(input_tokens=10, cache_write_tokens=4), Usage(input_tokens=5)
    usage = first + second + Usage(input_tokens=2, cache_write_tokens=1)
    assert usage.cache_write_tokens == 5
    assert usage.model_dump()["cache_write_tokens"] == 5
    # Every other provider's usage (and what was stored before) reads and dumps as it did.
    assert "cache_write_tokens" not in Usage(input_tokens=3).model_dump()
    assert "cache_write_tokens" not in Usage(input_tokens=3).model_dump_json()


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


@pytest.mark.parametrize("streamed", [False, True])
async def test_claude_cache_writes_cost_their_price_and_are_counted_once(
    claude_server: anthropic_server.AnthropicServer, streamed: bool
) -> None:
    # A stream's `message_start` has the input side (cache writes and reads included);
    # `message_delta` only the final output count.
    claude_server.add(
        anthropic_server.Reply(
            text="cached answer",
            input_tokens=2000,
            cache_creation_tokens=300,
            cache_read_tokens=5000,
            output_tokens=150,
        )
    )
    model = AnthropicChatModel(claude_server.credential(), "claude-sonnet-5-5", max_retries=0)
    try:
        if streamed:
            answer = await model.chat_stream(HI).collect()
        else:
            answer = await model.chat(HI)
    finally:
        await model.aclose()
    assert claude_server.bodies()[0].get("stream", False) is streamed
    usage = answer.usage
    assert usage is not None
    # The whole prompt, and its parts: Anthropic's `input_tokens` holds neither reads nor writes.
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens) == (7300, 5000, 300)
    # 2000 fresh at $2, 5000 read at $0.20, 300 written at $2.50, 150 out at $10 (per million):
    # $0.00725. Writes priced as input would make it $0.0071; counted twice, $0.00785.
    assert usage.cost == pytest.approx(0.00725, rel=1e-12)
