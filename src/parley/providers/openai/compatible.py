"""`OpenAICompatibleChatModel`: any server speaking Chat Completions (vLLM, llama.cpp, ...).

Example:
    >>> credential = OpenAICompatibleCredential(base_url="http://localhost:8000/v1")
    >>> model = OpenAICompatibleChatModel(credential, "Qwen/Qwen3-8B")
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from parley.models.credentials import Credential
from parley.models.parameters import Parameters
from parley.providers.openai.chat import OpenAIChatModel
from parley.providers.openai.credentials import OpenAICompatibleCredential

__all__ = ["OpenAICompatibleChatModel", "OpenAICompatibleParameters"]


class OpenAICompatibleParameters(Parameters):
    """The common parameters, the sampling knobs open servers add, and a pass-through."""

    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    reasoning_effort: str | None = Field(default=None, description="For reasoning models.")
    top_k: int | None = Field(default=None, description="vLLM, llama.cpp: top-k sampling.")
    min_p: float | None = Field(default=None, ge=0, le=1, description="vLLM, llama.cpp.")
    repetition_penalty: float | None = Field(default=None, gt=0, description="vLLM.")
    extra_body: dict[str, Any] | None = Field(
        default=None,
        description="Other fields sent as they are, e.g. vLLM's `chat_template_kwargs` or "
        "OpenRouter's `reasoning`.",
    )


class OpenAICompatibleChatModel(OpenAIChatModel):
    """A model behind any OpenAI-compatible Chat Completions server.

    The credential's `base_url` says where; a key is sent only if given. Reasoning is read
    from `reasoning_content` or `reasoning`, as these servers send it.
    """

    provider: ClassVar[str] = "openai_compatible"
    credential_class: ClassVar[type[Credential] | None] = OpenAICompatibleCredential
    parameters_class: ClassVar[type[Parameters]] = OpenAICompatibleParameters
    cards_location: ClassVar[str | None] = None
    key_required: ClassVar[bool] = False
    # These servers all take `max_tokens`; not all know `max_completion_tokens`.
    max_tokens_field: ClassVar[str] = "max_tokens"

    def _check_credential(self, credential: Credential | None) -> Credential | None:
        checked = super()._check_credential(credential)
        assert isinstance(checked, OpenAICompatibleCredential)  # the base built or checked it
        checked.require_endpoint(type(self).__name__)
        return checked

    def wire_parameters(self, parameters: Parameters, *, tools: bool) -> dict[str, Any]:
        """The request fields, `extra_body` spread into them."""
        fields = super().wire_parameters(parameters, tools=tools)
        extra = fields.pop("extra_body", None) or {}
        return {**fields, **extra}
