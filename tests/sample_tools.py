"""Tools the tests of agents, the service and the client share."""

from __future__ import annotations

from parley.tools import tool

__all__ = ["add", "send_email"]


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
