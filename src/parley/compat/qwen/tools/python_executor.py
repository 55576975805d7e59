"""Qwen-Agent's `python_executor`: run a Python snippet once, get `[output, report]`.

Qwen-Agent runs the code in its own process, unsandboxed ("Do not use it for production").
Here it runs in parley's code interpreter sandbox (`code_interpreter`'s strongest mode on
this machine: no network, files only in its own folder, CPU, memory and time limits), each
call in a fresh interpreter that is stopped afterwards. The result is Qwen-Agent's pair:
what the code printed and `"Done"`, or `""` and the error.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, ClassVar

from parley._sync import run_sync
from parley.compat.qwen.tools.base import BaseTool, register_tool
from parley.tools.builtin.code_interpreter import CodeInterpreter

__all__ = ["PythonExecutor"]

_FENCE = re.compile(r"```(?:py|python)?\s*\n(.*?)```", re.DOTALL)


@register_tool("python_executor")
class PythonExecutor(BaseTool):
    """Runs Python code once in the sandbox.

    Args:
        cfg: `timeout_length` (seconds, 20), and `code_interpreter`'s keys (`sandbox`,
            `limits`, ...).
    """

    description = "For executing python code. Runs in a sandbox without network access."
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The python code."}},
        "required": ["code"],
    }
    timeout: ClassVar[float | None] = None  # the interpreter keeps `timeout_length`

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.timeout_length = float(self.cfg.get("timeout_length", 20))
        interpreter_cfg = {k: v for k, v in self.cfg.items() if k != "timeout_length"}
        self.interpreter = CodeInterpreter(interpreter_cfg)

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> list[str]:
        """Run the code (JSON `{"code": ...}`, or the code itself, fenced or not)."""
        code = _code_of(params)
        if not code.strip():
            return ["", ""]
        session = f"python-executor-{secrets.token_hex(6)}"
        try:
            execution = self.interpreter.run_code(
                code, session=session, timeout=self.timeout_length
            )
        finally:
            run_sync(self.interpreter.end_session(None, session))
        if execution.error:
            return ["", execution.error.strip().splitlines()[-1]]
        return [execution.stdout, "Done"]


def _code_of(params: str | dict[str, Any]) -> str:
    if isinstance(params, dict):
        return str(params.get("code", ""))
    import json5  # noqa: PLC0415

    try:
        parsed = json5.loads(params)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "code" in parsed:
        return str(parsed["code"])
    fenced = _FENCE.search(params)
    return fenced.group(1) if fenced else params
