"""The local voice: offline speech on CPU (Piper's "joe" voice, or espeak-ng as a fallback).

See `parley.tts.local.model`. Piper needs the extra `tts-piper`; espeak-ng the system
package of that name.
"""

from parley.tts.local.model import (
    LocalRealtimeTTSModel,
    LocalTTSModel,
    LocalTTSParameters,
    default_local_voice,
)

__all__ = ["LocalRealtimeTTSModel", "LocalTTSModel", "LocalTTSParameters", "default_local_voice"]
