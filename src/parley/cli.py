"""The `parley` command: chat with a model, list model cards (and, later, serve agents)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TextIO

from parley.errors import ParleyError
from parley.messages import Msg

__all__ = ["main"]


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


async def _answer(model: object, history: list[Msg], out: TextIO) -> Msg:
    from parley.models.base import ChatModel  # noqa: PLC0415

    assert isinstance(model, ChatModel)
    stream = model.chat_stream(history)
    async for chunk in stream:
        if not chunk.is_last:
            out.write(chunk.text)
            out.flush()
    out.write("\n")
    assert stream.response is not None
    return stream.response.to_msg()


def _load(spec: str) -> object:
    from parley.models.spec import model_from_spec  # noqa: PLC0415

    with progress(f"Loading {spec}"):
        model = model_from_spec(spec)
        loader = getattr(model, "load_sync", None)
        if callable(loader):
            loader()
    return model


def chat(args: argparse.Namespace) -> int:
    """`parley chat`: one question, or a conversation on standard input."""
    model = _load(args.model)
    history = [Msg.system(args.system)] if args.system else []
    questions = [" ".join(args.question)] if args.question else None

    async def run() -> None:
        for question in questions or _prompts():
            history.append(Msg.user(question))
            history.append(await _answer(model, history, sys.stdout))

    asyncio.run(run())
    return 0


def _prompts() -> Iterator[str]:
    while True:
        try:
            line = input("> " if sys.stdin.isatty() else "")
        except EOFError:
            return
        if line.strip() in {"/exit", "/quit"}:
            return
        if line.strip():
            yield line


def models(args: argparse.Namespace) -> int:
    """`parley models`: the model cards of every provider (or of one)."""
    from parley.models.credentials import CredentialFactory  # noqa: PLC0415

    rows = []
    for kind in CredentialFactory.known_types():
        if args.provider and kind != args.provider:
            continue
        credential_cls = CredentialFactory.credential_class(kind)
        rows += [
            (kind, c.name, c.label, c.status, str(c.context_size or ""), ", ".join(c.input_types))
            for c in credential_cls.list_models()
        ]
    header = ("provider", "model", "label", "status", "context", "input")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parley", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    chat_cmd = commands.add_parser("chat", help="chat with a model")
    chat_cmd.add_argument("question", nargs="*", help="ask once; without it, read stdin")
    chat_cmd.add_argument(
        "--model", default="local", help="provider[:model], e.g. openai:gpt-4o-mini (default local)"
    )
    chat_cmd.add_argument(
        "--system", default="You are a helpful assistant.", help="the system prompt"
    )
    chat_cmd.set_defaults(run=chat)
    models_cmd = commands.add_parser("models", help="list model cards")
    models_cmd.add_argument("provider", nargs="?", help="only this provider")
    models_cmd.set_defaults(run=models)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `parley` command."""
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ParleyError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
