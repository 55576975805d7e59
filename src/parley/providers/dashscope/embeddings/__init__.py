"""DashScope's (Model Studio's) embedding models through the `dashscope` SDK's native API.

- `DashScopeEmbeddingModel`: text models on text embedding (`text-embedding-v4`, `-v3`) and
  multimodal models on multimodal embedding (`qwen3-vl-embedding`,
  `tongyi-embedding-vision-plus`, `multimodal-embedding-v1`): texts, images and videos;
- `DashScopeEmbeddingParameters`: `dimensions`, `text_type`, `output_type`, `instruct`.

It takes the chat models' `DashScopeCredential` (`parley.providers.dashscope`), whose
`list_embedding_models()` gives these models' cards. The SDK is imported on first use
(`pip install 'parley[dashscope]'`). Sources: Model Studio's text embedding and multimodal
embedding API references, and the SDK's `dashscope.v2.resources.embeddings`.
"""

from parley.providers.dashscope.embeddings.embedding import (
    MULTIMODAL_LIMITS,
    DashScopeEmbeddingModel,
    DashScopeEmbeddingParameters,
    is_multimodal_embedding_model,
)

__all__ = [
    "MULTIMODAL_LIMITS",
    "DashScopeEmbeddingModel",
    "DashScopeEmbeddingParameters",
    "is_multimodal_embedding_model",
]
