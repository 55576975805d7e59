"""The `parley` command: chat with a model or a running service, list model cards.

Also: index documents and ask them questions (`parley.rag.cli`), serve agents and manage
their keys (`parley.service.cli`), run evaluations (`parley.evals.cli`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from parley import __version__
from parley._terminal import progress, visible
from parley.errors import ConfigurationError, ParleyError
from parley.messages import Msg

if TYPE_CHECKING:
    from parley.client import AgentClient, Interrupt, ServiceChatMessage, Stream, StreamItem

__all__ = ["main"]


def describe_usage(usage: Any) -> str:
    """A call's or run's usage in one line: tokens, seconds and cost (`--verbose`)."""
    if usage is None:
        return "usage: not reported"
    if not isinstance(usage, Mapping):
        usage = usage.model_dump()
    cached = usage.get("cached_tokens") or 0
    cost = usage.get("cost")
    return (
        f"usage: {usage.get('input_tokens', 0):,} tokens in"
        + (f" ({cached:,} cached)" if cached else "")
        + f", {usage.get('output_tokens', 0):,} out, {usage.get('elapsed', 0.0):.2f} s, "
        + ("cost unknown" if cost is None else f"cost {cost:.6f}")
    )


async def _answer(model: object, history: list[Msg], out: TextIO, verbose: bool = False) -> Msg:
    from parley.models.base import ChatModel  # noqa: PLC0415

    assert isinstance(model, ChatModel)
    stream = model.chat_stream(history)
    async for chunk in stream:
        if not chunk.is_last:
            out.write(visible(chunk.text, keep=LINES))
            out.flush()
    out.write("\n")
    assert stream.response is not None
    if verbose:
        print(describe_usage(stream.response.usage), file=sys.stderr)
    return stream.response.to_msg()


def _load(spec: str) -> object:
    from parley.models.spec import model_from_spec  # noqa: PLC0415

    with progress(f"Loading {spec}"):
        model = model_from_spec(spec)
        loader = getattr(model, "load_sync", None)
        if callable(loader):
            loader()
    return model


LINES = "\n\t"
"""The control characters an answer or a tool's result is printed with: its lines and tabs
(every other one is shown as an escape, never obeyed by the terminal: `parley._terminal`)."""

DEFAULT_TOOLS = ("code_interpreter",)
"""The built-in tools `--tools` gives when no `--tool` names others."""


async def _agent_answer(
    agent: Any, question: str, out: TextIO, sink: Any = None, verbose: bool = False
) -> None:
    from parley.agents import (  # noqa: PLC0415
        RunEnded,
        RunError,
        TextDelta,
        ToolCallEnded,
        ToolResult,
    )

    async for event in agent.stream(question):
        if sink is not None:
            await sink.take(event)
        if isinstance(event, TextDelta):
            out.write(visible(event.text, keep=LINES))
            out.flush()
        elif isinstance(event, ToolCallEnded):
            _show_call(event.call.name, event.call.input)
        elif isinstance(event, ToolResult):
            _show_result(event.result.name, event.result.text)
        elif isinstance(event, RunError):
            print(visible(f"parley: {event.message}", keep="\n"), file=sys.stderr)
        elif isinstance(event, RunEnded) and verbose:
            out.write("\n")
            print(describe_usage(event.usage), file=sys.stderr)
    out.write("\n")
    out.flush()
    if sink is not None:
        await sink.finish()  # heard to its end before the next question


def _agent(model: object, args: argparse.Namespace, voice: Any = None) -> Any:
    from parley.agents import Agent  # noqa: PLC0415
    from parley.tools import Toolkit  # noqa: PLC0415

    tools = args.tools or args.tool_names
    names = (args.tool_names or list(DEFAULT_TOOLS)) if tools else []
    middleware = []
    if voice is not None:
        from parley.agents.speech import TTSMiddleware  # noqa: PLC0415

        middleware.append(TTSMiddleware(voice))
    return Agent(
        "parley",
        model,  # type: ignore[arg-type]
        system_prompt=args.system,
        tools=Toolkit(names),  # the model's own tool policy (the local one: one tool round)
        max_iters=4,
        middleware=middleware,
    )


def _speech(args: argparse.Namespace) -> tuple[Any, Any]:
    """The voice and where its audio goes, when `--speak`, `--speak-to` or `--tts` ask."""
    if not (args.speak or args.speak_to or args.tts):
        return None, None
    from pathlib import Path  # noqa: PLC0415

    from parley.agents.speech import AudioSink, find_player  # noqa: PLC0415
    from parley.tts.spec import DEFAULT_TTS_SPEC, tts_model_from_spec  # noqa: PLC0415

    # The player is found before anything loads: a missing one is said at once.
    sink = AudioSink(path=Path(args.speak_to)) if args.speak_to else AudioSink(player=find_player())
    spec = args.tts or DEFAULT_TTS_SPEC
    with progress(f"Loading the voice {spec}"):
        try:
            voice = tts_model_from_spec(spec, realtime=True)  # heard while it is written
        except ConfigurationError:
            voice = tts_model_from_spec(spec, realtime=False)
    return voice, sink


def _chosen_model(given: str | None) -> str:
    """The spec `parley chat` runs: `--model`, else `PARLEY_MODEL`, else the one the user has.

    A model chosen for the user is said on standard error, with how to choose another (and,
    for the tiny embedded one, how to pull a better one).
    """
    import os  # noqa: PLC0415

    from parley.providers.auto import choose_model  # noqa: PLC0415

    choice = choose_model(given or os.environ.get("PARLEY_MODEL") or None)
    if choice.source != "setting":
        print(f"parley: {choice.describe()}", file=sys.stderr)
    return choice.spec


def chat(args: argparse.Namespace) -> int:
    """`parley chat`: one question, or a conversation on standard input; `--url` asks a service."""
    if args.url:
        return remote_chat(args)
    if args.agent or args.thread or args.api_key:
        raise ConfigurationError("--agent, --thread and --api-key go with --url")
    voice, sink = _speech(args)
    spec = _chosen_model(args.model)
    model = _load(spec)
    agent = _agent(model, args, voice) if args.tools or args.tool_names or voice else None
    history = [Msg.system(args.system)] if args.system else []
    questions = [" ".join(args.question)] if args.question else None

    async def run() -> None:
        for question in questions or _prompts():
            if agent is not None:
                await _agent_answer(agent, question, sys.stdout, sink, args.verbose)
                continue
            history.append(Msg.user(question))
            history.append(await _answer(model, history, sys.stdout, args.verbose))

    asyncio.run(run())
    return 0


REMOTE_TIMEOUT = 300.0
"""Seconds `parley chat --url` waits for each read (a tool may run long between frames)."""


def remote_chat(args: argparse.Namespace) -> int:
    """`parley chat --url`: the same conversation, with an agent of a running service."""
    from parley.client import AgentClient  # noqa: PLC0415

    if args.tools or args.tool_names:
        raise ConfigurationError("--tools and --tool choose a local agent's tools; drop --url")
    if args.speak or args.speak_to or args.tts:
        raise ConfigurationError("--speak, --speak-to and --tts speak a local agent; drop --url")
    questions = [" ".join(args.question)] if args.question else None
    with AgentClient(
        args.url, agent=args.agent, api_key=args.api_key, timeout=REMOTE_TIMEOUT
    ) as client:
        conversation = _Conversation(client, args.model, args.thread)
        try:
            for question in questions or _prompts():
                conversation.ask(question, sys.stdout)
                if args.verbose and conversation.run_id:
                    usage = client.run(conversation.run_id).usage
                    print(describe_usage(usage), file=sys.stderr)
        finally:
            if conversation.thread_id:
                print(visible(f"thread: {conversation.thread_id}"), file=sys.stderr)
    return 0


class _Conversation:
    """One thread on a service: streams each answer, and answers approval requests."""

    def __init__(self, client: AgentClient, model: str | None, thread_id: str | None) -> None:
        self.client = client
        self.model = model
        self.thread_id = thread_id
        self.run_id: str | None = None
        """The last run's id (a question's, or its approval's after a pause)."""

    def ask(self, question: str, out: TextIO) -> None:
        stream = self.client.stream(question, model=self.model, thread_id=self.thread_id)
        interrupt = self._show(stream, out)
        while interrupt is not None:
            verdict = _approval(interrupt)
            interrupt = self._show(self.client.approve_stream(interrupt.interrupt_id, verdict), out)
        out.write("\n")
        out.flush()

    def _show(self, stream: Stream[StreamItem], out: TextIO) -> Interrupt | None:
        """Print a stream; return the interrupt it ends with, if any."""
        from parley.client import Interrupt  # noqa: PLC0415

        interrupt = None
        streamed = False  # text printed since the last message, which that message repeats
        try:
            with stream:
                for item in stream:
                    if isinstance(item, Interrupt):
                        interrupt = item
                    else:
                        streamed = _show_item(item, streamed, out)
        finally:
            self.thread_id = stream.thread_id or self.thread_id
            self.run_id = stream.run_id or self.run_id
        return interrupt


def _show_item(item: str | ServiceChatMessage, streamed: bool, out: TextIO) -> bool:
    """Print a token, or a message not streamed already; whether text is pending a message."""
    if isinstance(item, str):
        out.write(visible(item, keep=LINES))
        out.flush()
        return True
    if item.type == "ai" and item.content and not streamed:
        out.write(visible(item.content, keep=LINES))  # a model that did not stream its text
        out.flush()
    _show_tools(item)
    return False


def _show_tools(message: ServiceChatMessage) -> None:
    for call in message.tool_calls:
        _show_call(call["name"], call["args"])
    if message.type == "tool":
        name = message.custom_data.get("parley", {}).get("tool_name") or "tool"
        _show_result(name, message.content)


def _show_call(name: str, arguments: Any) -> None:
    """A tool call on one line: its name and its arguments as JSON."""
    shown = json.dumps(arguments, ensure_ascii=False)
    print(visible(f"[{name}] {shown}"), file=sys.stderr)


def _show_result(name: str, text: str) -> None:
    """A tool's result, its first 500 characters (its lines kept)."""
    print(visible(f"[{name} result] {text[:500]}", keep=LINES), file=sys.stderr)


def _approval(interrupt: Interrupt) -> bool | dict[str, bool]:
    """Ask on the terminal whether each call may run; deny when no one can answer."""
    names = ", ".join(call["name"] for call in interrupt.calls)
    if not sys.stdin.isatty():
        print(visible(f"parley: denied {names} (approving needs a terminal)"), file=sys.stderr)
        return False
    verdicts = {call["id"]: _confirm(call["name"], call["args"]) for call in interrupt.calls}
    if len(verdicts) == 1 or None in verdicts:
        return all(verdicts.values())
    return {call_id: verdict for call_id, verdict in verdicts.items() if call_id is not None}


def _confirm(name: str, arguments: dict[str, Any]) -> bool:
    # One line the model wrote all of but the question: nothing in it may move the cursor.
    shown = json.dumps(arguments, ensure_ascii=False)
    print(visible(f"Run {name} {shown}? [y/N] "), end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in {"y", "yes"}


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
    """`parley models`: the model cards of every provider (or of one).

    With `--embeddings`, the embedding models' cards, with the vector sizes they give; with
    `--tts`, the text-to-speech models' cards, whether they take text in pieces, and their
    voices.
    """
    from parley.models.credentials import CredentialFactory  # noqa: PLC0415
    from parley.providers.local._cli import ACTIONS, run_action  # noqa: PLC0415

    if args.provider in ACTIONS:
        return run_action(args)
    if args.names or args.token or args.revision or args.list:
        raise ConfigurationError(
            "--token, --revision and --list go with `parley models pull`; "
            "`parley models [PROVIDER]` takes one provider's name"
        )
    rows: list[tuple[str, ...]] = []
    failed = False
    for kind in CredentialFactory.known_types():
        if args.provider and kind != args.provider:
            continue
        try:
            rows += _card_rows(kind, CredentialFactory.credential_class(kind), args)
        except Exception as exc:  # a provider's broken cards hide no other's
            print(f"parley models: {kind}: cannot list its cards: {exc}", file=sys.stderr)
            failed = True
    last = "dimensions" if args.embeddings else "voices" if args.tts else "input"
    header = ("provider", "model", "label", "status", "realtime" if args.tts else "context", last)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    return 1 if failed else 0


def _card_rows(kind: str, credential_cls: Any, args: argparse.Namespace) -> list[tuple[str, ...]]:
    """`parley models`' rows for one provider: chat, embedding or speech cards."""
    if args.tts:
        return [
            (kind, c.name, c.label, c.status, "yes" if c.realtime else "", ", ".join(c.voices))
            for c in credential_cls.list_tts_models()
        ]
    if args.embeddings:
        return [
            (kind, c.name, c.label, c.status, str(c.context_size or ""), _sizes(c))
            for c in credential_cls.list_embedding_models()
        ]
    status = _local_status if kind == "local" else lambda card: card.status
    return [
        (kind, c.name, c.label, status(c), str(c.context_size or ""), ", ".join(c.input_types))
        for c in credential_cls.list_models()
    ]


def _local_status(card: Any) -> str:
    """A local model's status: embedded, pulled or not pulled (`parley models pull`)."""
    from parley.providers.local._cli import local_status  # noqa: PLC0415

    return local_status(card.name) or str(card.status)


def _sizes(card: Any) -> str:
    """The vector sizes an embedding card allows: its list, its range, or its default."""
    choices = card.dimension_choices()
    if choices:
        return ", ".join(map(str, choices))
    field = card.parameter_schema.get("properties", {}).get("dimensions", {})
    low, high = field.get("minimum"), field.get("maximum")
    if low is not None and high is not None:
        return f"{low}-{high}"
    default = card.default_dimensions()
    return str(default) if default else ""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parley", description=__doc__)
    parser.add_argument("--version", action="version", version=f"parley {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    chat_cmd = commands.add_parser("chat", help="chat with a model")
    chat_cmd.add_argument("question", nargs="*", help="ask once; without it, read stdin")
    chat_cmd.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="after each answer, print its tokens, time and cost (on stderr)",
    )
    chat_cmd.add_argument(
        "--model",
        help="provider[:model], e.g. openai:gpt-4o-mini (default: $PARLEY_MODEL, else a "
        "provider key's, an Ollama server's, the largest pulled, else the embedded local "
        "model); with --url, a model name the service lists",
    )
    chat_cmd.add_argument(
        "--system", default="You are a helpful assistant.", help="the system prompt"
    )
    chat_cmd.add_argument(
        "--tools", action="store_true", help="give the model built-in tools (code_interpreter)"
    )
    chat_cmd.add_argument(
        "--tool",
        action="append",
        dest="tool_names",
        metavar="NAME",
        help="a registered tool to give the model (repeatable; implies --tools)",
    )
    chat_cmd.add_argument(
        "--speak",
        action="store_true",
        help="speak the answer while it is written, through an audio player on PATH (aplay, "
        "paplay, pw-play, ffplay, afplay) or $PARLEY_AUDIO_PLAYER (a command playing WAV "
        "from stdin)",
    )
    chat_cmd.add_argument(
        "--speak-to", metavar="FILE.wav", help="write the answer's speech to this WAV file"
    )
    chat_cmd.add_argument(
        "--tts", metavar="SPEC", help="the voice, provider[:model] (default local; implies --speak)"
    )
    chat_cmd.add_argument("--url", help="ask an agent of a running parley service at this URL")
    chat_cmd.add_argument(
        "--agent", metavar="KEY", help="with --url: the agent (default: the service's default)"
    )
    chat_cmd.add_argument(
        "--thread", metavar="ID", help="with --url: continue this thread (its id is printed)"
    )
    chat_cmd.add_argument(
        "--api-key",
        metavar="KEY",
        help="with --url: the API key (default: $PARLEY_API_KEY, then $AUTH_SECRET)",
    )
    chat_cmd.set_defaults(run=chat)
    models_cmd = commands.add_parser(
        "models",
        help="list model cards; pull local models from the Hugging Face Hub",
        description="`parley models [PROVIDER]` lists model cards. `parley models pull NAME` "
        "downloads a local model (a preset, or OWNER/REPO/FILE.gguf) from the Hugging Face "
        "Hub; `parley models pull --list` lists the presets; `parley models rm NAME` deletes "
        "a pulled model.",
    )
    models_cmd.add_argument(
        "provider", nargs="?", help="only this provider; or the action `pull` or `rm`"
    )
    models_cmd.add_argument("names", nargs="*", metavar="NAME", help="with pull/rm: the model")
    models_cmd.add_argument(
        "--token", help="with pull: a Hugging Face token for gated models (default $HF_TOKEN)"
    )
    models_cmd.add_argument(
        "--revision", help="with pull: a branch, tag or commit of the repository (default main)"
    )
    models_cmd.add_argument(
        "--list", action="store_true", help="with pull: list the presets and which are pulled"
    )
    kinds = models_cmd.add_mutually_exclusive_group()
    kinds.add_argument(
        "--embeddings", action="store_true", help="the embedding models instead of chat models"
    )
    kinds.add_argument(
        "--tts", action="store_true", help="the text-to-speech models, with their voices"
    )
    models_cmd.set_defaults(run=models)
    _add_service_commands(commands)
    from parley.evals.cli import add_commands as add_evals  # noqa: PLC0415
    from parley.rag.cli import add_commands  # noqa: PLC0415  (imports nothing heavy)
    from parley.tts.cli import add_commands as add_speech  # noqa: PLC0415

    add_commands(commands)
    add_speech(commands)
    add_evals(commands)
    return parser


def _add_service_commands(commands: Any) -> None:
    """`serve` and `keys`, when the service extra is installed (they say so otherwise)."""
    try:
        from parley.service.cli import add_commands  # noqa: PLC0415
    except ImportError as exc:
        missing = str(exc)
        for name in ("serve", "worker", "keys"):
            stub = commands.add_parser(name, help=f"needs the service extra ({missing})")
            stub.set_defaults(run=lambda _args: _missing_service(missing))
        return
    add_commands(commands)


def _missing_service(reason: str) -> int:
    print(f"parley: {reason}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `parley` command."""
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ParleyError as exc:  # its message may quote a server or a model
        print(visible(f"parley: {exc}", keep="\n"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
