"""Qwen-Agent's `GroupChatCreator`: talks with the user to design a group chat's roles.

Each model reply is written in tagged parts, and the response splits them into messages:

    <Background>: the chat's setting             -> Message(assistant, ..., name="background")
    <Config>: {"name": ..., "description": ...,   -> Message(assistant, ..., name="role_config")
               "instructions": ...}                  (one per role; text that is no JSON
                                                     object is dropped)
    <Answer>: what to say to the user             -> Message(assistant, ..., name=<agent's>)

Given back as history, those messages are joined into one assistant message in the same
tagged form, so the model sees its earlier designs. The roles' configs are what
`GroupChat(agents={"background": ..., "agents": [...]})` takes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import json5

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent, FunctionListEntry
from parley.compat.qwen.schema import ASSISTANT, Message
from parley.models.base import ChatModel

__all__ = ["ANSWER_TOKEN", "BACKGROUND_TOKEN", "CONFIG_TOKEN", "GroupChatCreator"]

BACKGROUND_TOKEN = "<Background>"
CONFIG_TOKEN = "<Config>"
ANSWER_TOKEN = "<Answer>"

_CONFIG_SHAPE = {
    "name": "... the role's name, a few words",
    "description": "... who the role is, one short sentence",
    "instructions": "... what the role does and how it speaks, addressed to it as 'you'",
}

ROLE_CREATE_SYSTEM = f"""You help the user set up a group chat. From the topic the user gives,
invent fitting roles who will talk with each other in the chat room, and ask the user what
they want of those roles.

Each role is a JSON object of this shape:
{json.dumps(_CONFIG_SHAPE, indent=2)}

Always answer in exactly this form and nothing else: the chat's setting first, then every
role's config, then your words to the user:
{BACKGROUND_TOKEN}: ... the chat's setting: who the roles are to each other, the story so far
{CONFIG_TOKEN}: ... the first role's config, as JSON; name and description never empty; keep
any instructions the user gave, word for word
{CONFIG_TOKEN}: ... the next role's config, likewise (three roles unless the user asks for
another number; no two with one name)
{ANSWER_TOKEN}: ... what you say to the user, asking what they want of the roles; never empty

When the setting or a role needs no change, you may leave out its part and write only
{ANSWER_TOKEN} and the configs that changed."""


class GroupChatCreator(Agent):
    """Designs a group chat's roles with the user (see the module docs).

    Args:
        function_list: Tools (Qwen-Agent's signature; the creator calls none).
        llm: The model.
        name: The agent's name (on its `<Answer>` message).
        description: What it does.
        **kwargs: `Agent`'s other arguments.
    """

    def __init__(
        self,
        function_list: Sequence[FunctionListEntry] | None = None,
        llm: ChatModel | Mapping[str, Any] | None = None,
        name: str | None = None,
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            function_list=function_list,
            llm=llm,
            system_message=ROLE_CREATE_SYSTEM,
            name=name,
            description=description,
            **kwargs,
        )

    def _run(  # type: ignore[override]
        self,
        messages: list[Message],
        agents: Sequence[Agent] | None = None,
        lang: str = "en",
        **kwargs: Any,
    ) -> Iterator[QwenMessages]:
        """One reply of the model, split into the setting, the configs and the answer."""
        for response in self._call_llm(messages=self._preprocess_messages(messages)):
            yield self._postprocess_messages(response)

    def _preprocess_messages(self, messages: list[Message]) -> list[Message]:
        """Earlier designs (background, configs, answer messages) joined into tagged text."""
        joined: list[Message] = []
        parts: list[str] = []
        for message in messages:
            if message.role != ASSISTANT:
                joined.append(message)
                continue
            text = message.get_text_content()
            if message.name == "background":
                parts.append(f"{BACKGROUND_TOKEN}: {text}")
            elif message.name == "role_config":
                parts.append(f"{CONFIG_TOKEN}: {text}")
            else:
                parts.append(f"{ANSWER_TOKEN}: {text}")
                joined.append(Message(ASSISTANT, "\n".join(parts)))
                parts = []
        return joined

    def _postprocess_messages(self, messages: QwenMessages) -> list[Message]:
        """The model's reply as background, config and answer messages."""
        if not messages:
            return []
        last = messages[-1]
        message = last if isinstance(last, Message) else Message.model_validate(last)
        background, configs, answer = self._extract_role_config_and_answer(
            message.get_text_content()
        )
        found = [Message(message.role, background, name="background")] if background else []
        found += [Message(message.role, config, name="role_config") for config in configs]
        found.append(Message(message.role, answer, name=message.name))
        return found

    def _extract_role_config_and_answer(self, text: str) -> tuple[str, list[str], str]:
        """`(background, role configs, answer)` of a tagged reply (untagged: all answer)."""
        background_tag, config_tag, answer_tag = (
            f"{BACKGROUND_TOKEN}: ",
            f"{CONFIG_TOKEN}: ",
            f"{ANSWER_TOKEN}: ",
        )
        answer_at = text.find(answer_tag)
        answer = text[answer_at + len(answer_tag) :] if answer_at > -1 else ""
        body = text[:answer_at] if answer_at > -1 else text
        background = ""
        background_at = body.find(background_tag)
        if background_at > -1:
            config_at = body.find(config_tag, background_at)
            end = config_at if config_at > -1 else len(body)
            background = body[background_at + len(background_tag) : end]
            body = body[:background_at] + body[end:]
        configs = []
        for part in body.split(config_tag)[1:]:
            piece = part.strip()
            try:
                if isinstance(json5.loads(piece), dict):
                    configs.append(piece)
            except ValueError:
                continue  # not a config: the model wrote something else there
        if not (background or configs or answer):
            answer = body
        return background, configs, answer
