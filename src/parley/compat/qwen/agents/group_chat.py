"""Qwen-Agent's `GroupChat`: several agents (and people) talking in one chat.

    bot = GroupChat(agents={"background": "...", "agents": [
        {"name": "Board", "description": "...", "instructions": "...",
         "selected_tools": ["code_interpreter"]},
        {"name": "Ann", "description": "plays white", "instructions": "..."},
        {"name": "Tom", "description": "plays black", "is_human": True},
    ]}, llm={"model": "qwen-max"})
    for response in bot.run([Message("user", "<1,1>", name="Tom")]):
        ...

`agents` is a list of named agents, or a config: each config member becomes an `Assistant`
(its system message from the background, its name, description and instructions, and the
other members' names; `knowledge_files` its files, `selected_tools` its tools) or, with
`is_human`, a `UserAgent`.

Each run lets up to `max_round` speakers talk in turn (`need_batch_response=False`: one),
yielding the turns so far. Who speaks: the next agent named in `mentioned_agents_name`, or
mentioned as `@name` in the last message (in order); else by `agent_selection_method`:
`auto` (a `GroupChatAutoRouter` host reads the chat and names the speaker, or `[STOP]`, which
ends the chat), `round_robin` (the member after the last speaker), `random`, or `manual`
(typed at `input()`, three tries, then round robin). A `UserAgent`'s turn
(`PENDING_USER_INPUT`) ends the run: the chat waits for the person.

Each speaker sees the chat from its seat: its own turns as assistant messages, the others'
turns as user messages of `name: text` lines, and a last line `its name: ` for it to go on.

Deliberate difference from Qwen-Agent 0.0.34: system messages are not shown to the members
as chat lines (Qwen-Agent shows the group chat's own system message as a `system: ...`
line); each member has its own.
"""

# The Chinese prompts use Chinese punctuation (full-width commas and colons).
# ruff: noqa: RUF001

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent, FunctionListEntry
from parley.compat.qwen.agents.assistant import Assistant
from parley.compat.qwen.agents.group_chat_auto_router import STOP, GroupChatAutoRouter
from parley.compat.qwen.agents.user_agent import PENDING_USER_INPUT, UserAgent
from parley.compat.qwen.multi_agent_hub import MultiAgentHub
from parley.compat.qwen.schema import ASSISTANT, FUNCTION, SYSTEM, USER, Message
from parley.compat.qwen.utils.utils import has_chinese_chars
from parley.errors import ConfigurationError
from parley.models.base import ChatModel

__all__ = ["GroupChat", "mentioned_names"]

logger = logging.getLogger("parley.compat.qwen")

_METHODS = ("manual", "round_robin", "random", "auto")

_MEMBER = {
    "en": (
        "You are in a group chat.{background}\n\nYou are {name}.{description}\n\n"
        "{instructions}\n\nThe other members are {others}; to speak to one, write @ and "
        "their name.\n\nSay only what you say, without your name in front.\n\n"
        "The others' turns are shown as lines of\nname: what they said"
    ),
    "zh": (
        "你在一个群聊中。{background}\n\n你是{name}。{description}\n\n{instructions}\n\n"
        "群里的其他成员有：{others}；想和谁说话，就写 @ 加上他的名字。\n\n"
        "发言时只写内容，不要在前面写自己的名字。\n\n其他成员的发言显示为\n名字: 发言内容"
    ),
}
_BACKGROUND = {"en": " The chat's setting: {}", "zh": "群聊背景：{}"}
_ABOUT = {"en": " About you: {}", "zh": "你的简介：{}"}


def mentioned_names(text: str, names: Sequence[str]) -> list[str]:
    """The names `@`-mentioned in `text`, in order, each once (a name right after an `@`).

    Qwen-Agent's rule, not `parley.agents.multi.selection.mentioned` (the first mention
    only, a whole word): every mention queues a turn, and a name may run straight into the
    text after it, as Chinese names do (`@小塘一起去吧`).
    """
    found: list[str] = []
    for piece in text.split("@")[1:]:
        name = next((n for n in names if piece.startswith(n)), None)
        if name is not None and name not in found:
            found.append(name)
    return found


class GroupChat(Agent, MultiAgentHub):
    """Agents taking turns in one chat (see the module docs).

    Args:
        agents: Named agents, or a config `{"background": ..., "agents": [...]}`.
        agent_selection_method: `auto` (needs `llm`), `round_robin`, `random` or `manual`.
        function_list: The host's tools (`auto`).
        llm: The host's model, and the model of agents made from a config.
        **kwargs: `Agent`'s arguments for the chat itself (`name`, `description`, ...).

    Raises:
        ConfigurationError: An unknown selection method, `auto` without `llm`, members
            without names or with one name twice.
    """

    def __init__(
        self,
        agents: Sequence[Agent] | Mapping[str, Any],
        agent_selection_method: str = "auto",
        function_list: Sequence[FunctionListEntry] | None = None,
        llm: ChatModel | Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if agent_selection_method not in _METHODS:
            raise ConfigurationError(
                f"GroupChat: agent_selection_method must be one of {', '.join(_METHODS)}, "
                f"got {agent_selection_method!r}"
            )
        if agent_selection_method == "auto" and llm is None:
            raise ConfigurationError(
                "GroupChat: the auto selection method needs `llm` for its host; give one, or "
                "choose round_robin"
            )
        super().__init__(**kwargs)
        self.agent_selection_method = agent_selection_method
        # Members made from a config are the chat's to close; members passed in, the caller's.
        self._owns_members = isinstance(agents, Mapping)
        if isinstance(agents, Mapping):
            self._agents = self._init_agents_from_config(agents, llm=llm)
        else:
            self._agents = list(agents)
        self.agents  # noqa: B018  (checks the members now, not at the first turn)
        if agent_selection_method == "auto":
            self.host = GroupChatAutoRouter(
                function_list=function_list, llm=llm, agents=self.agents, name="host"
            )

    async def close(self) -> None:
        """Close what the chat opened: its host, and the members it made from a config."""
        await super().close()
        if self.agent_selection_method == "auto":
            await self.host.close()
        if self._owns_members:
            for member in self.agents:
                await member.close()

    def _run(
        self,
        messages: list[Message],
        lang: str = "en",
        max_round: int = 3,
        need_batch_response: bool = True,
        mentioned_agents_name: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[QwenMessages]:
        """Let speakers take turns: `max_round` of them, or one (`need_batch_response=False`)."""
        messages = copy.deepcopy(messages)
        for message in messages:
            if message.role == ASSISTANT and not message.name:
                raise ConfigurationError(
                    "GroupChat: every assistant message needs the name of the member who said it"
                )
            message.name = message.name or message.role
        if need_batch_response:
            return self._gen_batch_response(
                messages, lang, max_round, mentioned_agents_name, **kwargs
            )
        return self._gen_one_response(messages, lang, mentioned_agents_name, **kwargs)

    def _gen_batch_response(
        self,
        messages: list[Message],
        lang: str = "en",
        max_round: int = 3,
        mentioned_agents_name: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[list[Message]]:
        """Up to `max_round` turns, stopping at `[STOP]` or at a person's turn."""
        queue = mentioned_agents_name if mentioned_agents_name is not None else []
        messages = list(messages)
        response: list[Message] = []
        for _ in range(max_round):
            last = messages[-1].get_text_content() if messages else ""
            for name in mentioned_names(last, self.agent_names):
                if name not in queue:
                    queue.append(name)
            turn: list[Message] = []
            for turn in self._gen_one_response(messages, lang, queue, **kwargs):
                yield response + turn
            if not turn:
                break  # the host ended the chat
            if queue and turn[-1].name == queue[0]:
                queue.pop(0)
            response += turn
            if turn[-1].content == PENDING_USER_INPUT:
                break  # a person's turn: wait for them
            messages += turn
        yield response

    def _gen_one_response(
        self,
        messages: list[Message],
        lang: str = "en",
        mentioned_agents_name: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[list[Message]]:
        """One speaker's turn (nothing when the host ends the chat)."""
        speaker = self._select_agent(messages, mentioned_agents_name, lang)
        if speaker is None:
            yield []
            return
        logger.info("GroupChat: %s speaks", speaker.name)
        seat = self._manage_messages(messages, str(speaker.name))
        for turn in speaker.run(seat, **kwargs):
            yield [m if isinstance(m, Message) else Message.model_validate(m) for m in turn]

    def _select_agent(
        self,
        messages: list[Message],
        mentioned_agents_name: list[str] | None = None,
        lang: str = "en",
    ) -> Agent | None:
        """The next speaker; None when the host says the chat is over."""
        members = {str(agent.name): agent for agent in self.agents}
        if mentioned_agents_name:
            return members[mentioned_agents_name[0]]
        method = self.agent_selection_method
        if method == "auto":
            *_, answer = self.host.run(messages, lang=lang)
            last = answer[-1] if answer else Message(ASSISTANT, "")
            said = last if isinstance(last, Message) else Message.model_validate(last)
            named = said.get_text_content().strip()
            if named == STOP:
                return None
            if named in members:
                return members[named]
            logger.warning("GroupChat: the host named no member (%r); going in turn", named)
        elif method == "random":
            return random.choice(self.agents)  # not for security
        elif method == "manual":
            for _ in range(3):
                typed = input("Please enter the selected agent name: ")
                if typed in members:
                    return members[typed]
                logger.warning("Please select one agent from %s", list(members))
        return self._next_in_turn(messages)

    def _next_in_turn(self, messages: list[Message]) -> Agent:
        names = self.agent_names
        last = messages[-1].name if messages else None
        index = names.index(last) if last in names else -1
        return self.agents[(index + 1) % len(names)]

    def _manage_messages(self, messages: list[Message], name: str) -> list[Message]:
        """The chat as `name` sees it (see the module docs)."""
        seat: list[Message] = []
        heard: list[str] = []
        last_speaker: str | None = None
        for message in messages:
            if message.role == SYSTEM:
                continue
            if message.role == FUNCTION:
                if last_speaker == name:  # the results of its own calls
                    seat.append(copy.deepcopy(message))
                continue
            last_speaker = message.name
            if message.name != name:
                text = message.get_text_content().strip()
                if text:
                    heard.append(f"{message.name}: {text}")
                continue
            if heard:
                seat.append(Message(USER, "\n".join(heard)))
                heard = []
            if message.function_call is None and (not seat or seat[-1].name == name):
                seat.append(Message(USER, f"{name}: "))  # a user turn before each of its own
            own = copy.deepcopy(message)
            own.role = ASSISTANT
            seat.append(own)
        if heard:
            seat.append(Message(USER, "\n".join(heard)))
        if seat and seat[-1].role == USER:
            seat[-1].content = f"{seat[-1].get_text_content()}\n{name}: "
        else:
            seat.append(Message(USER, f"{name}: "))
        return seat

    def _init_agents_from_config(
        self, cfgs: Mapping[str, Any], llm: ChatModel | Mapping[str, Any] | None = None
    ) -> list[Agent]:
        """The members a config describes: `Assistant`s, and `UserAgent`s for people."""
        members = cfgs.get("agents")
        if not isinstance(members, list) or not members:
            raise ConfigurationError("GroupChat: a config needs a non-empty 'agents' list")
        lang = "zh" if has_chinese_chars(cfgs) else "en"
        built: list[Agent] = []
        for cfg in members:
            name = str(cfg.get("name", "")).strip()
            if cfg.get("is_human"):
                built.append(UserAgent(name=name, description=cfg.get("description")))
                continue
            others = ", ".join(str(m.get("name")) for m in members if m.get("name") != name)
            built.append(
                Assistant(
                    llm=llm,
                    system_message=_member_prompt(cfgs, cfg, others, lang),
                    files=cfg.get("knowledge_files") or None,
                    function_list=cfg.get("selected_tools") or None,
                    name=name,
                    description=cfg.get("description"),
                )
            )
        return built


def _member_prompt(cfgs: Mapping[str, Any], cfg: Mapping[str, Any], others: str, lang: str) -> str:
    """A config member's system message, in the config's language."""
    description = str(cfg.get("description", "")).strip()
    instructions = str(cfg.get("instructions", "")).strip()
    # Instructions at least as long as the description say all it says.
    about = _ABOUT[lang].format(description) if len(description) > len(instructions) else ""
    background = cfgs.get("background")
    return _MEMBER[lang].format(
        background=_BACKGROUND[lang].format(background) if background else "",
        name=str(cfg.get("name", "")).strip(),
        description=about,
        instructions=instructions,
        others=others,
    )
