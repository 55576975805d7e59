"""OpenAI's text-to-speech (`/v1/audio/speech`) through the official `openai` SDK.

`OpenAITTSModel` with `OpenAICredential` (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, so any server
that speaks the endpoint works): gpt-4o-mini-tts (13 voices, `instructions` for the manner
of speaking), tts-1 and tts-1-hd (9 voices); `speed` from 0.25 to 4. The audio streams as
raw 24 kHz PCM, or comes as a file in the `response_format` asked for. The SDK is imported
on first use (`pip install 'parley[openai]'`); errors are mapped as the chat models map them
(`parley.providers.openai._errors`), so the base's retries apply.
"""

from parley.providers.openai.speech.model import (
    MEDIA_TYPES,
    PCM,
    OpenAITTSModel,
    OpenAITTSParameters,
)

__all__ = ["MEDIA_TYPES", "PCM", "OpenAITTSModel", "OpenAITTSParameters"]
