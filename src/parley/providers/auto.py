"""Which model runs when none is configured: the one the user already has.

```python
choice = choose_model()            # no model configured: look around
choice = choose_model("openai:gpt-4o-mini")   # configured: that one, as given
print(choice.spec, "-", choice.reason)
```

The order, first found wins:

1. an explicit setting (`--model`, `PARLEY_MODEL`, the service's `model`);
2. a provider key in the environment: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
   `GEMINI_API_KEY` (or `GOOGLE_API_KEY`), `DASHSCOPE_API_KEY`; the provider's default chat
   model, at the base URL its SDK's own variable names (`OPENAI_BASE_URL`, ...);
3. an Ollama server (`OLLAMA_HOST`, else 127.0.0.1:11434) with a chat model: asked for its
   listing only (`/api/tags`, `/api/show`), with a short timeout;
4. the largest model pulled with `parley models pull` (the Hugging Face cache, no network);
5. the embedded SmolLM2-135M, which is tiny: the choice says how to pull a better one.

Nothing is sent to a hosted provider unless its key is set, and choosing sends nothing to
one: the keys are only looked at. A provider whose SDK is not installed is passed over (and
logged, with the extra to install).
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

__all__ = [
    "EMBEDDED_SPEC",
    "OLLAMA_TIMEOUT",
    "PROVIDER_KEYS",
    "PULL_HINT",
    "ModelChoice",
    "choose_model",
    "is_embedded",
]

log = logging.getLogger("parley.models")

EMBEDDED_SPEC = "local"
"""The embedded model's spec: SmolLM2-135M-Instruct, shipped on PyPI, no network."""

PULL_HINT = (
    "for better answers run `parley models pull qwen3-1.7b`, then use `--model local:qwen3-1.7b`"
)
"""What to do about the tiny embedded model (the page says it too)."""

PROVIDER_KEYS: tuple[tuple[str, str, str], ...] = (
    ("OPENAI_API_KEY", "openai", "openai"),
    ("ANTHROPIC_API_KEY", "anthropic", "anthropic"),
    ("GEMINI_API_KEY", "gemini", "google.genai"),
    ("GOOGLE_API_KEY", "gemini", "google.genai"),  # Gemini's SDK reads both
    ("DASHSCOPE_API_KEY", "dashscope", "dashscope"),
)
"""(variable, provider, the SDK's module) in the order they are looked at."""

OLLAMA_TIMEOUT = 1.0
"""Seconds each request of the Ollama probe may take (a local server answers in ms)."""

_OLLAMA_DEADLINE = 3.0
"""Seconds the whole probe may take: past them, the models not yet asked about are skipped."""

_OLLAMA_DEFAULT = "127.0.0.1:11434"

_CHOOSE_ANOTHER = "choose another with --model PROVIDER:MODEL or PARLEY_MODEL"


@dataclass(frozen=True)
class ModelChoice:
    """The model that runs, and why.

    Attributes:
        spec: A model spec (`openai:gpt-4.1`, `ollama:qwen3:1.7b`, `local:qwen3-1.7b`,
            `local`), as `model_from_spec` takes it.
        source: What chose it: `setting`, `env:<VARIABLE>`, `ollama`, `pulled` or
            `embedded`.
        reason: One line for people: why this one, and how to choose another.
        tiny: The embedded 135M model: its answers are weak, say how to pull a better one.
    """

    spec: str
    source: str
    reason: str
    tiny: bool

    def describe(self) -> str:
        """The choice in one line, for a start-up message: `model X (why)`."""
        return f"model {self.spec} ({self.reason})"


def is_embedded(spec: str) -> bool:
    """Whether `spec` names the embedded SmolLM2-135M (`local`, `local:smollm2-...`)."""
    from parley.providers.local._gguf import DEFAULT_MODEL  # noqa: PLC0415  (no llama.cpp import)

    provider, _, name = spec.strip().partition(":")
    return provider == "local" and name in ("", DEFAULT_MODEL)


def choose_model(explicit: str | None = None, *, probe_ollama: bool = True) -> ModelChoice:
    """The model to run: `explicit` when given, else the one the user already has.

    Args:
        explicit: A configured spec (a flag or a setting); it always wins.
        probe_ollama: Ask the Ollama server for its models (off: skip that step).
    """
    if explicit:
        return _setting(explicit.strip())
    for find in (_from_keys, _from_ollama if probe_ollama else None, _from_pulled):
        found = find() if find is not None else None
        if found is not None:
            return found
    return ModelChoice(
        EMBEDDED_SPEC,
        "embedded",
        "no provider key, Ollama model or pulled model found, so the embedded SmolLM2-135M, "
        f"which is tiny: {PULL_HINT}",
        tiny=True,
    )


def _setting(spec: str) -> ModelChoice:
    tiny = is_embedded(spec)
    reason = "as configured" + (f"; it is the tiny embedded model: {PULL_HINT}" if tiny else "")
    return ModelChoice(spec, "setting", reason, tiny)


# -- 2. a provider key ---------------------------------------------------------------------------


def _from_keys() -> ModelChoice | None:
    for variable, provider, module in PROVIDER_KEYS:
        if not os.environ.get(variable, "").strip():
            continue
        if not _installed(module):
            log.warning(
                "parley: %s is set, but the %s extra is not installed (pip install "
                "'parley[%s]'): not using it",
                variable,
                provider,
                provider,
            )
            continue
        spec = f"{provider}:{_default_chat_model(provider)}"
        return ModelChoice(
            spec, f"env:{variable}", f"{variable} is set; {_CHOOSE_ANOTHER}", tiny=False
        )
    return None


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # `google` itself missing, for google.genai
        return False


def _default_chat_model(provider: str) -> str:
    """The provider's default chat model: its first card, as `model_from_spec` takes it."""
    from parley.models.credentials import CredentialFactory  # noqa: PLC0415

    model_cls: Any = CredentialFactory.credential_class(provider).chat_model_classes()[0]
    return str(model_cls.list_models()[0].name)


# -- 3. an Ollama server -------------------------------------------------------------------------


def _from_ollama() -> ModelChoice | None:
    if not _installed("ollama"):
        return None  # no SDK: an Ollama model could not be run anyway
    from parley.providers.ollama.credentials import normalize_host  # noqa: PLC0415

    try:
        host = normalize_host(os.environ.get("OLLAMA_HOST") or _OLLAMA_DEFAULT)
        name = _ollama_chat_model(host)
    except Exception as exc:  # nothing there, or not Ollama: the next step
        log.debug("no Ollama server at %s: %s", os.environ.get("OLLAMA_HOST"), exc)
        return None
    if name is None:
        return None
    reason = f"the Ollama server at {host} has it; {_CHOOSE_ANOTHER}"
    return ModelChoice(f"ollama:{name}", "ollama", reason, tiny=False)


def _ollama_chat_model(host: str) -> str | None:
    """The server's best chat model: one that calls tools first, then the largest.

    Raises:
        httpx.HTTPError: The server cannot be reached or answers with an error.
        UserError: Requests to another machine are blocked (`ALLOW_MODEL_REQUESTS`).
    """
    import httpx  # noqa: PLC0415  (the ollama extra's dependency)

    from parley.models.base import ChatModel  # noqa: PLC0415

    ChatModel.check_allowed(host)
    deadline = time.monotonic() + _OLLAMA_DEADLINE
    ranked: list[tuple[bool, int, str]] = []
    with httpx.Client(base_url=host, timeout=OLLAMA_TIMEOUT, trust_env=False) as client:
        listing = client.get("/api/tags")
        listing.raise_for_status()
        for entry in listing.json().get("models") or []:
            name = _name(entry)
            if not name or _is_remote(entry) or time.monotonic() > deadline:
                continue
            shown = client.post("/api/show", json={"model": name})
            if shown.is_error:
                continue  # deleted since the listing, for one
            capabilities = shown.json().get("capabilities") or []
            if "completion" in capabilities:  # not an embedding-only model
                ranked.append(("tools" in capabilities, _size(entry), name))
    return max(ranked)[2] if ranked else None


def _name(entry: Any) -> str:
    """A listed model's name (`qwen3:1.7b`), or "" for an entry that is not one."""
    return str(entry.get("model") or entry.get("name") or "") if isinstance(entry, dict) else ""


def _is_remote(entry: dict[str, Any]) -> bool:
    """An Ollama cloud model: its prompts would go to ollama.com, a hosted provider."""
    return bool(entry.get("remote_host")) or _name(entry).endswith(("-cloud", ":cloud"))


def _size(entry: dict[str, Any]) -> int:
    """A listed model's size: its parameters (`8.0B`), else its bytes."""
    written = str((entry.get("details") or {}).get("parameter_size") or "")
    match = re.fullmatch(r"([\d.]+)\s*([KMBT])", written.strip().upper())
    if match:
        scale = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[match[2]]
        return int(float(match[1]) * scale)
    size = entry.get("size")
    return size if isinstance(size, int) else 0


# -- 4. a pulled model ---------------------------------------------------------------------------


def _from_pulled() -> ModelChoice | None:
    try:
        from parley.providers.local.hub import pulled_models  # noqa: PLC0415
    except ImportError:  # no Hub support (huggingface_hub missing, or an older parley)
        return None
    try:
        pulled = pulled_models()
    except Exception as exc:  # an unreadable cache hides nothing else
        log.warning("parley: could not list the pulled models: %s", exc)
        return None
    if not pulled:
        return None
    largest = max(pulled, key=lambda model: (model.size, model.name))
    reason = f"the largest model pulled with `parley models pull`; {_CHOOSE_ANOTHER}"
    return ModelChoice(f"local:{largest.name}", "pulled", reason, tiny=False)
