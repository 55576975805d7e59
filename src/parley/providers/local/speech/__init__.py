"""The local voice: offline speech on CPU (Piper's "joe" voice, or espeak-ng as a fallback).

See `parley.providers.local.speech.model`. Piper needs the extra `tts-piper`; espeak-ng the system
package of that name.
"""

from parley.providers.local.speech.model import (
    LocalRealtimeTTSModel,
    LocalTTSModel,
    LocalTTSParameters,
    default_local_voice,
)

__all__ = ["LocalRealtimeTTSModel", "LocalTTSModel", "LocalTTSParameters", "default_local_voice"]
