"""The public surface: `__all__` sorted and complete, and the error tree as drawn."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

import parley
from parley import errors

MODULES = [
    "parley",
    "parley.errors",
    "parley.messages",
    "parley.compat.qwen",
    "parley.compat.agentscope",
    "parley.compat.service_toolkit",
    "parley.models",
    "parley.models.testing",
    "parley.embeddings",
    "parley.providers.ollama.embeddings",
    "parley.providers.openai.embeddings",
    "parley.agents",
    "parley.agents.multi",
    "parley.agents.speech",
    "parley.tools",
    "parley.tools.builtin",
    "parley.tools.mcp",
    "parley.providers.dashscope.embeddings",
    "parley.providers.gemini.embeddings",
    "parley.rag",
    "parley.client",
    "parley.tracing",
    "parley.evals.report",
    "parley.evals.render",
    "parley.evals.html",
    "parley.evals.cli",
    "parley.evals.pytest_plugin",
]


def _isort_key(item: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    kind = 0 if item.isupper() else 1 if item[0].isupper() else 2
    return kind, item


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported, key=_isort_key), f"{name}.__all__ is not sorted"
    missing = [item for item in exported if not hasattr(module, item)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"


@pytest.mark.parametrize("name", MODULES)
def test_all_names_every_public_class_and_function_defined_there(name: str) -> None:
    module = importlib.import_module(name)
    defined = {
        item
        for item, value in vars(module).items()
        if not item.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").startswith(name)
    }
    assert defined <= set(module.__all__), f"not exported: {defined - set(module.__all__)}"


def test_top_level_exports_the_message_format() -> None:
    assert parley.Msg is parley.messages.Msg
    assert issubclass(parley.UserError, parley.ParleyError)


def _drawn_tree() -> dict[str, str]:
    """Child -> parent, read off the drawing in the errors module docstring."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        match = re.match(r"^(\s*(?:[│ ]\s*)*)(?:[├└]── )?([A-Z]\w+Error)\b", line)
        if not match:
            continue
        depth = match.start(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[match.group(2)] = stack[-1][1]
        stack.append((depth, match.group(2)))
    return parents


def test_error_tree_matches_its_drawing() -> None:
    drawn = _drawn_tree()
    classes = {n: getattr(errors, n) for n in errors.__all__}
    assert set(drawn) | {"ParleyError"} == set(classes)
    for child, parent in drawn.items():
        assert classes[parent] in classes[child].__mro__[1:], f"{child} should derive {parent}"
    for cls in classes.values():
        assert issubclass(cls, errors.ParleyError)


def test_errors_carry_their_details() -> None:
    http = errors.ModelHTTPError(503, {"error": "busy"}, model="m", provider="p")
    assert (http.status_code, http.body, http.model, http.provider) == (
        503,
        {"error": "busy"},
        "m",
        "p",
    )
    assert "503" in str(http)
    limited = errors.RateLimitError(429, None)
    assert limited.retry_after is None
    assert isinstance(limited, errors.ModelHTTPError)
    missing = errors.MissingDependencyError("openai", "openai")
    assert "pip install 'parley[openai]'" in str(missing)
    assert isinstance(missing, ImportError)
    assert isinstance(errors.MessageError("x"), ValueError)
    assert errors.ConflictError("busy", status_code=409).status_code == 409
    assert errors.ToolArgumentsError("bad", tool_name="t").tool_name == "t"
