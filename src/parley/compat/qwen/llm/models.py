"""The model types Qwen-Agent has, registered under its names, each on a parley chat model.

Which parley model each becomes, and how its config is read, is
`parley.compat.qwen._llm_config`'s mapping; the classes differ only in what they tell
Qwen-Agent code about themselves (`support_multimodal_input`, `support_audio_input`).
"""

from __future__ import annotations

from parley.compat.qwen.llm.base import ParleyChatModel, register_llm

__all__ = [
    "QwenAudioChatAtDS",
    "QwenChatAtDS",
    "QwenOmniChatAtOAI",
    "QwenVLChatAtDS",
    "QwenVLChatAtOAI",
    "QwenVLoChatAtDS",
    "TextChatAtAzure",
    "TextChatAtOAI",
]


@register_llm("oai")
class TextChatAtOAI(ParleyChatModel):
    """An OpenAI-compatible service (`model_server` its URL; none: OpenAI's own)."""


@register_llm("azure")
class TextChatAtAzure(TextChatAtOAI):
    """Azure OpenAI (`AzureOpenAIChatModel`): `model` the deployment, at `azure_endpoint`."""


@register_llm("qwen_dashscope")
class QwenChatAtDS(ParleyChatModel):
    """A Qwen model on DashScope's native API (functions natively by default, as Qwen-Agent)."""


class _Multimodal(ParleyChatModel):
    @property
    def support_multimodal_input(self) -> bool:
        """Images (and video) go to the model as they are."""
        return True


@register_llm("qwenvl_dashscope")
class QwenVLChatAtDS(_Multimodal):
    """Qwen-VL on DashScope's native API."""


@register_llm("qwenvlo_dashscope")
class QwenVLoChatAtDS(_Multimodal):
    """Qwen-VLo on DashScope's native API."""


@register_llm("qwenvl_oai")
class QwenVLChatAtOAI(_Multimodal):
    """Qwen-VL on an OpenAI-compatible service."""


class _Audio(_Multimodal):
    @property
    def support_audio_input(self) -> bool:
        """Audio goes to the model as it is."""
        return True


@register_llm("qwenomni_oai")
class QwenOmniChatAtOAI(_Audio):
    """Qwen-Omni on an OpenAI-compatible service (none given: DashScope's compatible mode)."""


@register_llm("qwenaudio_dashscope")
class QwenAudioChatAtDS(_Audio):
    """Qwen-Audio on DashScope's native API."""
