"""numpy, which the `rag` extra brings, or an error that says how to install it."""

from parley.errors import MissingDependencyError

try:
    import numpy as np
    import numpy.typing as npt
except ImportError as exc:  # pragma: no cover  (the rag extra brings numpy)
    raise MissingDependencyError("numpy", "rag") from exc

__all__ = ["np", "npt"]
