"""Model cards for what an Ollama server has: `/api/tags`, and `/api/show` when asked.

A server's model is named `family:tag` (`qwen3:8b`, `llama3.2:latest`), sometimes behind a
namespace (`library/qwen3`, `hf.co/user/repo:Q4_K_M`). Its card starts from the bundled card
of its family when there is one; `/api/show`'s `capabilities` (`completion`, `tools`,
`thinking`, `vision`, `audio`, `embedding`, ...: `types/model/capability.go`) and the
`<architecture>.context_length` of its `model_info` then say what the model itself takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from parley.models.base import ChatModel
from parley.models.cards import THINKING, ModelCard, merge_parameter_schema
from parley.providers.ollama._errors import ollama_errors
from parley.providers.ollama._sdk import new_client
from parley.providers.ollama.parameters import OllamaParameters

if TYPE_CHECKING:
    from parley.providers.ollama.credentials import OllamaCredential

__all__ = [
    "TOOL_CALLS",
    "bundled_card",
    "card_from_server",
    "family",
    "label_for",
    "model_size",
    "server_cards",
    "server_models",
]

TOOL_CALLS = "application/x-tool-call"
"""The output type of a model that calls tools natively (Ollama's `tools` capability)."""

IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp")
"""What Ollama's vision models read (the SDK checks these file types)."""
AUDIO_TYPES = ("audio/wav", "audio/mpeg")
"""What Ollama's audio models read (`llm/media.go` recognizes WAV and MP3)."""


def family(name: str) -> str:
    """A model name without its tag and namespace: `library/qwen3:8b` -> `qwen3`."""
    return name.rsplit("/", 1)[-1].split(":", 1)[0]


def bundled_card(name: str, cards: Sequence[ModelCard]) -> ModelCard | None:
    """The bundled card for `name`: its own, else its family's; None when there is none."""
    by_name = {card.name: card for card in cards}
    found = by_name.get(name) or by_name.get(family(name))
    return found.model_copy(deep=True) if found else None


def label_for(name: str, base: ModelCard | None) -> str:
    """A server model's label: its bundled card's, with the tag (`Qwen3 8b`), else its name."""
    if base is None:
        return name
    tag = name.rsplit("/", 1)[-1].partition(":")[2]
    return f"{base.label} {tag}" if tag and tag != "latest" else base.label


def model_size(model_info: Any, key: str) -> int | None:
    """`/api/show`'s `model_info[<architecture>.<key>]` when a positive int, else None.

    The keys: `context_length`, and an embedding model's `embedding_length`.
    """
    if not isinstance(model_info, dict):
        return None
    size = model_info.get(f"{model_info.get('general.architecture')}.{key}")
    return size if isinstance(size, int) and size > 0 else None


def card_from_server(
    name: str,
    cards: Sequence[ModelCard],
    capabilities: Sequence[str] | None = None,
    model_info: Any = None,
) -> ModelCard | None:
    """The card of a server's model; None for a model that cannot chat.

    Args:
        name: The model's name on the server.
        cards: The bundled cards.
        capabilities: `/api/show`'s `capabilities`, when asked.
        model_info: `/api/show`'s `model_info`, when asked.
    """
    base = bundled_card(name, cards)
    card = base or ModelCard(name=name)
    card.name, card.label = name, label_for(name, base)
    overrides = dict(card.parameter_overrides)
    if capabilities:
        if "completion" not in capabilities:
            return None  # an embedding model, or one that makes images
        card.input_types = ["text/plain"]
        card.input_types += [*IMAGE_TYPES] if "vision" in capabilities else []
        card.input_types += [*AUDIO_TYPES] if "audio" in capabilities else []
        card.output_types = ["text/plain"]
        card.output_types += [THINKING] if "thinking" in capabilities else []
        card.output_types += [TOOL_CALLS] if "tools" in capabilities else []
        if "thinking" in capabilities:
            if "think" in overrides and overrides["think"] is None:
                del overrides["think"]
        else:
            overrides["think"] = None
    card.context_size = model_size(model_info, "context_length") or card.context_size
    card.parameter_overrides = overrides
    card.parameter_schema = merge_parameter_schema(OllamaParameters.model_json_schema(), overrides)
    return card


async def server_models(
    credential: OllamaCredential, *, show: bool, timeout: float
) -> list[tuple[str, Any]]:
    """The models the credential's server has (`/api/tags`), with their `/api/show` answers.

    Each name comes with its `/api/show` answer when `show` (one request per model), else
    with None.

    Raises:
        ModelConnectionError: The server cannot be reached.
        ModelError: The server answered with an error.
    """
    host = credential.endpoint()
    ChatModel.check_allowed(host)
    client = new_client(host, timeout=timeout, headers=credential.header_values())
    found: list[tuple[str, Any]] = []
    try:
        with ollama_errors("", host):
            listing = await client.list()
        for entry in listing.models:
            name = entry.model or ""
            if not name:
                continue
            shown = None
            if show:
                with ollama_errors(name, host):
                    shown = await client.show(name)
            found.append((name, shown))
    finally:
        await client.close()  # type: ignore[no-untyped-call]  # untyped in the SDK
    return found


async def server_cards(
    credential: OllamaCredential, *, capabilities: bool, timeout: float
) -> list[ModelCard]:
    """The cards of the models the credential's server has (see `list_server_models`)."""
    from parley.providers.ollama.chat import OllamaChatModel  # noqa: PLC0415

    bundled = OllamaChatModel.list_models()
    found: list[ModelCard] = []
    for name, shown in await server_models(credential, show=capabilities, timeout=timeout):
        card = card_from_server(
            name,
            bundled,
            shown.capabilities if shown is not None else None,
            shown.modelinfo if shown is not None else None,
        )
        if card is not None:
            found.append(card)
    return sorted(found, key=lambda card: card.name)
