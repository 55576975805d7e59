"""A parsed document into chunks of about `chunk_size` tokens that overlap by `chunk_overlap`.

The document's paragraphs and tables (`doc_parser`'s sections) are packed in order into
chunks of at most `chunk_size` tokens. A paragraph longer than that is cut at its sentences,
and a sentence longer than that at its words (at its characters for text without spaces); a
long table is cut at its rows, each piece under the table's first row. A new chunk starts
with the end of the previous one, at most `chunk_overlap` tokens of it, in whole sentences,
so that a passage cut between two chunks is whole in one of them. A heading starts a new
chunk (without overlap) once the current one is half full.

Chunks keep where they came from: the PDF page, the slide or the sheet they are on (a chunk
never spans two, so that a citation names the right page, at the cost of a short chunk at
the end of a page), and the nearest heading above them (Markdown and Word `#` headings, a
slide's title). A slide's title and a sheet's name are also written at the top of its first
chunk, so that keyword and vector search see them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from parley.errors import UserError
from parley.rag.types import Chunk
from parley.tools.builtin._doc_formats import Section
from parley.tools.builtin.doc_parser import ParsedDocument

__all__ = ["Chunker", "document_title"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+)$")
_FULL_STOPS = "\u3002\uff01\uff1f\uff1b"  # the ideographic full stop, fullwidth ! ? ;
_SENTENCE_END = re.compile(rf"(?<=[.!?;])\s+|(?<=[{_FULL_STOPS}])")
_WORD_GAP = re.compile(r"(?<=\s)(?=\S)")
_CJK_STOP = re.compile(f"[{_FULL_STOPS}]")
_JOIN = "\n\n"


@dataclass(frozen=True, slots=True)
class _Unit:
    """A paragraph, sentence or table rows, with its place in the document."""

    text: str
    tokens: int
    section: Section
    heading: str | None
    joiner: str = _JOIN
    """What goes between the unit before it and this one: a paragraph break, or the space
    between two sentences of one paragraph."""


def document_title(document: ParsedDocument) -> str:
    """An HTML page's title, else the first top heading, else the file's name."""
    first = document.sections[0] if document.sections else None
    if first is not None and first.title and first.kind == "document":
        return first.title
    for section in document.sections[:3]:
        for item in section.items[:20]:
            match = _HEADING.match(item.text)
            if item.kind == "text" and match and len(match.group(1)) == 1:
                return match.group(2).strip()
    if "://" in document.source:
        return PurePosixPath(unquote(urlsplit(document.source).path)).name or document.source
    return document.name


class Chunker:
    """Cuts parsed documents into chunks (see the module docstring).

    Args:
        chunk_size: The most tokens a chunk holds (a single word longer than that is cut).
        chunk_overlap: The most tokens of a chunk's end repeated at the next one's start.
        count: Counts a text's tokens (`parley.agents.budget.text_token_counter()`).
    """

    def __init__(self, chunk_size: int, chunk_overlap: int, count: Callable[[str], int]) -> None:
        if chunk_size < 16:
            raise UserError(f"chunk_size must be at least 16 tokens, got {chunk_size}")
        if not 0 <= chunk_overlap < chunk_size // 2:
            raise UserError(
                f"chunk_overlap must be at least 0 and less than half of chunk_size "
                f"({chunk_size}), got {chunk_overlap}"
            )
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.count = count

    def chunks(self, document: ParsedDocument, doc_id: str, source: str) -> list[Chunk]:
        """The document's chunks, in order, numbered from 0."""
        title = document_title(document)
        pieces: list[Chunk] = []
        for units in self._runs(document):
            for text, first in self._pack(units):
                section = first.section
                pieces.append(
                    Chunk(
                        doc_id=doc_id,
                        index=len(pieces),
                        text=text,
                        tokens=self.count(text),
                        source=source,
                        title=title,
                        page=section.number if section.kind == "page" else None,
                        slide=section.number if section.kind == "slide" else None,
                        sheet=section.title if section.kind == "sheet" else None,
                        heading=first.heading,
                    )
                )
        return pieces

    # -- units ---------------------------------------------------------------------------------

    def _runs(self, document: ParsedDocument) -> Iterator[list[_Unit]]:
        """The units of each section (page, slide, sheet, or the whole document), in order."""
        heading: str | None = None
        for section in document.sections:
            run: list[_Unit] = []
            if section.kind in ("slide", "sheet"):
                heading = section.title
                if section.title:
                    run.append(self._unit(f"# {section.title}", section, heading))
            for item in section.items:
                match = _HEADING.match(item.text) if item.kind == "text" else None
                if match:
                    heading = match.group(2).strip()
                if item.kind == "table":
                    run.extend(self._table(item.text, section, heading))
                else:
                    run.extend(self._paragraph(item.text, section, heading))
            if run:
                yield run

    def _unit(self, text: str, section: Section, heading: str | None, joiner: str = _JOIN) -> _Unit:
        return _Unit(text, self.count(text), section, heading, joiner)

    def _continued(self, units: list[_Unit], joiner: str) -> list[_Unit]:
        """Units cut from one paragraph: all but the first are glued back with `joiner`."""
        return [u if i == 0 else _Unit(*_fields(u), joiner) for i, u in enumerate(units)]

    def _paragraph(self, text: str, section: Section, heading: str | None) -> list[_Unit]:
        unit = self._unit(text, section, heading)
        if unit.tokens <= self.chunk_size:
            return [unit]
        units: list[_Unit] = []
        for sentence in _SENTENCE_END.split(text):
            if sentence.strip():
                cut = self._sentence(sentence.strip(), section, heading)
                units.extend(_glued(units, cut))
        return units

    def _sentence(self, text: str, section: Section, heading: str | None) -> list[_Unit]:
        unit = self._unit(text, section, heading)
        if unit.tokens <= self.chunk_size:
            return [unit]
        words = _WORD_GAP.split(text)
        joiner = " "
        if len(words) == 1:
            words, joiner = list(text), ""  # no spaces (CJK, a long token): cut anywhere
        pieces = [self._unit(piece, section, heading) for piece in self._fill(words)]
        return self._continued(pieces, joiner)

    def _fill(self, words: list[str]) -> Iterator[str]:
        """Words joined into pieces of at most `chunk_size` tokens (a lone word cut to fit)."""
        piece = ""
        for word in words:
            if piece and self.count(piece + word) > self.chunk_size:
                yield piece.strip()
                piece = ""
            piece += word
            while self.count(piece) > self.chunk_size:  # one word alone is too long
                cut = max(1, len(piece) * self.chunk_size // (2 * self.count(piece)))
                yield piece[:cut]
                piece = piece[cut:]
        if piece.strip():
            yield piece.strip()

    def _table(self, text: str, section: Section, heading: str | None) -> list[_Unit]:
        unit = self._unit(text, section, heading)
        if unit.tokens <= self.chunk_size:
            return [unit]
        header, *rows = text.split("\n")
        budget = self.chunk_size - self.count(header) - 1
        if budget < self.chunk_size // 2:  # a huge first row: cut the table as text
            return self._sentence(text, section, heading)
        units: list[_Unit] = []
        block: list[str] = []
        used = 0
        for row in rows:
            tokens = self.count(row) + 1
            if block and used + tokens > budget:
                units.append(self._unit("\n".join([header, *block]), section, heading))
                block, used = [], 0
            if tokens > budget:
                units.extend(self._sentence(row, section, heading))
                continue
            block.append(row)
            used += tokens
        if block:
            units.append(self._unit("\n".join([header, *block]), section, heading))
        return units

    # -- packing ------------------------------------------------------------------------------

    def _pack(self, units: list[_Unit]) -> Iterator[tuple[str, _Unit]]:
        """Units joined greedily into chunks; each new chunk starts with the last's tail."""
        current: list[_Unit] = []
        used = 0
        fresh = False  # whether `current` holds more than the carried-over tail
        for unit in units:
            cost = unit.tokens + (1 if current else 0)
            if fresh and _HEADING.match(unit.text) and used >= self.chunk_size // 2:
                # A new section starts a new chunk, unless the chunk is still short.
                yield _text(current), current[0]
                current, used, cost = [], 0, unit.tokens
            elif fresh and used + cost > self.chunk_size:
                yield _text(current), current[0]
                current = self._tail(current, unit.tokens)
                used = sum(u.tokens + 1 for u in current)
                cost = unit.tokens + (1 if current else 0)
            current.append(unit)
            used += cost
            fresh = True
        if fresh:
            yield _text(current), current[0]

    def _tail(self, units: list[_Unit], incoming: int) -> list[_Unit]:
        """The end of a chunk to repeat: whole sentences, at most `chunk_overlap` tokens."""
        room = min(self.chunk_overlap, self.chunk_size - incoming - 1)
        tail: list[_Unit] = []
        for unit in reversed(units):
            if unit.tokens + 1 <= room:
                tail.insert(0, unit)
                room -= unit.tokens + 1
                continue
            sentences: list[str] = []
            for sentence in reversed(_SENTENCE_END.split(unit.text)):
                tokens = self.count(sentence.strip()) + 1
                if not sentence.strip() or tokens > room:
                    break
                sentences.insert(0, sentence.strip())
                room -= tokens
            if sentences:
                joiner = "" if _CJK_STOP.search(sentences[0]) else " "
                tail.insert(0, self._unit(joiner.join(sentences), unit.section, unit.heading))
            break
        return tail


def _fields(unit: _Unit) -> tuple[str, int, Section, str | None]:
    return unit.text, unit.tokens, unit.section, unit.heading


def _glued(before: list[_Unit], cut: list[_Unit]) -> list[_Unit]:
    """A sentence's units, the first glued to the sentence before it in the same paragraph."""
    if not before or not cut:
        return cut
    joiner = "" if _CJK_STOP.search(before[-1].text[-1:]) else " "
    return [_Unit(*_fields(cut[0]), joiner), *cut[1:]]


def _text(units: list[_Unit]) -> str:
    parts = [units[0].text]
    for unit in units[1:]:
        parts.extend((unit.joiner, unit.text))
    return "".join(parts)
