"""OpenAI's APIs through the official `openai` SDK, and the OpenAI-compatible providers.

- `OpenAIChatModel` (Chat Completions) and `OpenAIResponseModel` (Responses API), with
  `OpenAICredential` and their parameters and formatters;
- presets for providers that speak Chat Completions, each with its own credential, cards
  and quirks: `DeepSeekChatModel`, `MoonshotChatModel`, `XAIChatModel`,
  `DashScopeCompatibleChatModel`, and `OpenAICompatibleChatModel` for any other server
  (vLLM, llama.cpp's server, OpenRouter);
- `AzureOpenAIChatModel` with `AzureOpenAICredential` (provider `azure_openai`): Chat
  Completions on an Azure OpenAI deployment, through the SDK's `AsyncAzureOpenAI`.

The SDK is imported on first use (`pip install 'parley[openai]'`), not with this package.
"""

from parley.providers.openai.azure import AzureOpenAIChatModel, AzureOpenAICredential
from parley.providers.openai.chat import OpenAIChatModel
from parley.providers.openai.compatible import OpenAICompatibleChatModel, OpenAICompatibleParameters
from parley.providers.openai.credentials import OpenAICompatibleCredential, OpenAICredential
from parley.providers.openai.dashscope import (
    DashScopeCompatibleChatModel,
    DashScopeCompatibleCredential,
    DashScopeParameters,
)
from parley.providers.openai.deepseek import (
    DeepSeekChatModel,
    DeepSeekCredential,
    DeepSeekParameters,
)
from parley.providers.openai.formatter import OpenAIChatFormatter, OpenAIMultiAgentFormatter
from parley.providers.openai.moonshot import (
    MoonshotChatModel,
    MoonshotCredential,
    MoonshotParameters,
)
from parley.providers.openai.parameters import OpenAIParameters, OpenAIResponsesParameters
from parley.providers.openai.responses import OpenAIResponseModel
from parley.providers.openai.responses_formatter import OpenAIResponsesFormatter
from parley.providers.openai.xai import XAIChatModel, XAICredential, XAIParameters

__all__ = [
    "AzureOpenAIChatModel",
    "AzureOpenAICredential",
    "DashScopeCompatibleChatModel",
    "DashScopeCompatibleCredential",
    "DashScopeParameters",
    "DeepSeekChatModel",
    "DeepSeekCredential",
    "DeepSeekParameters",
    "MoonshotChatModel",
    "MoonshotCredential",
    "MoonshotParameters",
    "OpenAIChatFormatter",
    "OpenAIChatModel",
    "OpenAICompatibleChatModel",
    "OpenAICompatibleCredential",
    "OpenAICompatibleParameters",
    "OpenAICredential",
    "OpenAIMultiAgentFormatter",
    "OpenAIParameters",
    "OpenAIResponseModel",
    "OpenAIResponsesFormatter",
    "OpenAIResponsesParameters",
    "XAIChatModel",
    "XAICredential",
    "XAIParameters",
]
