"""`OllamaEmbeddingModel` through the real `ollama` SDK's client against the local server.

The server's vectors depend only on what they embed (`vector_for`), so every test can tell
which input each vector came from.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from parley.errors import (
    ConfigurationError,
    ContextLengthError,
    ModelHTTPError,
    ModelOutputError,
    UserError,
)
from parley.models.credentials import CredentialFactory
from parley.providers.ollama import OllamaCredential
from parley.providers.ollama.embeddings import OllamaEmbeddingModel
from parley.providers.ollama.server import (
    Embeddings,
    HTTPError,
    OllamaServer,
    Raw,
    RecordedRequest,
    Reply,
    ServedModel,
    vector_for,
)
from tests._requires import require_module
from tests.providers._fixtures import model_fixtures

require_module("ollama", "ollama")
require_module("httpx_aiohttp", "ollama")

TEXTS = [f"text number {i}" for i in range(1100)]  # 512 + 512 + 76
EMBED = "/api/embed"
ModelFactory = Callable[..., OllamaEmbeddingModel]


server, make_model = model_fixtures(OllamaServer, OllamaEmbeddingModel, "nomic-embed-text")


def texts_of(request: RecordedRequest) -> list[str]:
    texts: list[str] = request.json["input"]
    return texts


# -- answers --------------------------------------------------------------------------------


async def test_the_request_of_a_batch(server: OllamaServer, make_model: ModelFactory) -> None:
    server.add(Embeddings(), Embeddings(), Embeddings())
    parameters = {
        "dimensions": 256,
        "truncate": False,
        "keep_alive": "10m",
        "options": {"num_ctx": 1024},
    }
    await make_model(parameters=parameters)(TEXTS)
    first = next(r for r in server.requests if texts_of(r)[0] == TEXTS[0])
    assert first.path == EMBED
    assert first.json == {"model": "nomic-embed-text", "input": TEXTS[:512], **parameters}
    server.assert_consumed()


async def test_the_headers_of_the_credential_are_sent(server: OllamaServer) -> None:
    server.add(Embeddings())
    credential = server.credential(headers={"Authorization": "Bearer proxy-token"})
    model = OllamaEmbeddingModel(credential, "all-minilm")
    await model(["a"])
    await model.aclose()
    assert server.requests[0].headers["authorization"] == "Bearer proxy-token"
    assert server.bodies(EMBED) == [{"model": "all-minilm", "input": ["a"]}]


async def test_dimensions_from_the_card_of_the_model_or_its_family(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings(), Embeddings())
    model = make_model("nomic-embed-text:v1.5")
    assert model.dimensions == 768  # nomic-embed-text's card
    assert model.context_size == 2048
    assert (await model(["a"], dimensions=64)).embeddings == [vector_for("a", 64)]
    with pytest.raises(UserError, match="64, 128, 256, 512, 768 dimensions, not 100"):
        await model(["a"], dimensions=100)
    small = make_model("qwen3-embedding:0.6b")
    assert (small.dimensions, small.context_size) == (1024, 32768)
    with pytest.raises(UserError, match="32 to 1024 dimensions, not 2048"):
        await small(["a"], dimensions=2048)
    assert make_model("qwen3-embedding:8b").dimensions == 4096  # the family's card
    await small(["a"], dimensions=32)
    assert [body.get("dimensions") for body in server.bodies(EMBED)] == [64, 32]


# -- faults ---------------------------------------------------------------------------------


async def test_an_input_too_long_is_not_retried(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    # What Ollama answers with `truncate: false` (server/routes.go, EmbedHandler).
    server.add(HTTPError(400, "the input length exceeds the context length"))
    with pytest.raises(ContextLengthError, match="exceeds the context length"):
        await make_model(max_concurrency=1)(TEXTS, truncate=False)
    assert len(server.requests) == 1
    server.assert_consumed()


async def test_a_model_not_pulled_says_how_to_pull_it(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError.not_found("embeddinggemma"))
    with pytest.raises(ModelHTTPError, match="ollama pull embeddinggemma") as caught:
        await make_model("embeddinggemma")(["a"])
    assert caught.value.status_code == 404
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (b'{"model": "m"}', ModelOutputError, "without a list of `embeddings`"),
        (b'{"embeddings": [0.1, 0.2]}', ModelOutputError, "without a list of `embeddings`"),
        (b"[]", ModelOutputError, "not an object"),
    ],
    ids=["none", "flat", "array"],
)
async def test_a_malformed_answer_is_a_clear_error_not_retried(
    server: OllamaServer,
    make_model: ModelFactory,
    body: bytes,
    error: type[Exception],
    message: str,
) -> None:
    server.add(Raw(body))
    with pytest.raises(error, match=message):
        await make_model()(["a", "b"])
    assert len(server.requests) == 1


async def test_an_error_in_a_200_body_is_retried_as_a_server_error(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Raw(b'{"error": "embedding contains NaN or Inf values"}'), Embeddings())
    assert (await make_model()(["a"])).embeddings == [vector_for("a", 8)]
    server.add(Raw(b'{"error": "embedding contains NaN or Inf values"}'))
    with pytest.raises(ModelHTTPError, match="NaN or Inf") as caught:
        await make_model(max_retries=0)(["a"])
    assert caught.value.status_code == 500


async def test_a_chat_step_cannot_answer_an_embedding_request(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="hello"))
    with pytest.raises(ModelHTTPError):
        await make_model(max_retries=0)(["a"])
    with pytest.raises(AssertionError, match="cannot answer /api/embed"):
        server.assert_consumed()


# -- credentials and cards ------------------------------------------------------------------


async def test_the_credential_from_the_environment(
    server: OllamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", server.url.removeprefix("http://"))
    server.add(Embeddings())
    model = OllamaEmbeddingModel(model="all-minilm")
    assert model.endpoint() == server.url
    assert (await model(["a"])).embeddings == [vector_for("a", 8)]
    await model.aclose()
    monkeypatch.setenv("OLLAMA_HOST", "ftp://box")
    with pytest.raises(ConfigurationError, match="not an Ollama host"):
        await OllamaEmbeddingModel(model="all-minilm")(["a"])


async def test_the_credential_from_stored_settings(server: OllamaServer) -> None:
    credential = CredentialFactory.from_dict({"type": "ollama", "host": server.url})
    cls = credential.get_embedding_model_class()
    assert cls is OllamaEmbeddingModel
    server.add(Embeddings())
    model = cls(credential, "embeddinggemma")
    assert (await model(["a"])).embeddings == [vector_for("a", 8)]
    await model.aclose()


def test_the_bundled_cards_pin_each_models_sizes() -> None:
    cards = {card.name: card for card in OllamaCredential.list_embedding_models()}
    assert sorted(cards) == [
        "all-minilm",
        "embeddinggemma",
        "mxbai-embed-large",
        "nomic-embed-text",
        "qwen3-embedding",
        "qwen3-embedding:0.6b",
        "qwen3-embedding:4b",
    ]
    assert cards["all-minilm"].dimension_choices() == [384]
    assert cards["embeddinggemma"].dimension_choices() == [128, 256, 512, 768]
    assert cards["mxbai-embed-large"].default_dimensions() == 1024
    assert cards["qwen3-embedding"].dimension_range() == (32, 4096)
    assert cards["qwen3-embedding:4b"].default_dimensions() == 2560
    assert all(card.output_types == ["application/x-embedding"] for card in cards.values())
    assert "keep_alive" in cards["all-minilm"].parameter_schema["properties"]
    assert not {card.name for card in OllamaCredential.list_models()} & set(cards)


async def test_a_servers_embedding_models_from_its_capabilities(server: OllamaServer) -> None:
    server.models = [
        ServedModel(
            "nomic-embed-text:latest",
            capabilities=["embedding"],
            architecture="nomic-bert",
            context_length=2048,
            embedding_length=768,
        ),
        ServedModel("qwen3:8b", capabilities=["completion", "tools", "thinking"]),
        ServedModel(
            "hf.co/Snowflake/snowflake-arctic-embed-l:Q8_0",
            capabilities=["embedding"],
            architecture="bert",
            context_length=512,
            embedding_length=1024,
        ),
    ]
    credential = server.credential(headers={"X-Proxy": "secret"})
    cards = await credential.list_server_embedding_models()
    assert [card.name for card in cards] == [
        "hf.co/Snowflake/snowflake-arctic-embed-l:Q8_0",
        "nomic-embed-text:latest",
    ]
    arctic, nomic = cards
    assert (arctic.context_size, arctic.dimension_range()) == (512, (None, 1024))
    assert arctic.default_dimensions() == 1024
    assert arctic.dimension_choices() == []
    assert nomic.label == "Nomic Embed Text"
    assert nomic.dimension_choices() == [64, 128, 256, 512, 768]  # the bundled card's
    shown = [r.json["model"] for r in server.requests if r.path == "/api/show"]
    assert sorted(shown) == sorted(model.name for model in server.models)
    assert all(r.headers["x-proxy"] == "secret" for r in server.requests)
    chat = await credential.list_server_models(capabilities=True)
    assert [card.name for card in chat] == ["qwen3:8b"]
    assert credential.list_server_embedding_models_sync() == cards
