"""The context budget: before each model call, the oldest turns go so the prompt fits.

The prompt may take the model's `context_size` less a reserve for the answer (the model's
`max_tokens` parameter, else `DEFAULT_OUTPUT_RESERVE`) and less the tools' descriptions.
When the conversation takes more, whole turns go, oldest first (a turn is a user message and
everything up to the next one); then, inside the latest turn, the oldest tool rounds. What
always stays: system messages, the latest user message, and the latest model turn with its
tool results. An assistant message that calls tools and the tool messages answering it stay
or go together: a provider refuses a result without its call, or a call without its result.
The memory itself is never changed; only the copy sent to the model is trimmed.

That is the `trim` strategy. With `summarize` (`ContextBudget(..., strategy="summarize")`,
`Agent(..., context_strategy="summarize")`), the turns that would go are compressed instead,
as AgentScope does past a model's `context_size`: a model summarizes them, and the summary
(kept for the next calls, and extended when more turns go) takes their place, as a system
message after the system prompt. See `parley.agents.compress`.

Counting tokens, in order of preference:

1. the model's own tokenizer, when the model offers the hook `count_tokens(msgs) -> int`
   (see `CountsTokens`);
2. `tiktoken`'s `o200k_base` encoding (OpenAI's), when tiktoken can load it *without the
   network*: tiktoken downloads its BPE files on first use and caches them
   (`TIKTOKEN_CACHE_DIR`), and parley never starts that download from inside a run, where
   it could hang a reply on an offline machine. Run
   `python -c "import tiktoken; tiktoken.get_encoding('o200k_base')"` once with network
   access (or point `TIKTOKEN_CACHE_DIR` at a cache) to turn exact counts on;
3. an estimate (`estimate_tokens`): a token per 4 characters, the usual rule of thumb for
   English text with BPE tokenizers, and a token per Chinese, Japanese or Korean character
   (those tokenizers give about one each, often more).

`text_token_counter()` counts a plain text the same way (2 or 3), for code that sizes text
rather than messages (retrieval's chunks).

Every message also costs `MESSAGE_OVERHEAD` tokens (role and separators) and each media
block a flat `MEDIA_TOKENS`, a rough figure: providers price media by size.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, cast, get_args, runtime_checkable

from parley.agents._text import message_text
from parley.agents.compress import SUMMARY_TOKENS, Summarizer
from parley.errors import UserError
from parley.messages import Msg
from parley.models.tools import ToolSpec

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = [
    "DEFAULT_OUTPUT_RESERVE",
    "MEDIA_TOKENS",
    "MESSAGE_OVERHEAD",
    "TIKTOKEN_ENCODING",
    "ContextBudget",
    "ContextStrategy",
    "CountsTokens",
    "TextCounter",
    "TokenCounter",
    "estimate_text_tokens",
    "estimate_tokens",
    "message_text",
    "text_token_counter",
    "tiktoken_counter",
    "token_counter_for",
]

logger = logging.getLogger("parley.agents")

DEFAULT_OUTPUT_RESERVE = 1024
"""Tokens kept free for the answer when the model's parameters set no `max_tokens`."""

MESSAGE_OVERHEAD = 4
"""Tokens each message costs beyond its content (role markers, separators)."""

MEDIA_TOKENS = 1000
"""A flat guess at what one image, audio, video or file block costs."""

TIKTOKEN_ENCODING = "o200k_base"
"""The tiktoken encoding used when the model has no tokenizer of its own."""

ContextStrategy = Literal["trim", "summarize"]
"""What the context budget does with the turns that do not fit: drop them, or summarize them."""

TokenCounter = Callable[[Sequence[Msg]], int]
"""Counts the prompt tokens that messages take."""

TextCounter = Callable[[str], int]
"""Counts the tokens of a text."""

# CJK Unified Ideographs (+ extension A, compatibility), kana, Hangul syllables.
_WIDE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@runtime_checkable
class CountsTokens(Protocol):
    """The hook a chat model may offer to count tokens with its own tokenizer."""

    def count_tokens(self, msgs: Sequence[Msg]) -> int:
        """The prompt tokens `msgs` take, overhead included."""
        ...


def _media_blocks(msg: Msg) -> int:
    count = sum(b.type in ("image", "audio", "video", "file") for b in msg.content)
    for result in msg.tool_results:
        if not isinstance(result.output, str):
            count += sum(b.type != "text" for b in result.output)
    return count


def _counter(encode: Callable[[str], int]) -> TokenCounter:
    def count(msgs: Sequence[Msg]) -> int:
        return sum(
            encode(message_text(m)) + MESSAGE_OVERHEAD + MEDIA_TOKENS * _media_blocks(m)
            for m in msgs
        )

    return count


def estimate_text_tokens(text: str) -> int:
    """A text's tokens, estimated: one per CJK character, one per 4 other characters."""
    wide = len(_WIDE.findall(text))
    return wide + (len(text) - wide + 3) // 4


estimate_tokens: TokenCounter = _counter(estimate_text_tokens)
"""The estimate (`estimate_text_tokens`), plus the per-message and media costs."""


def _tiktoken_cache_file(name: str) -> Path:
    # Where tiktoken caches a downloaded encoding (tiktoken/load.py, `read_file_cached`): the
    # SHA-1 of the file's URL (tiktoken_ext/openai_public.py) in its cache folder.
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    folder = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    base = Path(folder) if folder else Path(tempfile.gettempdir()) / "data-gym-cache"
    return base / hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()


def _tiktoken_encoder(name: str) -> TextCounter | None:
    try:
        import tiktoken  # noqa: PLC0415  (loads a native extension: only when counting)
    except ImportError:
        return None
    if not _tiktoken_cache_file(name).is_file():
        logger.info("tiktoken's %s encoding is not cached here: estimating tokens", name)
        return None
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception as exc:  # a damaged cache, with no network to fetch it again
        logger.warning("tiktoken cannot load %s (%s): estimating tokens", name, exc)
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


@functools.cache
def tiktoken_counter(name: str = TIKTOKEN_ENCODING) -> TokenCounter | None:
    """A counter on a tiktoken encoding already on this machine, else None (no download)."""
    encoder = _tiktoken_encoder(name)
    return _counter(encoder) if encoder is not None else None


@functools.cache
def text_token_counter(name: str = TIKTOKEN_ENCODING) -> TextCounter:
    """Counts a text's tokens: the tiktoken encoding if on this machine, else the estimate."""
    return _tiktoken_encoder(name) or estimate_text_tokens


def token_counter_for(model: ChatModel | None) -> TokenCounter:
    """The best counter for `model`: its tokenizer, tiktoken, or the estimate."""
    # Looked up by name: a model class offers the hook without deriving from anything.
    hook = getattr(model, "count_tokens", None)
    if callable(hook):
        return cast("TokenCounter", hook)
    return tiktoken_counter() or estimate_tokens


def _units(msgs: Sequence[Msg]) -> list[list[Msg]]:
    """Messages grouped so that a tool-calling message and its results are one unit."""
    units: list[list[Msg]] = []
    for msg in msgs:
        if msg.role == "tool" and units and units[-1][0].tool_calls:
            units[-1].append(msg)
        else:
            units.append([msg])
    return units


def _turns(units: list[list[Msg]]) -> list[list[list[Msg]]]:
    """Units grouped into turns, each starting at a user message."""
    turns: list[list[list[Msg]]] = []
    for unit in units:
        if not turns or unit[0].role == "user":
            turns.append([])
        turns[-1].append(unit)
    return turns


class ContextBudget:
    """Trims prompts to a model's context window (see the module docstring).

    Args:
        model: The model the prompts are for; no `context_size` means no trimming.
        output_reserve: Tokens kept for the answer; default the model's `max_tokens`
            parameter, else `DEFAULT_OUTPUT_RESERVE`.
        counter: Counts tokens; default `token_counter_for(model)`.
        strategy: `trim` drops the turns that do not fit; `summarize` compresses them into
            a summary (`prepare` only; `fit` always trims).
        summary_model: Writes the summaries; default `model`.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        output_reserve: int | None = None,
        counter: TokenCounter | None = None,
        strategy: ContextStrategy = "trim",
        summary_model: ChatModel | None = None,
    ) -> None:
        if strategy not in get_args(ContextStrategy):
            raise UserError(f"unknown context strategy {strategy!r}; use 'trim' or 'summarize'")
        self.model = model
        self.output_reserve = output_reserve
        self._counter = counter
        self.strategy: ContextStrategy = strategy
        self.summary_model = summary_model
        self._summarizer: Summarizer | None = None
        # Counted once per message: a long run re-reads the same history every iteration.
        self._counts: dict[str, int] = {}

    def for_model(self, model: ChatModel) -> ContextBudget:
        """The same budget (reserve, counter, strategy) for another model's context window."""
        return ContextBudget(
            model,
            output_reserve=self.output_reserve,
            counter=self._counter,
            strategy=self.strategy,
            summary_model=self.summary_model,
        )

    @property
    def limit(self) -> int | None:
        """The tokens a prompt may take (tools included), or None when unbounded."""
        size = self.model.context_size
        if not size:
            return None
        reserve = self.output_reserve
        if reserve is None:
            reserve = self.model.parameters.max_tokens or DEFAULT_OUTPUT_RESERVE
        return max(size - reserve, 0)

    @property
    def counter(self) -> TokenCounter:
        """The token counter in use."""
        if self._counter is None:
            self._counter = token_counter_for(self.model)
        return self._counter

    def count(self, msg: Msg) -> int:
        """The tokens one message takes (cached by message id)."""
        found = self._counts.get(msg.id)
        if found is None:
            if len(self._counts) > 10_000:
                self._counts.clear()
            found = self._counts[msg.id] = self.counter([msg])
        return found

    def tools_tokens(self, tools: Sequence[ToolSpec]) -> int:
        """The tokens the tools' descriptions take."""
        if not tools:
            return 0
        described = json.dumps([t.model_dump(exclude_none=True) for t in tools])
        return self.counter([Msg.system(described)])

    def fit(self, msgs: Sequence[Msg], tools: Sequence[ToolSpec] = ()) -> list[Msg]:
        """The messages to send: all of them when they fit, else the oldest turns dropped."""
        limit = self.limit
        if limit is None:
            return list(msgs)
        room = limit - self.tools_tokens(tools)
        total = sum(self.count(m) for m in msgs)
        if total <= room:
            return list(msgs)
        dropped = self._drop(msgs, total - room)
        kept = [m for m in msgs if m.id not in dropped]
        logger.info("context budget: %d of %d messages dropped", len(dropped), len(msgs))
        return kept

    async def prepare(self, msgs: Sequence[Msg], tools: Sequence[ToolSpec] = ()) -> list[Msg]:
        """The messages to send, by the budget's strategy: trimmed, or old turns summarized.

        With `summarize`, room for the summary is made too (a quarter of the prompt's room, at
        most `SUMMARY_TOKENS`: the summarizing model's `max_tokens`), and the summary follows
        the system messages. A failed summary call trims instead.
        """
        limit = self.limit
        if self.strategy == "trim" or limit is None:
            return self.fit(msgs, tools)
        room = limit - self.tools_tokens(tools)
        total = sum(self.count(m) for m in msgs)
        if total <= room:
            return list(msgs)
        reserve = min(SUMMARY_TOKENS, max(room // 4, 1))
        dropped = self._drop(msgs, total - room + reserve)
        kept = [m for m in msgs if m.id not in dropped]
        summary = await self._summarize([m for m in msgs if m.id in dropped], reserve)
        if summary is None:
            return self.fit(msgs, tools)
        logger.info("context budget: %d of %d messages summarized", len(dropped), len(msgs))
        system = [m for m in kept if m.role == "system"]
        return [*system, summary, *(m for m in kept if m.role != "system")]

    async def _summarize(self, dropped: list[Msg], max_tokens: int) -> Msg | None:
        if self._summarizer is None:
            self._summarizer = Summarizer(self.summary_model or self.model)
        return await self._summarizer.summary(dropped, max_tokens)

    def _drop(self, msgs: Sequence[Msg], excess: int) -> set[str]:
        """The ids of the messages to drop to shed `excess` tokens (or all that may go)."""
        turns = _turns(_units([m for m in msgs if m.role != "system"]))
        # Whole earlier turns first (so the prompt still opens with a user message); then the
        # latest turn's middle: its user message (first unit) and latest model turn (last) stay.
        chunks = [[m for unit in turn for m in unit] for turn in turns[:-1]]
        if turns:
            latest = turns[-1]
            middle = latest[1:-1] if latest[0][0].role == "user" else latest[:-1]
            chunks += middle
        dropped: set[str] = set()
        for chunk in chunks:
            if excess <= 0:
                break
            dropped.update(m.id for m in chunk)
            excess -= sum(self.count(m) for m in chunk)
        if excess > 0:
            logger.warning("the prompt exceeds the context budget even after trimming")
        return dropped
