"""Qwen-Agent's `code_interpreter`: parley's own `CodeInterpreter`, registered under that name.

See `parley.tools.builtin.code_interpreter`.
"""

from parley.tools.builtin.code_interpreter import CodeInterpreter

__all__ = ["CodeInterpreter"]
