"""`Router`: a model picks which agent answers, then that agent does.

The routing model is asked, through structured output, for an `agent` field whose JSON
schema is an enum of the agents' names, with each agent's name and `description` in the
prompt and the conversation so far. A pick that is no agent's name (after the one
correction `generate_structured_output` makes) falls back to the default agent.

The conversation lives in the router (`router.memory`, as Qwen-Agent's Router passes the
whole conversation to the agent it picks): each chosen agent runs on it, so the next one
sees what the others said and did; the agents' own memories are not used.

    router = Router([coder, writer], model)
    msg = await router.reply("Write a haiku about recursion.")    # writer answers
    async for event in router.stream("Fix this loop: ..."):        # Routed, then coder's
        ...
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from parley._sync import iterate_sync, run_sync
from parley.agents.agent import Agent, AgentInput
from parley.agents.agent import _as_msgs as as_msgs  # the agents' own input rules
from parley.agents.approval import PendingApproval
from parley.agents.events import RunStatus
from parley.agents.memory import InMemoryMemory, Memory
from parley.agents.multi._choose import Choice, choose
from parley.agents.multi.events import Routed, RouterEvent
from parley.agents.run import AgentRun, StructuredSchema
from parley.errors import ModelOutputError, UserError
from parley.messages import Msg
from parley.models.base import ChatModel

__all__ = ["RouteDecision", "Router", "RouterRun"]

ROUTING_INSTRUCTIONS = (
    "You route a conversation to the agent best suited to give the next answer. "
    "Read the conversation and pick one agent by name."
)


def _unique(agents: Sequence[Agent]) -> dict[str, Agent]:
    by_name: dict[str, Agent] = {}
    for agent in agents:
        if agent.name in by_name:
            raise UserError(f"two agents are named {agent.name!r}: a router needs unique names")
        by_name[agent.name] = agent
    return by_name


@dataclass(frozen=True)
class RouteDecision:
    """Which agent answers, and why.

    Attributes:
        agent: The agent that answers.
        reason: The routing model's reason, when it gave one.
        fallback: The model's pick was not valid, so the default agent was taken.
        event: The `Routed` event that reports it.
    """

    agent: Agent
    reason: str | None
    fallback: bool
    event: Routed


class Router:
    """Routes each input to the agent a model picks; `reply` and `stream` as an `Agent` has.

    Args:
        agents: The agents to choose from (unique names; their `description` guides the
            choice).
        model: The routing model.
        default: The agent (or its name) that answers when the model's pick is not valid;
            the first agent by default.
        name: The router's name.
        instructions: What the routing model is told, before the list of agents.
        memory: Where the conversation is kept; a new `InMemoryMemory` by default.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        model: ChatModel,
        *,
        default: Agent | str | None = None,
        name: str = "router",
        instructions: str = ROUTING_INSTRUCTIONS,
        memory: Memory | None = None,
    ) -> None:
        if not agents:
            raise UserError("a router needs at least one agent")
        self.agents = _unique(agents)
        self.model = model
        self.name = name
        self.instructions = instructions
        self.memory: Memory = memory if memory is not None else InMemoryMemory()
        self.default = self._agent(default) if default is not None else agents[0]

    def __repr__(self) -> str:
        return f"Router(name={self.name!r}, agents={list(self.agents)})"

    def _agent(self, agent: Agent | str) -> Agent:
        name = agent if isinstance(agent, str) else agent.name
        found = self.agents.get(name)
        if found is None or (isinstance(agent, Agent) and found is not agent):
            raise UserError(f"{name!r} is not one of the router's agents: {list(self.agents)}")
        return found

    # -- routing -----------------------------------------------------------------------------------

    async def route(self, msgs: AgentInput = None) -> RouteDecision:
        """Pick the agent for the conversation plus `msgs`, without running it."""
        conversation = [*await self.memory.get(), *as_msgs(msgs)]
        candidates = {name: agent.description for name, agent in self.agents.items()}
        choice = await choose(
            self.model, candidates, conversation, instructions=self.instructions, key="agent"
        )
        return self._decision(choice)

    def _decision(self, choice: Choice) -> RouteDecision:
        agent = self.agents[choice.name] if choice.name is not None else self.default
        fallback = choice.name is None
        event = Routed(
            agent=agent.name, reason=choice.reason, fallback=fallback, usage=choice.usage
        )
        return RouteDecision(agent, choice.reason, fallback, event)

    # -- running -----------------------------------------------------------------------------------

    def stream(
        self,
        msgs: AgentInput = None,
        *,
        structured: StructuredSchema | None = None,
        deps: Any = None,
        user_id: str | None = None,
    ) -> RouterRun:
        """Route `msgs` and iterate the events: `Routed`, then the chosen agent's.

        A failure of the agent's model ends its events with `RunError` and `RunEnded`, as
        `Agent.stream` does; a failure of the routing model (no agent ran) raises from the
        iteration. `deps` and `user_id` reach the chosen agent's tools (`RunContext`).
        """
        return RouterRun(self, as_msgs(msgs), structured=structured, deps=deps, user_id=user_id)

    async def reply(
        self,
        msgs: AgentInput = None,
        *,
        structured: StructuredSchema | None = None,
        deps: Any = None,
        user_id: str | None = None,
    ) -> Msg:
        """Route `msgs` and return the chosen agent's final message (as `Agent.reply` does).

        Raises:
            ModelError: The routing model or the agent's model failed.
        """
        return await self.stream(msgs, structured=structured, deps=deps, user_id=user_id).result()

    def resume_stream(
        self, interrupt: str | PendingApproval, approved: bool | Mapping[str, bool]
    ) -> RouterRun:
        """Continue a chosen agent's run that parked for approval, iterating its events."""
        agent = self._parked_agent(interrupt)
        return RouterRun(self, [], resume=(agent, interrupt, approved))

    async def resume(
        self, interrupt: str | PendingApproval, approved: bool | Mapping[str, bool]
    ) -> Msg:
        """Continue a run parked for approval; the final message, as `reply` returns it."""
        return await self.resume_stream(interrupt, approved).result()

    def _parked_agent(self, interrupt: str | PendingApproval) -> Agent:
        if isinstance(interrupt, PendingApproval):
            return self._agent(interrupt.agent)
        for agent in self.agents.values():
            if any(p.interrupt_id == interrupt for p in agent.pending_approvals):
                return agent
        raise UserError(f"no agent of router {self.name!r} waits on interrupt {interrupt!r}")

    # -- sync twins --------------------------------------------------------------------------------

    def route_sync(self, msgs: AgentInput = None) -> RouteDecision:
        """`route`, from synchronous code."""
        return run_sync(self.route(msgs))

    def reply_sync(
        self, msgs: AgentInput = None, *, structured: StructuredSchema | None = None
    ) -> Msg:
        """`reply`, from synchronous code."""
        return run_sync(self.reply(msgs, structured=structured))

    def stream_sync(
        self, msgs: AgentInput = None, *, structured: StructuredSchema | None = None
    ) -> Iterator[RouterEvent]:
        """`stream`, from synchronous code; closing the iterator stops the run."""
        return iterate_sync(self.stream(msgs, structured=structured))

    def resume_sync(
        self, interrupt: str | PendingApproval, approved: bool | Mapping[str, bool]
    ) -> Msg:
        """`resume`, from synchronous code."""
        return run_sync(self.resume(interrupt, approved))


class RouterRun:
    """One routed reply: iterate it for events; `result()` runs it to the end.

    After the run, `decision` (None for a resumed run), `run` (the agent's `AgentRun`),
    `status` and `final` tell how it went.
    """

    def __init__(
        self,
        router: Router,
        input_msgs: list[Msg],
        *,
        structured: StructuredSchema | None = None,
        resume: tuple[Agent, str | PendingApproval, bool | Mapping[str, bool]] | None = None,
        deps: Any = None,
        user_id: str | None = None,
    ) -> None:
        self.router = router
        self._run_context: dict[str, Any] = {"deps": deps, "user_id": user_id}
        self.decision: RouteDecision | None = None
        self.run: AgentRun | None = None
        self._input = input_msgs
        self._structured = structured
        self._resume = resume
        self._events = self._iterate()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> RouterEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop the run (if still going) and clean up; no further event."""
        await self._events.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def status(self) -> RunStatus | None:
        """How the agent's run ended (None before it did)."""
        return self.run.status if self.run is not None else None

    @property
    def final(self) -> Msg | None:
        """The agent's last assistant message."""
        return self.run.final if self.run is not None else None

    async def result(self) -> Msg:
        """Run to the end and return the final message; re-raises the run's error."""
        async with self:
            async for _ in self:
                pass
        if self.run is not None and self.run.error is not None:
            raise self.run.error
        if self.final is None:
            raise ModelOutputError(f"the run ended ({self.status}) before the model answered")
        return self.final

    async def _iterate(self) -> AsyncGenerator[RouterEvent, None]:
        self.run = await self._start()
        if self.decision is not None:
            yield self.decision.event
        async with self.run:
            async for event in self.run:
                yield event

    async def _start(self) -> AgentRun:
        memory = self.router.memory
        if self._resume is not None:
            agent, interrupt, approved = self._resume
            return agent.resume_stream(
                interrupt, approved, structured=self._structured, memory=memory, **self._run_context
            )
        self.decision = await self.router.route(self._input)
        agent = self.decision.agent
        return agent.stream(
            self._input, structured=self._structured, memory=memory, **self._run_context
        )
