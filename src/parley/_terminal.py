"""What the commands show on a terminal: others' text made safe to print, and a spinner.

Everything the command line prints that it did not write itself (an answer, a tool's result,
a call's arguments in the approval prompt, a file's name, an error a server sent) goes
through `visible`: a terminal obeys the escape sequences such text may hold (a retitled
window, a cleared screen, a rewritten line, a hyperlink), and bidi controls make a name
read otherwise than it is. Ordinary text, non-ASCII letters among it, is left as it is.

`progress` shows a spinner while a slow step runs (`parley chat`, `parley eval`). This module
sits at the bottom of the floors, so every command (`parley.cli` at the top, `parley.evals.cli`
below it) can use it.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

__all__ = ["progress", "visible"]

# C0 and C1 control characters (a terminal's escape sequences among them) and the bidi
# controls that make a name read otherwise than it is (U+202E: `txt.exe` shown as `exe.txt`).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str, keep: str = "") -> str:
    r"""`text` with its control characters written as escapes (`\x1b`), but those in `keep`.

    Args:
        text: What is to be shown.
        keep: Control characters shown as they are: `"\n\t"` for an answer's lines and
            tabs; none for what must stay on one line (a name, a prompt).
    """

    def escaped(match: re.Match[str]) -> str:
        char = match.group()
        return char if char in keep else char.encode("unicode_escape").decode("ascii")

    return _CONTROL.sub(escaped, text)


@contextlib.contextmanager
def progress(label: str, stream: TextIO | None = None) -> Iterator[None]:
    """Show a spinner with `label` on a terminal while the block runs (plain line otherwise)."""
    stream = stream or sys.stderr
    if not stream.isatty():
        print(f"{label}...", file=stream, flush=True)
        yield
        return
    done = threading.Event()

    def spin() -> None:
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            if done.wait(0.1):
                break
            print(f"\r{frame} {label}...", end="", file=stream, flush=True)
        print("\r\033[K", end="", file=stream, flush=True)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()
