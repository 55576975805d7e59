"""Embedding models an Ollama server runs, through the official `ollama` SDK (extra `ollama`).

- `OllamaEmbeddingModel` on `/api/embed`: up to 512 texts a request, unit-length vectors,
  `dimensions` (the first values of each vector, unit length again), `truncate`,
  `keep_alive` and the model `options` (`OllamaEmbeddingParameters`), the token count from
  `prompt_eval_count`;
- bundled cards for common models (embeddinggemma, qwen3-embedding, nomic-embed-text,
  mxbai-embed-large, all-minilm), listed by `OllamaCredential.list_embedding_models()`;
  what a server has pulled by `OllamaCredential(...).list_server_embedding_models()`
  (`/api/tags`, and `/api/show`'s `embedding` capability).

The credential, the SDK's client (on aiohttp) and the error mapping are the chat model's
(`parley.providers.ollama`): a model that is not pulled says to run `ollama pull`, an input
longer than the context with `truncate: false` is a `ContextLengthError`.
"""

from parley.providers.ollama.embeddings.model import OllamaEmbeddingModel, OllamaEmbeddingParameters

__all__ = ["OllamaEmbeddingModel", "OllamaEmbeddingParameters"]
