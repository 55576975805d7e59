"""Keyword analysis: words for English, overlapping character pairs for CJK, stop words."""

from __future__ import annotations

from parley.rag import keyword_query, keyword_text


def test_english_queries_keep_the_words_that_carry_meaning() -> None:
    assert keyword_query("What is the capital of France?") == ["capital", "france"]
    assert keyword_query("refund REFUND refunds") == ["refund", "refunds"]  # FTS5 stems


def test_cjk_text_is_indexed_as_overlapping_pairs() -> None:
    assert keyword_text("自然语言处理").split() == ["自然", "然语", "语言", "言处", "处理"]
    # Mixed text: the Latin words are left for the engine's word tokenizer.
    assert keyword_text("用 Python 处理数据").split() == ["用", "Python", "处理", "理数", "数据"]


def test_a_cjk_query_finds_a_word_inside_a_longer_run() -> None:
    # Without spaces a word tokenizer would index the whole run as one token; pairs match
    # the two-character word 语言 inside it.
    indexed = set(keyword_text("自然语言处理是人工智能的分支").split())
    assert set(keyword_query("语言")) <= indexed


def test_summary_requests_name_nothing_to_search_for() -> None:
    assert keyword_query("Please summarize this document") == []
    assert keyword_query("请总结一下这篇文档") == []
    assert keyword_query("这篇文章讲了什么") == []


def test_one_character_stop_words_inside_a_run_do_not_break_words() -> None:
    # 在 is a stop word alone, but 现在 (now) must survive as a term.
    assert "现在" in keyword_query("现在的天气")
