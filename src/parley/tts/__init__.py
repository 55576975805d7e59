"""Text-to-speech: models that turn text into audio, whole or as it is written.

- `TTSModel`: `await model.synthesize(text)` gives a `TTSResponse` (an audio block, usage);
  with `stream=True`, its pieces as they arrive.
- `RealtimeTTSModel`: text pushed in pieces over one connection (`push`, then `synthesize()`
  for the rest), for speaking a model's answer while it is being written.
- `TTSMiddleware`, which speaks an agent's answers, sits on the agents' floor:
  `parley.agents.speech`.

Providers: `parley.providers.local.speech` (the embedded voice, offline),
`parley.providers.openai.speech`, `parley.providers.dashscope.speech`. Build one from a spec
with `parley.tts.spec.tts_model_from_spec`.
"""

from parley.tts._audio import PCMFormat, pcm_format, pcm_media_type, read_wav, wav_bytes
from parley.tts.base import AudioChunk, TTSModel, TTSParameters, TTSResponse, TTSUsage
from parley.tts.realtime import RealtimeSession, RealtimeTTSModel, UtteranceDone

__all__ = [
    "AudioChunk",
    "PCMFormat",
    "RealtimeSession",
    "RealtimeTTSModel",
    "TTSModel",
    "TTSParameters",
    "TTSResponse",
    "TTSUsage",
    "UtteranceDone",
    "pcm_format",
    "pcm_media_type",
    "read_wav",
    "wav_bytes",
]
