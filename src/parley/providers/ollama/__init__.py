"""Models an Ollama server runs, through the official `ollama` SDK (extra `ollama`).

- `OllamaChatModel` on `/api/chat`: NDJSON streams, tools (calls without ids from older
  servers get generated ones; ids newer servers send are kept), thinking (`think`: true,
  false or a level; earlier turns' `thinking` sent back), structured output (`format` with
  a JSON schema, then the shared ladder), images and WAV/MP3 audio (base64 in `images`),
  `keep_alive` and the model `options` (`OllamaParameters`), usage from `prompt_eval_count`
  and `eval_count` with the durations in the response's `metadata`, and `done_reason`
  mapped (`stop`, `length`, and `load` / `unload` for calls without messages);
- `OllamaCredential(host=...)`: `OLLAMA_HOST` or `http://localhost:11434`, no key, optional
  headers; `list_models()` gives the bundled cards of common models (llama3.x, qwen3,
  gemma3, mistral, deepseek-r1, ...), and the instance method `list_server_models()` the
  cards of what a server has pulled (`/api/tags`, with `/api/show`'s capabilities on ask).

Errors: Ollama's `{"error": "..."}` answers, and the same as a line in a stream, are mapped
to parley's errors; a model that is not pulled (404) says to run `ollama pull`. Sources:
Ollama's `docs/api.md`, `docs/api/*.mdx` and `api/types.go`.

The SDK is imported on first use (`pip install 'parley[ollama]'`), not with this package;
its HTTP client is httpx-aiohttp's (httpx's interface on aiohttp, which reads a stream's
lines at a fraction of httpx's own cost; see `_sdk`).
"""

from parley.providers.ollama._cards import TOOL_CALLS
from parley.providers.ollama.chat import OllamaChatModel
from parley.providers.ollama.credentials import OllamaCredential
from parley.providers.ollama.formatter import OllamaChatFormatter, OllamaMultiAgentFormatter
from parley.providers.ollama.parameters import OllamaParameters, ThinkLevel

__all__ = [
    "TOOL_CALLS",
    "OllamaChatFormatter",
    "OllamaChatModel",
    "OllamaCredential",
    "OllamaMultiAgentFormatter",
    "OllamaParameters",
    "ThinkLevel",
]
