"""Agents that speak: their answers as audio events, and those events heard.

- `TTSMiddleware` (`parley.agents.speech.middleware`): give it to an agent or a run and
  the answer's text is spoken by a `parley.tts` voice, as `AudioStarted`/`AudioDelta`/
  `AudioEnded` events beside the text.
- `AudioSink` (`parley.agents.speech.player`): plays those events through an audio player
  on PATH as they arrive (`parley chat --speak`), or writes them to a WAV file.

These sit on the agents' floor: they read a run's events, while `parley.tts` (the voices)
stays below agents. Their old homes, `parley.tts.middleware` and `parley.tts.player`, are
deprecated aliases of these modules for one release.
"""

from parley.agents.speech.middleware import TTSMiddleware
from parley.agents.speech.player import AudioPlayer, AudioSink, find_player, streamed_wav_header

__all__ = ["AudioPlayer", "AudioSink", "TTSMiddleware", "find_player", "streamed_wav_header"]
