"""Qwen-Agent's `HumanSimulator`: a model playing the user, to test an assistant with.

The model, told to act as a human user, answers with a JSON list of four candidate
questions; the simulator picks one at random (`seed`, default 42, makes the pick
repeatable) and answers with it. A reply that is not such a list, or `["<|STOP|>"]`, gives
`STOP`: the simulated user is done.

As in Qwen-Agent, its instructions apply only when a `system_message` is given (they go
before it); roles are the simulator's own: the assistant under test speaks as `user` to it.
With no user turn yet, a user message asking for the first request opens the game, after
the system message (Qwen-Agent puts it before the system message).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent, FunctionListEntry
from parley.compat.qwen.schema import SYSTEM, USER, Message
from parley.models.base import ChatModel

__all__ = ["DEFAULT_HUMAN_SIMULATOR_PROMPT", "STOP", "HumanSimulator"]

STOP = "<|STOP|>"
"""The simulated user's way of ending the dialogue."""

DEFAULT_HUMAN_SIMULATOR_PROMPT = f"""Let's play a game: you act as the human user, and the
one you talk with acts as the AI assistant.

- Ask and request what a real person would.
- Keep to the given context and to the conversation so far.
- Answer with a JSON list of four possible next questions and nothing else.
- Make the four differ in difficulty, purpose and wording.
- When the conversation can end, answer ["{STOP}"] alone."""

_BEGIN = "Play a human user now and make your first request.\n\nBegin!"


class HumanSimulator(Agent):
    """A model acting as the user (see the module docs).

    Args:
        function_list: Tools.
        llm: The model playing the user.
        system_message: What the user is about (the game's rules go before it); None: no
            system message.
        name: The agent's name.
        description: What it does.
        **kwargs: `Agent`'s other arguments.
    """

    def __init__(
        self,
        function_list: Sequence[FunctionListEntry] | None = None,
        llm: ChatModel | Mapping[str, Any] | None = None,
        system_message: str | None = None,
        name: str | None = None,
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        if system_message:
            system_message = f"{DEFAULT_HUMAN_SIMULATOR_PROMPT}\n\n{system_message}"
        super().__init__(function_list, llm, system_message, name, description, **kwargs)

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """One question, picked from the model's four."""
        head = 1 if messages and messages[0].role == SYSTEM else 0
        if len(messages) == head or messages[head].role != USER:
            # The model (the "user") needs a user turn to answer first: the game's start.
            # After the system message (Qwen-Agent puts it before, which models reject).
            messages = [*messages[:head], Message(USER, _BEGIN), *messages[head:]]
        *_, reply = self._call_llm(messages=messages)
        last = reply[-1]
        message = last if isinstance(last, Message) else Message.model_validate(last)
        message.content = _pick(message.get_text_content(), kwargs.get("seed", 42))
        yield [*reply[:-1], message]


def _pick(text: str, seed: Any) -> str:
    """One of the listed questions, by `seed`; `STOP` when there is no usable list."""
    try:
        questions = json.loads(text)
    except json.JSONDecodeError:
        return STOP
    if not isinstance(questions, list) or not questions:
        return STOP
    chosen = random.Random(seed).choice(questions)  # a repeatable pick
    return chosen if isinstance(chosen, str) and chosen else STOP
