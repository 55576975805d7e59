"""`OllamaEmbeddingModel` through the real `ollama` SDK's client against the local server.

The server's vectors depend only on what they embed (`vector_for`), so every test can tell
which input each vector came from.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from parley.errors import (
    ConfigurationError,
    ContextLengthError,
    ModelConnectionError,
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
    Reset,
    ServedModel,
    Step,
    vector_for,
)
from tests._requires import require_module
from tests.embeddings._faults import slow_answer_is_retried_then_surfaced
from tests.embeddings.test_base import ItemCache, MemoryCache

require_module("ollama", "ollama")
require_module("httpx_aiohttp", "ollama")

TEXTS = [f"text number {i}" for i in range(1100)]  # 512 + 512 + 76
EMBED = "/api/embed"
ModelFactory = Callable[..., OllamaEmbeddingModel]


@pytest.fixture
def server() -> Any:
    with OllamaServer() as running:
        yield running


@pytest.fixture
async def make_model(server: OllamaServer) -> AsyncIterator[ModelFactory]:
    """Models bound to `server` with near-zero backoff; their clients closed afterwards."""
    made: list[OllamaEmbeddingModel] = []

    def make(model: str = "nomic-embed-text", **kwargs: Any) -> OllamaEmbeddingModel:
        kwargs.setdefault("retry_delay", 0.001)
        credential = kwargs.pop("credential", None) or server.credential()
        instance = OllamaEmbeddingModel(credential, model, **kwargs)
        made.append(instance)
        return instance

    yield make
    for instance in made:
        await instance.aclose()


def texts_of(request: RecordedRequest) -> list[str]:
    texts: list[str] = request.json["input"]
    return texts


def fail_once(first_text: str, error: Step) -> Callable[[RecordedRequest], Step]:
    """A step for every request: `error` the first time the batch starting with `first_text`
    comes, embeddings otherwise (batches arrive in any order)."""
    failed = threading.Event()

    def step(request: RecordedRequest) -> Step:
        if texts_of(request)[0] == first_text and not failed.is_set():
            failed.set()
            return error
        return Embeddings()

    return step


# -- answers --------------------------------------------------------------------------------


async def test_vectors_in_input_order_across_batches_of_512(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings(), Embeddings(), Embeddings())
    parameters = {
        "dimensions": 256,
        "truncate": False,
        "keep_alive": "10m",
        "options": {"num_ctx": 1024},
    }
    response = await make_model(parameters=parameters)(TEXTS)
    assert response.embeddings == [vector_for(text, 256) for text in TEXTS]
    assert response.source == "api"
    assert response.usage is not None
    assert response.usage.tokens == 3 * len(TEXTS)  # the server counts words
    requests = server.requests
    assert sorted(len(texts_of(r)) for r in requests) == [76, 512, 512]
    assert sorted(t for r in requests for t in texts_of(r)) == sorted(TEXTS)
    first = next(r for r in requests if texts_of(r)[0] == TEXTS[0])
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


async def test_a_429_is_retried_for_its_batch_only_after_retry_after(
    server: OllamaServer, make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # The backoff waits near zero, so a wait of 0.10 s can only be the header's.
    step = fail_once(TEXTS[512], HTTPError.rate_limit(retry_after=0.1))
    server.add(*[step] * 4)
    with caplog.at_level(logging.WARNING, logger="parley.models"):
        response = await make_model()(TEXTS)
    assert response.embeddings == [vector_for(text, 8) for text in TEXTS]
    firsts = [texts_of(r)[0] for r in server.requests]
    assert sorted(firsts) == sorted([TEXTS[0], TEXTS[512], TEXTS[512], TEXTS[1024]])
    assert "embedding batch 2/3 failed" in caplog.text
    assert "retry 1 of 3 in 0.10s" in caplog.text
    server.assert_consumed()


async def test_a_5xx_is_retried_then_surfaced(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(500, "llama runner process has terminated"), HTTPError(502, "down"))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(max_retries=1)(["a"])
    assert caught.value.status_code == 502
    assert len(server.requests) == 2


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


async def test_a_reset_connection_is_retried(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Reset(), Embeddings())
    assert (await make_model()(["a"])).embeddings == [vector_for("a", 8)]
    server.add(Reset())
    with pytest.raises(ModelConnectionError):
        await make_model(max_retries=0)(["a"])


async def test_a_server_that_is_not_running_is_named(make_model: ModelFactory) -> None:
    with OllamaServer() as gone:
        credential = gone.credential()
    with pytest.raises(ModelConnectionError, match="is it running"):
        await make_model(credential=credential, max_retries=0)(["a"])


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (b'{"model": "m", "embeddings": [[0.1, ', ModelOutputError, "malformed JSON"),
        (b'{"model": "m"}', ModelOutputError, "without a list of `embeddings`"),
        (b'{"embeddings": [0.1, 0.2]}', ModelOutputError, "without a list of `embeddings`"),
        (b'{"embeddings": [[0.1]]}', ModelOutputError, "1 vectors for 2 inputs"),
        (b"[]", ModelOutputError, "not an object"),
    ],
    ids=["json", "none", "flat", "count", "array"],
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


async def test_requests_elsewhere_are_blocked_in_the_tests() -> None:
    model = OllamaEmbeddingModel(OllamaCredential(host="http://gpu-box:11434"), "all-minilm")
    with pytest.raises(UserError, match="blocked"):
        await model(["a"])


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


# -- caches and the sync twin ---------------------------------------------------------------


async def test_a_repeated_request_is_answered_from_the_cache(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings())
    model = make_model(embedding_cache=MemoryCache())
    first = await model(["a", "b"])
    again = await model(["a", "b"])
    assert again.source == "cache"
    assert again.embeddings == first.embeddings
    assert len(server.requests) == 1


async def test_a_per_item_cache_sends_only_the_new_texts(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings(), Embeddings())
    model = make_model(embedding_cache=ItemCache())
    await model(["a", "b"])
    response = await model(["b", "c", "a", "c"])
    assert response.embeddings == [vector_for(t, 8) for t in ("b", "c", "a", "c")]
    assert texts_of(server.requests[1]) == ["c"]


def test_the_sync_twin(server: OllamaServer) -> None:
    server.add(Embeddings())
    model = OllamaEmbeddingModel(server.credential(), "all-minilm")
    assert model.call_sync(["a"]).embeddings == [vector_for("a", 8)]
    model.close_sync()


async def test_an_answer_slower_than_the_timeout_is_retried_then_surfaced(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    await slow_answer_is_retried_then_surfaced(server, make_model, Embeddings, vector_for("a", 8))
