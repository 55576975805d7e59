"""AgentScope's credentials under `agentscope.credential`'s names: parley's own classes.

parley's credentials take what AgentScope's do (`api_key`, `base_url`; Ollama's `host`), so
they are the same classes, except `DashScopeCredential`: AgentScope's points at DashScope's
OpenAI-compatible mode, which is parley's `DashScopeCompatibleCredential`.
"""

from parley.models import Credential as CredentialBase
from parley.models import CredentialFactory
from parley.providers.anthropic import AnthropicCredential
from parley.providers.gemini import GeminiCredential
from parley.providers.ollama import OllamaCredential
from parley.providers.openai import DashScopeCompatibleCredential as DashScopeCredential
from parley.providers.openai import (
    DeepSeekCredential,
    MoonshotCredential,
    OpenAICredential,
    XAICredential,
)

__all__ = [
    "AnthropicCredential",
    "CredentialBase",
    "CredentialFactory",
    "DashScopeCredential",
    "DeepSeekCredential",
    "GeminiCredential",
    "MoonshotCredential",
    "OllamaCredential",
    "OpenAICredential",
    "XAICredential",
]
