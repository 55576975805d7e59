"""Role rules for `Msg`, compiled into its pydantic-core schema.

Which blocks a role may hold is checked in pydantic-core rather than in a Python validator:
the message schema becomes a union tagged on `role`, and each role's content is a union of
blocks tagged on `type` in which a misplaced block meets a schema that always fails with a
message saying what is wrong and how to fix it. Valid messages, the hot path of every model
call and every stored thread, never run Python code to be checked.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

from pydantic import GetJsonSchemaHandler
from pydantic_core import CoreSchema, core_schema

from parley.errors import MessageError

__all__ = ["ALLOWED_BLOCKS", "split_by_role"]

_MEDIA = ("text", "image", "audio", "video", "file")

ALLOWED_BLOCKS: dict[str, tuple[str, ...]] = {
    "system": _MEDIA,
    "user": _MEDIA,
    "assistant": (*_MEDIA, "thinking", "tool_call"),
    "tool": ("tool_result",),
}
"""The block types each role may hold."""

_WHERE = {
    "tool_call": "tool calls come from the model: put them in Msg.assistant(...)",
    "thinking": "reasoning comes from the model: put it in Msg.assistant(...)",
    "tool_result": "answer a tool call with Msg.tool_result(...), a tool message",
}


def _misplaced(block_type: str, role: str) -> str:
    if role == "tool":
        return (
            f"a {block_type} block cannot be in a tool message, which holds only tool_result "
            "blocks; put other content in a user or assistant message"
        )
    article = "an" if role == "assistant" else "a"
    return f"a {block_type} block cannot be in {article} {role} message; {_WHERE[block_type]}"


def _rejecting(message: str) -> CoreSchema:
    # `none` fails on any block, and the custom error replaces its text with ours.
    return core_schema.custom_error_schema(
        core_schema.none_schema(), custom_error_type="role_rule", custom_error_message=message
    )


def _text_to_blocks(role: str) -> core_schema.NoInfoValidatorFunction:
    def convert(text: str) -> list[Any]:
        from parley.messages.blocks import TextBlock  # noqa: PLC0415  (import cycle)

        if role == "tool":
            raise MessageError(_misplaced("text", role))
        return [TextBlock(text=text)]

    return convert


def _content_schema(role: str, blocks: dict[str, Any], base: dict[str, Any]) -> CoreSchema:
    choices = {
        tag: schema if tag in ALLOWED_BLOCKS[role] else _rejecting(_misplaced(tag, role))
        for tag, schema in blocks["choices"].items()
    }
    role_blocks = {**blocks, "choices": choices, "ref": None}
    role_blocks.pop("ref")
    listed = {**base, "items_schema": role_blocks}
    if role == "tool":
        listed["min_length"] = 1
    text = core_schema.no_info_after_validator_function(
        _text_to_blocks(role), core_schema.str_schema()
    )
    # A list is tried first; a bare string becomes one text block.
    return core_schema.union_schema(
        [(cast(CoreSchema, listed), "blocks"), (text, "text")], mode="left_to_right"
    )


def split_by_role(schema: CoreSchema) -> CoreSchema:
    """Rewrite a message model schema into a union tagged on `role` with per-role content.

    `schema` is the schema pydantic generated for the model; its `content` field must be a
    list of blocks tagged on `type`, with a default. The rewritten schema validates and
    serializes the same model class.
    """
    model = cast(dict[str, Any], schema)
    while model["type"] != "model":
        if "schema" not in model:  # a reference to the model's schema, split where defined
            return schema
        model = model["schema"]
    fields_schema = model["schema"]
    if fields_schema["type"] != "model-fields":  # split already
        return schema
    content_default = fields_schema["fields"]["content"]["schema"]
    listed = content_default["schema"]
    blocks = listed["items_schema"]
    variants: dict[str, CoreSchema] = {}
    for role in ALLOWED_BLOCKS:
        variant = copy.copy(fields_schema)
        fields = dict(variant["fields"])
        fields["role"] = {**fields["role"], "schema": core_schema.literal_schema([role])}
        content: dict[str, Any] = {
            **content_default,
            "schema": _content_schema(role, blocks, listed),
        }
        if role == "tool":
            # No default: an empty tool message would never be validated against min_length.
            content = content["schema"]
        fields["content"] = {**fields["content"], "schema": content}
        variant["fields"] = fields
        variants[role] = cast(CoreSchema, variant)
    # The JSON schema stays the unsplit fields' (a role, a list of any blocks): pydantic would
    # put the variants inline in the discriminator's mapping, which OpenAPI rejects (FastAPI's
    # /openapi.json failed on it). The role rules are still checked when validating.
    # Serializing uses the unsplit fields too: a message is already valid when it is dumped,
    # and pydantic-core's union serializer (here the role's, then the content's list-or-string)
    # cost more than all the fields inside it (benchmarks/messages.py).
    model["schema"] = core_schema.tagged_union_schema(
        variants,
        discriminator="role",
        metadata={"pydantic_js_functions": [_fields_json(fields_schema)]},
        serialization=fields_schema,
    )
    return schema


def _fields_json(fields_schema: CoreSchema) -> Callable[[CoreSchema, GetJsonSchemaHandler], Any]:
    def json_schema(_schema: CoreSchema, handler: GetJsonSchemaHandler) -> Any:
        return handler(fields_schema)

    return json_schema
