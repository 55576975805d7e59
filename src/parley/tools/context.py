"""`RunContext`: what a tool call knows of the run that made it.

The agent loop builds one per tool call and hands it to tools that declare it, the way
pydantic-ai's `RunContext` reaches its tools:

- a function tool takes a parameter annotated `RunContext` (any name, usually the first);
  it is left out of the schema the model sees and filled in at each call;
- a `Tool` subclass receives it as the keyword argument `ctx` of `call` / `acall` when that
  method takes `ctx` or `**kwargs` (Qwen-Agent style tools do).

Per-conversation tool state (the code interpreter's process and files, the files `storage`
and `doc_parser` may touch) is keyed by `session_key`: user and thread, never shared.

Example:
    >>> from parley.tools import RunContext, tool
    >>> @tool
    ... def whoami(ctx: RunContext[dict[str, str]]) -> str:
    ...     '''Say who is asking.'''
    ...     return f"{ctx.user_id} in {ctx.thread_id} ({ctx.deps['team']})"
    >>> whoami.tool_spec().parameters["properties"]
    {}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["LOCAL_USER", "RunContext", "session_key"]

DepsT = TypeVar("DepsT")

LOCAL_USER = "local"
"""The user of a run nobody signed in to (a script, the service without auth)."""


def _key_part(text: str) -> str:
    # `%` first: the escape of `/` must not be read back as something the id held.
    return text.replace("%", "%25").replace("/", "%2F")


def session_key(user_id: str | None, thread_id: str) -> str:
    """The key of one conversation's tool state: its user and its thread.

    `user/thread`, with `%` and `/` inside either escaped (`%25`, `%2F`): user `acme` and
    thread `bob/notes` (`acme/bob%2Fnotes`) is not user `acme/bob` and thread `notes`
    (`acme%2Fbob/notes`).
    """
    return f"{_key_part(user_id or LOCAL_USER)}/{_key_part(thread_id)}"


@dataclass(frozen=True, slots=True)
class RunContext(Generic[DepsT]):
    """What a tool call knows of its run.

    Attributes:
        run_id: The run (`AgentRun.run_id`).
        agent: The name of the agent whose model made the call.
        thread_id: The conversation: the service's thread, or the id of the agent's memory.
        user_id: Who the run is for (the service's authenticated user); None when nobody
            signed in.
        deps: What the caller passed as `deps=` to `reply` / `stream` (pydantic-ai's
            dependencies: a database handle, settings, a client).
        tool_call_id: The call being run (empty outside one).
        tool_name: The tool being called (empty outside a call).
    """

    run_id: str
    agent: str
    thread_id: str
    user_id: str | None = None
    deps: DepsT = None  # type: ignore[assignment]
    tool_call_id: str = ""
    tool_name: str = ""

    @property
    def session_key(self) -> str:
        """The key of this conversation's tool state (user and thread)."""
        return session_key(self.user_id, self.thread_id)

    def for_call(self, tool_call_id: str, tool_name: str) -> RunContext[DepsT]:
        """This context for one tool call."""
        # Built directly: `dataclasses.replace` costs several times more, on every call.
        return RunContext(
            self.run_id,
            self.agent,
            self.thread_id,
            self.user_id,
            self.deps,
            tool_call_id,
            tool_name,
        )

    @classmethod
    def detached(cls, thread_id: str = "default", **values: Any) -> RunContext[Any]:
        """A context outside any agent run (a tool called directly, a test)."""
        run_id = str(values.pop("run_id", ""))
        agent = str(values.pop("agent", ""))
        return RunContext(run_id=run_id, agent=agent, thread_id=thread_id, **values)
