"""Keyword analysis shared by every store: the terms a chunk is indexed under and a query asks.

Words are runs of letters and digits, lower-cased by the engine's tokenizer (FTS5's
`unicode61`, PostgreSQL's `simple` configuration). Chinese, Japanese and Korean text has no
spaces between words, and a word tokenizer would index a whole sentence as one token; it is
indexed instead as overlapping pairs of characters (`自然语言` → `自然 然语 语言`), the
usual dictionary-free approach (Lucene's CJK analyzer), which matches any word of two or more
characters and needs no word list. A single character between non-CJK text stays itself.

Queries drop common words (English function words, Chinese particles, and the words of a
"summarize this document" request) so that BM25 ranks on what the question is about, and a
query of nothing but such words asks for no keywords (no keyword hit answers it).
"""

from __future__ import annotations

import re

__all__ = ["STOP_WORDS", "keyword_query", "keyword_terms", "keyword_text"]

# CJK Unified Ideographs (+ extension A, compatibility), Hiragana, Katakana, Hangul.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_]+|[{_CJK}]+")

_STOP_LIST = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves please tell explain describe summarize summarise summary document article
    paper file pdf
    的 了 吗 呢 啊 是 在 和 与 及 或 这 那 这个 那个 这篇 我 你 他 它 们 请 帮 帮我 一下
    什么 怎么 如何 为什么 哪些 哪个 总结 概括 介绍 讲讲 说说 讲了 描述 文档 文章 论文 文件
"""
STOP_WORDS = frozenset(_STOP_LIST.split())
"""Words a query is not ranked on."""


def _pairs(run: str) -> str:
    if len(run) == 1:
        return run
    return " ".join(run[i : i + 2] for i in range(len(run) - 1))


def keyword_text(text: str) -> str:
    """The text as the keyword index holds it: CJK runs turned into overlapping pairs."""
    return _CJK_RUN.sub(lambda m: f" {_pairs(m.group())} ", text)


def keyword_terms(text: str) -> list[str]:
    """The terms a chunk is indexed under, in order: `keyword_text`'s words, lower-cased.

    For engines that are handed terms rather than text to tokenize (PostgreSQL: its parser
    reads `3.14` or `example.com` as one token, where a query asks for `3` and `14`).
    """
    return _WORD.findall(keyword_text(text).lower())


def _query_words(query: str) -> list[str]:
    words: list[str] = []
    for match in _WORD.finditer(query.lower()):
        word = match.group()
        if _CJK_RUN.fullmatch(word):
            # Stop words of two or more characters are cut out of a CJK run, then what is
            # left is paired. A one-character stop word is dropped only when it stands alone:
            # cut out of a run it would break words (在 in 现在).
            for piece in _CJK_STOPS.split(word):
                if piece and piece not in STOP_WORDS:
                    words.extend(_pairs(piece).split())
        elif word not in STOP_WORDS:
            words.append(word)
    return words


_CJK_STOPS = re.compile(
    "|".join(sorted((w for w in STOP_WORDS if len(w) > 1 and _CJK_RUN.fullmatch(w)), key=len)[::-1])
)


def keyword_query(query: str) -> list[str]:
    """The distinct terms a query is ranked on (empty: it names nothing to search for)."""
    return list(dict.fromkeys(_query_words(query)))
