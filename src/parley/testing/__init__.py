"""Test doubles for external services: local HTTP servers that speak a provider's wire format.

Shipped in the package so that tests of parley, and of code built on it, need no network.

- `parley.testing.openai_server`: OpenAI's Chat Completions, Responses and embeddings APIs.
- `parley.testing.gemini_server`: the Gemini API (and Vertex AI's paths): `generateContent`,
  `streamGenerateContent`, and the embedding calls (`batchEmbedContents`, `embedContent`,
  `predict`).
- `parley.testing.ollama_server`: Ollama's API (`/api/chat`, `/api/embed`, `/api/tags`,
  `/api/show`).
- `parley.testing.dashscope_server`: DashScope's native API (text and multimodal generation,
  text and multimodal embedding, and the SDK's uploads of local files).
- `parley.testing.anthropic_server`: Anthropic's Messages API.
- `parley.testing.cosyvoice_server`: DashScope's duplex WebSocket API for CosyVoice speech.

Scripted chat models (no HTTP at all) are in `parley.models.testing`.
"""
