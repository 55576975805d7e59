"""agent-service-toolkit's own client, as it behaves, against a live parley service.

The toolkit is not on PyPI (and its code is not ours to copy), so this module follows its
client's rules as that client applies them (src/client/client.py upstream):

- every request carries `Authorization: Bearer $AUTH_SECRET` when that variable is set;
- `GET /info` is validated into `ServiceMetadata` whose `models` are `AllModelEnum` values:
  one unknown name and the client refuses the whole answer;
- `invoke` posts `UserInput(...).model_dump()` (so `model` is always sent: the client's own
  default, `gpt-4o-mini` or `fake`) to `/{agent}/invoke` and validates a `ChatMessage`;
- `stream` posts `StreamInput` to `/{agent}/stream` and reads lines: a blank line is skipped;
  any other line is parsed; `data: [DONE]`, a line that is not `data: ...`, or a frame type
  other than `token`, `message` and `error` ends its reading; `error` raises (older
  versions) or becomes an `ai` message "Error: ..." (newer ones);
- `get_history` posts `ChatHistoryInput` to `/history` and validates `ChatHistory`;
- `acreate_feedback` posts `Feedback` to `/feedback`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from pydantic import BaseModel

from parley.agents import Agent
from parley.compat.service_toolkit import (
    AgentInfo,
    ChatHistory,
    ChatHistoryInput,
    ChatMessage,
    Feedback,
    StreamInput,
    UserInput,
)
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from tests.sample_tools import add
from tests.service._live import running

# AllModelEnum's values in the toolkit's schema/models.py, older and newer versions together
# (newer ones added deepseek-chat and ollama and moved groq's 70b to llama 3.3): a name the
# service sends must be known to both, which the test below checks with KNOWN_TO_ALL.
ToolkitModel = Literal[
    "deepseek-chat",
    "ollama",
    "groq-llama-3.3-70b",
    "gpt-4o-mini",
    "gpt-4o",
    "claude-3-haiku",
    "claude-3.5-haiku",
    "claude-3.5-sonnet",
    "gemini-1.5-flash",
    "groq-llama-3.1-8b",
    "groq-llama-3.1-70b",
    "groq-llama-guard-3-8b",
    "bedrock-3.5-haiku",
    "fake",
]


KNOWN_TO_ALL = {"gpt-4o-mini", "gpt-4o", "fake"}  # in every version of AllModelEnum


class StrictServiceMetadata(BaseModel):
    """`ServiceMetadata` typed as the toolkit types it."""

    agents: list[AgentInfo]
    models: list[ToolkitModel]
    default_agent: str
    default_model: ToolkitModel


class StopReadingError(Exception):
    """The toolkit's client would stop reading here."""


class ToolkitClient:
    """The toolkit client's rules, on httpx (see the module docstring)."""

    def __init__(self, base_url: str, secret: str | None) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        info = httpx.get(f"{base_url}/info", headers=self.headers, timeout=10)
        info.raise_for_status()
        self.info = StrictServiceMetadata.model_validate(info.json())
        self.agent = self.info.default_agent

    def invoke(self, message: str, thread_id: str | None = None) -> ChatMessage:
        body = UserInput(message=message, thread_id=thread_id, model="fake").model_dump()
        response = httpx.post(
            f"{self.base_url}/{self.agent}/invoke", json=body, headers=self.headers, timeout=10
        )
        response.raise_for_status()
        return ChatMessage.model_validate(response.json())

    def stream(self, message: str, thread_id: str | None = None) -> Iterator[ChatMessage | str]:
        body = StreamInput(message=message, thread_id=thread_id).model_dump()
        url = f"{self.base_url}/{self.agent}/stream"
        with httpx.stream("POST", url, json=body, headers=self.headers, timeout=10) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.strip():
                    continue
                try:
                    yield self._parse(line.strip())
                except StopReadingError:
                    return

    @staticmethod
    def _parse(line: str) -> ChatMessage | str:
        if not line.startswith("data: "):
            raise StopReadingError
        data = line[len("data: ") :]
        if data == "[DONE]":
            raise StopReadingError
        parsed: dict[str, Any] = json.loads(data)
        if parsed["type"] == "message":
            return ChatMessage.model_validate(parsed["content"])
        if parsed["type"] == "token":
            return str(parsed["content"])
        if parsed["type"] == "error":
            raise RuntimeError(parsed["content"])
        raise StopReadingError

    def history(self, thread_id: str) -> ChatHistory:
        body = ChatHistoryInput(thread_id=thread_id).model_dump()
        response = httpx.post(f"{self.base_url}/history", json=body, headers=self.headers)
        response.raise_for_status()
        return ChatHistory.model_validate(response.json())

    def feedback(self, run_id: str, score: float) -> None:
        body = Feedback(run_id=run_id, key="human-feedback-stars", score=score).model_dump()
        response = httpx.post(f"{self.base_url}/feedback", json=body, headers=self.headers)
        response.raise_for_status()
        response.json()


@pytest.fixture
def live(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, ScriptedModel]]:
    monkeypatch.setenv("AUTH_SECRET", "toolkit-secret")
    model = ScriptedModel(
        [
            "Hello from parley.",
            ScriptedModel.tool_call("add", {"a": 2, "b": 2}, call_id="call_x"),
            "2 + 2 is 4.",
        ],
        stream=True,
    )
    app = create_app(
        ServiceSettings(database_url=sqlite_url),
        agents=[Agent("research-assistant", model, tools=[add])],
    )
    with running(app) as url:
        yield url, model


def test_the_toolkit_client_works_unchanged(live: tuple[str, ScriptedModel]) -> None:
    live_url, model = live
    client = ToolkitClient(live_url, secret="toolkit-secret")
    assert client.agent == "research-assistant"
    assert set(client.info.models) <= KNOWN_TO_ALL

    answer = client.invoke("Hi!", thread_id="toolkit-thread")
    assert (answer.type, answer.content) == ("ai", "Hello from parley.")

    items = list(client.stream("What is 2 + 2?", thread_id="toolkit-thread"))
    messages = [i for i in items if isinstance(i, ChatMessage)]
    tokens = "".join(i for i in items if isinstance(i, str))
    # The client read the whole run: the call, its result, the streamed answer, the answer.
    assert [m.type for m in messages] == ["ai", "tool", "ai"]
    assert messages[0].tool_calls[0]["args"] == {"a": 2, "b": 2}
    assert messages[1].content == "4"
    assert tokens == messages[2].content == "2 + 2 is 4."

    history = client.history("toolkit-thread")
    assert [m.type for m in history.messages] == ["human", "ai", "human", "ai", "tool", "ai"]
    assert answer.run_id is not None
    client.feedback(answer.run_id, 1.0)
    model.assert_consumed()


def test_the_toolkit_client_needs_the_secret(live: tuple[str, ScriptedModel]) -> None:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        ToolkitClient(live[0], secret="wrong")
    assert caught.value.response.status_code == 401
