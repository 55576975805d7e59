"""AgentScope's credentials under `agentscope.credential`'s names: parley's own classes.

parley's credentials take what AgentScope's do (`api_key`, `base_url`; Ollama's `host`), so
they are the same classes, except `DashScopeCredential`: AgentScope's points at DashScope's
OpenAI-compatible mode, which is parley's `DashScopeCompatibleCredential`.
"""

from parley.models import Credential as CredentialBase
from parley.models import CredentialFactory
from parley.models.anthropic import AnthropicCredential
from parley.models.gemini import GeminiCredential
from parley.models.ollama import OllamaCredential
from parley.models.openai import DashScopeCompatibleCredential as DashScopeCredential
from parley.models.openai import (
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
