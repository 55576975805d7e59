"""Anthropic's Claude models through the official `anthropic` SDK (Messages API).

- `AnthropicChatModel`, with `AnthropicCredential` (the key from `ANTHROPIC_API_KEY`),
  `AnthropicParameters` (thinking, effort, prompt caching, server tools), and the
  formatters `AnthropicChatFormatter` and `AnthropicMultiAgentFormatter`.

The SDK is imported on first use (`pip install 'parley[anthropic]'`), not with this package;
it sends through its `DefaultAioHttpClient` (httpx2's interface on aiohttp, the SDK's
`aiohttp` extra), whose stream reads cost a fraction of httpx2's own (see `_sdk`).
Quirks (each with its source in the module that handles it): the system prompt is a
top-level field; `max_tokens` is required (defaulted from the model card); API version
2026-10-21, which SDK 2.x sends, removed `temperature`, `top_p` and `top_k`; thinking blocks
must go back with their signature, and redacted thinking and server-tool blocks unchanged;
a forced tool choice is refused while the model thinks; a long server-tool turn may stop with
`pause_turn` (`ChatResponse.paused`), to be sent back as it is to continue.
"""

from parley.providers.anthropic.chat import AnthropicChatModel
from parley.providers.anthropic.credentials import AnthropicCredential
from parley.providers.anthropic.formatter import (
    AnthropicChatFormatter,
    AnthropicMultiAgentFormatter,
)
from parley.providers.anthropic.parameters import AnthropicParameters

__all__ = [
    "AnthropicChatFormatter",
    "AnthropicChatModel",
    "AnthropicCredential",
    "AnthropicMultiAgentFormatter",
    "AnthropicParameters",
]
