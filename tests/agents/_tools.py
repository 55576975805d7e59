"""Tools the approval and continuation tests share, recording their calls in `ran`.

`lookup` and `whoami` are idempotent (a takeover runs them again), `charge` is not, and
`send_email` and `delete_file` wait for approval.
"""

from __future__ import annotations

from typing import Any

from parley.tools import RunContext, tool

ran: list[tuple[str, dict[str, Any]]] = []
"""The calls the tools here ran, in order (each test module clears it before each test)."""


@tool(requires_approval=True)
def send_email(to: str) -> str:
    """Send an email.

    Args:
        to: The address.
    """
    ran.append(("send_email", {"to": to}))
    return f"sent to {to}"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    ran.append(("delete_file", {"path": path}))
    return f"deleted {path}"


@tool(idempotent=True)
def lookup(name: str) -> str:
    """Look a contact up (reading only: safe to run again; no approval needed).

    Args:
        name: Who.
    """
    ran.append(("lookup", {"name": name}))
    return f"{name.lower()}@example.org"


@tool
def charge(amount: int) -> str:
    """Charge a card (not idempotent: twice would charge twice).

    Args:
        amount: In cents.
    """
    ran.append(("charge", {"amount": amount}))
    return f"charged {amount}"


@tool(idempotent=True)
def whoami(ctx: RunContext) -> str:
    """The run's id."""
    ran.append(("whoami", {}))
    return ctx.run_id
