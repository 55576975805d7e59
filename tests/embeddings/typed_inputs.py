"""What the type checker says of embedding models' inputs (mypy checks this file; pytest not).

`EmbeddingModel` is generic over its inputs: a text model takes strings, a multimodal model
blocks too. Each `type: ignore` marks an error mypy must find: strict mode's
`warn_unused_ignores` fails the check when one stops being an error (say, a model's inputs
widened to `Any`).
"""

from __future__ import annotations

from typing import assert_type

from parley.embeddings import EmbeddingModel, EmbeddingResponse
from parley.messages import ImageBlock, TextBlock, VideoBlock
from parley.providers.dashscope.embeddings import DashScopeEmbeddingModel
from parley.providers.gemini.embeddings import GeminiEmbeddingModel
from parley.providers.local.embeddings import LocalEmbeddingModel
from parley.providers.ollama.embeddings import OllamaEmbeddingModel
from parley.providers.openai.embeddings import OpenAIEmbeddingModel


async def text_models_take_strings_only(
    openai: OpenAIEmbeddingModel,
    ollama: OllamaEmbeddingModel,
    local: LocalEmbeddingModel,
    image: ImageBlock,
) -> None:
    """A block given to a text model is a type error, before any call."""
    assert_type(await openai(["a text"]), EmbeddingResponse)
    await openai([image])  # type: ignore[list-item]
    await ollama([TextBlock(text="a text")])  # type: ignore[list-item]
    assert_type(local.call_sync(["a text"]), EmbeddingResponse)


async def multimodal_models_take_blocks(
    dashscope: DashScopeEmbeddingModel,
    gemini: GeminiEmbeddingModel,
    image: ImageBlock,
    video: VideoBlock,
) -> None:
    """Strings and media blocks mix in one call to a multimodal model."""
    assert_type(await dashscope(["a caption", image, video]), EmbeddingResponse)
    assert_type(await gemini([image, "a caption"]), EmbeddingResponse)
    await gemini([3])  # type: ignore[list-item]


def a_text_model_is_a_model_of_strings(model: OpenAIEmbeddingModel) -> EmbeddingModel[str]:
    """Code written for any text model takes every provider's."""
    return model
