"""Google's embedding models through the official `google-genai` SDK.

- `GeminiEmbeddingModel`: `gemini-embedding-001` (text) and `gemini-embedding-2` (text,
  images, audio, video and PDFs) on the Gemini API (`batchEmbedContents`), or on Vertex AI
  (`batchEmbedContents` for Gemini models, `predict` for the older text models);
- `GeminiEmbeddingParameters`: `dimensions` (`outputDimensionality`), `task_type`, `title`,
  and Vertex AI's `auto_truncate`.

It takes the chat model's `GeminiCredential` (`parley.providers.gemini`), whose
`list_embedding_models()` gives these models' cards. The SDK is imported on first use
(`pip install 'parley[gemini]'`). Sources: the Gemini API's embeddings guide and reference,
Vertex AI's Gemini Embedding 2 page, and `google-genai`'s `models.embed_content`.
"""

from parley.providers.gemini.embeddings.embedding import (
    GeminiEmbeddingModel,
    GeminiEmbeddingParameters,
    TaskType,
)

__all__ = ["GeminiEmbeddingModel", "GeminiEmbeddingParameters", "TaskType"]
