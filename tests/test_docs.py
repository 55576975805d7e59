"""Every parley example in the documentation (docs/**/*.md) runs as written, offline.

Each page is one test. Its ```python blocks run in order in one namespace, as a reader pasting
them into one Python session would, in a fresh temporary working directory; a block with
`await` at its top level runs as in `python -m asyncio` (one event loop for the page). The
embedded local models stand in for hosted ones, and scripted models or parley's own test
servers where an answer must be exact. Blocks indented under a tab or an admonition count.

What does not run (each kind is still compiled, so a syntax error fails):
- another framework's code, fenced with a title naming it, as ```python title="Qwen-Agent":
  a block whose `title` does not start with "parley" is shown, not run;
- a block right after a `<!-- not-run: why -->` line (it needs a hosted provider's key, or a
  server of someone else's);
- a block right after `<!-- pending: module -->`: code for a part being built elsewhere; it
  runs as soon as `module` imports, and is only compiled until then.

A block right after `<!-- file: path -->` is a file the page's examples use (an MCP server's
script, a provider's package and its cards): it is written to that path in the working
directory, not run. The working directory is on `sys.path`, as a script's folder is, so such a
package imports; modules imported by a page are forgotten after it.

A page that says `<!-- docs-test: postgres -->` runs with `PARLEY_DATABASE_URL` naming a fresh
database on a throwaway PostgreSQL with pgvector (`tests/_external.py`), as a reader's would.

A block that needs an optional part that is missing (an extra's package) skips the page on a
developer's machine and fails it under CI (`tests/_requires.py`).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib.util
import inspect
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from parley.errors import MissingDependencyError
from tests._external import fresh_database
from tests._requires import unavailable

DOCS = Path(__file__).parent.parent / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
EXAMPLE_PAGES = [page for page in PAGES if "```python" in page.read_text()]
"""The pages with Python examples (the API reference's pages have none of their own)."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^`]*)$")
_TITLE = re.compile(r"""title="([^"]*)\"""")
POSTGRES = "<!-- docs-test: postgres -->"
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not-run|pending|file):\s*(?P<what>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its code, where it starts, and whether it runs."""

    code: str
    line: int  # the first line of code, 1-based
    language: str
    title: str | None = None
    not_run: str | None = None  # why, from `<!-- not-run: why -->`
    pending: str | None = None  # the module it waits for, from `<!-- pending: module -->`
    file: str | None = None  # the file it is, from `<!-- file: name -->`

    @property
    def is_python(self) -> bool:
        return self.language == "python"

    @property
    def foreign(self) -> bool:
        """Another framework's code (titled with its name)."""
        return self.title is not None and not self.title.lower().startswith("parley")

    @property
    def runs(self) -> bool:
        if not self.is_python or self.foreign or self.not_run is not None or self.file:
            return False
        return self.pending is None or importlib.util.find_spec(self.pending) is not None


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown page, dedented to their fence's indentation."""
    found: list[Block] = []
    lines = text.splitlines()
    marker: re.Match[str] | None = None
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            if lines[index].strip():
                marker = _MARKER.match(lines[index])
            index += 1
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        language, _, attributes = opening["info"].strip().partition(" ")
        end = index + 1
        while end < len(lines) and lines[end].strip() != ticks:
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line
            for line in lines[index + 1 : end]
        ]
        title = _TITLE.search(attributes)
        kind = marker["kind"] if marker else None
        found.append(
            Block(
                code=textwrap.dedent("\n".join(body)) + "\n",
                line=index + 2,
                language=language,
                title=title[1] if title else None,
                not_run=marker["what"] if kind == "not-run" and marker else None,
                pending=marker["what"] if kind == "pending" and marker else None,
                file=marker["what"] if kind == "file" and marker else None,
            )
        )
        marker = None
        index = end + 1
    return found


def _compile(block: Block, page: Path) -> object:
    # Padded so that a traceback names the line of the page.
    source = "\n" * (block.line - 1) + block.code
    return compile(source, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _name(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


def test_the_pages_have_examples() -> None:
    runnable = [b for p in PAGES for b in blocks(p.read_text()) if b.runs]
    assert len(runnable) >= 40, len(runnable)
    concepts = {p.stem for p in EXAMPLE_PAGES if p.parent.name == "concepts"}
    assert concepts == {p.stem for p in (DOCS / "concepts").glob("*.md")}


def test_blocks_are_read_as_the_docstring_says() -> None:
    page = (
        "```python\nx = 1\n```\n\n"
        '=== "tab"\n\n    ```python title="Qwen-Agent"\n    import qwen_agent\n    ```\n\n'
        '    ```python title="parley"\n    y = 2\n    ```\n\n'
        "<!-- not-run: needs a key -->\n\n```python\nz = 3\n```\n\n"
        "<!-- pending: parley.not_a_module -->\n```python\nw = 4\n```\n\n"
        "```bash\nmake check\n```\n\n"
        "<!-- file: server.py -->\n```python\nv = 5\n```\n"
    )
    found = blocks(page)
    assert [b.code for b in found] == [
        "x = 1\n",
        "import qwen_agent\n",
        "y = 2\n",
        "z = 3\n",
        "w = 4\n",
        "make check\n",
        "v = 5\n",
    ]
    assert [b.runs for b in found] == [True, False, True, False, False, False, False]
    assert [b.line for b in found] == [2, 8, 12, 18, 23, 27, 32]
    assert found[3].not_run == "needs a key"
    assert found[4].pending == "parley.not_a_module"
    assert found[6].file == "server.py"


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=_name)
def test_page_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    with contextlib.ExitStack() as stack:
        if POSTGRES in page.read_text():
            server = request.getfixturevalue("pgvector_url")
            monkeypatch.setenv("PARLEY_DATABASE_URL", stack.enter_context(fresh_database(server)))
        try:
            run_page(page, tmp_path, monkeypatch)
        finally:  # the page's own modules are forgotten
            for name, module in list(sys.modules.items()):
                if str(getattr(module, "__file__", "") or "").startswith(str(tmp_path)):
                    del sys.modules[name]


def run_page(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the page's blocks in order, in one namespace, in `tmp_path`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as for a script there: its modules import
    monkeypatch.setenv("PARLEY_WORKSPACE", str(tmp_path / "workspace"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # indexes from_files makes
    namespace: dict[str, object] = {"__name__": "__docs__"}
    with asyncio.Runner() as runner:
        for block in blocks(page.read_text()):
            if block.file:
                Path(block.file).parent.mkdir(parents=True, exist_ok=True)
                Path(block.file).write_text(block.code)
            if not block.is_python:
                continue
            code = _compile(block, page)
            if not block.runs:
                continue
            try:
                result = eval(code, namespace)  # the page's own example
                if inspect.iscoroutine(result):
                    runner.run(result)
            except MissingDependencyError as exc:
                unavailable(f"{_name(page)}:{block.line} needs {exc}", "")
            except ModuleNotFoundError as exc:
                if (exc.name or "").startswith("parley"):
                    raise
                unavailable(f"{_name(page)}:{block.line} needs {exc.name}", "`make install`")
