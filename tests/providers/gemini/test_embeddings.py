"""`GeminiEmbeddingModel` through the real `google-genai` SDK against the local Gemini server.

The server's vectors depend only on what they embed (`vector_for`), so every test can tell
which input each vector came from.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parley.errors import (
    ModelOutputError,
    RateLimitError,
    UserError,
)
from parley.messages import AudioBlock, FileBlock, VideoBlock
from parley.providers.gemini import GeminiCredential
from parley.providers.gemini.embeddings import GeminiEmbeddingModel
from parley.providers.gemini.server import (
    Embeddings,
    GeminiServer,
    HTTPError,
    Raw,
    RecordedRequest,
    vector_for,
)
from tests._requires import require_module
from tests.providers._fixtures import model_fixtures
from tests.providers._samples import IMAGE_URL, PNG, text_and_images

require_module("google.genai", "gemini")

TEXTS = [f"text number {i}" for i in range(250)]

ModelFactory = Callable[..., GeminiEmbeddingModel]


server, make_model = model_fixtures(GeminiServer, GeminiEmbeddingModel, "gemini-embedding-001")


def first_text(request: RecordedRequest) -> str:
    text: str = request.json["requests"][0]["content"]["parts"][0]["text"]
    return text


# -- the Gemini API -----------------------------------------------------------------------------


async def test_the_request_of_a_batch(server: GeminiServer, make_model: ModelFactory) -> None:
    server.add(*[Embeddings()] * 3)
    parameters = {"dimensions": 768, "task_type": "RETRIEVAL_DOCUMENT", "title": "Manual"}
    await make_model(parameters=parameters)(TEXTS)
    requests = server.embedding_requests()
    assert all(r.path.endswith("/models/gemini-embedding-001:batchEmbedContents") for r in requests)
    first = next(r for r in requests if first_text(r) == TEXTS[0])
    assert first.json["requests"][1] == {
        "content": {"parts": [{"text": TEXTS[1]}]},
        "taskType": "RETRIEVAL_DOCUMENT",
        "title": "Manual",
        "outputDimensionality": 768,
        "model": "models/gemini-embedding-001",
    }
    assert first.headers["x-goog-api-key"] == "test-key"
    server.assert_consumed()


async def test_sizes_outside_the_models_range_are_refused_before_any_request(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings())
    model = make_model()
    assert model.dimensions == 3072
    with pytest.raises(UserError, match="128 to 3072 dimensions, not 64"):
        await model(["a"], dimensions=64)
    with pytest.raises(UserError, match="not 4096"):
        make_model(parameters={"dimensions": 4096})
    assert server.requests == []
    response = await model(["a"], dimensions=200)  # any size in the range
    assert response.embeddings == [vector_for("a", 200)]


async def test_a_rate_limit_says_how_long_to_wait(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    # `Retry-After`: the contract suite; here Google's `RetryInfo`.
    server.add(HTTPError.rate_limit(retry_delay="31s"))
    with pytest.raises(RateLimitError, match="RESOURCE_EXHAUSTED") as caught:
        await make_model(max_retries=0)(["a"])
    assert caught.value.retry_after == 31


async def test_incomplete_answers_are_output_errors(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    # Malformed JSON and vectors missing, as every provider's: the contract suite.
    server.add(
        Raw(b'{"embeddings": [{}]}'), Raw(b'{"embeddings": [{"values": [1.0]}, {"value": []}]}')
    )
    model = make_model()
    with pytest.raises(ModelOutputError, match="sent 1 embeddings for 2 inputs"):
        await model(["a", "b"])
    with pytest.raises(ModelOutputError, match="no values for input 1"):
        await model(["a", "b"])
    assert len(server.embedding_requests()) == 2  # never retried: it would come back the same


async def test_the_api_refuses_auto_truncate(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    # A text model refusing media, as every provider's: the contract suite.
    with pytest.raises(UserError, match="auto_truncate is for Vertex AI"):
        await make_model()(["a"], auto_truncate=True)
    assert server.requests == []


# -- multimodal -----------------------------------------------------------------------------------


async def test_each_text_and_media_input_is_its_own_content(
    server: GeminiServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    pdf = base64.b64encode(b"%PDF-1.4 fake").decode()
    server.add(Embeddings())
    inputs: list[Any] = [
        *text_and_images(tmp_path),
        AudioBlock.from_url("https://example.com/bark.mp3"),
        VideoBlock.from_url("https://www.youtube.com/watch?v=abc"),
        FileBlock.from_bytes(b"%PDF-1.4 fake", "application/pdf"),
    ]
    response = await make_model("gemini-embedding-2", parameters={"dimensions": 256})(inputs)
    keys = [
        "a caption",
        "a block of text",
        IMAGE_URL,
        PNG,
        PNG,
        "https://example.com/bark.mp3",
        "https://www.youtube.com/watch?v=abc",
        pdf,
    ]
    assert response.embeddings == [vector_for(key, 256) for key in keys]
    assert response.usage is not None
    assert response.usage.tokens == 2 + 4 + 6 * 100
    [request] = server.embedding_requests()
    parts = [r["content"]["parts"] for r in request.json["requests"]]
    assert parts == [
        [{"text": "a caption"}],
        [{"text": "a block of text"}],
        [{"fileData": {"fileUri": IMAGE_URL, "mimeType": "image/png"}}],
        [{"inlineData": {"mimeType": "image/png", "data": PNG}}],
        [{"inlineData": {"mimeType": "image/png", "data": PNG}}],
        [{"fileData": {"fileUri": "https://example.com/bark.mp3", "mimeType": "audio/mpeg"}}],
        [{"fileData": {"fileUri": "https://www.youtube.com/watch?v=abc"}}],
        [{"inlineData": {"mimeType": "application/pdf", "data": pdf}}],
    ]
    assert all(r["outputDimensionality"] == 256 for r in request.json["requests"])


# -- Vertex AI ------------------------------------------------------------------------------------


async def test_vertex_ai_gemini_models_through_batch_embed_contents(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    credential = server.credential(
        "", vertexai=True, project="my-proj", location="europe-west4", access_token="ya29.token"
    )
    server.add(Embeddings())
    parameters = {"dimensions": 768, "task_type": "RETRIEVAL_QUERY", "auto_truncate": True}
    model = make_model(credential=credential, parameters=parameters)
    response = await model(["a", "b"])
    assert response.embeddings == [vector_for("a", 768), vector_for("b", 768)]
    [request] = server.requests
    base = "/v1beta1/projects/my-proj/locations/europe-west4/publishers/google/models"
    assert request.path == f"{base}/gemini-embedding-001:batchEmbedContents"
    config = {"outputDimensionality": 768, "taskType": "RETRIEVAL_QUERY", "autoTruncate": True}
    assert request.json == {
        "requests": [
            {"content": {"parts": [{"text": "a"}]}, "embedContentConfig": config},
            {"content": {"parts": [{"text": "b"}]}, "embedContentConfig": config},
        ]
    }
    assert request.headers["authorization"] == "Bearer ya29.token"


async def test_vertex_ai_text_models_through_predict(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    credential = server.credential("vertex-key", vertexai=True)
    server.add(Embeddings())
    parameters = {"dimensions": 256, "task_type": "RETRIEVAL_DOCUMENT", "title": "Manual"}
    model = make_model("text-embedding-005", credential=credential, parameters=parameters)
    response = await model(["one", "two words"])
    assert response.embeddings == [vector_for("one", 256), vector_for("two words", 256)]
    assert response.usage is not None
    assert response.usage.tokens == 3  # each prediction's statistics.token_count
    [request] = server.requests
    assert request.path == "/v1beta1/publishers/google/models/text-embedding-005:predict"
    assert request.json == {
        "instances": [
            {"content": "one", "task_type": "RETRIEVAL_DOCUMENT", "title": "Manual"},
            {"content": "two words", "task_type": "RETRIEVAL_DOCUMENT", "title": "Manual"},
        ],
        "parameters": {"outputDimensionality": 256},
    }
    assert request.headers["x-goog-api-key"] == "vertex-key"


# -- credential, cards, caches, sync --------------------------------------------------------------


def test_the_credential_lists_the_embedding_models_and_their_sizes() -> None:
    assert GeminiCredential.get_embedding_model_class() is GeminiEmbeddingModel
    cards = {card.name: card for card in GeminiCredential.list_embedding_models()}
    assert sorted(cards) == ["gemini-embedding-001", "gemini-embedding-2"]
    for card in cards.values():
        assert card.default_dimensions() == 3072
        assert card.dimension_range() == (128, 3072)
        assert card.output_types == ["application/x-embedding"]
    assert cards["gemini-embedding-001"].input_types == ["text/plain"]
    two = cards["gemini-embedding-2"]
    for media_type in ("image/png", "audio/mpeg", "video/mp4", "application/pdf"):
        assert two.accepts(media_type)
    assert not set(cards) & {card.name for card in GeminiCredential.list_models()}
