"""Qwen-Agent's `MultiAgentHub`: the mixin of agents that manage other agents.

A class mixing it in (`Router`, `GroupChat`) keeps its agents in `self._agents`; the hub
checks them when read: a non-empty list of agents, each with a name, no name twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parley.errors import ConfigurationError

if TYPE_CHECKING:
    from parley.compat.qwen.agent import Agent

__all__ = ["MultiAgentHub"]


class MultiAgentHub:
    """The agents a multi-agent agent manages (`self._agents`), checked when read."""

    _agents: list[Agent]

    @property
    def agents(self) -> list[Agent]:
        """The agents.

        Raises:
            ConfigurationError: `_agents` is missing or empty, holds something that is no
                agent, or an agent has no name or another's name.
        """
        from parley.compat.qwen.agent import Agent  # noqa: PLC0415  (agent imports agents)

        owner = type(self).__name__
        found = getattr(self, "_agents", None)
        if not isinstance(found, list) or not found:
            raise ConfigurationError(f"{owner} needs a non-empty list of agents (its `_agents`)")
        if not all(isinstance(agent, Agent) for agent in found):
            raise ConfigurationError(f"{owner}: every member must be an Agent, got {found!r}")
        names = [agent.name for agent in found]
        if not all(names):
            raise ConfigurationError(f"{owner}: every agent needs a name, got {names!r}")
        if len(set(names)) != len(names):
            raise ConfigurationError(f"{owner}: agents' names must differ, got {names!r}")
        return found

    @property
    def agent_names(self) -> list[str]:
        """The agents' names, in order."""
        return [str(agent.name) for agent in self.agents]

    @property
    def nonuser_agents(self) -> list[Agent]:
        """The agents that are not `UserAgent`s (not a real person's seat)."""
        from parley.compat.qwen.agents.user_agent import UserAgent  # noqa: PLC0415

        return [agent for agent in self.agents if not isinstance(agent, UserAgent)]
