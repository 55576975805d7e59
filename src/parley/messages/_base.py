"""The dict-style pydantic base shared by parley's messages and the Qwen-Agent schema."""

from __future__ import annotations

import functools
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict


class _MissingKeyError(KeyError, AttributeError):
    """A missing key: a `KeyError` for dict-minded callers, an `AttributeError` for Qwen-Agent's.

    Qwen-Agent's `__getitem__` is `getattr`, so code written for it catches `AttributeError`;
    code that treats messages as dicts catches `KeyError`. Both work.
    """


class DictLikeModel(BaseModel):
    """A pydantic model that also reads and writes like a dict.

    `model["field"]` and `model["field"] = value` work, `model.get(key, default)` follows
    Qwen-Agent (the default is returned for a missing *or falsy* value), dumps omit `None`
    fields unless told otherwise, and `str()` is the dump.
    """

    # JSON parsing caches the keys only: they repeat in every message, while texts, ids and
    # timestamps rarely do, and caching each of them took a tenth of a message's parse.
    model_config = ConfigDict(cache_strings="keys")

    def __getitem__(self, key: str) -> Any:
        if key in type(self).model_fields:
            return getattr(self, key)
        raise _MissingKeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in type(self).model_fields:
            raise _MissingKeyError(key)
        setattr(self, key, value)

    def get(self, key: str, default: Any = None) -> Any:
        """Return the field's value, or `default` when it is missing or falsy (as Qwen-Agent)."""
        value = getattr(self, key, None) if key in type(self).model_fields else None
        return value if value else default

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """Dump to a dict; `None` fields are left out unless `exclude_none=False` is passed."""
        kwargs.setdefault("exclude_none", True)
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        """Dump to JSON; `None` fields are left out unless `exclude_none=False` is passed."""
        if not kwargs:
            # The common call, made for every message stored or sent: straight to the
            # serializer, skipping pydantic's argument-forwarding wrapper.
            return self.__pydantic_serializer__.to_json(self, exclude_none=True).decode()
        kwargs.setdefault("exclude_none", True)
        return super().model_dump_json(**kwargs)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        """Validate JSON into the model; the same keyword arguments as pydantic's."""
        if not kwargs:
            # Every stored message is read back this way: straight to the validator, skipping
            # pydantic's argument-forwarding wrapper, as model_dump_json does above.
            return cls.__pydantic_validator__.validate_json(json_data)  # type: ignore[no-any-return]
        return super().model_validate_json(json_data, **kwargs)

    def __str__(self) -> str:
        return str(self.model_dump())


M = TypeVar("M", bound=BaseModel)

# The slots every pydantic model has, set straight through their descriptors: a C call each,
# where `object.__setattr__` looks the name up first.
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted(cls: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    """Build a model from values already known to be valid, skipping validation.

    For parley's own constructors on their hot paths (`Msg.user("hi")` is made for every
    turn), where every value was type-checked on the way in. It does what pydantic's
    `model_construct` does for such input, at a fifth of its cost: `values` must hold every
    field, defaults included.
    """
    model = _new(cls)
    _set_dict(model, values)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model


@functools.cache
def every_field(cls: type[BaseModel]) -> set[str]:
    """The names of every field of `cls`: a fields set that `bare` instances may share.

    Pydantic adds a field's name to an instance's fields set when the field is assigned; a
    set that already names every field is never changed by that, so one set (the same
    object on every call for a class) can serve every instance instead of one set each.
    """
    return set(cls.model_fields)


def bare(cls: type[M], fields_set: set[str]) -> M:
    """An instance of `cls` with pydantic's own attributes set and no field yet.

    `trusted`'s lean form, for models kept by the thousand (a stream's delta chunks). The
    caller then sets every field, in the class's order, with `object.__setattr__`, which puts
    them in the instance's inline values (CPython 3.11 and 3.12; 3.13 keeps them in a dict
    for classes with `__slots__` in their bases, as pydantic's) rather than in a `__dict__`:
    a dict that the garbage collector would track, and walk in every pass, on top of the
    instance. The dict appears once something reads `__dict__` (pydantic's
    serializer does, when the model is dumped); until then the instance is one object.
    `fields_set` is stored as it is: pass `every_field(cls)` to share one.
    """
    model = _new(cls)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model
