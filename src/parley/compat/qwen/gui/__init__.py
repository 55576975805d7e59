"""Qwen-Agent's `WebUI`, importable so that examples written for Qwen-Agent load unchanged.

About twenty of Qwen-Agent's examples import `WebUI` at the top and call it only from
`app_gui()`; their `test()` and `app_tui()` run here as they are. Qwen-Agent's web page is a
Gradio app; parley has no Gradio page. Its web page is the service's: `parley serve` (the
agent defined in a project file, a chat page at `/`, the HTTP API beside it). So
`WebUI(bot).run()` raises `WebUIUnavailableError`, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parley.compat.qwen.agent import Agent
from parley.errors import UserError

__all__ = ["WebUI", "WebUIUnavailableError"]

_NO_GRADIO_PAGE = (
    "parley has no Gradio web UI (Qwen-Agent's WebUI); parley's web page is the service's: "
    "run `parley serve` with the agent in a project file (a chat page at /, the HTTP API "
    "beside it), or run the agent in a terminal with `bot.run(messages)`"
)


class WebUIUnavailableError(UserError, RuntimeError):
    """`WebUI.run()`: parley's web page is `parley serve`, not a Gradio app."""


class WebUI:
    """Qwen-Agent's Gradio chat page: constructed as there, `run()` refuses (module docs).

    Args:
        agent: The agent, or several agents (the page lets the user pick one, or `@`-mention
            it).
        chatbot_config: The page's settings (`user.name`, `prompt.suggestions`, ...).
    """

    def __init__(
        self, agent: Agent | Sequence[Agent], chatbot_config: Mapping[str, Any] | None = None
    ) -> None:
        self.agent_list = [agent] if isinstance(agent, Agent) else list(agent)
        self.chatbot_config = dict(chatbot_config or {})

    def run(
        self,
        messages: Sequence[Any] | None = None,
        share: bool = False,
        server_name: str | None = None,
        server_port: int | None = None,
        concurrency_limit: int = 10,
        enable_mention: bool = False,
        **kwargs: Any,
    ) -> None:
        """Would serve the page; raises instead.

        Raises:
            WebUIUnavailableError: Always: parley's web page is `parley serve`.
        """
        raise WebUIUnavailableError(_NO_GRADIO_PAGE)
