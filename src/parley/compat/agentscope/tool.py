"""`ToolChoice` as `agentscope.tool` has it (the rest of AgentScope's tools is not here)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

__all__ = ["ToolChoice"]


class ToolChoice(BaseModel):
    """Which tools the model may call.

    `mode` is `auto`, `none`, `required`, or a tool's name (that tool must be called);
    `tools`, when given, narrows the tools sent to those named.
    """

    mode: Literal["auto", "none", "required"] | str
    tools: list[str] | None = None
