"""The agents a service serves, registered from Python or named in settings and files.

```python
registry = AgentRegistry()
registry.register(Agent("weather", model, tools=[get_weather]), description="Weather")
registry.register(make_research_agent, key="research")  # a factory, called once, lazily
app = create_app(agents=registry)
```

Settings name agents as `module:attribute` (`PARLEY_AGENTS='["myapp.agents:weather"]'`), where
the attribute is an `Agent`, a function returning one (or a list), a list of agents, or an
`AgentRegistry`. A file (`PARLEY_AGENTS_FILE`, TOML or YAML) does the same with keys and
descriptions::

    default = "weather"
    [[agents]]
    target = "myapp.agents:weather"
    key = "weather"            # optional: the agent's name
    description = "Answers questions about the weather"

With none of these, the service serves `builtin_agent()`: the settings' model (the embedded
local model by default) with the built-in code interpreter (not for the embedded 135M model,
which cannot use it: `embedded_model`).
"""

from __future__ import annotations

import importlib
import threading
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from parley.agents import Agent
from parley.errors import ConfigurationError, NotFoundError
from parley.models.base import ChatModel

__all__ = ["AgentEntry", "AgentFactory", "AgentRegistry", "builtin_agent", "load_target"]

AgentFactory = Callable[[], Agent]
"""A function that builds an agent (called once, when the agent is first used)."""

BUILTIN_KEY = "assistant"
BUILTIN_TOOLS = ("code_interpreter",)
BUILTIN_PROMPT = (
    "You are a helpful assistant. To calculate, call code_interpreter with one line of "
    "Python that prints the result, for example print(3 * 4). Then answer with the number it "
    "printed."
)
TINY_PROMPT = "You are a helpful assistant."
BUILTIN_DESCRIPTION = "A helpful assistant that can run Python in a sandbox."
TINY_DESCRIPTION = "A helpful assistant (the embedded model, without tools)."
"""The default agent's prompt for the embedded 135M model, which it gets without tools."""


@dataclass
class AgentEntry:
    """One served agent: its key (URL segment), description, and the agent or its factory."""

    key: str
    description: str
    factory: AgentFactory
    _agent: Agent | None = field(default=None, repr=False)
    _variants: dict[str, Agent] = field(default_factory=dict, repr=False)
    # The service's warm-up builds the default agent in a worker thread while the first
    # requests may ask for it: without the lock each would call the factory (two models).
    _building: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def agent(self) -> Agent:
        """The agent, built on first use (once, whichever thread asks first)."""
        if self._agent is None:
            with self._building:
                if self._agent is None:
                    self._agent = self._build()
        return self._agent

    def _build(self) -> Agent:
        built = self.factory()
        if not isinstance(built, Agent):
            raise ConfigurationError(
                f"the factory of agent {self.key!r} returned {type(built).__name__}, not an Agent"
            )
        return built

    @property
    def built(self) -> list[Agent]:
        """The agents built so far: the agent and its variants on other models."""
        return [a for a in (self._agent, *self._variants.values()) if a is not None]

    def with_model(self, spec: str, build: Callable[[str], ChatModel]) -> Agent:
        """The agent on another model (`spec`), made once and kept."""
        variant = self._variants.get(spec)
        if variant is None:
            variant = self.agent.with_model(build(spec))
            self._variants[spec] = variant
        return variant


class AgentRegistry:
    """Agents by key, in registration order; the first one is the default unless named."""

    def __init__(self, agents: Iterable[Agent] = ()) -> None:
        self._entries: dict[str, AgentEntry] = {}
        self._default: str | None = None
        for agent in agents:
            self.register(agent)

    def register(
        self,
        agent: Agent | AgentFactory,
        *,
        key: str | None = None,
        description: str | None = None,
        default: bool = False,
    ) -> AgentEntry:
        """Serve `agent` (or what `agent()` builds, on first use) under `key`.

        Raises:
            ConfigurationError: The key is taken or not usable in a URL, or a factory has
                no key.
        """
        if isinstance(agent, Agent):
            key = key or agent.name
            instance: Agent | None = agent
            description = description if description is not None else agent.description
        else:
            if key is None:
                raise ConfigurationError("an agent factory needs a key: register(f, key=...)")
            instance = None
        _check_key(key)
        if key in self._entries:
            raise ConfigurationError(f"an agent with key {key!r} is registered already")
        entry = AgentEntry(key, description or "", _factory_of(agent), instance)
        self._entries[key] = entry
        if default or self._default is None:
            self._default = key
        return entry

    @property
    def default(self) -> str:
        """The default agent's key."""
        if self._default is None:
            raise ConfigurationError("no agent is registered")
        return self._default

    @default.setter
    def default(self, key: str) -> None:
        # A configuration mistake (settings, an agents file), not a request's 404.
        if key not in self._entries:
            known = ", ".join(self._entries) or "(none)"
            raise ConfigurationError(
                f"the default agent {key!r} is not registered; agents: {known}"
            )
        self._default = key

    def get(self, key: str) -> AgentEntry:
        """The entry for `key`.

        Raises:
            NotFoundError: No agent has that key.
        """
        entry = self._entries.get(key)
        if entry is None:
            raise NotFoundError(f"agent {key!r} not found", status_code=404)
        return entry

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[AgentEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def load(self, target: str, *, key: str | None = None, description: str | None = None) -> None:
        """Register what `module:attribute` names (an agent, factory, list or registry)."""
        found = load_target(target)
        if isinstance(found, AgentRegistry):
            for entry in found:
                self.register(entry.factory, key=entry.key, description=entry.description)
        elif isinstance(found, (list, tuple)):
            for agent in found:
                self.register(_as_agent(agent, target))
        elif isinstance(found, Agent) or callable(found):
            self.register(found, key=key or _name_of(found, target), description=description)
        else:
            raise ConfigurationError(
                f"{target} is a {type(found).__name__}; name an Agent, a function returning "
                "one, a list of agents, or an AgentRegistry"
            )

    def load_file(self, path: Path) -> None:
        """Register the agents a TOML or YAML file lists (see the module's docstring)."""
        data = _read_config(path)
        items = data.get("agents", [])
        if not isinstance(items, list):
            raise ConfigurationError(f"{path}: `agents` must be a list of tables")
        for index, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("target"), str):
                raise ConfigurationError(f"{path}: agents[{index}] needs a `target` string")
            self.load(item["target"], key=item.get("key"), description=item.get("description"))
        if isinstance(data.get("default"), str):
            self.default = data["default"]


def builtin_agent(model: ChatModel, *, key: str = BUILTIN_KEY, tools: bool | None = None) -> Agent:
    """The agent served when none is configured: `model` with the built-in code interpreter.

    The embedded 135M model gets no tool and a plain prompt unless `tools=True` (see
    `embedded_model`): offered a tool, it calls it for every question, with code that fails.
    """
    from parley.tools import Toolkit  # noqa: PLC0415  (the tools extra loads on use)

    offer = not embedded_model(model) if tools is None else tools
    if not offer:
        return Agent(
            key,
            model,
            system_prompt=TINY_PROMPT,
            max_iters=1,
            description=TINY_DESCRIPTION,
        )
    # No tool_choice: the model's own default applies (the local one's is one tool round).
    return Agent(
        key,
        model,
        system_prompt=BUILTIN_PROMPT,
        tools=Toolkit(list(BUILTIN_TOOLS)),
        max_iters=4,
        description=BUILTIN_DESCRIPTION,
    )


def embedded_model(model: ChatModel) -> bool:
    """Whether `model` is the embedded SmolLM2-135M, which the default agent offers no tool.

    Measured on the shipped `tools` set (benchmarks/evals.py --compare; the figures are in
    docs/how-to/evaluate.md): offered code_interpreter, the 135M model called it for plain
    questions too ("What is the capital of France?" ran `Paris` as Python), with code that
    fails, then explained the error; its arithmetic was no better for the tool. Without it, it
    answered 10 of the 10 plain questions with no tool call, in about a second each.
    """
    from parley.providers.local._gguf import DEFAULT_MODEL  # noqa: PLC0415

    return model.provider == "local" and model.model == DEFAULT_MODEL


def load_target(target: str) -> Any:
    """The object `module:attribute` names (`attribute` may be dotted).

    Raises:
        ConfigurationError: The name is malformed, or the module or attribute is missing.
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"name an agent as 'module:attribute', got {target!r}")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r} for {target!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ConfigurationError(f"{module_name!r} has no attribute {attribute!r}") from None
    return found


def _check_key(key: str) -> None:
    if not key or "/" in key or key != key.strip() or key.startswith((".", "_")):
        raise ConfigurationError(
            f"agent key {key!r} cannot be a URL segment: use letters, digits, '-' and '_'"
        )
    if key in _RESERVED:
        raise ConfigurationError(f"agent key {key!r} is taken by the service's own endpoint")


# Paths a `/{agent_id}/invoke` route would shadow or be confused with.
_RESERVED = frozenset(
    {
        "info",
        "invoke",
        "stream",
        "history",
        "feedback",
        "health",
        "threads",
        "runs",
        "approvals",
        "agents",
        "v1",
        "static",
        "docs",
        "openapi.json",
    }
)


def _factory_of(agent: Agent | AgentFactory) -> AgentFactory:
    if isinstance(agent, Agent):
        return lambda: agent
    return agent


def _as_agent(found: object, target: str) -> Agent:
    if not isinstance(found, Agent):
        raise ConfigurationError(f"{target} lists a {type(found).__name__}, not an Agent")
    return found


def _name_of(found: object, target: str) -> str:
    if isinstance(found, Agent):
        return found.name
    return target.rpartition(":")[2].rpartition(".")[2]


def _read_config(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read agents file {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else tomllib.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"agents file {path} is not valid: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"agents file {path} must hold a table (mapping)")
    return data
