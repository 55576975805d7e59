"""Qwen-Agent's `DialogueSimulator`: a simulated user and an assistant talk for some rounds.

Each round the user speaks (when the conversation is empty or ends with the assistant),
then the assistant answers (when it ends with the user), up to `max_round` rounds; the
simulated user saying `STOP` ends it. The user agent (a `HumanSimulator`) sees the
conversation with the roles swapped (it is the "assistant" of its own model), function
calls and results left out. The response is every turn taken, user and assistant.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent
from parley.compat.qwen.agents.human_simulator import STOP, HumanSimulator
from parley.compat.qwen.schema import ASSISTANT, FUNCTION, USER, Message
from parley.errors import ConfigurationError

__all__ = ["DialogueSimulator"]


class DialogueSimulator(Agent):
    """A dialogue between a simulated user and an assistant (see the module docs).

    Args:
        user_agent: The simulated user.
        assistant_agent: The assistant under test.
        max_round: The most rounds.
        **kwargs: `Agent`'s arguments for the simulator itself.
    """

    def __init__(
        self,
        user_agent: HumanSimulator,
        assistant_agent: Agent,
        max_round: int = 5,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.max_round = max_round
        self.user_agent = user_agent
        self.assistant_agent = assistant_agent

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """Rounds of user and assistant turns; yields every turn so far."""
        messages = copy.deepcopy(messages)
        response: list[Message] = []
        for _ in range(self.max_round):
            if not messages or messages[-1].role == ASSISTANT:
                turn = self._user_turn(messages, kwargs)
                if turn is None:
                    break
                messages.append(turn)
                response.append(turn)
                yield response
            if messages and messages[-1].role == USER:
                *_, said = self.assistant_agent.run(messages, **kwargs)
                answer = [m if isinstance(m, Message) else Message.model_validate(m) for m in said]
                messages += answer
                response += answer
                yield response
        yield response

    def _user_turn(self, messages: list[Message], kwargs: dict[str, Any]) -> Message | None:
        """The simulated user's next message; None when it says STOP."""
        *_, said = self.user_agent.run(_swap_roles(messages), **kwargs)
        swapped = _swap_roles(
            [m if isinstance(m, Message) else Message.model_validate(m) for m in said]
        )
        if len(swapped) != 1 or swapped[0].role != USER:
            raise ConfigurationError(
                f"DialogueSimulator: the user agent must answer with one message, got {said!r}"
            )
        return None if STOP in swapped[0].get_text_content() else swapped[0]


def _swap_roles(messages: list[Message]) -> list[Message]:
    """User and assistant swapped; function results, calls and empty turns left out."""
    swapped = []
    for message in copy.deepcopy(messages):
        if message.role == FUNCTION:
            continue
        if message.role == USER:
            message.role = ASSISTANT
        elif message.role == ASSISTANT:
            message.role = USER
            message.function_call = None
        if message.content:
            swapped.append(message)
    return swapped
