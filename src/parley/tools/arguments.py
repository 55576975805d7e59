"""Tool-call arguments: parsed with growing tolerance, then validated against the schema.

Models write arguments as JSON, mostly. They are read as strict JSON first, then as JSON5
(single quotes, trailing commas, comments), then repaired by `json-repair` guided by the
schema (cut-off strings, missing braces). The result is validated against the tool's JSON
schema; what still fails raises `ToolArgumentsError` with a message the model can act on.
"""

from __future__ import annotations

import json
from typing import Any

from parley.errors import ToolArgumentsError

__all__ = ["parse_tool_arguments", "qwen_list_to_schema", "validate_arguments"]

_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}


def qwen_list_to_schema(parameters: list[dict[str, Any]]) -> dict[str, Any]:
    """Turn Qwen-Agent's list form of parameters into a JSON schema.

    Each entry is `{"name", "type", "description", "required", ...}`; other keys (`enum`,
    `items`, `default`, ...) are kept as schema keywords.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for entry in parameters:
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ToolArgumentsError(f"a parameter in the list form has no name: {entry!r}")
        spec = {k: v for k, v in entry.items() if k not in ("name", "required")}
        if spec.get("type") not in _JSON_TYPES:
            spec.pop("type", None)
        properties[name] = spec
        if entry.get("required"):
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def _loads(raw: str, schema: dict[str, Any] | None) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        pass
    import json5  # noqa: PLC0415  (only for arguments that are not JSON)

    try:
        return json5.loads(raw)
    except ValueError:
        pass
    import json_repair  # noqa: PLC0415

    try:
        return json_repair.loads(raw, schema=schema) if schema else json_repair.loads(raw)
    except (ValueError, TypeError):
        return json_repair.loads(raw)


def parse_tool_arguments(
    raw: str | dict[str, Any] | None, schema: dict[str, Any] | None = None, *, tool: str = ""
) -> dict[str, Any]:
    """Read arguments the model wrote into a dict, and check them against `schema`.

    Raises:
        ToolArgumentsError: They are not an object, even after repair, or break the schema.
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        value: Any = {}
    elif isinstance(raw, dict):
        value = raw
    else:
        value = _loads(raw, schema)
    if not isinstance(value, dict):
        raise ToolArgumentsError(
            f"arguments must be a JSON object, got {raw!r:.200}", tool_name=tool or None
        )
    if schema:
        validate_arguments(value, schema, tool=tool)
    return value


def validate_arguments(value: dict[str, Any], schema: dict[str, Any], *, tool: str = "") -> None:
    """Check arguments against a JSON schema.

    Raises:
        ToolArgumentsError: Naming every place that breaks the schema, and how.
    """
    import jsonschema  # noqa: PLC0415  (a slow import, needed only when a tool is called)

    validator = jsonschema.Draft202012Validator(schema)
    problems = [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(arguments)'}: {error.message}"
        for error in validator.iter_errors(value)
    ]
    if problems:
        name = f" for {tool}" if tool else ""
        raise ToolArgumentsError(
            f"invalid arguments{name}: " + "; ".join(sorted(problems)), tool_name=tool or None
        )
