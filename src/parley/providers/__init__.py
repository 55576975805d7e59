"""The providers: one package each, whole, standing on the bases and on nothing of each other.

Each package holds a provider's credential, chat model(s), formatter, cards, embeddings
(`embeddings/`), speech (`speech/`), wire parsing, error mapping and its test server
(`server.py`, a local HTTP server speaking the provider's wire format for the official SDK):

- `parley.providers.openai`: Chat Completions and Responses, Azure OpenAI, and the
  OpenAI-compatible presets (DeepSeek, Moonshot, xAI, DashScope's compatible mode).
- `parley.providers.anthropic`: the Messages API.
- `parley.providers.gemini`: the Gemini API and Vertex AI.
- `parley.providers.ollama`: an Ollama server's `/api/chat` and `/api/embed`.
- `parley.providers.dashscope`: DashScope's native text, multimodal, embedding and speech APIs.
- `parley.providers.local`: in-process models (llama.cpp chat, onnxruntime embeddings, the
  embedded voices) and `parley models pull`.

`parley.providers.auto.choose_model` picks the model a user already has. The bases
(`parley.models`, `parley.embeddings`, `parley.tts`) import no provider: they find one by name
through the credential registry (`parley.models.credentials`).
"""
