"""Google's Gemini models through the official `google-genai` SDK.

- `GeminiChatModel` (the Gemini API's `generateContent`, or Vertex AI's), with
  `GeminiCredential` (an API key from `GOOGLE_API_KEY` / `GEMINI_API_KEY`, or Vertex AI's
  project, location and Google credentials), `GeminiParameters`, and the formatters
  `GeminiChatFormatter` and `GeminiMultiAgentFormatter`.

The SDK is imported on first use (`pip install 'parley[gemini]'`), not with this package.
Sources: the Gemini API reference (`GenerateContentResponse`, `FinishReason`,
`UsageMetadata`), its guides on thinking, thought signatures, function calling and
structured output, and `google-genai`'s own source.
"""

from parley.providers.gemini.chat import GeminiChatModel
from parley.providers.gemini.credentials import GeminiCredential
from parley.providers.gemini.formatter import GeminiChatFormatter, GeminiMultiAgentFormatter
from parley.providers.gemini.parameters import GeminiParameters

__all__ = [
    "GeminiChatFormatter",
    "GeminiChatModel",
    "GeminiCredential",
    "GeminiMultiAgentFormatter",
    "GeminiParameters",
]
