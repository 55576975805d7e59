"""The run context: what the agent loop tells each tool call, and who gets it."""

from __future__ import annotations

from typing import Any

import pytest

from parley.agents import Agent, InMemoryMemory
from parley.errors import UserError
from parley.messages import ToolCallBlock
from parley.models import ChatResponse
from parley.models.testing import ScriptedModel
from parley.tools import RunContext, Tool, Toolkit, tool


def calling(name: str, args: dict[str, Any], call_id: str = "c1") -> ChatResponse:
    return ChatResponse(
        content=[ToolCallBlock(id=call_id, name=name, input=args)], finish_reason="tool_calls"
    )


async def test_a_function_tool_gets_the_run_context_the_model_never_sees() -> None:
    seen: list[RunContext[dict[str, str]]] = []

    @tool
    def whoami(ctx: RunContext[dict[str, str]], greeting: str) -> str:
        """Say who is asking.

        Args:
            greeting: How to greet.
        """
        seen.append(ctx)
        return f"{greeting} {ctx.user_id}"

    assert list(whoami.tool_spec().parameters["properties"]) == ["greeting"]
    memory = InMemoryMemory()
    model = ScriptedModel([calling("whoami", {"greeting": "hi"}), "done"])
    agent = Agent("helper", model, tools=[whoami])
    run = agent.stream("go", memory=memory, deps={"team": "blue"}, user_id="alice")
    events = [event async for event in run]

    [ctx] = seen
    assert ctx.run_id == run.run_id == events[0].run_id
    assert ctx.agent == "helper"
    assert ctx.thread_id == memory.thread_id
    assert ctx.user_id == "alice"
    assert ctx.deps == {"team": "blue"}
    assert (ctx.tool_call_id, ctx.tool_name) == ("c1", "whoami")
    assert ctx.session_key == f"alice/{memory.thread_id}"
    history = await memory.get()
    assert history[2].tool_results[0].output == "hi alice"


async def test_a_model_cannot_fill_the_context_parameter_itself() -> None:
    @tool
    async def secret(ctx: RunContext[None]) -> str:
        """Tell the caller's user."""
        return str(ctx.user_id)

    kit = Toolkit([secret])
    forged = ToolCallBlock(id="c1", name="secret", input={"ctx": {"user_id": "root"}})
    result = await kit.run(forged, RunContext.detached(user_id="bob"))
    assert result.is_error
    assert "ctx" in result.text  # an unexpected argument, not a context
    honest = await kit.run(ToolCallBlock(id="c2", name="secret", input={}), None)
    assert honest.output == "None"  # called outside a run: a detached context


async def test_tool_classes_get_the_context_when_they_take_it() -> None:
    got: dict[str, Any] = {}

    class WithKwargs(Tool):  # Qwen-Agent's shape: call(params, **kwargs)
        name = "with_kwargs"

        def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
            got["kwargs"] = kwargs.get("ctx")
            return "ok"

    class WithCtx(Tool):
        name = "with_ctx"

        async def acall(self, params: dict[str, Any], ctx: RunContext[Any] | None = None) -> str:
            got["acall"] = ctx
            return "ok"

    class Plain(Tool):  # takes nothing more: still callable, without a context
        name = "plain"

        def call(self, params: str | dict[str, Any]) -> str:
            return "plain ok"

    kit = Toolkit([WithKwargs(), WithCtx(), Plain()])
    assert [t.takes_context for t in kit] == [True, True, False]
    ctx = RunContext(run_id="r1", agent="a", thread_id="t1", user_id="u1")
    results = await kit.run_all(
        [ToolCallBlock(id=f"c{i}", name=name, input={}) for i, name in enumerate(kit.names)], ctx
    )
    assert [r.output for r in results] == ["ok", "ok", "plain ok"]
    assert got["kwargs"] == ctx.for_call("c0", "with_kwargs")
    assert got["acall"] == ctx.for_call("c1", "with_ctx")


def test_only_one_parameter_may_take_the_context() -> None:
    def two(a: RunContext[None], b: RunContext[None]) -> str:
        """Two contexts."""
        return ""

    with pytest.raises(UserError, match="only one parameter may take the RunContext"):
        tool(two)


async def test_end_session_reaches_every_tool_even_when_one_fails() -> None:
    ended: list[tuple[str | None, str]] = []

    class Keeps(Tool):
        name = "keeps"

        async def end_session(self, user_id: str | None, thread_id: str) -> None:
            ended.append((user_id, thread_id))

    class Breaks(Tool):
        name = "breaks"

        async def end_session(self, user_id: str | None, thread_id: str) -> None:
            raise RuntimeError("cannot")

    await Toolkit([Breaks(), Keeps()]).end_session("alice", "t1")
    assert ended == [("alice", "t1")]


def test_a_memory_has_a_stable_thread_id_of_its_own() -> None:
    first, second = InMemoryMemory(), InMemoryMemory()
    assert first.thread_id == first.thread_id
    assert first.thread_id != second.thread_id
    first.thread_id = "thread-7"
    assert first.thread_id == "thread-7"
