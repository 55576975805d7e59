"""What chat and embedding model classes share as provider classes (seed 003's three steps).

A provider's model class may declare its parameters as an inner `Parameters` class, and a
custom provider's model cards sit in a `_models/` folder beside its module; a model takes
its provider's credential (or builds the default one from the environment) and its
parameters as the provider's class or a dict.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from parley.errors import UserError
from parley.models.credentials import Credential
from parley.models.parameters import ParametersBase

__all__ = ["adopt_provider_class", "check_credential", "check_parameters"]

P = TypeVar("P", bound=ParametersBase)


def adopt_provider_class(cls: type[Any], parameters_base: type[ParametersBase]) -> None:
    """Take a new model class's inner `Parameters`, and its `_models/` cards if custom."""
    inner = cls.__dict__.get("Parameters")
    if isinstance(inner, type) and issubclass(inner, parameters_base):
        cls.parameters_class = inner  # the seed's inner `Parameters` class
    if "cards_location" not in cls.__dict__ and not cls.__module__.startswith("parley."):
        # A custom provider's cards: `_models/` beside its module (parley's own classes name
        # their location).
        module = sys.modules.get(cls.__module__)
        source = getattr(module, "__file__", None)
        if source and (folder := Path(source).parent / "_models").is_dir():
            cls.cards_location = folder


def check_credential(
    owner: type[Any], expected: type[Credential] | None, credential: Credential | None
) -> Credential | None:
    """The credential a model of `owner` uses: the one given, or its provider's default.

    Raises:
        UserError: The credential is another provider's.
    """
    if credential is None:
        return expected.model_validate({}) if expected is not None else None
    if expected is not None and not isinstance(credential, expected):
        raise UserError(
            f"{owner.__name__} needs a {expected.__name__}, got a {type(credential).__name__}"
        )
    return credential


def check_parameters(
    owner: type[Any], cls: type[P], parameters: ParametersBase | Mapping[str, Any] | None
) -> P:
    """`parameters` as the provider's class `cls` (a dict is merged into its defaults).

    Raises:
        UserError: Another class's parameters, or an unknown name or bad value in a dict.
    """
    if parameters is None:
        return cls()
    if isinstance(parameters, Mapping):
        return cls().merged(**parameters)
    if not isinstance(parameters, cls):
        raise UserError(
            f"{owner.__name__} takes {cls.__qualname__}, got {type(parameters).__name__}"
        )
    return parameters
