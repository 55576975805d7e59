"""`AzureOpenAIChatModel`: Chat Completions on an Azure deployment through `AsyncAzureOpenAI`.

The stand-in server records what the official SDK sent: the deployment's path, the
`api-version` query and the `api-key` header.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from parley.errors import ConfigurationError
from parley.models.credentials import CredentialFactory
from parley.models.spec import model_from_spec
from parley.providers.openai import AzureOpenAIChatModel, AzureOpenAICredential
from parley.providers.openai.server import OpenAIServer, Reply, ToolCall
from tests.providers._chat import HI
from tests.providers._fixtures import ModelFactory

DEPLOYMENT_PATH = "/openai/deployments/my-gpt/chat/completions?api-version=2024-06-01"


def azure_model(server: OpenAIServer, make_model: ModelFactory, **kwargs: Any) -> Any:
    return make_model(
        AzureOpenAIChatModel, "my-gpt", credential=server.azure_credential(), **kwargs
    )


async def test_whole_and_streamed_answers_go_to_the_deployment(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="Hello!"), Reply(text="Hi there", chunk_size=3))
    model = azure_model(server, make_model, parameters={"max_tokens": 50})
    assert (await model.chat(HI)).text == "Hello!"
    chunks = [chunk async for chunk in model.chat_stream(HI)]
    assert "".join(chunk.text for chunk in chunks[:-1]) == "Hi there"
    assert chunks[-1].text == "Hi there"
    for request in server.requests:
        assert request.path == DEPLOYMENT_PATH
        assert request.headers["api-key"] == "azure-key"
        assert "authorization" not in request.headers
    whole, streamed = server.bodies()
    assert (whole["model"], whole["max_tokens"]) == ("my-gpt", 50)
    assert "max_completion_tokens" not in whole  # unknown to API versions before 2024-09
    assert streamed["stream"] is True
    assert "stream_options" not in streamed  # likewise


async def test_native_tool_calls(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(tool_calls=[ToolCall("get_time", {"city": "Paris"}, id="call_1")]))
    spec = {
        "name": "get_time",
        "description": "The time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    response = await azure_model(server, make_model).chat(HI, tools=[spec])
    [call] = response.tool_calls
    assert (call.name, call.input, call.id) == ("get_time", {"city": "Paris"}, "call_1")
    [request] = server.requests
    assert request.path == DEPLOYMENT_PATH
    assert [tool["function"]["name"] for tool in request.json["tools"]] == ["get_time"]


async def test_the_provider_reads_the_sdks_environment(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "from-env")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.azure_endpoint)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    assert "azure_openai" in CredentialFactory.known_types()
    server.add(Reply(text="ok"))
    model = model_from_spec("azure_openai:env-dep", max_retries=0)
    assert isinstance(model, AzureOpenAIChatModel)
    try:
        assert (await model.chat(HI)).text == "ok"
    finally:
        await model.aclose()
    [request] = server.requests
    assert request.path == "/openai/deployments/env-dep/chat/completions?api-version=2024-10-21"
    assert request.headers["api-key"] == "from-env"


def test_a_missing_endpoint_version_or_key_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"):
        monkeypatch.delenv(env, raising=False)
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_ENDPOINT"):
        AzureOpenAIChatModel(AzureOpenAICredential(api_version="2024-06-01"), "dep")
    with pytest.raises(ConfigurationError, match="OPENAI_API_VERSION"):
        AzureOpenAIChatModel(AzureOpenAICredential(base_url="https://x.openai.azure.com"), "dep")
    keyless = AzureOpenAICredential(base_url="https://x.openai.azure.com", api_version="v")
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_API_KEY"):
        AzureOpenAIChatModel(keyless, "dep").client_factory()


def test_the_stand_in_refuses_a_deployment_path_without_api_version(
    server: OpenAIServer,
) -> None:
    request = urllib.request.Request(
        f"{server.azure_endpoint}/openai/deployments/my-gpt/chat/completions",
        data=json.dumps({"messages": []}).encode(),
        headers={"content-type": "application/json", "api-key": "k"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    caught.value.close()  # the error holds the response's socket
    assert caught.value.code == 404
    assert server.requests[0].path.endswith("/chat/completions")  # recorded, no step used
