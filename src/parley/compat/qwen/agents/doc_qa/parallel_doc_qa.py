"""Qwen-Agent's `ParallelDocQA`: every chunk of the documents read in parallel, then a summary.

For the newest question, as Qwen-Agent's does:

1. the documents (the files of the user's messages, and the agent's `files`) are copied in by
   its `retrieval` tool (local files only from the working directory, downloads only from
   public addresses) and parsed, and cut into chunks of about 1000 tokens;
2. one model call per chunk, run in parallel, answers the question from that chunk alone, in
   JSON: `{"res": "ans", "content": "..."}`, or `{"res": "none", ...}` when the chunk does
   not answer it (asked again, at most 4 rounds, while no chunk answers);
3. the question and the chunks' answers are searched for in the documents (`retrieval`,
   keyword search, 300-token passages, 4500 tokens at most);
4. one model call answers from those passages, streamed as the response.

Differences from Qwen-Agent 0.0.34: the search uses the question and the answers as they are
(Qwen-Agent first asks the model for keywords); the prompts are parley's own words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import json5

from parley.agents.budget import text_token_counter
from parley.compat.qwen._rag import files_of, without_files
from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agents.assistant import (
    Assistant,
    format_records,
    last_user_text,
    with_knowledge,
)
from parley.compat.qwen.schema import SYSTEM, USER, Message
from parley.compat.qwen.tools._documents import parse_copy
from parley.compat.qwen.tools.retrieval import Retrieval
from parley.errors import ToolExecutionError

__all__ = ["NO_RESPONSE", "ParallelDocQA"]

DEFAULT_NAME = "Simple Parallel DocQA With RAG Sum Agents"
DEFAULT_DESC = "Reads the documents in parallel, retrieves what the answers point to, and answers."
NO_RESPONSE = "<None>"
PARALLEL_CHUNK_SIZE = 1000
MAX_RAG_TOKEN_SIZE = 4500
RAG_CHUNK_SIZE = 300
MAX_NO_RESPONSE_RETRY = 4
_MAX_WORKERS = 8

_MEMBER_SYSTEM = {
    "en": (
        "You answer questions from one excerpt of a document. Judge first whether the excerpt "
        "answers the question; never make an answer up. If it does, answer from the excerpt "
        "alone, quoting it where you can, briefly, in the excerpt's language. Reply in JSON "
        'only: {{"res": "ans", "content": "<your answer>"}} when the excerpt answers, '
        '{{"res": "none", "content": "{none}"}} when it does not.'
    ),
    "zh": (
        "你根据文档的一个片段回答问题。先判断片段能否回答问题，不要编造答案。能回答时，只依据片段、"  # noqa: RUF001
        '尽量引用原文、简洁地用片段的语言作答。只用JSON回复：能回答时 {{"res": "ans", "content": '  # noqa: RUF001
        '"<你的答案>"}}，不能回答时 {{"res": "none", "content": "{none}"}}。'  # noqa: RUF001
    ),
}
_MEMBER_USER = {
    "en": "# Document excerpt:\n{chunk}\n\n# Question:\n{question}\n\nYour JSON reply:",
    "zh": "# 文档片段：\n{chunk}\n\n# 问题：\n{question}\n\n你的JSON回复：",  # noqa: RUF001
}
_SUMMARY = {
    "en": (
        "Answer the user's question from the reference passages in the knowledge base; say so "
        "when they do not hold the answer."
    ),
    "zh": "请根据知识库中的参考资料回答用户的问题；资料中没有答案时请如实说明。",  # noqa: RUF001
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


class ParallelDocQA(Assistant):
    """Reads every chunk in parallel, then answers from a retrieval (see the module docs)."""

    default_name = DEFAULT_NAME
    default_description = DEFAULT_DESC
    builtin_tools = (
        {
            "name": "retrieval",
            "max_ref_token": MAX_RAG_TOKEN_SIZE,
            "parser_page_size": RAG_CHUNK_SIZE,
            "rag_searchers": ["keyword_search"],
        },
    )

    @property
    def retrieval(self) -> Retrieval:
        """The `retrieval` tool the documents are copied in and searched by."""
        tool = self.function_map["retrieval"]
        assert isinstance(tool, Retrieval)
        return tool

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """Read the chunks in parallel, retrieve by their answers, answer from that.

        Raises:
            ToolExecutionError: No document in the messages or `files`, or one that cannot
                be copied in or read.
        """
        question = last_user_text(messages)
        files = [*self.files, *files_of(messages)]
        if not files:
            raise ToolExecutionError(
                "ParallelDocQA answers from documents: give the user message a file item "
                "(ContentItem(file=...)) or the agent files=",
                tool_name="retrieval",
            )
        chunks = self._chunks(files)
        answers = self._member_answers(chunks, question, lang)
        query = f"{question}\n\n{answers}" if answers else question
        records = self.retrieval.call({"query": query, "files": files})
        knowledge = format_records(records, lang)
        summary = [Message(SYSTEM, _SUMMARY.get(lang, _SUMMARY["en"]))]
        if messages and messages[0].role == SYSTEM:
            summary = [messages[0]]
            messages = messages[1:]
        prepared = with_knowledge([*summary, *without_files(messages)], knowledge, lang)
        return self._call_llm(prepared)

    def _chunks(self, files: Sequence[str]) -> list[str]:
        tool = self.retrieval
        count = text_token_counter()
        chunks: list[str] = []
        for copy in tool.copy_files(files):
            document = parse_copy(copy, tool.work_dir)
            current: list[str] = []
            used = 0
            for item in (i for s in document.sections for i in s.items):
                tokens = count(item.text)
                if current and used + tokens > PARALLEL_CHUNK_SIZE:
                    chunks.append("\n\n".join(current))
                    current, used = [], 0
                current.append(item.text)
                used += tokens
            if current:
                chunks.append("\n\n".join(current))
        return chunks

    def _member_answers(self, chunks: Sequence[str], question: str, lang: str) -> str:
        for _ in range(MAX_NO_RESPONSE_RETRY):
            with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(chunks) or 1)) as pool:
                replies = list(pool.map(lambda c: self._ask_member(c, question, lang), chunks))
            found = [answer for reply in replies if (answer := _answer_of(reply))]
            if found:
                return "\n\n".join(found)
        return ""

    def _ask_member(self, chunk: str, question: str, lang: str) -> str:
        system = _MEMBER_SYSTEM.get(lang, _MEMBER_SYSTEM["en"]).format(none=NO_RESPONSE)
        user = _MEMBER_USER.get(lang, _MEMBER_USER["en"]).format(chunk=chunk, question=question)
        reply = self._call_llm([Message(SYSTEM, system), Message(USER, user)], stream=False)
        last = reply[-1] if reply else None
        content = last.content if isinstance(last, Message) else (last or {}).get("content")
        return content if isinstance(content, str) else ""


def _answer_of(reply: str) -> str:
    """A chunk's answer from its reply, or "" when it says the chunk does not answer."""
    text = _FENCE.sub("", reply.strip())
    try:
        parsed = json5.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "res" in parsed:
        if parsed["res"] == "ans" and isinstance(parsed.get("content"), str):
            return str(parsed["content"]).strip()
        return ""
    if NO_RESPONSE in text or '"res": "none"' in text:
        return ""
    return text
