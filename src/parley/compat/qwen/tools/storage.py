"""Qwen-Agent's `storage`: parley's own `Storage`, registered under that name.

See `parley.tools.builtin.storage`.
"""

from parley.tools.builtin.storage import KeyNotExistsError, Storage

__all__ = ["KeyNotExistsError", "Storage"]
