"""Qwen-Agent's `GroupChatAutoRouter`: the host that picks a group chat's next speaker.

Its system message lists the roles (`name: description`); each run shows the model the chat
so far as one user message, a line `name: text` per turn (a speaker's consecutive turns
joined), and the model answers with the next speaker's name, or `[STOP]` when the chat
should end. The prompt is in Chinese when the roles' descriptions are.
"""

# The Chinese prompts use Chinese punctuation (full-width commas and colons).
# ruff: noqa: RUF001

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent, FunctionListEntry
from parley.compat.qwen.schema import FUNCTION, SYSTEM, USER, Message
from parley.compat.qwen.utils.utils import has_chinese_chars
from parley.models.base import ChatModel

__all__ = ["STOP", "GroupChatAutoRouter"]

STOP = "[STOP]"
"""The host's answer when the chat should end."""

_PROMPT = {
    "en": """You host a role-play chat. These are the roles:
{agent_descs}

The chat so far is shown one turn per line, as
role name: what they said
and the latest lines matter most.

Choose who speaks next, one of [{agent_names}]. When the user has asked to stop, or the
topic has run its course, answer [STOP]. Answer with the role's name or [STOP] and nothing
else.""",
    "zh": """你主持一个角色扮演群聊，角色如下：
{agent_descs}

聊天记录每行一条，格式为
角色名: 发言内容
越靠后的发言越重要。

请选出下一位发言的角色，从 [{agent_names}] 中选。若用户要求结束，或话题已经可以结束，请回答 [STOP]。
只回答角色名或 [STOP]，不要写别的。""",
}

_EMPTY = {
    "en": "The chat has just begun: pick any role to speak first, not the real user.",
    "zh": "群聊刚开始，请任选一位角色先发言，不要选真实用户。",
}


class GroupChatAutoRouter(Agent):
    """Picks the next speaker of a group chat (see the module docs).

    Args:
        function_list: Tools (Qwen-Agent's signature; the host calls none).
        llm: The host's model.
        agents: The chat's members (names and descriptions).
        name: The host's name.
        description: What it does.
        **kwargs: `Agent`'s other arguments.
    """

    def __init__(
        self,
        function_list: Sequence[FunctionListEntry] | None = None,
        llm: ChatModel | Mapping[str, Any] | None = None,
        agents: Sequence[Agent] | None = None,
        name: str | None = None,
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        members = list(agents or [])
        roles = "\n".join(f"{agent.name}: {agent.description}" for agent in members)
        self.prompt_lang = "zh" if has_chinese_chars(roles) else "en"
        system = _PROMPT[self.prompt_lang].format(
            agent_descs=roles, agent_names=", ".join(str(agent.name) for agent in members)
        )
        super().__init__(function_list, llm, system, name, description, **kwargs)

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """Ask the model who speaks next (its answer: a name or `[STOP]`)."""
        lines: list[str] = []
        last_speaker = None
        for message in messages:
            if message.role in (SYSTEM, FUNCTION) or not message.content:
                continue
            speaker = message.name or message.role
            text = message.get_text_content().strip()
            if lines and speaker == last_speaker:
                lines[-1] += f"\n{text}"
            else:
                lines.append(f"{speaker}: {text}")
            last_speaker = speaker
        if not lines:
            lines.append(_EMPTY[self.prompt_lang])
        head = [copy.deepcopy(messages[0])] if messages and messages[0].role == SYSTEM else []
        return self._call_llm(messages=[*head, Message(USER, "\n".join(lines))])
