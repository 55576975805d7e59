"""Tools the tests of agents, the service and the client share."""

from __future__ import annotations

from typing import Any

from parley.tools import Tool, tool

__all__ = ["LocalOnly", "add", "send_email"]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool(requires_approval=True)
def send_email(to: str) -> str:
    """Send an email.

    Args:
        to: The address.
    """
    return f"sent to {to}"


class LocalOnly(Tool):
    """A tool that serves this machine only, as the code interpreter without bubblewrap."""

    name = "weak_sandbox"
    description = "Runs code in a weak sandbox."

    @property
    def local_only(self) -> bool:
        """Always: the service refuses its agents to other machines."""
        return True

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        """Run nothing."""
        return "ran"
