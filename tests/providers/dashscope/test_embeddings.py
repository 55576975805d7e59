"""`DashScopeEmbeddingModel` through the real `dashscope` SDK against the local native-API server.

The server's vectors depend only on what they embed (`vector_for`), so every test can tell
which input each vector came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parley.errors import (
    ModelHTTPError,
    ModelOutputError,
    RateLimitError,
    UserError,
)
from parley.messages import AudioBlock, ImageBlock, VideoBlock
from parley.models.credentials import CredentialFactory
from parley.providers.dashscope import DashScopeCredential
from parley.providers.dashscope.embeddings import DashScopeEmbeddingModel
from parley.providers.dashscope.server import (
    MULTIMODAL_EMBEDDING_PATH,
    STORAGE_PATH,
    TEXT_EMBEDDING_PATH,
    UPLOADS_PATH,
    DashScopeServer,
    Embeddings,
    HTTPError,
    Raw,
    RecordedRequest,
    vector_for,
)
from tests._requires import require_module
from tests.providers._fixtures import model_fixtures
from tests.providers._samples import IMAGE_URL, PNG, text_and_images

require_module("dashscope", "dashscope")

TEXTS = [f"text number {i}" for i in range(25)]
VIDEO_URL = "https://example.com/dog.mp4"

ModelFactory = Callable[..., DashScopeEmbeddingModel]


server, make_model = model_fixtures(DashScopeServer, DashScopeEmbeddingModel, "text-embedding-v4")


def texts_of(request: RecordedRequest) -> list[str]:
    texts: list[str] = request.json["input"]["texts"]
    return texts


# -- text embedding -----------------------------------------------------------------------------


async def test_the_request_of_a_batch(server: DashScopeServer, make_model: ModelFactory) -> None:
    server.add(Embeddings(), Embeddings(), Embeddings())
    model = make_model(parameters={"dimensions": 64, "text_type": "query"})
    await model(TEXTS)
    requests = server.embedding_requests()
    assert [r.path for r in requests] == [TEXT_EMBEDDING_PATH] * 3
    first = next(r for r in requests if texts_of(r)[0] == TEXTS[0])
    assert first.json == {
        "model": "text-embedding-v4",
        "input": {"texts": TEXTS[:10]},
        "parameters": {"dimension": 64, "text_type": "query"},
    }
    assert first.headers["authorization"] == "Bearer sk-test"
    server.assert_consumed()


async def test_parameters_per_call_and_the_models_default_size(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings(size=1024), Embeddings())
    model = make_model(parameters={"instruct": "Find the answer."})
    assert model.dimensions == 1024  # the card's default
    await model(["a"])
    response = await model(["a"], dimensions=256, output_type="dense")
    assert response.embeddings == [vector_for("a", 256)]
    plain, sized = server.embedding_requests()
    assert plain.json["parameters"] == {"instruct": "Find the answer."}
    assert sized.json["parameters"] == {
        "instruct": "Find the answer.",
        "dimension": 256,
        "output_type": "dense",
    }


async def test_sizes_the_model_does_not_give_are_refused_before_any_request(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    with pytest.raises(UserError, match="not 300"):
        make_model(parameters={"dimensions": 300})
    model = make_model("text-embedding-v3")
    with pytest.raises(UserError, match="1024, 768, 512, 256, 128, 64 dimensions, not 2048"):
        await model(["a"], dimensions=2048)
    with pytest.raises(UserError, match="text_type"):
        await model(["a"], text_type="question")
    assert server.requests == []


async def test_a_rate_limit_says_how_long_to_wait(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError.rate_limit(retry_after=7))
    with pytest.raises(RateLimitError, match=r"Throttling\.RateQuota") as caught:
        await make_model(max_retries=0)(["a"])
    assert caught.value.status_code == 429
    assert caught.value.retry_after == 7
    assert "request" in str(caught.value)  # DashScope's request id, for support


async def test_an_error_in_a_200_answer_is_mapped(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    body = {"code": "InvalidApiKey", "message": "Invalid API-key provided.", "request_id": "r1"}
    server.add(Raw(json.dumps(body).encode()))
    with pytest.raises(ModelHTTPError, match="Invalid API-key") as caught:
        await make_model()(["a"])
    assert caught.value.status_code == 401


async def test_an_answer_without_its_embeddings_is_an_output_error(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    # Malformed JSON and vectors missing, as every provider's: the contract suite.
    server.add(Raw(b'{"output": {}, "request_id": "r"}'))
    with pytest.raises(ModelOutputError, match=r"without output\.embeddings"):
        await make_model()(["a", "b"])
    assert len(server.embedding_requests()) == 1  # never retried: it would come back the same


# -- multimodal embedding -----------------------------------------------------------------------


async def test_texts_images_and_videos_in_one_request(
    server: DashScopeServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    server.add(Embeddings(reverse=True))
    inputs: list[Any] = [
        *text_and_images(tmp_path),
        VideoBlock.from_url(VIDEO_URL),
    ]
    model = make_model("qwen3-vl-embedding", parameters={"dimensions": 256})
    response = await model(inputs)
    data_url = f"data:image/png;base64,{PNG}"
    keys = ["a caption", "a block of text", IMAGE_URL, data_url, data_url, VIDEO_URL]
    assert response.embeddings == [vector_for(key, 256) for key in keys]
    assert response.usage is not None
    assert response.usage.tokens == 2 + 4 + 4 * 100  # text apart from media, as qwen3-vl counts
    [request] = server.embedding_requests()
    assert request.path == MULTIMODAL_EMBEDDING_PATH
    assert request.json == {
        "model": "qwen3-vl-embedding",
        "input": {
            "contents": [
                {"text": "a caption"},
                {"text": "a block of text"},
                {"image": IMAGE_URL},
                {"image": data_url},
                {"image": data_url},
                {"video": VIDEO_URL},
            ]
        },
        "parameters": {"dimension": 256},
    }
    assert "x-dashscope-ossresourceresolve" not in request.headers


@pytest.mark.parametrize(
    ("model_name", "expected"),
    [
        # 20 elements, 5 images and 1 video a request.
        ("qwen3-vl-embedding", [["text"] + ["image"] * 5, ["image", "video"], ["video", "text"]]),
        # 1 image and 1 video a request.
        (
            "multimodal-embedding-v1",
            [["text", "image"], *[["image"]] * 4, ["image", "video"], ["video", "text"]],
        ),
        # 64 images and 8 videos: everything in one request.
        (
            "tongyi-embedding-vision-plus",
            [["text"] + ["image"] * 6 + ["video", "video", "text"]],
        ),
    ],
)
async def test_requests_are_packed_within_each_models_limits(
    server: DashScopeServer, make_model: ModelFactory, model_name: str, expected: list[list[str]]
) -> None:
    image, video = ImageBlock.from_url(IMAGE_URL), VideoBlock.from_url(VIDEO_URL)
    inputs: list[Any] = ["first", *[image] * 6, video, video, "last"]
    server.add(*[Embeddings()] * len(expected))
    response = await make_model(model_name, max_concurrency=1)(inputs)
    assert len(response.embeddings) == len(inputs)
    sent = [[next(iter(c)) for c in r.json["input"]["contents"]] for r in server.requests]
    assert sent == expected
    server.assert_consumed()


@pytest.mark.parametrize(
    ("model_name", "videos", "texts", "expected"),
    [
        # 20 elements a request.
        ("qwen3-vl-embedding", 0, 25, [["text"] * 20, ["text"] * 5]),
        ("tongyi-embedding-vision-plus", 0, 25, [["text"] * 20, ["text"] * 5]),
        # 8 videos a request; the rest of the 20 elements go with the next ones.
        ("tongyi-embedding-vision-plus", 10, 12, [["video"] * 8, ["video"] * 2 + ["text"] * 12]),
        # 1 video a request.
        ("qwen3-vl-embedding", 3, 1, [["video"], ["video"], ["video", "text"]]),
    ],
)
async def test_each_models_element_and_video_limits(
    server: DashScopeServer,
    make_model: ModelFactory,
    model_name: str,
    videos: int,
    texts: int,
    expected: list[list[str]],
) -> None:
    video = VideoBlock.from_url(VIDEO_URL)
    inputs: list[Any] = [video] * videos + [f"text {i}" for i in range(texts)]
    server.add(*[Embeddings()] * len(expected))
    response = await make_model(model_name, max_concurrency=1)(inputs)
    keys = [VIDEO_URL] * videos + [f"text {i}" for i in range(texts)]
    assert response.embeddings == [vector_for(key, 8) for key in keys]
    sent = [[next(iter(c)) for c in r.json["input"]["contents"]] for r in server.requests]
    assert sent == expected
    server.assert_consumed()


async def test_a_model_of_one_size_is_sent_no_dimension(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Embeddings(size=1024))  # the model's one size, which it gives unasked
    model = make_model("multimodal-embedding-v1", parameters={"dimensions": 1024})
    assert (await model(["a"])).embeddings == [vector_for("a", 1024)]
    assert server.requests[0].json["parameters"] == {}
    with pytest.raises(UserError, match="1024 dimensions, not 512"):
        await model(["a"], dimensions=512)


async def test_media_a_multimodal_model_does_not_take_are_refused_before_any_request(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    audio = AudioBlock.from_bytes(b"RIFF", "audio/wav")
    model = make_model("qwen3-vl-embedding")
    with pytest.raises(UserError, match="text, images and videos; input 2 is a audio block"):
        await model(["a", ImageBlock.from_url(IMAGE_URL), audio])
    with pytest.raises(UserError, match="takes no text_type"):
        await model(["a"], text_type="query")
    assert server.requests == []


async def test_usage_counted_as_the_tongyi_models_count_it(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    usage = {
        "input_tokens": 903,
        "input_tokens_details": {"image_tokens": 896, "text_tokens": 7},
        "output_tokens": 2,
        "total_tokens": 905,
    }
    server.add(Embeddings(usage=usage), Embeddings(usage={}))
    model = make_model("tongyi-embedding-vision-plus")
    response = await model(["a", ImageBlock.from_url(IMAGE_URL)])
    assert response.usage is not None
    assert response.usage.tokens == 903  # media already in input_tokens
    unknown = await model(["a"])
    assert unknown.usage is not None
    assert unknown.usage.tokens is None


async def test_local_media_uploaded_to_storage_with_upload_files(
    server: DashScopeServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    video = tmp_path / "dog.mp4"
    video.write_bytes(b"fake video")
    server.add(Embeddings())
    model = make_model("qwen3-vl-embedding", upload_files=True)
    response = await model(["a dog", VideoBlock.from_path(video)])
    paths = [r.path.split("?", 1)[0] for r in server.requests]
    assert paths == [UPLOADS_PATH, STORAGE_PATH, MULTIMODAL_EMBEDDING_PATH]
    location = "oss://dashscope-instant/qwen3-vl-embedding/scripted/dog.mp4"
    request = server.requests[-1]
    assert request.json["input"]["contents"] == [{"text": "a dog"}, {"video": location}]
    assert request.headers["x-dashscope-ossresourceresolve"] == "enable"
    assert b"fake video" in server.stored[location.removeprefix("oss://")]
    assert response.embeddings == [vector_for("a dog", 8), vector_for(location, 8)]


# -- credential, cards, caches, sync --------------------------------------------------------------


async def test_a_credential_from_stored_settings_with_a_workspace(server: DashScopeServer) -> None:
    credential = CredentialFactory.from_dict(
        {"type": "dashscope", "api_key": "sk-stored", "base_url": server.url, "workspace": "ws-1"}
    )
    server.add(Embeddings())
    model = DashScopeEmbeddingModel(credential, "text-embedding-v4")
    try:
        await model(["a"])
    finally:
        await model.aclose()
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer sk-stored"
    assert headers["x-dashscope-workspace"] == "ws-1"


def test_the_credential_lists_the_embedding_models_and_their_sizes() -> None:
    assert DashScopeCredential.get_embedding_model_class() is DashScopeEmbeddingModel
    cards = {card.name: card for card in DashScopeCredential.list_embedding_models()}
    assert sorted(cards) == [
        "multimodal-embedding-v1",
        "qwen3-vl-embedding",
        "text-embedding-v3",
        "text-embedding-v4",
        "tongyi-embedding-vision-plus",
    ]
    v4 = cards["text-embedding-v4"]
    assert v4.dimension_choices() == [2048, 1536, 1024, 768, 512, 256, 128, 64]
    assert v4.default_dimensions() == 1024
    assert v4.output_types == ["application/x-embedding"]
    assert cards["text-embedding-v3"].dimension_choices() == [1024, 768, 512, 256, 128, 64]
    vl = cards["qwen3-vl-embedding"]
    assert vl.default_dimensions() == 2560
    assert vl.accepts("image/png")
    assert vl.accepts("video/mp4")
    assert "text_type" not in vl.parameter_schema["properties"]
    assert cards["multimodal-embedding-v1"].dimension_choices() == [1024]
    # The chat listing stays chat models only.
    assert not set(cards) & {card.name for card in DashScopeCredential.list_models()}
