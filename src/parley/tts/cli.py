"""`parley say`: speak a text into a WAV file, offline on the local voice by default.

parley say "Hello there." -o hello.wav
echo "Hello there." | parley say -o - | aplay       # stdin in, WAV on stdout
parley say --model openai:gpt-4o-mini-tts --voice coral "Hi" -o hi.wav
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from parley.errors import UserError

__all__ = ["add_commands", "say"]

MAX_TEXT = 100_000
"""The most characters `say` reads (a book chapter); longer input is refused, not cut."""


def add_commands(commands: Any) -> None:
    """Add `say` to the `parley` command's subparsers."""
    parser = commands.add_parser("say", help="speak a text into a WAV file")
    parser.add_argument("text", nargs="*", help="what to say; without it (or -), read stdin")
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="the WAV file to write (- for stdout; the default when stdout is not a terminal)",
    )
    parser.add_argument(
        "--model", default="local", help="provider[:model], e.g. local:espeak-ng (default local)"
    )
    parser.add_argument("--voice", help="one of the model's voices (see parley models --tts)")
    parser.add_argument("--speed", type=float, help="the pace, 1.0 normal (local voice)")
    parser.set_defaults(run=say)


def say(args: argparse.Namespace) -> int:
    """Speak `args.text` (or stdin) with `args.model`, writing a WAV file."""
    from parley.tts.spec import tts_model_from_spec  # noqa: PLC0415

    target = _target(args.output)
    text = _text(args.text)
    parameters: dict[str, Any] = {}
    if args.voice:
        parameters["voice"] = args.voice
    if args.speed is not None:
        parameters["speed"] = args.speed
    model = tts_model_from_spec(args.model, parameters=parameters)
    response = model.synthesize_sync(text)
    data = response.audio_bytes
    if response.media_type != "audio/wav":
        raise UserError(f"{args.model} gave {response.media_type}, not a WAV file")
    if target is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        target.write_bytes(data)
        print(f"wrote {target} ({len(data):,} bytes)", file=sys.stderr)
    return 0


def _target(output: str | None) -> Path | None:
    """Where the WAV goes: a file, or stdout (None) when it is piped."""
    if output is None and sys.stdout.isatty():
        raise UserError("say writes a WAV file: give -o FILE, or pipe it (parley say hi | aplay)")
    if output in (None, "-"):
        return None
    assert output is not None
    path = Path(output)
    if path.suffix.lower() != ".wav":
        raise UserError(f"say writes WAV audio: name the file .wav, not {path.name!r}")
    if not path.parent.is_dir():
        raise UserError(f"no folder {str(path.parent)!r} to write {path.name!r} in")
    return path


def _text(words: list[str]) -> str:
    text = " ".join(words) if words and words != ["-"] else sys.stdin.read(MAX_TEXT + 1)
    if len(text) > MAX_TEXT:
        raise UserError(f"the text is over {MAX_TEXT:,} characters: say it in parts")
    if not text.strip():
        raise UserError("there is nothing to say: the text is empty")
    return text
