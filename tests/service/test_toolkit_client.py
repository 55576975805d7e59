"""agent-service-toolkit's own client, as it behaves now, against a live parley service.

The toolkit is not on PyPI (and its code is not ours to copy), so this module follows its
client's rules as its current source applies them (src/client/client.py and src/schema/ on its
main branch, July 2026):

- every request carries `Authorization: Bearer $AUTH_SECRET` when that variable is set;
- `GET /info` is validated into `ServiceMetadata` whose `models` and `default_model` are
  `AllModelEnum` values: one name the enum lacks (`gpt-4o-mini` since 2026) and the client
  refuses the whole answer, at construction;
- `invoke` posts `UserInput(message=...)` with `model` set only when the caller names one (else
  `null`: the service's default) to `/{agent}/invoke` and validates a `ChatMessage`;
- `stream` posts `StreamInput` to `/{agent}/stream` and reads lines: a blank line is skipped;
  `data: [DONE]`, a line that is not `data: ...`, or a frame type other than `token`,
  `message` and `error` ends its reading; `error` becomes an `ai` message `Error: ...`;
- `get_history` posts `ChatHistoryInput` to `/{agent}/history` (the client's agent) and
  validates `ChatHistory`;
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
from parley.errors import ModelError
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from tests.sample_tools import add
from tests.service._live import running

# The values of the toolkit's current AllModelEnum (src/schema/models.py, July 2026).
ToolkitModel = Literal[
    "gpt-5-nano",
    "gpt-5-mini",
    "gpt-5.1",
    "gpt-5.6-luna",
    "gpt-5.6-terra",
    "gpt-5.6-sol",
    "azure-gpt-5",
    "azure-gpt-5-mini",
    "deepseek-v4-flash",
    "deepseek-v4-pro",
    "claude-haiku-4-5",
    "claude-sonnet-4-5",
    "claude-sonnet-5",
    "gemini-2.5-pro",
    "gemini-3.1-flash-lite",
    "gemini-3.5-flash",
    "gemini-3.5-flash-lite",
    "gemini-3.6-flash",
    "gemini-3.1-pro-preview",
    "models/gemini-3.1-flash-lite",
    "models/gemini-3.5-flash",
    "models/gemini-3.5-flash-lite",
    "models/gemini-3.6-flash",
    "llama-3.1-8b-instant",
    "llama-3.3-70b-versatile",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "openai/gpt-oss-safeguard-20b",
    "global.anthropic.claude-haiku-4-5-20251001-v1:0",
    "global.anthropic.claude-sonnet-5",
    "ollama",
    "google/gemini-3.5-flash",
    "google/gemini-3.6-flash",
    "openai-compatible",
    "fake",
]

# In every release of AllModelEnum since March 2025 (`fake` in every one): what a service
# may list for clients of any of them.
KNOWN_TO_ALL = {"openai-compatible", "fake"}


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

    def invoke(
        self, message: str, thread_id: str | None = None, model: str | None = None
    ) -> ChatMessage:
        request = UserInput(message=message)
        if thread_id:
            request.thread_id = thread_id
        if model:
            request.model = model
        response = httpx.post(
            f"{self.base_url}/{self.agent}/invoke",
            json=request.model_dump(),
            headers=self.headers,
            timeout=10,
        )
        response.raise_for_status()
        return ChatMessage.model_validate(response.json())

    def stream(self, message: str, thread_id: str | None = None) -> Iterator[ChatMessage | str]:
        request = StreamInput(message=message, stream_tokens=True)
        if thread_id:
            request.thread_id = thread_id
        url = f"{self.base_url}/{self.agent}/stream"
        body = request.model_dump()
        with httpx.stream("POST", url, json=body, headers=self.headers, timeout=10) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if line.strip():
                    parsed = self._parse(line)
                    if parsed is None:
                        break
                    yield parsed

    @staticmethod
    def _parse(line: str) -> ChatMessage | str | None:
        line = line.strip()
        if not line.startswith("data: "):
            return None
        data = line[len("data: ") :]
        if data == "[DONE]":
            return None
        parsed: dict[str, Any] = json.loads(data)
        if parsed["type"] == "message":
            return ChatMessage.model_validate(parsed["content"])
        if parsed["type"] == "token":
            return str(parsed["content"])
        if parsed["type"] == "error":
            return ChatMessage(type="ai", content="Error: " + parsed["content"])
        return None

    def history(self, thread_id: str) -> ChatHistory:
        body = ChatHistoryInput(thread_id=thread_id).model_dump()
        url = f"{self.base_url}/{self.agent}/history"
        response = httpx.post(url, json=body, headers=self.headers, timeout=10)
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
            ModelError("the model's server is down"),
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
    assert client.info.default_model in KNOWN_TO_ALL

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

    # A failed run: the client shows the error frame as an `ai` message, then stops.
    [failed] = list(client.stream("And now?", thread_id="toolkit-thread"))
    assert isinstance(failed, ChatMessage)
    assert (failed.type, failed.content) == ("ai", "Error: the model's server is down")

    history = client.history("toolkit-thread")
    assert [m.type for m in history.messages] == [
        *("human", "ai", "human", "ai", "tool", "ai", "human")
    ]
    assert answer.run_id is not None
    client.feedback(answer.run_id, 1.0)
    model.assert_consumed()


def test_every_model_info_offers_is_served(live: tuple[str, ScriptedModel]) -> None:
    client = ToolkitClient(live[0], secret="toolkit-secret")
    # What the toolkit's app offers in its model menu, each asked for by name.
    answers = [client.invoke("Hi!", model=name) for name in client.info.models]
    assert [a.content for a in answers] == ["Hello from parley.", "2 + 2 is 4."]


def test_the_toolkit_client_needs_the_secret(live: tuple[str, ScriptedModel]) -> None:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        ToolkitClient(live[0], secret="wrong")
    assert caught.value.response.status_code == 401
