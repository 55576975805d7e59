"""`parley models pull NAME`, `parley models pull --list` and `parley models rm NAME`."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from parley.errors import ConfigurationError
from parley.providers.local._gguf import BUNDLED
from parley.providers.local.hub import cache_dir, find_pulled, pull, remove, unknown_message
from parley.providers.local.presets import PRESETS, preset_for, split_hub_name

__all__ = ["ACTIONS", "local_status", "run_action"]

ACTIONS = ("pull", "rm")
"""The words after `parley models` that are actions, not a provider's name."""


def run_action(args: argparse.Namespace) -> int:
    """Run `parley models pull ...` or `parley models rm ...`."""
    if args.provider == "pull" and args.list:
        if args.names:
            raise ConfigurationError("`parley models pull --list` takes no model name")
        return list_presets()
    if len(args.names) != 1:
        raise ConfigurationError(
            f"name one model: `parley models {args.provider} NAME` "
            "(a preset from `parley models pull --list`, or OWNER/REPO/FILE.gguf)"
        )
    name = args.names[0]
    if args.provider == "rm":
        return _remove(name)
    return _pull(name, token=args.token, revision=args.revision)


def _pull(name: str, *, token: str | None, revision: str | None) -> int:
    preset = preset_for(name)
    if preset is None and split_hub_name(name) is None:
        raise ConfigurationError(unknown_message(name))
    what = f"{preset.hub_name} ({_gb(preset.size)}, licence {preset.licence})" if preset else name
    _say(f"Pulling {what} into {cache_dir()}", sys.stderr)
    pulled = pull(name, token=token, revision=revision)
    _say(f"pulled {pulled.name}: {pulled.path} ({_gb(pulled.size)})")
    _say(f"use it: parley chat --model local:{pulled.name}")
    return 0


def _remove(name: str) -> int:
    removed = remove(name)
    if removed is None:
        _say(f"parley models rm: {name} is not pulled", sys.stderr)
        return 1
    _say(f"removed {removed.name} ({_gb(removed.size)}) from {cache_dir()}")
    return 0


def list_presets() -> int:
    """Print the presets: name, size, licence, tool-call format, whether pulled, Hub file."""
    header = ("name", "size", "licence", "tools", "pulled", "file")
    rows = [
        (
            p.name,
            _gb(p.size),
            p.licence,
            p.tool_format,
            "yes" if find_pulled(p.name) else "no",
            p.hub_name,
        )
        for p in PRESETS.values()
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        _say("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return 0


def local_status(name: str) -> str:
    """What `parley models local` says of a local model: embedded, pulled or not pulled."""
    if name in BUNDLED:
        return "embedded"
    if preset_for(name) is None:
        return ""
    return "pulled" if find_pulled(name) else "not pulled"


def _say(line: str, stream: TextIO | None = None) -> None:
    (stream or sys.stdout).write(line + "\n")


def _gb(size: int) -> str:
    return f"{size / 1e9:.2f} GB" if size >= 1e8 else f"{size / 1e6:.1f} MB"
