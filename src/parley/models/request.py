"""A chat call as a provider adapter receives it, and the messages a caller may pass.

Below `parley.models.base` so that the response cache and structured output can name a
request without importing the model class that makes one; `parley.models.base` re-exports
both names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parley.messages import Msg
from parley.models.parameters import Parameters
from parley.models.tools import ToolSpec

__all__ = ["ChatRequest", "MessagesInput"]

MessagesInput = Sequence[Msg | Mapping[str, Any]]
"""Messages as a caller passes them: `Msg` objects or their dict form."""


@dataclass
class ChatRequest:
    """One call, normalized: what a provider adapter turns into its wire format."""

    messages: list[Msg]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str | None = None
    parameters: Parameters = field(default_factory=Parameters)
    response_format: dict[str, Any] | None = None
    """A JSON schema the answer must follow, for providers that constrain output natively."""
