"""`embeddings` and `retrieval` spans: the openai SDK's embeddings on the local server, and
searches of a `DocumentIndex` (directly and through the retrieval tool in an agent)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from parley.agents import Agent
from parley.errors import ModelError
from parley.models.testing import ScriptedModel
from parley.providers.openai.embeddings import OpenAIEmbeddingModel
from parley.providers.openai.server import Embeddings, HTTPError, OpenAIServer
from parley.rag import DocumentIndex
from parley.rag.tool import RetrievalTool
from tests._requires import require_module
from tests.tracing.fixtures import Spans, attrs, parent_of, span_id

require_module("openai", "openai")

ModelFactory = Callable[..., Any]


class TwoPerBatch(OpenAIEmbeddingModel):
    """Two inputs per request, so three inputs take two."""

    batch_size: ClassVar[int] = 2


@pytest.fixture
async def make_model(server: OpenAIServer) -> AsyncIterator[ModelFactory]:
    made: list[OpenAIEmbeddingModel] = []

    def make(cls: type[OpenAIEmbeddingModel] = OpenAIEmbeddingModel, **kwargs: Any) -> Any:
        instance = cls(server.credential(), "text-embedding-3-small", retry_delay=0.001, **kwargs)
        made.append(instance)
        return instance

    yield make
    for instance in made:
        await instance.aclose()


async def test_an_embedding_call(
    spans: Spans, server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings(), Embeddings())
    response = await make_model(TwoPerBatch)(["one", "two", "three"], dimensions=8)
    server.assert_consumed()

    span = spans.one("embeddings text-embedding-3-small")
    assert span.kind is SpanKind.CLIENT
    found = attrs(span)
    assert found.pop("server.port") > 0
    assert found == {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "text-embedding-3-small",
        "server.address": "127.0.0.1",
        "gen_ai.embeddings.dimension.count": 8,
        "gen_ai.usage.input_tokens": response.usage.tokens,  # type: ignore[union-attr]
        "parley.embeddings.inputs": 3,
        "parley.embeddings.batches": 2,
        "parley.embeddings.source": "api",
    }
    assert response.usage is not None
    assert response.usage.tokens


async def test_a_failed_embedding_call_sets_error_status(
    spans: Spans, server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(400, "bad input"))
    with pytest.raises(ModelError) as raised:
        await make_model()(["one"])

    span = spans.one("embeddings text-embedding-3-small")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"].endswith(type(raised.value).__qualname__)


@pytest.fixture
async def index(
    tmp_path: Path, server: OpenAIServer, make_model: ModelFactory
) -> AsyncIterator[DocumentIndex]:
    (tmp_path / "refunds.txt").write_text("Refunds are paid within fourteen days.")
    server.add(Embeddings(size=8))  # the document's chunk
    opened = await DocumentIndex.open(tmp_path / "index.db", embedding_model=make_model())
    await opened.add(tmp_path / "refunds.txt")
    yield opened
    await opened.close()


async def test_a_search_is_a_retrieval_span_around_its_query_embedding(
    spans: Spans, server: OpenAIServer, index: DocumentIndex, tmp_path: Path
) -> None:
    server.add(Embeddings(size=8))  # the query
    hits = await index.search("When are refunds paid?", top_k=3)
    server.assert_consumed()

    source = str(tmp_path / "index.db")
    span = spans.one(f"retrieval {source}")
    assert attrs(span) == {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": source,
        "gen_ai.request.top_k": 3,
        "parley.retrieval.mode": "hybrid",
        "parley.retrieval.hits": len(hits),
    }
    assert hits
    query = spans.named("embeddings text-embedding-3-small")[-1]
    assert parent_of(query) == span_id(span)


@pytest.mark.usefixtures("content")
async def test_a_searchs_content_when_asked_for(
    spans: Spans, server: OpenAIServer, index: DocumentIndex, tmp_path: Path
) -> None:
    hits = await index.search("refunds", mode="keyword")

    found = attrs(spans.one(f"retrieval {tmp_path / 'index.db'}"))
    assert found["gen_ai.retrieval.query.text"] == "refunds"
    documents = json.loads(found["gen_ai.retrieval.documents"])
    assert documents == [
        {
            "id": f"{hits[0].chunk.doc_id}#0",
            "score": hits[0].score,
            "source": str(tmp_path / "refunds.txt"),
        }
    ]


async def test_the_retrieval_tool_nests_its_search_in_the_tool_span(
    spans: Spans, index: DocumentIndex, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("retrieval", {"query": "refunds"}), "Within 14 days [1]."]
    )
    tool = RetrievalTool(index, mode="keyword")
    await Agent("librarian", model, tools=[tool]).reply("When are refunds paid?")

    tool_span = spans.one("execute_tool retrieval")
    assert attrs(tool_span)["gen_ai.tool.type"] == "datastore"
    search = spans.one(f"retrieval {tmp_path / 'index.db'}")
    assert attrs(search)["parley.retrieval.mode"] == "keyword"
    assert attrs(search)["parley.retrieval.hits"] == 1
    assert parent_of(search) == span_id(tool_span)
    assert parent_of(tool_span) == span_id(spans.one("invoke_agent librarian"))
