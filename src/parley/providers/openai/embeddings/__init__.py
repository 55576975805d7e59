"""OpenAI's embeddings API (`/v1/embeddings`) through the official `openai` SDK.

- `OpenAIEmbeddingModel` with `OpenAICredential`: text-embedding-3-small (1536 dimensions,
  shortened to any size by `dimensions`), text-embedding-3-large (3072) and
  text-embedding-ada-002 (1536 only); up to 2048 texts a request, the vectors sent as
  base64 and decoded with numpy when it is installed;
- `OpenAICompatibleEmbeddingModel` with `OpenAICompatibleCredential`: any server that speaks
  the same API (vLLM, LM Studio, llama.cpp's server, Ollama's `/v1`, DashScope's compatible
  mode), with its own `batch_size` and `encoding_format="float"` for servers that refuse
  base64.

The SDK is imported on first use (`pip install 'parley[openai]'`), not with this package;
errors are mapped as the chat models map them (`parley.providers.openai._errors`).
"""

from parley.providers.openai.embeddings.model import (
    OpenAICompatibleEmbeddingModel,
    OpenAICompatibleEmbeddingParameters,
    OpenAIEmbeddingModel,
    OpenAIEmbeddingParameters,
)

__all__ = [
    "OpenAICompatibleEmbeddingModel",
    "OpenAICompatibleEmbeddingParameters",
    "OpenAIEmbeddingModel",
    "OpenAIEmbeddingParameters",
]
