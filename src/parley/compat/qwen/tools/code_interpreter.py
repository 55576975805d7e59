"""Qwen-Agent's `code_interpreter`: parley's own `CodeInterpreter`, registered under that name.

See `parley.tools.builtin.code_interpreter`. One difference in how an agent builds it:
Qwen-Agent's agents hand the files of the user's messages to `code_interpreter`, which copies
them into its work directory, so the model's code can open the user's upload by name.
parley's interpreter copies in only files under its `file_roots` (none by default). A
`code_interpreter` that a Qwen-Agent agent builds from its `function_list` (a name or a
config without `file_roots`) therefore takes the working directory as its file root, the
rule every other Qwen-Agent file tool here follows (`tools.base.BaseToolWithFileAccess`)
and `Assistant` applies to attached files. Files elsewhere are still refused (say so with
`{"name": "code_interpreter", "file_roots": [...]}`); the model itself names no files to
copy (it writes code, which the sandbox confines).
"""

from __future__ import annotations

from pathlib import Path

from parley.tools import Tool
from parley.tools.builtin.code_interpreter import CodeInterpreter

__all__ = ["CodeInterpreter", "user_files_from_working_directory"]


def user_files_from_working_directory(tool: Tool) -> Tool:
    """`tool`; a `CodeInterpreter` configured without `file_roots` gets the working directory.

    For tools an agent builds from its `function_list` (see the module docs).
    """
    if isinstance(tool, CodeInterpreter) and not tool.cfg.get("file_roots"):
        tool.file_roots = [Path.cwd().resolve()]
    return tool
