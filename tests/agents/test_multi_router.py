"""The router on scripted models: the pick, the fallback, streaming, the shared conversation."""

from __future__ import annotations

from typing import Any

import pytest

from parley.agents import Agent, MessageCompleted, RunEnded, RunStarted
from parley.agents.multi import Routed, Router, RouterEventAdapter
from parley.errors import ModelHTTPError, UserError
from parley.messages import Msg
from parley.models import ChatResponse
from parley.models.structured import STRUCTURED_TOOL
from parley.models.testing import ScriptedModel
from parley.tools import RunContext, tool


def pick(name: str, reason: str | None = None) -> ChatResponse:
    """The routing model's structured answer."""
    args: dict[str, Any] = {"agent": name}
    if reason is not None:
        args["reason"] = reason
    return ScriptedModel.tool_call(STRUCTURED_TOOL, args)


def team(
    coder_steps: list[Any] | None = None, writer_steps: list[Any] | None = None
) -> tuple[Agent, Agent]:
    coder = Agent("coder", ScriptedModel(coder_steps or []), description="Writes and fixes code.")
    writer = Agent("writer", ScriptedModel(writer_steps or []), description="Writes prose.")
    return coder, writer


def consumed(*models: Any) -> None:
    for model in models:
        model.assert_consumed()


async def test_the_model_picks_the_agent_that_answers() -> None:
    coder, writer = team(writer_steps=["Recursion: / a function calls itself / until it stops."])
    router_model = ScriptedModel([pick("writer", "a poem")])
    router = Router([coder, writer], router_model)

    answer = await router.reply("Write a haiku about recursion.")

    assert answer.text.startswith("Recursion")
    assert answer.name == "writer"
    consumed(router_model, coder.model, writer.model)
    request = router_model.requests[0]
    assert request.tool_choice == STRUCTURED_TOOL
    schema = request.tools[0].parameters
    assert schema["properties"]["agent"]["enum"] == ["coder", "writer"]
    assert schema["required"] == ["agent"]
    system = request.messages[0].text
    assert "- coder: Writes and fixes code." in system
    assert "- writer: Writes prose." in system
    assert "Write a haiku about recursion." in request.messages[1].text


async def test_an_invalid_pick_falls_back_to_the_default_agent() -> None:
    coder, writer = team(writer_steps=["I write."])
    # Not a name: refused by the schema, corrected once, refused again.
    router_model = ScriptedModel([pick("poet"), pick("bard")])
    router = Router([coder, writer], router_model, default="writer")

    run = router.stream("Hello")
    events = [event async for event in run]

    routed = events[0]
    assert isinstance(routed, Routed)
    assert routed.agent == "writer"
    assert routed.fallback
    assert run.decision is not None
    assert run.decision.fallback
    assert run.final is not None
    assert run.final.text == "I write."
    consumed(router_model, coder.model, writer.model)


async def test_the_default_agent_is_the_first_unless_named() -> None:
    coder, writer = team(coder_steps=["code"])
    router = Router([coder, writer], ScriptedModel([pick("nobody"), pick("nobody")]))

    assert router.default is coder
    assert (await router.reply("hi")).name == "coder"


async def test_stream_forwards_the_routing_event_then_the_agents_events() -> None:
    coder, writer = team(coder_steps=["Fixed."])
    router = Router([coder, writer], ScriptedModel([pick("coder", "a bug")]))

    events = [event async for event in router.stream("My loop never ends.")]

    assert isinstance(events[0], Routed)
    assert events[0].reason == "a bug"
    assert events[0].usage.input_tokens > 0
    assert isinstance(events[1], RunStarted)
    assert events[1].agent == "coder"
    assert isinstance(events[-1], RunEnded)
    assert events[-1].status == "completed"
    for event in events:  # a stream of them is JSON, read back into the same classes
        assert RouterEventAdapter.validate_json(event.model_dump_json()) == event


async def test_the_conversation_is_shared_by_the_agents_it_reaches() -> None:
    coder, writer = team(coder_steps=["def f(): ..."], writer_steps=["It defines f."])
    router_model = ScriptedModel([pick("coder"), pick("writer")])
    router = Router([coder, writer], router_model)

    await router.reply("Write f.")
    await router.reply("Explain it.")

    seen = [m.text for m in writer.model.requests[0].messages]  # type: ignore[attr-defined]
    assert seen == ["Write f.", "def f(): ...", "Explain it."]
    # The second routing call read the first exchange too, names kept.
    history = router_model.requests[1].messages[1].text
    assert "user: Write f." in history
    assert "coder: def f(): ..." in history
    assert [m.text for m in await router.memory.get()] == [*seen, "It defines f."]
    assert await coder.memory.get() == []  # the router's memory, not the agent's


async def test_a_single_agent_is_routed_without_a_model_call() -> None:
    coder, _ = team(coder_steps=["ok"])
    router_model = ScriptedModel([])
    router = Router([coder], router_model)

    decision = await router.route("anything")

    assert decision.agent is coder
    assert not decision.fallback
    assert router_model.requests == []


async def test_route_picks_without_running() -> None:
    coder, writer = team()
    router = Router([coder, writer], ScriptedModel([pick("writer")]))

    decision = await router.route("A sonnet, please.")

    assert decision.agent is writer
    assert await router.memory.get() == []


def test_sync_twins() -> None:
    coder, writer = team(coder_steps=["one"], writer_steps=["two"])
    router = Router([coder, writer], ScriptedModel([pick("coder"), pick("writer")]))

    assert router.reply_sync("first").text == "one"
    events = list(router.stream_sync("second"))

    assert isinstance(events[0], Routed)
    assert events[0].agent == "writer"
    assert any(isinstance(e, MessageCompleted) and e.msg.text == "two" for e in events)


async def test_a_routing_model_failure_raises() -> None:
    coder, writer = team()
    router = Router([coder, writer], ScriptedModel([ModelHTTPError(500, message="down")]))

    with pytest.raises(ModelHTTPError):
        await router.reply("hi")


async def test_an_agent_failure_raises_from_reply() -> None:
    coder, writer = team(coder_steps=[ModelHTTPError(500, message="down")])
    router = Router([coder, writer], ScriptedModel([pick("coder")]))

    with pytest.raises(ModelHTTPError):
        await router.reply("hi")


async def test_an_approval_parks_and_resumes_through_the_router() -> None:
    @tool(requires_approval=True)
    def deploy(env: str) -> str:
        """Deploy.

        Args:
            env: Where.
        """
        return f"deployed to {env}"

    ops = Agent(
        "ops",
        ScriptedModel([ScriptedModel.tool_call("deploy", {"env": "prod"}, "c1"), "Done."]),
        tools=[deploy],
        description="Deploys.",
    )
    coder, _ = team()
    router = Router([coder, ops], ScriptedModel([pick("ops")]))

    parked = await router.reply("Ship it.")
    interrupt = parked.metadata["interrupt_id"]
    final = await router.resume(interrupt, approved=True)

    assert final.text == "Done."
    results = [m for m in await router.memory.get() if m.role == "tool"]
    assert results[0].tool_results[0].text == "deployed to prod"
    with pytest.raises(UserError, match="waits on interrupt"):
        await router.resume("int_unknown", approved=True)


def test_usage_mistakes() -> None:
    coder, writer = team()
    with pytest.raises(UserError, match="at least one agent"):
        Router([], ScriptedModel())
    with pytest.raises(UserError, match="two agents are named"):
        Router([coder, Agent("coder", ScriptedModel())], ScriptedModel())
    with pytest.raises(UserError, match="not one of the router's agents"):
        Router([coder, writer], ScriptedModel(), default="poet")
    with pytest.raises(UserError, match="not one of the router's agents"):
        Router([coder, writer], ScriptedModel(), default=Agent("writer", ScriptedModel()))


async def test_input_may_be_messages() -> None:
    coder, writer = team(writer_steps=["Hi Ann."])
    router = Router([coder, writer], ScriptedModel([pick("writer")]))

    answer = await router.reply([Msg.user("Hello", name="ann")])

    assert answer.text == "Hi Ann."
    assert (await router.memory.get())[0].name == "ann"


async def test_the_chosen_agent_s_tools_get_the_caller_s_deps_and_user() -> None:
    seen: list[RunContext[str]] = []

    @tool
    def lookup(ctx: RunContext[str]) -> str:
        """Look something up for the caller."""
        seen.append(ctx)
        return "found"

    coder = Agent(
        "coder",
        ScriptedModel([ScriptedModel.tool_call("lookup", {}), "done"]),
        description="Writes and fixes code.",
        tools=[lookup],
    )
    writer = Agent("writer", ScriptedModel([]), description="Writes prose.")
    router = Router([coder, writer], ScriptedModel([pick("coder")]))

    answer = await router.reply("fix it", deps="db-handle", user_id="alice")

    assert answer.text == "done"
    [ctx] = seen
    assert (ctx.deps, ctx.user_id, ctx.agent) == ("db-handle", "alice", "coder")
    assert ctx.thread_id == router.memory.thread_id
