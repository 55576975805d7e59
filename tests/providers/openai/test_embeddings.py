"""`OpenAIEmbeddingModel` through the real `openai` SDK against the local wire-format server.

The server's vectors depend only on what they embed (`vector_for`), so every test can tell
which input each vector came from.
"""

from __future__ import annotations

import base64
import json
import struct
import sys

import pytest

from parley.errors import (
    ConfigurationError,
    ModelHTTPError,
    ModelOutputError,
    RateLimitError,
    UserError,
)
from parley.models.credentials import CredentialFactory
from parley.providers.openai import OpenAICompatibleCredential, OpenAICredential
from parley.providers.openai.embeddings import OpenAICompatibleEmbeddingModel, OpenAIEmbeddingModel
from parley.providers.openai.server import (
    Embeddings,
    OpenAIServer,
    Raw,
    RecordedRequest,
    Reply,
    vector_for,
)
from tests._requires import require_module
from tests.embeddings.test_base import ItemCache
from tests.providers._fixtures import ModelFactory, model_fixtures

require_module("openai", "openai")

TEXTS = [f"text number {i}" for i in range(4100)]  # 2048 + 2048 + 4


server, make_model = model_fixtures(OpenAIServer, OpenAIEmbeddingModel, "text-embedding-3-small")


def texts_of(request: RecordedRequest) -> list[str]:
    texts: list[str] = request.json["input"]
    return texts


def float_answer(texts: list[str], size: int) -> bytes:
    """An answer in numbers, as a server that ignores `encoding_format` sends it."""
    data = [
        {"object": "embedding", "index": i, "embedding": vector_for(t, size)}
        for i, t in enumerate(texts)
    ]
    usage = {"prompt_tokens": 1, "total_tokens": 1}
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": usage}).encode()


# -- answers --------------------------------------------------------------------------------


async def test_the_request_of_a_batch(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Embeddings(), Embeddings(), Embeddings())
    model = make_model(parameters={"dimensions": 16, "user": "u-1"})
    await model(TEXTS)
    first = next(r for r in server.requests if texts_of(r)[0] == TEXTS[0])
    assert first.path == "/v1/embeddings"
    assert first.json == {
        "model": "text-embedding-3-small",
        "input": TEXTS[:2048],
        "encoding_format": "base64",
        "dimensions": 16,
        "user": "u-1",
    }
    assert first.headers["authorization"] == "Bearer sk-test"
    server.assert_consumed()


async def test_vectors_asked_as_numbers(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Embeddings())
    response = await make_model(parameters={"encoding_format": "float"})(["a", "b"])
    assert response.embeddings == [vector_for("a", 8), vector_for("b", 8)]
    assert server.bodies()[0]["encoding_format"] == "float"
    assert "dimensions" not in server.bodies()[0]


async def test_numbers_are_read_when_base64_was_asked(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Raw(float_answer(["a", "b"], 4)))
    response = await make_model()(["a", "b"])
    assert server.bodies()[0]["encoding_format"] == "base64"
    assert response.embeddings == [vector_for("a", 4), vector_for("b", 4)]


async def test_base64_vectors_are_exact_float32(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    vector = [0.1, -2.5, 3e-8]
    encoded = base64.b64encode(struct.pack("<3f", *vector)).decode()
    data = [{"object": "embedding", "index": 0, "embedding": encoded}]
    server.add(Raw(json.dumps({"object": "list", "data": data, "model": "m"}).encode()))
    response = await make_model()(["a"])
    assert response.embeddings == [list(struct.unpack("<3f", struct.pack("<3f", *vector)))]
    assert response.usage is not None
    assert response.usage.tokens is None  # the answer had no usage


async def test_base64_is_decoded_without_numpy_too(
    server: OpenAIServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # not installed
    server.add(Embeddings(reverse=True))
    response = await make_model()(["a", "b", "c"], dimensions=5)
    assert response.embeddings == [vector_for(t, 5) for t in ("a", "b", "c")]


async def test_dimensions_per_call_and_the_cards_bounds(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings(), Embeddings())
    model = make_model("text-embedding-3-large")
    assert model.dimensions == 3072  # the card's default
    assert model.context_size == 8191
    await model(["a"], dimensions=256)
    await model(["a"])
    sized, plain = server.bodies()
    assert sized["dimensions"] == 256
    assert "dimensions" not in plain
    with pytest.raises(UserError, match="1 to 3072 dimensions, not 4000"):
        await model(["a"], dimensions=4000)
    with pytest.raises(UserError, match="1 to 1536 dimensions, not 2000"):
        make_model(parameters={"dimensions": 2000})
    assert len(server.requests) == 2  # the refused sizes sent nothing


async def test_a_model_of_one_size_is_sent_no_dimensions(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings(size=1536))
    model = make_model("text-embedding-ada-002", parameters={"dimensions": 1536})
    response = await model(["a"])
    assert len(response.embeddings[0]) == 1536
    assert "dimensions" not in server.bodies()[0]  # OpenAI refuses it for this model
    with pytest.raises(UserError, match="1536 dimensions, not 512"):
        await model(["a"], dimensions=512)


async def test_a_model_without_a_card_takes_any_size(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings())
    model = make_model("my-fine-tuned-embedder", parameters={"dimensions": 5000})
    assert model.card() is None
    assert len((await model(["a"])).embeddings[0]) == 5000


# -- faults ---------------------------------------------------------------------------------


TWO_SIZES = b'{"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAAAAAA"}]}'


@pytest.mark.parametrize(
    ("body", "inputs", "message"),
    [
        (b'{"object": "list"}', 1, "without a `data` list"),
        (b'{"data": [{"index": 0}]}', 1, "without an `embedding`"),
        (b'{"data": [{"index": 1, "embedding": [1.0]}]}', 1, "indexes are not 0 to 0"),
        (b'{"data": [{"index": 0, "embedding": "not base64!"}]}', 1, "not base64"),
        (TWO_SIZES, 2, "float32 vectors of one size"),
        (b'{"data": [{"index": 0, "embedding": {"a": 1}}]}', 1, "neither lists of numbers"),
    ],
    ids=["no-data", "no-embedding", "index", "base64", "sizes", "type"],
)
async def test_a_malformed_answer_is_a_clear_error_not_retried(
    server: OpenAIServer, make_model: ModelFactory, body: bytes, inputs: int, message: str
) -> None:
    server.add(Raw(body))
    with pytest.raises(ModelOutputError, match=message):
        await make_model()(TEXTS[:inputs])
    assert len(server.requests) == 1


async def test_an_error_in_a_200_body_is_mapped(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    error = {"error": {"message": "quota", "type": "x", "code": "rate_limit_exceeded"}}
    server.add(Raw(json.dumps(error).encode()))
    with pytest.raises(RateLimitError, match="quota"):
        await make_model(max_retries=0)(["a"])


async def test_a_chat_step_cannot_answer_an_embedding_request(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="hello"))
    with pytest.raises(ModelHTTPError):
        await make_model(max_retries=0)(["a"])
    with pytest.raises(AssertionError, match="cannot answer /v1/embeddings"):
        server.assert_consumed()


# -- credentials and cards ------------------------------------------------------------------


def test_the_cards_pin_each_models_sizes() -> None:
    cards = {card.name: card for card in OpenAICredential.list_embedding_models()}
    assert sorted(cards) == [
        "text-embedding-3-large",
        "text-embedding-3-small",
        "text-embedding-ada-002",
    ]
    small, large, ada = (
        cards["text-embedding-3-small"],
        cards["text-embedding-3-large"],
        cards["text-embedding-ada-002"],
    )
    assert (small.dimension_range(), small.default_dimensions()) == ((1, 1536), 1536)
    assert (large.dimension_range(), large.default_dimensions()) == ((1, 3072), 3072)
    assert (ada.dimension_choices(), ada.default_dimensions()) == ([1536], 1536)
    assert all(card.context_size == 8191 for card in cards.values())
    assert all(card.output_types == ["application/x-embedding"] for card in cards.values())
    assert "encoding_format" in small.parameter_schema["properties"]
    assert OpenAICredential.list_models()  # the chat cards stay apart
    assert not {c.name for c in OpenAICredential.list_models()} & set(cards)


# -- OpenAI-compatible servers --------------------------------------------------------------


async def test_a_compatible_server_with_its_own_batch_size_and_fields(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(*[Embeddings() for _ in range(4)])
    model = make_model(
        "BAAI/bge-m3",
        OpenAICompatibleEmbeddingModel,
        credential=server.compatible_credential(),
        batch_size=3,
        parameters={"encoding_format": "float", "extra_body": {"truncate_prompt_tokens": 64}},
    )
    texts = TEXTS[:10]
    response = await model(texts)
    assert response.embeddings == [vector_for(t, 8) for t in texts]
    assert sorted(len(texts_of(r)) for r in server.requests) == [1, 3, 3, 3]
    body = next(r.json for r in server.requests if texts_of(r)[0] == texts[0])
    assert body == {
        "model": "BAAI/bge-m3",
        "input": texts[:3],
        "encoding_format": "float",
        "truncate_prompt_tokens": 64,
    }
    # No key given: the SDK's placeholder, which servers without keys ignore.
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"


async def test_a_compatible_model_needs_the_servers_url(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_COMPATIBLE_BASE_URL"):
        OpenAICompatibleEmbeddingModel(OpenAICompatibleCredential(), "m")
    with pytest.raises(UserError, match="batch_size must be at least 1"):
        OpenAICompatibleEmbeddingModel(server.compatible_credential(), "m", batch_size=0)
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", server.url)
    credential = CredentialFactory.from_dict({"type": "openai_compatible"})
    assert credential.get_embedding_model_class() is OpenAICompatibleEmbeddingModel
    server.add(Embeddings())
    model = OpenAICompatibleEmbeddingModel(credential, "m")
    assert (await model(["a"])).embeddings == [vector_for("a", 8)]
    await model.aclose()


async def test_two_compatible_servers_do_not_share_cached_vectors(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    cache = ItemCache()
    with OpenAIServer() as other:
        server.add(Embeddings())
        other.add(Embeddings(size=8))
        here = make_model(
            "embedding",
            OpenAICompatibleEmbeddingModel,
            embedding_cache=cache,
            credential=server.compatible_credential(),
        )
        there = make_model(
            "embedding",
            OpenAICompatibleEmbeddingModel,
            embedding_cache=cache,
            credential=other.compatible_credential(),
        )
        await here(["a"])
        assert (await there(["a"])).source == "api"  # another server: its own vectors
        assert (await here(["a"])).source == "cache"
        assert len(other.requests) == 1
        other.assert_consumed()
