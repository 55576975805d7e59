"""Qwen-Agent's `doc_parser`: parley's own `DocParser`, registered under that name.

See `parley.tools.builtin.doc_parser`.
"""

from parley.tools.builtin.doc_parser import DocParser

__all__ = ["DocParser"]
