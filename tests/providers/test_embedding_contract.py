"""What every embedding provider does, whatever its wire: one suite, run once per provider.

Each test takes `embedder` (see `conftest.py`): the provider's wire-format server, if it has
one, and its model, built through the official SDK. The servers' vectors depend only on what
they embed (`vector_for`), so a test tells which input each vector came from. A provider's own
file keeps what is particular to it (its request's fields, its cards, its media).
"""

from __future__ import annotations

import logging
import sys

import pytest

from parley import errors
from parley.messages import ImageBlock
from parley.models.credentials import CredentialFactory
from parley.providers._server.embeddings import vector_for
from tests.embeddings.test_base import ItemCache, MemoryCache
from tests.providers._chat import API_KEY, DEFAULT_HOST, unset_keys
from tests.providers._embedding import (
    INDEXED,
    PER_CALL_SIZE,
    WIRE,
    Embedder,
    EmbeddingProvider,
    require,
    texts,
)
from tests.providers._wording import dropped, unreachable

pytestmark = pytest.mark.needs(WIRE)  # all but the tests that say otherwise


def batched(entry: EmbeddingProvider) -> list[str]:
    """Texts for two whole batches and three more."""
    return list(texts(2 * entry.batch + 3))


# -- answers --------------------------------------------------------------------------------


async def test_vectors_in_input_order_across_batches(embedder: Embedder) -> None:
    embedder.add(*[embedder.module.Embeddings()] * 3)
    inputs = batched(embedder.entry)
    size = embedder.entry.sizes[0]
    response = await embedder.model(parameters={"dimensions": size})(inputs)
    assert response.embeddings == [vector_for(text, size) for text in inputs]
    assert response.source == "api"
    assert response.usage is not None
    assert response.usage.tokens == 3 * len(inputs)  # the servers count words
    requests = embedder.requests()
    batch = embedder.entry.batch
    assert sorted(len(embedder.texts_of(r)) for r in requests) == [3, batch, batch]
    assert sorted(t for r in requests for t in embedder.texts_of(r)) == sorted(inputs)
    embedder.server.assert_consumed()


@pytest.mark.needs(WIRE, INDEXED)
async def test_vectors_listed_out_of_order_are_put_back_by_their_index(embedder: Embedder) -> None:
    embedder.add(embedder.module.Embeddings(reverse=True))
    response = await embedder.model()(["a", "b", "c"])
    assert response.embeddings == [vector_for(t, 8) for t in ("a", "b", "c")]


@pytest.mark.needs(WIRE, PER_CALL_SIZE)
async def test_a_size_per_call_and_one_the_card_refuses(embedder: Embedder) -> None:
    embedder.add(embedder.module.Embeddings())
    size, refused = embedder.entry.sizes
    model = embedder.model()
    assert (await model(["a"], dimensions=size)).embeddings == [vector_for("a", size)]
    with pytest.raises(errors.UserError, match=f"not {refused}"):
        await model(["a"], dimensions=refused)
    with pytest.raises(errors.UserError, match=f"not {refused}"):
        embedder.model(parameters={"dimensions": refused})
    assert len(embedder.requests()) == 1  # the refused sizes sent nothing


@pytest.mark.needs
async def test_usage_counts_every_input(embedder: Embedder) -> None:
    if embedder.server is not None:
        embedder.add(embedder.module.Embeddings())
    response = await embedder.model()(["one two", "three"])
    assert len(response.embeddings) == 2
    assert response.usage is not None
    assert response.usage.tokens is not None
    assert response.usage.tokens >= 2


@pytest.mark.needs
async def test_a_text_model_refuses_media_before_any_request(embedder: Embedder) -> None:
    with pytest.raises(errors.UserError, match="text only; input 1 is a image block"):
        await embedder.model()(["a", ImageBlock.from_url("https://example.com/cat.png")])
    assert embedder.server is None or embedder.server.requests == []


# -- faults and retries ----------------------------------------------------------------------


async def test_a_429_is_retried_for_its_batch_only_after_retry_after(
    embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    inputs = batched(embedder.entry)
    batch = embedder.entry.batch
    # The backoff waits near zero, so a wait of 0.10 s can only be the header's.
    limited = embedder.module.HTTPError.rate_limit(retry_after=0.1)
    embedder.add(*[embedder.fail_once(inputs[batch], limited)] * 4)
    with caplog.at_level(logging.WARNING, logger="parley.models"):
        response = await embedder.model()(inputs)
    assert response.embeddings == [vector_for(text, 8) for text in inputs]
    firsts = [embedder.texts_of(r)[0] for r in embedder.requests()]
    assert sorted(firsts) == sorted([inputs[0], inputs[batch], inputs[batch], inputs[2 * batch]])
    assert "embedding batch 2/3 failed" in caplog.text
    assert "retry 1 of 3 in 0.10s" in caplog.text
    embedder.server.assert_consumed()


async def test_a_rate_limit_says_how_long_to_wait(embedder: Embedder) -> None:
    embedder.add(embedder.module.HTTPError.rate_limit(retry_after=7))
    with pytest.raises(errors.RateLimitError) as caught:
        await embedder.model(max_retries=0)(["a"])
    assert (caught.value.status_code, caught.value.retry_after) == (429, 7)


async def test_a_5xx_is_retried_then_surfaced(embedder: Embedder) -> None:
    embedder.add(embedder.entry.error(503, "overloaded"), embedder.entry.error(500, "broken"))
    with pytest.raises(errors.ModelHTTPError, match="broken") as caught:
        await embedder.model(max_retries=1)(["a"])
    assert caught.value.status_code == 500
    assert len(embedder.requests()) == 2
    embedder.server.assert_consumed()


async def test_a_400_is_not_retried_and_stops_the_other_batches(embedder: Embedder) -> None:
    embedder.add(embedder.entry.error(400, "invalid argument"))
    with pytest.raises(errors.ModelHTTPError, match="invalid argument") as caught:
        await embedder.model(max_concurrency=1)(batched(embedder.entry))
    assert caught.value.status_code == 400
    assert not isinstance(caught.value, errors.RateLimitError)
    assert len(embedder.requests()) == 1
    embedder.server.assert_consumed()


async def test_a_reset_connection_is_retried_then_surfaced(embedder: Embedder) -> None:
    embedder.add(embedder.module.Reset(), embedder.module.Embeddings())
    assert (await embedder.model()(["a"])).embeddings == [vector_for("a", 8)]
    embedder.add(embedder.module.Reset())
    lost = dropped(embedder.entry.provider, embedder.server.url)
    with pytest.raises(errors.ModelConnectionError, match=lost):
        await embedder.model(max_retries=0)(["a"])
    embedder.server.assert_consumed()


async def test_an_unreachable_server_is_named(embedder: Embedder) -> None:
    model = embedder.model(max_retries=0)
    url = embedder.server.url
    embedder.server.stop()
    expected = unreachable(embedder.entry.provider, url, embedder.entry.hint)
    with pytest.raises(errors.ModelConnectionError, match=expected):
        await model(["a"])


async def test_malformed_and_incomplete_answers_are_output_errors_not_retried(
    embedder: Embedder,
) -> None:
    embedder.add(
        embedder.module.Raw(b'{"data": [{"embeddings": [{"val'),
        embedder.module.Embeddings(missing=1),
    )
    model = embedder.model()
    with pytest.raises(errors.ModelOutputError, match="malformed JSON"):
        await model(["a", "b"])
    with pytest.raises(errors.ModelOutputError, match=embedder.entry.missing):
        await model(["a", "b"])
    assert len(embedder.requests()) == 2  # never retried: it would come back the same
    embedder.server.assert_consumed()


async def test_an_answer_slower_than_the_timeout_is_retried_then_surfaced(
    embedder: Embedder,
) -> None:
    steps = embedder.module.Embeddings
    embedder.add(steps(delay=1.0), steps())
    response = await embedder.model(timeout=0.3)(["a"])
    assert response.embeddings == [vector_for("a", 8)]
    assert len(embedder.requests()) == 2
    embedder.add(steps(delay=1.0))
    with pytest.raises(errors.ModelTimeoutError):
        await embedder.model(timeout=0.3, max_retries=0)(["a"])


# -- caches, the sync twin, the SDK ----------------------------------------------------------


@pytest.mark.needs
async def test_a_repeated_request_is_answered_from_the_cache(embedder: Embedder) -> None:
    if embedder.server is not None:
        embedder.add(*[embedder.module.Embeddings()] * 3)
    model = embedder.model(embedding_cache=MemoryCache())
    inputs = batched(embedder.entry)
    first = await model(inputs)
    again = await model(inputs)
    assert (first.source, again.source) == ("api", "cache")
    assert again.embeddings == first.embeddings
    if embedder.server is not None:
        assert len(embedder.requests()) == 3
        embedder.server.assert_consumed()


async def test_a_per_item_cache_sends_only_the_new_texts(embedder: Embedder) -> None:
    embedder.add(embedder.module.Embeddings(), embedder.module.Embeddings())
    model = embedder.model(embedding_cache=ItemCache())
    await model(["a", "b"])
    response = await model(["b", "c", "a", "c"])
    assert response.embeddings == [vector_for(t, 8) for t in ("b", "c", "a", "c")]
    assert [embedder.texts_of(r) for r in embedder.requests()] == [["a", "b"], ["c"]]


def test_the_sync_twin(embedding_provider: EmbeddingProvider) -> None:
    require(embedding_provider)

    assert embedding_provider.server is not None
    assert embedding_provider.module is not None
    with embedding_provider.server() as server:
        server.add(embedding_provider.module.Embeddings())
        model = embedding_provider.build(server, {"model": embedding_provider.model})
        try:
            response = model.call_sync(["a", "b"])
        finally:
            model.close_sync()
    assert response.embeddings == [vector_for("a", 8), vector_for("b", 8)]


@pytest.mark.needs
async def test_a_missing_sdk_names_the_extra(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    (module, extra), *_ = embedder.entry.requires
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(errors.MissingDependencyError, match=rf"parley\[{extra}\]"):
        await embedder.model()(["a"])


# -- keys and hosts --------------------------------------------------------------------------


@pytest.mark.needs(API_KEY)
async def test_the_credential_from_the_environment(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = unset_keys(embedder.entry.keys, monkeypatch)
    assert keys.base_url_variable is not None
    monkeypatch.setenv(keys.variables[0], "sk-from-env")
    monkeypatch.setenv(keys.base_url_variable, embedder.server.url)
    embedder.add(embedder.module.Embeddings())
    # No credential given: the model makes its own, from the environment.
    model = keys.credential.get_embedding_model_class()(model=embedder.entry.model)
    embedder.made.append(model)
    assert (await model(["a"])).embeddings == [vector_for("a", 8)]
    assert embedder.server.requests[0].headers[keys.header] == keys.scheme + "sk-from-env"
    monkeypatch.delenv(keys.variables[0])
    unkeyed = keys.credential.get_embedding_model_class()(model=embedder.entry.model)
    embedder.made.append(unkeyed)
    with pytest.raises(errors.ConfigurationError, match=" or ".join(keys.variables)):
        await unkeyed(["a"])
    assert len(embedder.requests()) == 1  # refused before any request


@pytest.mark.needs(API_KEY)
async def test_the_credential_from_stored_settings(embedder: Embedder) -> None:
    keys = embedder.entry.keys
    assert keys is not None
    settings = {"type": keys.kind, "api_key": "sk-stored", "base_url": embedder.server.url}
    credential = CredentialFactory.from_dict(settings)
    cls = credential.get_embedding_model_class()
    assert cls is type(embedder.model())
    embedder.add(embedder.module.Embeddings())
    model = cls(credential, embedder.entry.model)
    embedder.made.append(model)
    assert (await model(["a"])).embeddings == [vector_for("a", 8)]
    assert embedder.server.requests[0].headers[keys.header] == keys.scheme + "sk-stored"


@pytest.mark.needs(DEFAULT_HOST)
async def test_requests_elsewhere_are_blocked_in_the_tests(embedder: Embedder) -> None:
    remote = embedder.entry.remote
    assert remote is not None
    with pytest.raises(errors.UserError, match=rf"{remote.host}.* are blocked"):
        await embedder.model(credential=remote.credential())(["a"])
