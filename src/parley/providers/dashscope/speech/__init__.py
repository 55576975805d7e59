"""Qwen-TTS on Alibaba Cloud Model Studio (DashScope).

- `DashScopeTTSModel`: `qwen3-tts-flash` and its kin on the native multimodal-generation
  endpoint, the whole text in one request, its audio streamed back (24 kHz PCM);
- `DashScopeRealtimeTTSModel`: `qwen3-tts-flash-realtime` and `qwen-tts-realtime`, text
  pushed in pieces over a WebSocket as a chat model writes it;
- `DashScopeCosyVoiceRealtimeTTSModel` (`parley.providers.dashscope.speech.cosyvoice`):
  CosyVoice v3, text pushed in pieces over the duplex inference WebSocket, spoken a sentence
  at a time.

All take the chat models' `DashScopeCredential` (`parley.providers.dashscope`), whose
`list_tts_models()` gives their cards. `pip install 'parley[dashscope]'`.
"""

from parley.providers.dashscope.speech.cosyvoice import (
    DashScopeCosyVoiceParameters,
    DashScopeCosyVoiceRealtimeTTSModel,
)
from parley.providers.dashscope.speech.model import DashScopeTTSModel, DashScopeTTSParameters
from parley.providers.dashscope.speech.realtime import (
    DashScopeRealtimeTTSModel,
    DashScopeRealtimeTTSParameters,
)

__all__ = [
    "DashScopeCosyVoiceParameters",
    "DashScopeCosyVoiceRealtimeTTSModel",
    "DashScopeRealtimeTTSModel",
    "DashScopeRealtimeTTSParameters",
    "DashScopeTTSModel",
    "DashScopeTTSParameters",
]
