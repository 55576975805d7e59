"""The evaluation sets parley ships, and the targets each is run on.

- `tools` (50 cases, `tools_agent(model)`): arithmetic through `code_interpreter`, the typed
  tool `convert_units`, choosing between the two, and plain questions that need no tool;
- `qa` (21 cases, `qa_agent(model, index)`): questions about Python's library reference,
  answered from a search of it (`benchmarks/data/pydocs`, indexed by `_pydocs.open_index`);
- `structured` (20 cases, `structured_agent(model)`): a person's name, age, city and email
  extracted into the `Contact` schema.

`load(name)` reads a set (`parley eval tools` finds them by name the same way); `path(name)`
is its YAML file, to read or copy. `benchmarks/evals.py` runs all three on a model and
docs/how-to/evaluate.md shows the figures.

The sets live in the package (not in a top-level folder) so that an installed parley runs them
by name; only the `qa` set's corpus stays in the source checkout (see `_pydocs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from parley.errors import ConfigurationError
from parley.models.tools import ToolChoicePolicy

if TYPE_CHECKING:
    from parley.agents import Agent
    from parley.evals.dataset import Dataset
    from parley.models.base import ChatModel
    from parley.rag import DocumentIndex

__all__ = [
    "NAMES",
    "QA_PROMPT",
    "STRUCTURED_PROMPT",
    "AgentSettings",
    "Contact",
    "load",
    "path",
    "qa_agent",
    "structured_agent",
    "tools_agent",
]

HERE = Path(__file__).resolve().parent
NAMES = ("tools", "qa", "structured")
"""The shipped sets, by name."""

QA_PROMPT = (
    "You answer questions about Python's standard library. Call retrieval with the question "
    "to search the library reference, then name the function or class that does it."
)
"""The `qa` set's system prompt: search first, then name the API."""

STRUCTURED_PROMPT = "Extract the person's details from the user's text as JSON."
"""The `structured` set's system prompt."""


def path(name: str) -> Path:
    """The YAML file of the shipped set `name`.

    Raises:
        ConfigurationError: No shipped set has that name.
    """
    if name not in NAMES:
        raise ConfigurationError(
            f"no shipped evaluation set {name!r}; the shipped sets are {', '.join(NAMES)}"
        )
    return HERE / f"{name}.yaml"


def load(name: str) -> Dataset:
    """The shipped set `name`, as a `Dataset`."""
    import parley.evals.sets._evaluators  # noqa: F401, PLC0415  (registers `fields_equal`)
    from parley.evals.dataset import Dataset  # noqa: PLC0415

    return Dataset.load(path(name))


@dataclass(frozen=True)
class AgentSettings:
    """How an agent is set up around its model: what `benchmarks/evals.py` compares.

    Args:
        system_prompt: The system prompt (None: none).
        offer_tools: Whether the agent is given its tools at all.
        tool_choice: The agent's tool policy (None: the model's own, one tool round for the
            embedded model).
        label: Names the settings in reports.
    """

    system_prompt: str | None = None
    offer_tools: bool = True
    tool_choice: ToolChoicePolicy = None
    label: str = "default"
    parameters: dict[str, Any] = field(default_factory=dict)
    """Generation parameters the model is made with (`temperature`, ...), for reports."""


class Contact(BaseModel):
    """The `structured` set's schema: who a short text is about."""

    name: str = Field(description="The person's full name.")
    age: int = Field(description="Age in years.")
    city: str = Field(description="The city the person lives in now.")
    email: str | None = Field(description="Email address, or null when none is given.")


def tools_agent(model: ChatModel, settings: AgentSettings | None = None) -> Agent:
    """The `tools` set's agent: `model` with `code_interpreter` and `convert_units`."""
    from parley.agents import Agent  # noqa: PLC0415
    from parley.evals.sets._tools import convert_units  # noqa: PLC0415
    from parley.tools import Toolkit  # noqa: PLC0415  (extra `tools`)

    settings = settings or AgentSettings()
    tools = Toolkit(["code_interpreter", convert_units] if settings.offer_tools else [])
    return Agent(
        "tools-set",
        model,
        system_prompt=settings.system_prompt,
        tools=tools,
        tool_choice=settings.tool_choice,
        max_iters=4,
    )


def qa_agent(
    model: ChatModel, index: DocumentIndex, settings: AgentSettings | None = None
) -> Agent:
    """The `qa` set's agent: `model` with the retrieval tool over the pydocs index.

    Its system prompt is the set's own (`QA_PROMPT`); `settings` give the tool policy.
    """
    from parley.agents import Agent  # noqa: PLC0415
    from parley.rag.tool import RetrievalTool  # noqa: PLC0415
    from parley.tools import Toolkit  # noqa: PLC0415

    settings = settings or AgentSettings()
    # Three passages: a longer prompt slows the 135M model and muddles its answer.
    return Agent(
        "qa-set",
        model,
        system_prompt=QA_PROMPT,
        tools=Toolkit([RetrievalTool(index, top_k=3)]),
        tool_choice=settings.tool_choice,
        max_iters=3,
    )


def structured_agent(model: ChatModel) -> Agent:
    """The `structured` set's agent: `model` told to extract (the set asks for `Contact`)."""
    from parley.agents import Agent  # noqa: PLC0415

    return Agent("structured-set", model, system_prompt=STRUCTURED_PROMPT, max_iters=1)
