"""Qwen-Agent's `VirtualMemoryAgent`: the model fetches knowledge with `retrieval` when needed.

An `Assistant` whose model gets Qwen-Agent's `retrieval` tool (`query`, `files`) and sees
the user's files as `[file](name)` text. When it calls `retrieval`, the passages found go
into the system message (`# Knowledge Base`, as `Assistant` shows knowledge) and the tool's
result says so, as in Qwen-Agent; other tools' results come back as they are. At most
`MAX_LLM_CALL_PER_RUN` model calls per run.

The files the model names are copied in by `retrieval` under `BaseToolWithFileAccess`'s
rules: local files only from the working directory (or the tool's `file_roots`), downloads
only from public addresses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agents.assistant import Assistant, format_records, with_knowledge
from parley.compat.qwen.agents.fncall_agent import MAX_LLM_CALL_PER_RUN
from parley.compat.qwen.schema import (
    FUNCTION,
    USER,
    ContentItem,
    Message,
)

__all__ = ["VirtualMemoryAgent"]

DEFAULT_NAME = "Virtual Memory Agent"
DEFAULT_DESC = (
    "This agent can utilize tools to retrieve useful information from external resources or "
    "long conversation histories to aid in responding."
)
RETRIEVED = (
    "The relevant content has already been retrieved and updated in the previous system message."
)
_FILE = {"en": "[file]({name})", "zh": "[文件]({name})"}


class VirtualMemoryAgent(Assistant):
    """Answers with a `retrieval` tool whose finds fill the system message (see the module)."""

    retrieval_tool_name = "retrieval"
    builtin_tools = (retrieval_tool_name,)
    default_name = DEFAULT_NAME
    default_description = DEFAULT_DESC

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """Call the model with the tools until it answers; retrievals fill the system message."""
        original = messages
        functions = [tool.function for tool in self.function_map.values()]
        response: list[Message] = []
        for _ in range(MAX_LLM_CALL_PER_RUN):
            output: list[Message] = []
            for step in self._call_llm(_files_as_text(messages, lang) + response, functions):
                output = [m if isinstance(m, Message) else Message.model_validate(m) for m in step]
                if output:
                    yield response + output
            response += output
            if not response:
                return
            use_tool, name, arguments, _ = self._detect_tool(response[-1])
            if not use_tool or name is None:
                return
            observation = self._call_tool(name, arguments or "{}", messages=messages)
            if name == self.retrieval_tool_name:
                messages = with_knowledge(original, _knowledge(observation, lang), lang)
                observation = RETRIEVED
            response.append(Message(FUNCTION, observation, name=name))
            yield response


def _knowledge(observation: str | list[ContentItem], lang: str) -> str:
    """The retrieval's result (JSON records, else text) as knowledge sections."""
    if not isinstance(observation, str):
        return "\n".join(item.text for item in observation if item.text)
    try:
        records = json.loads(observation)
    except ValueError:
        return observation
    if isinstance(records, list) and all(isinstance(r, dict) for r in records):
        return format_records(records, lang)
    return observation


def _files_as_text(messages: list[Message], lang: str) -> list[Message]:
    """The user's file items as `[file](name)` text, which the model can read and name."""
    shown = _FILE.get(lang, _FILE["en"])
    result = []
    for message in messages:
        content = message.content
        if message.role != USER or isinstance(content, str) or not any(i.file for i in content):
            result.append(message)
            continue
        items = [ContentItem(text=shown.format(name=i.file)) if i.file else i for i in content]
        result.append(message.model_copy(update={"content": items}))
    return result
