"""Qwen-Agent's `DialogueRetrievalAgent`: a conversation too long for the model, searched.

The conversation before the newest message, and the newest message's long text, are written
to a text file (in `<workspace>/dialogues/`), and the question is answered by `Assistant`
retrieving from that file. A newest message longer than 1000 characters holds material and a
request: the model is asked first to pick the request out (from the message's first and last
1000 characters), and the request is the question; the rest goes into the file.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agents.assistant import Assistant, last_user_text
from parley.compat.qwen.schema import SYSTEM, USER, ContentItem, Message
from parley.errors import MessageError
from parley.tools.workspace import default_workspace

__all__ = ["MAX_TRUNCATED_QUERY_LENGTH", "DialogueRetrievalAgent"]

MAX_TRUNCATED_QUERY_LENGTH = 1000
_EXTRACT = {
    "en": (
        "<Given Text>\n{ref_doc}\n\nThe text above holds some material and one request from the "
        "user, usually at its start or its end. Write out that request exactly, and nothing "
        "else; do not answer it."
    ),
    "zh": "<给定文本>\n{ref_doc}\n\n上面的文本包含一段材料和用户的一个请求，请求通常在开头或结尾。"  # noqa: RUF001
    "请原样写出这个请求，不要回答它，也不要写别的内容。",  # noqa: RUF001
}


class DialogueRetrievalAgent(Assistant):
    """Answers over a long conversation by retrieving from it (see the module docs).

    Attributes:
        dialogue_dir: Where the conversations' files are written (default
            `<workspace>/dialogues`); the agent reads its own files from there.
    """

    dialogue_dir: Path | None = None

    def _run(
        self,
        messages: list[Message],
        lang: str = "en",
        session_id: str = "",
        **kwargs: Any,
    ) -> Iterator[QwenMessages]:
        """Write the conversation to a file, then answer the question from it.

        Raises:
            MessageError: The newest message is not the user's.
        """
        if not messages or messages[-1].role != USER:
            raise MessageError("DialogueRetrievalAgent answers a user's message: put it last")
        kept = [m for m in messages[:-1] if m.role == SYSTEM]
        lines = [f"{m.role}: {_text(m)}" for m in messages[:-1] if m.role != SYSTEM]
        text = last_user_text(messages[-1:])
        query = text
        if len(text) > MAX_TRUNCATED_QUERY_LENGTH:
            query = self._extract_query(text, lang)
            lines.append(text.replace(query, ""))
        path = self._save("\n".join(lines), session_id)
        content = [ContentItem(text=query), ContentItem(file=str(path))]
        last = messages[-1].content
        if not isinstance(last, str):
            content += [i for i in last if i.file or i.image or i.audio]
        return super()._run([*kept, Message(USER, content)], lang, **kwargs)

    def _extract_query(self, text: str, lang: str) -> str:
        limit = MAX_TRUNCATED_QUERY_LENGTH
        latent = text if len(text) <= 2 * limit else f"{text[:limit]} ... {text[-limit:]}"
        prompt = _EXTRACT.get(lang, _EXTRACT["en"]).format(ref_doc=latent)
        reply = self._call_llm([Message(USER, prompt)], stream=False)
        found = reply[-1].content if reply and isinstance(reply[-1], Message) else ""
        return found.strip() if isinstance(found, str) and found.strip() else text[:limit]

    def _save(self, content: str, session_id: str) -> Path:
        folder = (self.dialogue_dir or default_workspace().root / "dialogues").resolve()
        folder.mkdir(parents=True, exist_ok=True)
        # The agent reads back what it wrote: its folder joins those files may come from.
        roots = list(self.file_roots or [Path.cwd()])
        if folder not in roots:
            self.file_roots = [*roots, folder]
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d_%H%M%S_%f")
        path = folder / f"dialogue_history_{_safe(session_id)}_{stamp}.txt"
        path.write_text(content, encoding="utf-8")
        return path


def _text(message: Message) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(item.text or (f"[file]({item.file})" if item.file else "") for item in content)


def _safe(session_id: str) -> str:
    return "".join(c for c in session_id if c.isalnum() or c in "-_")[:64]
