"""Tools: a Qwen-Agent compatible `Tool` base, `@tool`, the registry and `Toolkit`.

Arguments are parsed tolerantly and validated against each tool's schema.
"""

from parley.tools.arguments import parse_tool_arguments, qwen_list_to_schema, validate_arguments
from parley.tools.base import Tool, ToolOutput, to_output
from parley.tools.context import RunContext
from parley.tools.function import FunctionTool, tool
from parley.tools.registry import TOOL_REGISTRY, register_tool
from parley.tools.toolkit import ToolInput, Toolkit
from parley.tools.workspace import Workspace, default_workspace

__all__ = [
    "TOOL_REGISTRY",
    "FunctionTool",
    "RunContext",
    "Tool",
    "ToolInput",
    "ToolOutput",
    "Toolkit",
    "Workspace",
    "default_workspace",
    "parse_tool_arguments",
    "qwen_list_to_schema",
    "register_tool",
    "to_output",
    "tool",
    "validate_arguments",
]
