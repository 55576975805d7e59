"""The typed function tool the tool-use set gives its agent: `convert_units`.

Deterministic, so a case's expected answer is fixed: the factor table below is exact (the
international mile, foot, inch, pound and ounce; the US liquid gallon), and results are
rounded to 2 decimals, as the set's expected answers are.
"""

from __future__ import annotations

from typing import Literal

from parley.tools import tool

__all__ = ["Unit", "convert", "convert_units"]

Unit = Literal["km", "m", "cm", "mi", "ft", "in", "kg", "g", "lb", "oz", "l", "gal", "C", "F", "K"]
"""The units `convert_units` knows."""

# Each unit as (dimension, how many of the dimension's base unit it is).
_FACTORS: dict[str, tuple[str, float]] = {
    "km": ("length", 1000.0),
    "m": ("length", 1.0),
    "cm": ("length", 0.01),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "l": ("volume", 1.0),
    "gal": ("volume", 3.785411784),
}
_TEMPERATURES = ("C", "F", "K")


def _to_celsius(value: float, unit: str) -> float:
    if unit == "F":
        return (value - 32.0) * 5.0 / 9.0
    return value - 273.15 if unit == "K" else value


def _from_celsius(value: float, unit: str) -> float:
    if unit == "F":
        return value * 9.0 / 5.0 + 32.0
    return value + 273.15 if unit == "K" else value


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """`value` in `from_unit` expressed in `to_unit`, rounded to 2 decimals.

    Raises:
        ValueError: A unit is unknown, or the two measure different things.
    """
    if from_unit in _TEMPERATURES and to_unit in _TEMPERATURES:
        return round(_from_celsius(_to_celsius(value, from_unit), to_unit), 2)
    source, target = _FACTORS.get(from_unit), _FACTORS.get(to_unit)
    if source is None or target is None:
        known = ", ".join([*_FACTORS, *_TEMPERATURES])
        raise ValueError(f"unknown unit in {from_unit!r} -> {to_unit!r}; known: {known}")
    if source[0] != target[0]:
        raise ValueError(f"cannot convert {source[0]} ({from_unit}) to {target[0]} ({to_unit})")
    return round(value * source[1] / target[1], 2)


@tool(idempotent=True)
def convert_units(value: float, from_unit: Unit, to_unit: Unit) -> str:
    """Convert a quantity between units of length, mass, volume or temperature.

    Args:
        value: The quantity to convert.
        from_unit: The unit it is in.
        to_unit: The unit to express it in.
    """
    result = convert(value, from_unit, to_unit)
    return f"{value:g} {from_unit} = {result:g} {to_unit}"
