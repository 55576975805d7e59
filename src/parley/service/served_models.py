"""The models a service serves as themselves on `/v1/chat/completions`, beside its agents.

```python
models = ModelRegistry({"local": "local", "stand-in": ScriptedModel([...])})
app = create_app(settings, agents=[...], models=models)
```

A client names a served model by its key, and the request goes to that model as it is: the
client's tools, its tool results, its sampling parameters. Only what the operator configured
is served (the settings' `served_models`, or models given to `create_app`): a key maps to a
model spec (`provider:model`, keys from the environment) or a built `ChatModel`, and no
request can name another provider or URL. A spec's model is built at its first request (a
missing key or extra is that request's error, as for agents); the embedded model's weights
load once per process whichever agent or request asks first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from parley.errors import ConfigurationError
from parley.models.base import ChatModel
from parley.models.credentials import CredentialFactory
from parley.models.spec import DEFAULT_MODEL_SPEC, model_from_spec
from parley.service.settings import ServiceSettings

__all__ = ["ModelEntry", "ModelRegistry", "ModelsInput", "served_models"]

ModelsInput = Mapping[str, ChatModel | str] | Iterable[str]
"""Models to serve: keys mapped to specs or models, or specs (each its own key)."""


@dataclass
class ModelEntry:
    """One served model: its key, its spec (None for a model given built), the model."""

    key: str
    spec: str | None
    build: Callable[[str], ChatModel] = model_from_spec
    _model: ChatModel | None = field(default=None, repr=False)
    # Two first requests at once would each build the model (two clients, two pools).
    _building: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def model(self) -> ChatModel:
        """The model, built from its spec on first use.

        Raises:
            ConfigurationError: The spec cannot be built (unknown provider, no key, ...).
        """
        if self._model is None:
            with self._building:
                if self._model is None:
                    assert self.spec is not None  # a model given built is set at once
                    self._model = self.build(self.spec)
        return self._model

    @property
    def built(self) -> ChatModel | None:
        """The model if it was built (or given), else None."""
        return self._model

    @property
    def provider(self) -> str:
        """Who serves the model: the spec's provider, or the given model's."""
        if self.spec is not None:
            return self.spec.partition(":")[0]
        assert self._model is not None
        return self._model.provider


class ModelRegistry:
    """Served models by key, in the order given.

    Args:
        models: Keys mapped to specs or built models, or specs (each its own key).

    Raises:
        ConfigurationError: A key is empty or given twice, or a spec names no provider.
    """

    def __init__(self, models: ModelsInput = ()) -> None:
        self._entries: dict[str, ModelEntry] = {}
        pairs = models.items() if isinstance(models, Mapping) else ((s, s) for s in models)
        for key, model in pairs:
            self.register(key, model)

    def register(self, key: str, model: ChatModel | str) -> ModelEntry:
        """Serve `model` (a spec, built on first use, or a model) under `key`.

        Raises:
            ConfigurationError: The key is empty or taken, or the spec names no provider
                parley knows.
        """
        if not key or key != key.strip():
            raise ConfigurationError(f"a served model's key must be a non-empty name: {key!r}")
        if key in self._entries:
            raise ConfigurationError(f"a model with key {key!r} is served already")
        if isinstance(model, str):
            _check_provider(key, model)
            entry = ModelEntry(key, model)
        else:
            entry = ModelEntry(key, None, _model=model)
        self._entries[key] = entry
        return entry

    def get(self, key: str) -> ModelEntry | None:
        """The entry for `key`, or None."""
        return self._entries.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[ModelEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    async def aclose(self) -> None:
        """Close the connections of the models built from specs (given ones are the caller's)."""
        for entry in self:
            model = entry.built
            close = getattr(model, "aclose", None)
            if entry.spec is not None and callable(close):
                await close()


def _check_provider(key: str, spec: str) -> None:
    """Refuse a spec whose provider parley does not know, at start rather than at a request."""
    try:
        CredentialFactory.credential_class(spec.partition(":")[0])
    except ConfigurationError as exc:
        raise ConfigurationError(f"served model {key!r} ({spec!r}): {exc}") from None


def served_models(settings: ServiceSettings, *, builtin_agent: bool) -> ModelRegistry:
    """The models the settings serve.

    Unset (`served_models` None), the settings' `model` when the service runs its built-in
    agent on it (`builtin_agent`), else none: a service of one's own agents starts serving
    a model only when told to.
    """
    configured = settings.served_models
    if configured is None:
        return ModelRegistry([settings.model or DEFAULT_MODEL_SPEC] if builtin_agent else [])
    return ModelRegistry(configured)
