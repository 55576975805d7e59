"""Text-to-speech models named by a short spec, `provider:model`, as chat models are."""

from __future__ import annotations

from typing import Any

from parley.errors import ConfigurationError
from parley.models.credentials import CredentialFactory
from parley.tts.base import TTSModel

__all__ = ["DEFAULT_TTS_SPEC", "tts_model_from_spec"]

DEFAULT_TTS_SPEC = "local"
"""The embedded default: the local voice, offline."""


def tts_model_from_spec(
    spec: str = DEFAULT_TTS_SPEC, *, realtime: bool | None = None, **options: Any
) -> TTSModel:
    """Build a TTS model from `provider` or `provider:model` (keys from the environment).

    The class is the provider's one whose cards name the model (DashScope serves Qwen3-TTS,
    its realtime form and CosyVoice with three classes); `realtime` picks between a whole and
    a realtime class that share a model (the local voice has both). Without a model name, the
    class's default (for `local`: the best voice installed).

    Raises:
        ConfigurationError: The provider is unknown or offers no such TTS model.
    """
    provider, _, name = spec.partition(":")
    credential = CredentialFactory.from_dict({"type": provider})
    classes: list[type[TTSModel]] = credential.tts_model_classes()
    if realtime is not None:
        classes = [c for c in classes if c.realtime == realtime]
    if not classes:
        kind = {None: "", True: "realtime ", False: "non-realtime "}[realtime]
        raise ConfigurationError(f"provider {provider!r} offers no {kind}text-to-speech model")
    if not name:
        name = classes[0].default_model() or ""
        if not name:
            raise ConfigurationError(f"name a model for {provider!r}: '{provider}:<model>'")
    chosen = next(
        (c for c in classes if any(card.name == name for card in c.list_models())), classes[0]
    )
    return chosen(credential, name, **options)
