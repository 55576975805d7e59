"""Old module paths, kept working for one release after the providers moved (0.2).

Each provider's code used to live in up to five places (`parley.models.<p>`,
`parley.embeddings.<p>`, `parley.tts.<p>`, `parley.testing.<p>_server` and its wire module); it
now lives in one package, `parley.providers.<p>`. Importing an old path gives the module at
the new one, the very same object (classes compare equal, `isinstance` holds), with a
`DeprecationWarning` that names the new path.

The speech middleware and player moved too (`parley.tts.middleware` and `parley.tts.player`
are `parley.agents.speech`), to the agents' floor whose events they read.

It is an import hook (a finder on `sys.meta_path`) rather than a file at each old path: a file
in `parley.models` importing `parley.providers` would be an import from a lower floor to a
higher one, the circle the floors exist to prevent (`.importlinter`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

# Old module prefix → new one. A submodule follows its package: `parley.models.openai.chat` is
# `parley.providers.openai.chat`. Longest prefixes are tried first.
MOVED: dict[str, str] = {
    "parley.models.auto": "parley.providers.auto",
    **{
        f"parley.models.{p}": f"parley.providers.{p}"
        for p in ("openai", "anthropic", "gemini", "ollama", "dashscope", "local")
    },
    **{
        f"parley.embeddings.{p}": f"parley.providers.{p}.embeddings"
        for p in ("openai", "gemini", "ollama", "dashscope", "local")
    },
    **{f"parley.tts.{p}": f"parley.providers.{p}.speech" for p in ("openai", "dashscope", "local")},
    **{
        f"parley.testing.{p}_server": f"parley.providers.{p}.server"
        for p in ("openai", "anthropic", "gemini", "ollama", "dashscope")
    },
    "parley.testing.cosyvoice_server": "parley.providers.dashscope.cosyvoice_server",
    "parley.testing.dashscope_realtime_server": "parley.providers.dashscope.realtime_server",
    "parley.testing.hub_server": "parley.providers.local.hub_server",
    # Speech for agents stands on the agents' floor now (it reads their events).
    "parley.tts.middleware": "parley.agents.speech.middleware",
    "parley.tts.player": "parley.agents.speech.player",
}


_LONGEST_FIRST = sorted(MOVED, key=len, reverse=True)
_MISSING = object()


def new_name(old: str) -> str | None:
    """The module an old path now names, or None when `old` did not move."""
    for prefix in _LONGEST_FIRST:
        if old == prefix or old.startswith(prefix + "."):
            return MOVED[prefix] + old[len(prefix) :]
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new one."""

    def __init__(self, new: str) -> None:
        self._new = new
        self._kept: tuple[object, object] = (None, _MISSING)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _warn(spec.name, self._new)
        module = importlib.import_module(self._new)
        self._kept = (module.__spec__, getattr(module, "__path__", _MISSING))
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Put back the module's own spec: nothing runs (it ran at its new path).

        importlib has just set the alias's spec on the module (and an empty `__path__`, the
        alias being a package): left so, `importlib.reload` of the new path would run nothing
        and rename the module, and a plain module would pass for a package.
        """
        spec, path = self._kept
        module.__spec__ = spec  # type: ignore[assignment]
        if path is _MISSING and hasattr(module, "__path__"):
            del module.__path__


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of moved modules (and only those)."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname) if fullname.startswith("parley.") else None
        if new is None:
            return None
        # `is_package` keeps `import parley.models.openai.chat` working: the old package's
        # submodules are found through this finder again, not through a `__path__`.
        return importlib.machinery.ModuleSpec(fullname, _Alias(new), is_package=True)


def _warn(old: str, new: str) -> None:
    # The warning points at the user's import, past importlib's own frames.
    frame = sys._getframe(1)
    while frame.f_back is not None and _is_machinery(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
    warnings.warn_explicit(
        f"{old} moved to {new} (each provider is one package now); import it from there: "
        "the old path goes in the next release",
        DeprecationWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=frame.f_globals.get("__name__", "parley"),
        registry=frame.f_globals.setdefault("__warningregistry__", {}),
    )


def _is_machinery(module: str) -> bool:
    return module in {__name__, "importlib"} or module.startswith("importlib.")


_FINDER = _MovedFinder()


def install() -> None:
    """Put the finder on `sys.meta_path` (once); `parley/__init__.py` calls it."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
