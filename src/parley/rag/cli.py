"""`parley index` and `parley ask`: build an index of documents, and ask them questions.

    parley index handbook/ faq.pdf            # made or brought up to date, with a progress bar
    parley ask --docs handbook/ "How long do refunds take?"

Both find the same index for the same documents and `--embedding` (one file per set, in
`~/.cache/parley/indexes/`, see `default_index_path`) unless `--index` names one (an SQLite
file, or a PostgreSQL URL). `ask` brings the index up to date first, answers with the
embedded local model unless `--model` names another, and prints the sources it drew on.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from parley._terminal import visible

if TYPE_CHECKING:
    from parley.rag.index import DocumentIndex, IngestReport

__all__ = ["add_commands", "ask", "index"]


def add_commands(commands: Any) -> None:
    """Add `index` and `ask` to the `parley` command's subparsers."""
    index_parser = commands.add_parser(
        "index", help="build or update an index of documents (files, folders, URLs)"
    )
    index_parser.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or URLs")
    _index_options(index_parser)
    index_parser.set_defaults(run=index)

    ask_parser = commands.add_parser("ask", help="ask documents a question, with sources")
    ask_parser.add_argument("question", nargs="+", help="the question")
    ask_parser.add_argument(
        "--docs",
        action="append",
        required=True,
        metavar="PATH",
        help="a file, folder or URL to answer from (repeatable)",
    )
    ask_parser.add_argument("--model", help="provider[:model] to answer with (default local)")
    ask_parser.add_argument(
        "--mode", choices=["keyword", "vector", "hybrid", "front_page"], help="how to search"
    )
    ask_parser.add_argument("--top-k", type=int, default=5, help="passages to read (default 5)")
    _index_options(ask_parser)
    ask_parser.set_defaults(run=ask)


def _index_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index",
        metavar="LOCATION",
        help="the index: an SQLite file or a PostgreSQL URL (default: one per set of documents "
        "and embedding model in ~/.cache/parley/indexes/)",
    )
    parser.add_argument(
        "--embedding",
        default="local",
        metavar="SPEC",
        help="embedding model, provider[:model] (default local), or 'none' for keyword search only",
    )
    parser.add_argument("--chunk-size", type=int, default=500, help="tokens per chunk")
    parser.add_argument("--chunk-overlap", type=int, default=50, help="tokens chunks share")


class _Bar:
    """A progress bar on a terminal (tqdm), one line per document otherwise."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.bar: Any = None

    def __call__(self, done: int, total: int, source: str) -> None:
        name = visible(Path(source).name if "://" not in source else source)
        if not self.out.isatty():
            print(f"indexed {done}/{total} {name}", file=self.out, flush=True)
            return
        if self.bar is None or self.bar.total != total or done == 1:
            self.close()
            from tqdm import tqdm  # noqa: PLC0415  (the rag extra)

            # Redrawn at each document (not every 0.1 s): one line, rewritten, per document.
            self.bar = tqdm(total=total, unit="doc", file=self.out, leave=False, mininterval=0)
        self.bar.set_postfix_str(name, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


async def _open(args: argparse.Namespace, paths: Sequence[str]) -> tuple[DocumentIndex, str]:
    """The index the options name, open, and where it is."""
    from parley.rag.assistant import default_index_path  # noqa: PLC0415
    from parley.rag.index import DocumentIndex  # noqa: PLC0415

    spec = args.embedding
    if spec == "none":
        embedder = None
    else:
        from parley.embeddings.spec import embedding_model_from_spec  # noqa: PLC0415

        embedder = embedding_model_from_spec(spec)
    location = str(args.index or default_index_path(paths, embedder))
    opened = await DocumentIndex.open(
        location,
        embedding_model=embedder,
        chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
    )
    return opened, location


async def _update(index: DocumentIndex, paths: Sequence[str], out: TextIO) -> IngestReport:
    from parley.rag.assistant import add_sources  # noqa: PLC0415

    bar = _Bar(out)
    try:
        return await add_sources(index, paths, progress=bar, errors="report")
    finally:
        bar.close()


def _summary(report: IngestReport) -> str:
    counts = [
        (len(report.added), "added"),
        (len(report.updated), "updated"),
        (len(report.unchanged), "unchanged"),
        (len(report.removed), "removed"),
        (len(report.failed), "failed"),
    ]
    return ", ".join(f"{n} {what}" for n, what in counts if n) or "nothing to index"


def index(args: argparse.Namespace) -> int:
    """`parley index`: make or update the index; 1 if a document failed."""

    async def run() -> int:
        opened, location = await _open(args, args.paths)
        try:
            report = await _update(opened, args.paths, sys.stderr)
        finally:
            await opened.close()
        _print_failures(report, "")
        print(f"{_summary(report)}: {location}")
        return 1 if report.failed else 0

    return asyncio.run(run())


def _print_failures(report: IngestReport, verb: str) -> None:
    for source, error in report.failed.items():
        print(visible(f"parley: {verb}{source}: {error}", keep="\n"), file=sys.stderr)


def ask(args: argparse.Namespace) -> int:
    """`parley ask`: update the index, answer the question, print the sources."""
    from parley.rag.assistant import Assistant  # noqa: PLC0415

    async def run() -> int:
        opened, _ = await _open(args, args.docs)
        try:
            report = await _update(opened, args.docs, sys.stderr)
            _print_failures(report, "skipped ")
            model = None
            if args.model:
                from parley.models.spec import model_from_spec  # noqa: PLC0415

                model = model_from_spec(args.model)
            assistant = Assistant(opened, model, top_k=args.top_k, mode=args.mode)
            return await _answer(assistant, " ".join(args.question), sys.stdout)
        finally:
            await opened.close()

    return asyncio.run(run())


async def _answer(assistant: Any, question: str, out: TextIO) -> int:
    from parley.agents import RunEnded, TextDelta, ToolResult  # noqa: PLC0415
    from parley.rag.tool import citations  # noqa: PLC0415

    sources: list[str] = []
    status = "completed"
    async for event in assistant.stream(question):
        if isinstance(event, TextDelta):
            # The answer may repeat a document's escape sequences: shown, never obeyed.
            out.write(visible(event.text, keep="\n\t"))
            out.flush()
        elif isinstance(event, ToolResult) and event.result.name == "retrieval":
            sources += [s for s in citations(event.result.text) if s not in sources]
        elif isinstance(event, RunEnded):
            status = event.status
            if event.final is not None and not event.final.text:
                out.write("(no answer)")
    out.write("\n")
    if sources:
        out.write("\nSources:\n" + "".join(f"  {line}\n" for line in sources))
    return 0 if status == "completed" else 1
