"""Tool calls in the model's own format: the GGUF's template renders, a grammar constrains.

A template-native job (`NativeCall`) runs in the engine's worker thread:

1. the GGUF's chat template (or the one given) renders the messages and the tools;
2. with a forced call (`tool_choice` a name, or `required`), the format's opening marker is
   appended to the prompt and the call's body is generated under its grammar;
3. with `auto`, the reply is generated freely and streamed as text until a call opens (the
   format's marker, or a reply that starts with `{` in the bare-JSON formats); the
   generation then stops, and goes on from the text before the marker plus the marker,
   under the call's grammar.

A single call streams as it is written: its name once the grammar has written it (first),
then its arguments piece by piece. Phi-4's list of calls arrives whole; Hermes' parallel
calls come one after another (after each, the model may open another).

Why not a lazy grammar: llama.cpp has triggered ("lazy") grammars, and llama-cpp-python
0.3.36 binds the sampler (`LlamaSampler.add_grammar_lazy_patterns`), but its `Llama`
completion API builds its own sampler chain and takes only a plain grammar. Stopping at the
marker and continuing under the grammar is the same constraint from the marker on; the
continuation's prompt is the evaluated text plus the marker, which llama-cpp-python's prefix
cache does not evaluate again (for a marker that is one special token, as Qwen's
`<tool_call>` is, the very tokens evaluated are reused).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from parley.messages import new_call_id
from parley.models.accumulator import Delta, MetaDelta, TextDelta, ToolCallDelta
from parley.models.tools import ToolSpec
from parley.providers.local._tool_formats import (
    CallSyntax,
    ParsedCall,
    parse_body,
    render_prompt,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from llama_cpp.llama import Llama

__all__ = ["NativeCall", "generate_native"]

_SAMPLING = {
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "stop",
}
"""The options that `Llama.create_completion` takes (the job's also hold chat-only ones)."""


@dataclass
class NativeCall:
    """A generation whose tools are rendered and parsed in the model's own format."""

    syntax: CallSyntax
    messages: list[dict[str, Any]]
    tools: Sequence[ToolSpec]
    """The tools shown to the model (none when `tool_choice` is `none`)."""
    grammar: str | None
    """The GBNF of a call's body (None: no call may be made)."""
    forced: bool
    parallel: bool = False
    """Whether more than one call may be made (Hermes writes them one after another)."""
    template: str | None = None
    """A jinja chat template to use instead of the GGUF's."""


class _Proxy:
    """What `_LlamaProxy` (in `_engine`) offers this module: the `Llama`, capped and counted."""

    _llama: Llama
    _max_tokens: int
    sampled: int

    def create_completion(self, prompt: str | list[int], **kwargs: Any) -> Any: ...


def _render(llama: Llama, call: NativeCall) -> str:
    template = call.template or llama.metadata.get("tokenizer.chat_template")
    if not template:
        from parley.errors import ConfigurationError  # noqa: PLC0415

        raise ConfigurationError(
            "the GGUF file has no chat template (tokenizer.chat_template) to render tools "
            "with: give one (chat_template=...) or use tool_format='chatml-function-calling'"
        )
    return render_prompt(
        template,
        call.messages,
        call.tools,
        bos_token=_token_text(llama, llama.token_bos()),
        eos_token=_token_text(llama, llama.token_eos()),
    )


def _token_text(llama: Llama, token: int) -> str:
    return llama._model.token_get_text(token) if token != -1 else ""


def _tokens(llama: Llama, text: str) -> list[int]:
    # The template writes the special tokens (and the BOS where the model has one) itself.
    return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))


class _Watch:
    """Free text, held back where a call may be opening; finds where one opens."""

    def __init__(self, syntax: CallSyntax) -> None:
        self.syntax = syntax
        self.text = ""
        self.sent = 0
        self.opened: int | None = None
        self.marker = ""

    def feed(self, piece: str) -> str:
        """Take a piece of generated text; the text now safe to stream (none once a call opens)."""
        self.text += piece
        if self.sent == 0 and self.syntax.opens_with_brace:
            stripped = self.text.lstrip()
            if not stripped:
                return ""  # blank so far: it may still open with a brace
            if stripped.startswith("{"):
                self.opened = len(self.text) - len(stripped)
                return ""
        for marker in self.syntax.triggers:
            found = self.text.find(marker, max(0, self.sent - len(marker)))
            if found >= 0:
                self.opened, self.marker = found, marker
                return self._send(found)
        return self._send(len(self.text) - self._partial_marker())

    def rest(self) -> str:
        """What was held back, once the generation ended without a call."""
        return self._send(len(self.text))

    def _partial_marker(self) -> int:
        longest = 0
        for marker in self.syntax.triggers:
            for size in range(min(len(marker) - 1, len(self.text)), longest, -1):
                if self.text.endswith(marker[:size]):
                    longest = size
                    break
        return longest

    def _send(self, end: int) -> str:
        end = max(end, self.sent)
        out, self.sent = self.text[self.sent : end], end
        return out


class _TokenTrigger:
    """Stops a generation right after a marker that is one (special) token of the vocabulary.

    Such tokens come out of llama-cpp-python's text as nothing, so they are watched as ids.
    """

    def __init__(self, llama: Llama, syntax: CallSyntax, prompt_size: int) -> None:
        self.ids: dict[int, str] = {}
        for marker in syntax.triggers:
            tokens = _tokens(llama, marker)
            if len(tokens) == 1:
                self.ids[tokens[0]] = marker
        self.prompt_size = prompt_size
        self.seen: list[int] | None = None
        self.marker = ""

    def __call__(self, ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        # llama-cpp-python passes the evaluated tokens: the marker is the last one the step
        # after it was sampled; what was sampled after it is dropped.
        if len(ids) > self.prompt_size and int(ids[-1]) in self.ids:
            self.seen = [int(t) for t in ids]
            self.marker = self.ids[int(ids[-1])]
            return True
        return False


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k in _SAMPLING and v is not None}


def generate_native(
    proxy: Any, call: NativeCall, options: Mapping[str, Any], stop: threading.Event
) -> Iterator[Delta]:
    """Run a template-native job (in the worker thread), yielding deltas, then a `MetaDelta`.

    `proxy` is the engine's `_LlamaProxy` (it stops, caps and counts completions).
    """
    proxy = cast("_Proxy", proxy)
    llama = proxy._llama
    prompt = _render(llama, call)
    sampling = _options(options)
    sampling["stop"] = [*(sampling.get("stop") or ()), _token_text(llama, llama.token_eos())]
    budget = int(options["max_tokens"])
    if call.forced and call.grammar is not None:
        continuation: list[int] | None = _tokens(llama, prompt + call.syntax.opening)
    else:
        free = _Free(proxy, call.syntax, sampling, stop, calls_only=False)
        continuation = yield from free.run(_tokens(llama, prompt), budget, watch=call.grammar)
        if continuation is None:
            if not stop.is_set():
                yield _meta(proxy, "length" if free.finish == "length" else "stop")
            return
    calls: list[ParsedCall] = []
    while continuation is not None and call.grammar is not None:
        # Single calls stream their arguments; Phi-4's lists arrive whole.
        streamer = None if call.syntax.in_list else _ArgumentStream(len(calls))
        body = yield from _constrained(
            proxy, call.grammar, continuation, sampling, budget, stop, streamer
        )
        if stop.is_set():
            return
        parsed = parse_body(call.syntax, body)
        if parsed is None:  # cut short by max_tokens
            if streamer is None or not streamer.started:
                if calls:  # the calls before it were whole
                    break
                yield TextDelta(call.syntax.opening + body)  # what was written stays text
            yield _meta(proxy, "length")
            return
        if streamer is None:
            yield from _call_deltas(parsed, len(calls))
        calls += parsed
        continuation = yield from _next_call(proxy, call, continuation, body, sampling, stop)
    yield _meta(proxy, "tool_calls")


def _next_call(
    proxy: _Proxy,
    call: NativeCall,
    tokens: list[int],
    body: str,
    sampling: dict[str, Any],
    stop: threading.Event,
) -> Generator[Delta, None, list[int] | None]:
    """Where a further call opens right after `body` (Hermes' parallel calls), else None.

    The model goes on after the call's closing marker; anything but another marker (its end
    of turn, or text) ends the turn's calls.
    """
    syntax = call.syntax
    if not (call.parallel and syntax.repeats):
        return None
    remaining = int(proxy._max_tokens) - max(proxy.sampled, 0)
    if remaining < 2:
        return None
    after = tokens + _tokens(proxy._llama, body.rstrip() + syntax.closing + "\n")
    free = _Free(proxy, syntax, sampling, stop, calls_only=True)
    return (yield from free.run(after, remaining, watch=""))


class _Free:
    """A free generation, streamed as text until a call opens (or, `calls_only`, not at all)."""

    def __init__(
        self,
        proxy: _Proxy,
        syntax: CallSyntax,
        sampling: dict[str, Any],
        stop: threading.Event,
        *,
        calls_only: bool,
    ) -> None:
        self.proxy = proxy
        self.syntax = syntax
        self.sampling = sampling
        self.stop = stop
        self.calls_only = calls_only
        self.finish: str | None = None

    def run(
        self, tokens: list[int], budget: int, *, watch: str | None
    ) -> Generator[Delta, None, list[int] | None]:
        """Generate after `tokens`; return the continuation's tokens where a call opened.

        `watch` is None when no call may open (the tools are barred): then it is all text.
        With `calls_only`, text is not streamed, and any text but blanks ends the run.
        """
        llama = self.proxy._llama
        trigger = _TokenTrigger(llama, self.syntax, len(tokens))
        watcher = _Watch(self.syntax) if watch is not None else None
        chunks = self.proxy.create_completion(
            tokens,
            stream=True,
            max_tokens=budget,
            stopping_criteria=_criteria(trigger) if trigger.ids and watcher else None,
            **self.sampling,
        )
        try:
            for chunk in chunks:
                if self.stop.is_set():
                    return None
                choice = chunk["choices"][0]
                piece = choice.get("text") or ""
                text = watcher.feed(piece) if watcher is not None else piece
                self.finish = choice.get("finish_reason") or self.finish
                if self.calls_only and text.strip():
                    return None
                if text and not self.calls_only:
                    yield TextDelta(text)
                if watcher is not None and watcher.opened is not None:
                    break
        finally:
            chunks.close()
        if self.stop.is_set():
            return None
        if trigger.seen is not None:
            return trigger.seen
        if watcher is not None and watcher.opened is not None:
            before = watcher.text[: watcher.opened]
            return tokens + _tokens(llama, before + watcher.marker)
        if watcher is not None and (rest := watcher.rest()) and not self.calls_only:
            yield TextDelta(rest)
        return None


def _criteria(trigger: _TokenTrigger) -> Any:
    from llama_cpp.llama import StoppingCriteriaList  # noqa: PLC0415

    return StoppingCriteriaList([trigger])


def _constrained(
    proxy: _Proxy,
    grammar: str,
    tokens: list[int],
    sampling: dict[str, Any],
    budget: int,
    stop: threading.Event,
    streamer: _ArgumentStream | None,
) -> Generator[Delta, None, str]:
    """A call's body, generated after `tokens` under `grammar`; its arguments streamed."""
    from llama_cpp.llama_grammar import LlamaGrammar  # noqa: PLC0415

    remaining = max(budget - max(proxy.sampled, 0), 1)
    options = {k: v for k, v in sampling.items() if k != "stop"}  # the grammar ends the call
    chunks = proxy.create_completion(
        tokens,
        stream=True,
        max_tokens=remaining,
        grammar=LlamaGrammar.from_string(grammar, verbose=False),
        **options,
    )
    parts: list[str] = []
    try:
        for chunk in chunks:
            if stop.is_set():
                break
            parts.append(chunk["choices"][0].get("text") or "")
            if streamer is not None:
                yield from streamer.feed("".join(parts))
    finally:
        chunks.close()
    body = "".join(parts)
    if streamer is not None and not stop.is_set():
        yield from streamer.end(body)
    return body


_HEAD = re.compile(
    r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*'
)
"""The start of a call's body, up to its arguments (the grammar writes the name first)."""
_TAIL = re.compile(r"\}?\s*$")


class _ArgumentStream:
    """A single call's body as it is generated: its name, then its arguments piece by piece.

    The body is `{"name": .., KEY: ARGUMENTS}`; the last `}` (and blanks) seen so far may be
    the body's own end, so it is held back until more comes.
    """

    def __init__(self, key: int) -> None:
        self.key = key
        self.start: int | None = None
        self.sent = 0

    def feed(self, body: str) -> Iterator[Delta]:
        """The deltas for what `body` (the text so far) adds."""
        if self.start is None:
            head = _HEAD.match(body)
            if head is None:
                return
            self.start = self.sent = head.end()
            # With an id, the call is announced now (without one it is held back to the end).
            yield ToolCallDelta(self.key, new_call_id(), json.loads(head.group(1)), "")
        match = _TAIL.search(body, self.sent)
        end = match.start() if match else len(body)
        if end > self.sent:
            yield ToolCallDelta(self.key, arguments=body[self.sent : end])
            self.sent = end

    def end(self, body: str) -> Iterator[Delta]:
        """What is left once the body is whole: the arguments' last characters."""
        if self.start is None:
            return
        whole = body.rstrip()
        end = len(whole) - 1 if whole.endswith("}") else len(whole)
        if end > self.sent:
            yield ToolCallDelta(self.key, arguments=body[self.sent : end])
            self.sent = end

    @property
    def started(self) -> bool:
        """Whether the call was announced (its name streamed)."""
        return self.start is not None


def _call_deltas(calls: Sequence[ParsedCall], first_key: int) -> Iterator[Delta]:
    for key, parsed in enumerate(calls, start=first_key):
        yield ToolCallDelta(key, None, parsed.name, parsed.arguments)


def _meta(proxy: Any, finish: str) -> MetaDelta:
    return MetaDelta(usage=proxy.usage(), finish_reason=cast("Any", finish))
