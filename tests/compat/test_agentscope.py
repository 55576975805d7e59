"""AgentScope message JSON, Python and Java forms: each block both ways, the seed, real dumps."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from parley import messages as pm
from parley.compat.agentscope import (
    detect_form,
    msg_from_agentscope,
    msg_to_agentscope,
    msgs_from_agentscope,
    msgs_to_agentscope,
)
from parley.errors import ConfigurationError, MessageError

WHEN = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
STAMP = "2024-01-15T10:30:00Z"

# -- fixtures: real documents ------------------------------------------------------------------

# The seed's "Serialization Example" (seeds/004), verbatim.
SEED_EXAMPLE = """
{
  "name": "user",
  "role": "USER",
  "content": [
    {
      "type": "text",
      "text": "What is this image?"
    },
    {
      "type": "image",
      "source": {
        "type": "url",
        "url": "https://example.com/photo.jpg"
      }
    }
  ],
  "metadata": {},
  "id": "msg_001",
  "timestamp": "2024-01-15T10:30:00Z"
}
"""

# What AgentScope 2.0.11 emits (`json.dumps(m.model_dump(mode="json"))`), from the research
# notes; produced by running the library.
AS_USER = {
    "name": "user",
    "content": [
        {
            "type": "text",
            "text": "What's in these?",
            "id": "64ed3142e48e438babd0b022a3d346e4",
            "created_at": "2026-11-21T20:59:52.194155",
            "finished_at": None,
        },
        {
            "type": "data",
            "id": "fba7c55fa1804dd39cb329aef572f578",
            "source": {
                "type": "url",
                "url": "https://example.com/cat.png",
                "media_type": "image/png",
            },
            "name": None,
            "created_at": "2026-11-21T20:59:52.194232",
            "finished_at": None,
        },
        {
            "type": "data",
            "id": "bec8428652af4033a577faeddc5b3f23",
            "source": {"type": "base64", "data": "iVBORw0KGgo=", "media_type": "image/png"},
            "name": "tiny.png",
            "created_at": "2026-11-21T20:59:52.194239",
            "finished_at": None,
        },
    ],
    "role": "user",
    "id": "9ad54acc38a3481186b7177566fe9a91",
    "metadata": {},
    "created_at": "2026-11-21T20:59:52.194241",
    "usage": None,
    "finished_at": "2026-11-21T20:59:52.194241",
    "finished_reason": None,
    "structured_output": None,
    "error": None,
}

AS_ASSISTANT = {
    "name": "assistant",
    "content": [
        {
            "type": "thinking",
            "thinking": "Need two lookups.",
            "id": "59bb364b3d414b288cd1ce36c689458f",
            "created_at": "2026-11-21T20:59:52.194473",
            "finished_at": None,
        },
        {
            "type": "text",
            "text": "Checking.",
            "id": "9cc016a4c8a44f02beae51a438bf76cd",
            "created_at": "2026-11-21T20:59:52.194479",
            "finished_at": None,
        },
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "get_weather",
            "input": '{"city": "Paris"}',
            "state": "finished",
            "suggested_rules": [],
            "created_at": "2026-11-21T20:59:52.194484",
            "finished_at": None,
        },
        {
            "type": "tool_call",
            "id": "call_2",
            "name": "get_weather",
            "input": '{"city": "Rome"}',
            "state": "finished",
            "suggested_rules": [],
            "created_at": "2026-11-21T20:59:52.194487",
            "finished_at": None,
        },
        {
            "type": "tool_result",
            "id": "call_1",
            "name": "get_weather",
            "output": "18C sunny",
            "state": "success",
            "metadata": {},
            "created_at": "2026-11-21T20:59:52.194491",
            "finished_at": None,
        },
        {
            "type": "tool_result",
            "id": "call_2",
            "name": "get_weather",
            "output": [
                {
                    "type": "text",
                    "text": "timeout",
                    "id": "c2629216a32140a6b6ad5901330507cd",
                    "created_at": "2026-11-21T20:59:52.194495",
                    "finished_at": None,
                }
            ],
            "state": "error",
            "metadata": {"code": 504},
            "created_at": "2026-11-21T20:59:52.194500",
            "finished_at": None,
        },
        {
            "type": "hint",
            "hint": "call_2 failed; retry once.",
            "id": "805091a551b546de9b95d87f94cd5080",
            "source": "system",
            "created_at": "2026-11-21T20:59:52.194506",
            "finished_at": "2026-11-21T20:59:52.194507",
        },
    ],
    "role": "assistant",
    "id": "1eacf9aa9a174b8b9e36b407e5997711",
    "metadata": {},
    "created_at": "2026-11-21T20:59:52.194510",
    "usage": {
        "input_tokens": 120,
        "output_tokens": 40,
        "cache_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    },
    "finished_at": None,
    "finished_reason": None,
    "structured_output": None,
    "error": None,
}

AS_SYSTEM = {
    "name": "system",
    "content": [
        {
            "type": "text",
            "text": "You are helpful.",
            "id": "3623d2cd3e8e4959bacd83d6e62e5a4d",
            "created_at": "2026-11-21T20:59:52.194616",
            "finished_at": None,
        }
    ],
    "role": "system",
    "id": "9f2f5106e1744caba0650267b3e8ec84",
    "metadata": {},
    "created_at": "2026-11-21T20:59:52.194611",
    "usage": None,
    "finished_at": "2026-11-21T20:59:52.194611",
    "finished_reason": None,
    "structured_output": None,
    "error": None,
}

# The minimal dict the library accepts (it generates ids and times for what is missing).
AS_MINIMAL = {
    "name": "x",
    "role": "assistant",
    "content": [
        {"type": "tool_call", "id": "c", "name": "f", "input": "{}"},
        {"type": "thinking", "thinking": "t", "signature": "abc"},
    ],
}

AS_DOCUMENTS = [AS_USER, AS_ASSISTANT, AS_SYSTEM, AS_MINIMAL]


def library_keys(doc: dict[str, Any], block_type: str) -> set[str]:
    """The keys the real library dumps for a block of `block_type` in `doc`."""
    return next(set(b) for b in doc["content"] if b["type"] == block_type)


def py(msg: pm.Msg) -> dict[str, Any]:
    return msg_to_agentscope(msg, "python")


def java(msg: pm.Msg) -> dict[str, Any]:
    return msg_to_agentscope(msg, "java")


def both_ways(msg: pm.Msg, form: str) -> pm.Msg:
    return msg_from_agentscope(msg_to_agentscope(msg, form), form)  # type: ignore[arg-type]


# -- the seed ----------------------------------------------------------------------------------


def test_seed_example_reads_as_a_user_message_with_an_image():
    msg = msg_from_agentscope(json.loads(SEED_EXAMPLE))
    assert msg.role == "user"
    assert msg.name == "user"
    assert msg.id == "msg_001"
    assert msg.created_at == WHEN
    assert msg.content == [
        pm.TextBlock(text="What is this image?"),
        pm.ImageBlock(source=pm.URLSource(url="https://example.com/photo.jpg")),
    ]
    assert msg.metadata == {}  # nothing needed keeping: the Java form holds all of it


def test_seed_example_round_trips_to_an_equal_document():
    seed = json.loads(SEED_EXAMPLE)
    written = msg_to_agentscope(msg_from_agentscope(seed), "java")
    assert written == seed
    assert json.dumps(written["timestamp"]) == '"2024-01-15T10:30:00Z"'


# -- the Python form: writing ---------------------------------------------------------------


def test_python_message_has_the_library_keys_and_values():
    msg = pm.Msg.user("hi", name="bob", id="m1", created_at=WHEN, metadata={"k": 1})
    assert py(msg) == {
        "name": "bob",
        "content": [
            {
                "type": "text",
                "text": "hi",
                "id": "m1.0",
                "created_at": STAMP,
                "finished_at": None,
            }
        ],
        "role": "user",
        "id": "m1",
        "metadata": {"k": 1},
        "created_at": STAMP,
        "usage": None,
        "finished_at": None,
        "finished_reason": None,
        "structured_output": None,
        "error": None,
    }
    assert set(py(msg)) == set(AS_USER)


def test_python_thinking_keeps_signature_and_extras_as_top_level_keys():
    block = pm.ThinkingBlock(thinking="t", signature="sig", extra={"redacted_thinking_data": "x"})
    written = py(pm.Msg.assistant(block, id="m", created_at=WHEN))["content"][0]
    assert written["signature"] == "sig"
    assert written["redacted_thinking_data"] == "x"
    assert set(written) - {"signature", "redacted_thinking_data"} == library_keys(
        AS_ASSISTANT, "thinking"
    )


def test_python_media_blocks_become_data_blocks():
    blocks = [
        pm.ImageBlock.from_url("https://example.com/cat.png", "image/png"),
        pm.ImageBlock.from_url("https://example.com/cat"),
        pm.AudioBlock.from_bytes(b"RIFF", "audio/wav"),
        pm.VideoBlock.from_url("file:///tmp/v.mp4"),
        pm.FileBlock(source=pm.URLSource(url="https://example.com/a.pdf"), filename="a.pdf"),
    ]
    written = py(pm.Msg.user(*blocks, id="m", created_at=WHEN))["content"]
    assert [b["type"] for b in written] == ["data"] * 5
    assert all(set(b) == library_keys(AS_USER, "data") for b in written)
    assert [b["source"] for b in written] == [
        {"type": "url", "url": "https://example.com/cat.png", "media_type": "image/png"},
        # AgentScope requires a media type; an unknown one is the family's wildcard.
        {"type": "url", "url": "https://example.com/cat", "media_type": "image/*"},
        {"type": "base64", "data": "UklGRg==", "media_type": "audio/wav"},
        {"type": "url", "url": "file:///tmp/v.mp4", "media_type": "video/*"},
        {
            "type": "url",
            "url": "https://example.com/a.pdf",
            "media_type": "application/octet-stream",
        },
    ]
    assert [b["name"] for b in written] == [None, None, None, None, "a.pdf"]


def test_python_tool_call_carries_the_raw_json_string():
    call = pm.ToolCallBlock(id="c1", name="get_weather", input={"city": "Paris"})
    written = py(pm.Msg.assistant(call, id="m", created_at=WHEN))["content"][0]
    assert written == {
        "type": "tool_call",
        "id": "c1",
        "name": "get_weather",
        "input": '{"city": "Paris"}',
        "state": "pending",
        "suggested_rules": [],
        "created_at": STAMP,
        "finished_at": None,
    }
    assert set(written) == library_keys(AS_ASSISTANT, "tool_call")


def test_python_tool_call_writes_the_raw_input_while_streaming():
    call = pm.ToolCallBlock(id="c1", name="f", input={}, raw_input='{"city": "Pa')
    msg = pm.Msg.assistant(call)
    assert py(msg)["content"][0]["input"] == '{"city": "Pa'
    assert both_ways(msg, "python") == msg


def test_python_tool_message_is_an_assistant_message_holding_the_results():
    msg = pm.Msg.tool_result("c1", "18C sunny", name="get_weather", id="t1", created_at=WHEN)
    written = py(msg)
    assert written["role"] == "assistant"
    assert written["name"] == "assistant"  # AgentScope needs a name; the patch keeps None
    assert written["content"] == [
        {
            "type": "tool_result",
            "id": "c1",
            "name": "get_weather",
            "output": "18C sunny",
            "state": "success",
            "metadata": {},
            "created_at": STAMP,
            "finished_at": None,
        }
    ]
    assert set(written["content"][0]) == library_keys(AS_ASSISTANT, "tool_result")
    assert msg_from_agentscope(written) == msg


def test_python_error_result_with_block_output():
    msg = pm.Msg.tool_result("c2", [pm.TextBlock(text="timeout")], name="f", is_error=True, id="t")
    result = py(msg)["content"][0]
    assert result["state"] == "error"
    assert result["output"][0]["type"] == "text"
    assert result["output"][0]["text"] == "timeout"
    assert set(result["output"][0]) == library_keys(AS_ASSISTANT, "text")


def test_python_usage_maps_cached_tokens_and_keeps_elapsed_in_the_patch():
    usage = pm.Usage(input_tokens=3, output_tokens=4, cached_tokens=2, elapsed=1.5)
    msg = pm.Msg.assistant("x", name="a", usage=usage, id="m", created_at=WHEN)
    written = py(msg)
    assert written["usage"] == {
        "input_tokens": 3,
        "output_tokens": 4,
        "cache_input_tokens": 2,
        "cache_creation_input_tokens": 0,
    }
    assert written["metadata"]["parley"] == [
        {"op": "replace", "path": "/0/usage/elapsed", "value": 1.5}
    ]
    assert msg_from_agentscope(written) == msg


def test_python_write_keeps_only_what_would_be_lost():
    msg = pm.Msg.user("hi", name="bob")
    assert "parley" not in py(msg)["metadata"]
    nameless = pm.Msg.user("hi")
    assert py(nameless)["metadata"]["parley"] == [{"op": "remove", "path": "/0/name"}]


def test_a_parley_key_of_the_senders_own_is_kept_apart_from_the_patch():
    msg = pm.Msg.user("hi", name="bob", metadata={"parley": "mine", "agentscope": 1})
    assert both_ways(msg, "python") == msg
    assert both_ways(msg, "java") == msg


@pytest.mark.parametrize(
    ("block", "native"),
    [
        (pm.TextBlock(text="t"), True),
        (
            pm.ThinkingBlock(thinking="t", signature="s", extra={"redacted_thinking_data": "r"}),
            True,
        ),
        (pm.ThinkingBlock(thinking="t", extra={}), False),  # an empty extra reads back as None
        (pm.ImageBlock.from_url("https://e.com/a.png", "image/png"), True),
        (pm.ImageBlock.from_url("https://e.com/a.png"), True),  # written image/*, read as None
        (pm.AudioBlock.from_bytes(b"ID3", "audio/mpeg"), True),
        (pm.VideoBlock.from_url("https://e.com/v", "video/mp4"), True),
        (pm.FileBlock.from_bytes(b"%PDF", "application/pdf"), True),
        (pm.FileBlock(source=pm.URLSource(url="https://e.com/a"), filename="a"), False),
        (pm.FileBlock.from_bytes(b"x", "image/png"), False),  # reads back as an ImageBlock
        (pm.ToolCallBlock(id="c", name="f", input={"a": [1, "b"]}), True),
        (pm.ToolCallBlock(id="c", name="f", input={}, raw_input='{"a": 1'), True),
        (pm.ToolCallBlock(id="c", name="f", input={"a": 1}, raw_input='{"a":1}'), False),
    ],
)
def test_python_blocks_both_ways(block: Any, native: bool):
    msg = pm.Msg.assistant(block, name="a")
    written = py(msg)
    assert ("parley" not in written["metadata"]) is native
    assert both_ways(msg, "python") == msg


# -- the Python form: reading ---------------------------------------------------------------


def test_reading_a_real_user_message():
    msg = msg_from_agentscope(AS_USER)
    assert msg.role == "user"
    assert msg.name == "user"
    assert msg.id == AS_USER["id"]
    assert msg.created_at.tzinfo is UTC  # local time made UTC
    assert msg.content[0] == pm.TextBlock(text="What's in these?")
    assert msg.content[1] == pm.ImageBlock(
        source=pm.URLSource(url="https://example.com/cat.png", media_type="image/png")
    )
    assert msg.content[2] == pm.ImageBlock(
        source=pm.Base64Source(media_type="image/png", data="iVBORw0KGgo=")
    )
    assert msg.usage is None


def test_reading_a_real_system_message():
    msg = msg_from_agentscope(AS_SYSTEM)
    assert (msg.role, msg.text, msg.name) == ("system", "You are helpful.", "system")


def test_reading_a_real_reply_splits_results_and_hints_into_messages():
    msgs = msgs_from_agentscope([AS_ASSISTANT])
    assert [m.role for m in msgs] == ["assistant", "tool", "tool", "user"]
    reply, first, second, hint = msgs
    assert reply.id == AS_ASSISTANT["id"]
    assert reply.thinking == "Need two lookups."
    assert reply.text == "Checking."
    assert reply.tool_calls == [
        pm.ToolCallBlock(id="call_1", name="get_weather", input={"city": "Paris"}),
        pm.ToolCallBlock(id="call_2", name="get_weather", input={"city": "Rome"}),
    ]
    assert reply.usage == pm.Usage(input_tokens=120, output_tokens=40)
    assert first.content == [
        pm.ToolResultBlock(tool_call_id="call_1", name="get_weather", output="18C sunny")
    ]
    assert second.content == [
        pm.ToolResultBlock(
            tool_call_id="call_2",
            name="get_weather",
            output=[pm.TextBlock(text="timeout")],
            is_error=True,
        )
    ]
    assert (hint.text, hint.name) == ("call_2 failed; retry once.", "system")
    assert [m.id for m in msgs[1:]] == [f"{reply.id}-{n}" for n in (1, 2, 3)]
    assert hint.metadata["agentscope"] == {"form": "python", "part_of": reply.id, "hint": True}


def test_msg_from_agentscope_refuses_a_message_holding_several():
    with pytest.raises(MessageError, match=r"4 parley messages .*msgs_from_agentscope"):
        msg_from_agentscope(AS_ASSISTANT)


@pytest.mark.parametrize("doc", AS_DOCUMENTS, ids=["user", "assistant", "system", "minimal"])
def test_real_documents_read_and_write_back_unchanged(doc: dict[str, Any]):
    original = copy.deepcopy(doc)
    assert msgs_to_agentscope(msgs_from_agentscope([doc])) == [original]
    assert doc == original  # the input is not changed


def test_the_minimal_document_reads_its_fields_and_adds_nothing_on_the_way_back():
    msg = msg_from_agentscope(AS_MINIMAL)
    assert msg.content == [
        pm.ToolCallBlock(id="c", name="f", input={}),
        pm.ThinkingBlock(thinking="t", signature="abc"),
    ]
    assert msg_to_agentscope(msg) == AS_MINIMAL


def test_a_message_of_only_tool_results_is_one_tool_message():
    doc = py(pm.Msg.assistant("x"))  # any reply, then only results:
    doc["content"] = [r for r in AS_ASSISTANT["content"] if r["type"] == "tool_result"]
    msg = msg_from_agentscope(doc)
    assert msg.role == "tool"
    assert [r.tool_call_id for r in msg.tool_results] == ["call_1", "call_2"]


@pytest.mark.parametrize(
    ("state", "is_error"),
    [("success", False), ("running", False), ("error", True), ("denied", True)],
)
def test_result_states_read_as_is_error_and_come_back_exactly(state: str, is_error: bool):
    doc = copy.deepcopy(AS_ASSISTANT)
    doc["content"] = [dict(doc["content"][4], state=state)]
    msg = msg_from_agentscope(doc)
    assert msg.tool_results[0].is_error is is_error
    assert msg_to_agentscope(msg) == doc


def test_tool_call_input_that_is_not_a_json_object_is_kept_raw():
    doc = copy.deepcopy(AS_MINIMAL)
    doc["content"] = [{"type": "tool_call", "id": "c", "name": "f", "input": '{"a": '}]
    call = msg_from_agentscope(doc).tool_calls[0]
    assert (call.input, call.raw_input) == ({}, '{"a": ')


def test_compact_tool_call_json_reads_as_input_and_writes_back_as_it_was():
    doc = copy.deepcopy(AS_MINIMAL)
    doc["content"] = [{"type": "tool_call", "id": "c", "name": "f", "input": '{"a":1}'}]
    msg = msg_from_agentscope(doc)
    assert msg.tool_calls[0] == pm.ToolCallBlock(id="c", name="f", input={"a": 1})
    assert msg_to_agentscope(msg) == doc


def test_data_block_kinds_follow_the_media_type():
    doc = copy.deepcopy(AS_USER)
    sources = [
        {"type": "url", "url": "https://e.com/a", "media_type": "audio/mpeg"},
        {"type": "url", "url": "https://e.com/v", "media_type": "video/*"},
        {"type": "url", "url": "https://e.com/d", "media_type": "application/pdf"},
        {"type": "url", "url": "data:image/png;base64,iVBORw0KGgo=", "media_type": "image/png"},
    ]
    doc["content"] = [{"type": "data", "source": s, "name": "d.pdf"} for s in sources]
    content = msg_from_agentscope(doc).content
    assert content[0] == pm.AudioBlock(
        source=pm.URLSource(url="https://e.com/a", media_type="audio/mpeg")
    )
    assert content[1] == pm.VideoBlock(source=pm.URLSource(url="https://e.com/v"))
    assert content[2] == pm.FileBlock(
        source=pm.URLSource(url="https://e.com/d", media_type="application/pdf"), filename="d.pdf"
    )
    assert content[3] == pm.ImageBlock(
        source=pm.Base64Source(media_type="image/png", data="iVBORw0KGgo=")
    )
    assert msgs_to_agentscope(msgs_from_agentscope([doc])) == [doc]


# -- the Java form: writing -----------------------------------------------------------------


def test_java_message_keys_follow_the_seed():
    msg = pm.Msg.user("hi", name="bob", id="m1", created_at=WHEN, metadata={"k": 1})
    assert java(msg) == {
        "name": "bob",
        "role": "USER",
        "content": [{"type": "text", "text": "hi"}],
        "metadata": {"k": 1},
        "id": "m1",
        "timestamp": STAMP,
    }
    assert list(java(msg)) == list(json.loads(SEED_EXAMPLE))


def test_java_roles_are_upper_case_and_tool_is_tool():
    roles = [
        java(pm.Msg.system("s"))["role"],
        java(pm.Msg.user("u"))["role"],
        java(pm.Msg.assistant("a"))["role"],
        java(pm.Msg.tool_result("c", "r", name="f"))["role"],
    ]
    assert roles == ["SYSTEM", "USER", "ASSISTANT", "TOOL"]


def test_java_name_none_is_left_out():
    assert "name" not in java(pm.Msg.user("hi"))


@pytest.mark.parametrize(
    ("block", "written"),
    [
        (pm.TextBlock(text="t"), {"type": "text", "text": "t"}),
        (pm.ThinkingBlock(thinking="t"), {"type": "thinking", "thinking": "t"}),
        (
            pm.ThinkingBlock(thinking="t", signature="s", extra={"reasoningDetails": [1]}),
            {
                "type": "thinking",
                "thinking": "t",
                "metadata": {"reasoningDetails": [1], "thoughtSignature": "s"},
            },
        ),
        (
            pm.ImageBlock.from_url("https://e.com/a.jpg"),
            {"type": "image", "source": {"type": "url", "url": "https://e.com/a.jpg"}},
        ),
        (
            pm.AudioBlock.from_bytes(b"ID3", "audio/mpeg"),
            {
                "type": "audio",
                "source": {"type": "base64", "media_type": "audio/mpeg", "data": "SUQz"},
            },
        ),
        (
            pm.VideoBlock.from_url("file:///tmp/v.mp4"),
            {"type": "video", "source": {"type": "url", "url": "file:///tmp/v.mp4"}},
        ),
        (
            pm.FileBlock(source=pm.URLSource(url="https://e.com/a.pdf"), filename="a.pdf"),
            {
                "type": "data",
                "source": {"type": "url", "url": "https://e.com/a.pdf"},
                "name": "a.pdf",
            },
        ),
        (
            pm.ToolCallBlock(id="call_001", name="get_weather", input={"city": "Beijing"}),
            {
                "type": "tool_use",
                "id": "call_001",
                "name": "get_weather",
                "input": {"city": "Beijing"},
            },
        ),
        (
            pm.ToolCallBlock(id="c", name="f", input={}, raw_input='{"ci'),
            {"type": "tool_use", "id": "c", "name": "f", "input": {}, "content": '{"ci'},
        ),
    ],
)
def test_java_blocks_both_ways(block: Any, written: dict[str, Any]):
    msg = pm.Msg.assistant(block, name="a")
    assert java(msg)["content"] == [written]
    assert both_ways(msg, "java") == msg


def java_text_result(
    call_id: str, name: str, text: str, *, is_error: bool = False
) -> tuple[pm.ToolResultBlock, dict[str, Any]]:
    """A text tool result and its Java form: the text as one text block, a state for the error."""
    block = pm.ToolResultBlock(tool_call_id=call_id, name=name, output=text, is_error=is_error)
    output = [{"type": "text", "text": text}]
    state = "error" if is_error else "success"
    return block, {
        "type": "tool_result",
        "id": call_id,
        "name": name,
        "output": output,
        "state": state,
    }


@pytest.mark.parametrize(
    ("result", "written"),
    [
        java_text_result("call_001", "get_weather", "Beijing: Sunny"),
        java_text_result(
            "call_abc123", "f", "[ERROR] API call failed: Connection timeout", is_error=True
        ),
        (
            pm.ToolResultBlock(
                tool_call_id="c",
                name="f",
                output=[pm.TextBlock(text="a"), pm.ImageBlock.from_url("https://e.com/p.png")],
            ),
            {
                "type": "tool_result",
                "id": "c",
                "name": "f",
                "output": [
                    {"type": "text", "text": "a"},
                    {"type": "image", "source": {"type": "url", "url": "https://e.com/p.png"}},
                ],
                "state": "success",
            },
        ),
    ],
)
def test_java_tool_results_both_ways(result: pm.ToolResultBlock, written: dict[str, Any]):
    msg = pm.Msg(role="tool", content=[result])
    assert java(msg)["content"] == [written]
    assert both_ways(msg, "java") == msg


def test_java_usage_is_chat_usage_metadata():
    usage = pm.Usage(input_tokens=3, output_tokens=4, elapsed=0.25)
    written = java(pm.Msg.assistant("x", name="a", usage=usage))
    assert written["metadata"] == {
        "_chat_usage": {"inputTokens": 3, "outputTokens": 4, "time": 0.25}
    }


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (WHEN, "2024-01-15T10:30:00Z"),
        (WHEN.replace(microsecond=120000), "2024-01-15T10:30:00.120Z"),
        (WHEN.replace(microsecond=123456), "2024-01-15T10:30:00.123456Z"),
        (datetime(2024, 1, 15, 12, 30, tzinfo=timezone(timedelta(hours=2))), STAMP),
    ],
)
def test_timestamps_are_written_as_java_instants(moment: datetime, text: str):
    msg = pm.Msg.user("x", name="u", created_at=moment)
    assert java(msg)["timestamp"] == text
    assert py(msg)["created_at"] == text
    back = both_ways(msg, "java")
    assert back == msg
    assert back.created_at.utcoffset() == moment.utcoffset()  # the zone comes back too


# -- the Java form: reading -----------------------------------------------------------------


def java_doc(*blocks: dict[str, Any], role: str = "ASSISTANT", **fields: Any) -> dict[str, Any]:
    doc = {"role": role, "content": list(blocks), "metadata": {}, "id": "j1", "timestamp": STAMP}
    return {**doc, **fields}


def test_java_reads_agentscope_java_timestamps_and_spellings():
    doc = java_doc(
        {
            "type": "image",
            "source": {"type": "base64", "mediaType": "image/png", "data": "iVBORw0KGgo="},
        },
        role="USER",
        timestamp="2024-01-15 10:30:00.123",
    )
    msg = msg_from_agentscope(doc)
    assert msg.content == [
        pm.ImageBlock(source=pm.Base64Source(media_type="image/png", data="iVBORw0KGgo="))
    ]
    assert msg.created_at.tzinfo is UTC
    assert msg.created_at.microsecond == 123000
    assert msg_to_agentscope(msg, "java") == doc


def test_java_result_linked_by_tool_use_id_without_a_name_takes_the_calls_name():
    call = java_doc({"type": "tool_use", "id": "call_001", "name": "get_weather", "input": {}})
    result = java_doc(
        {
            "type": "tool_result",
            "toolUseId": "call_001",
            "output": [{"type": "text", "text": "Beijing: Sunny"}],
        },
        role="TOOL",
        id="j2",
    )
    msgs = msgs_from_agentscope([call, result])
    assert msgs[1].content == [
        pm.ToolResultBlock(tool_call_id="call_001", name="get_weather", output="Beijing: Sunny")
    ]
    assert msg_from_agentscope(result).tool_results[0].name == ""  # alone, no call to ask
    assert msgs_to_agentscope(msgs, "java") == [call, result]


def test_java_chat_usage_reads_as_usage():
    doc = java_doc(
        {"type": "text", "text": "x"},
        metadata={"_chat_usage": {"inputTokens": 5, "outputTokens": 6, "time": 1.5}, "k": "v"},
    )
    msg = msg_from_agentscope(doc)
    assert msg.usage == pm.Usage(input_tokens=5, output_tokens=6, elapsed=1.5)
    assert msg.metadata == {"k": "v"}


def test_java_chat_usage_that_is_not_a_usage_stays_metadata():
    doc = java_doc({"type": "text", "text": "x"}, metadata={"_chat_usage": "lots"})
    msg = msg_from_agentscope(doc)
    assert msg.usage is None
    assert msg.metadata == {"_chat_usage": "lots"}
    assert msg_to_agentscope(msg, "java") == doc


def test_java_control_role_is_refused():
    with pytest.raises(MessageError, match=r"CONTROL.*SYSTEM, USER, ASSISTANT or TOOL"):
        msg_from_agentscope(java_doc(role="CONTROL"))


# -- detection, lists, errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "form"),
    [
        ({"role": "USER"}, "java"),
        ({"role": "user", "timestamp": STAMP}, "java"),
        ({"role": "assistant", "content": [{"type": "tool_use"}]}, "java"),
        ({"role": "user", "content": [{"type": "image"}]}, "java"),
        ({"role": "user", "created_at": STAMP, "timestamp": STAMP}, "python"),
        ({"role": "assistant", "content": [{"type": "tool_call"}]}, "python"),
        ({}, "python"),
    ],
)
def test_detect_form(doc: dict[str, Any], form: str):
    assert detect_form(doc) == form


def test_an_explicit_form_overrides_detection():
    seed = json.loads(SEED_EXAMPLE)
    with pytest.raises(MessageError, match=r"'image'.*python form"):
        msg_from_agentscope(seed, "python")
    with pytest.raises(ConfigurationError, match="'python' or 'java'"):
        msg_from_agentscope(seed, "kotlin")  # type: ignore[arg-type]


def conversation() -> list[pm.Msg]:
    calls = [
        pm.ToolCallBlock(id="c1", name="get_weather", input={"city": "Paris"}),
        pm.ToolCallBlock(id="c2", name="get_weather", input={"city": "Rome"}),
    ]
    return [
        pm.Msg.user("Weather in Paris and Rome?", name="user"),
        pm.Msg.assistant("Checking.", *calls, name="agent"),
        pm.Msg.tool_result("c1", "18C", name="get_weather"),
        pm.Msg.tool_result("c2", "timeout", name="get_weather", is_error=True),
        pm.Msg.assistant("Paris is 18C; Rome did not answer.", name="agent"),
    ]


def test_python_lists_fold_tool_results_into_the_reply_as_agentscope_does():
    msgs = conversation()
    written = msgs_to_agentscope(msgs)
    assert [w["role"] for w in written] == ["user", "assistant", "assistant"]
    reply = written[1]["content"]
    assert [b["type"] for b in reply] == ["text", "tool_call", "tool_call"] + ["tool_result"] * 2
    assert [b["state"] for b in reply[1:]] == ["finished", "finished", "success", "error"]
    assert msgs_from_agentscope(written) == msgs


def test_java_lists_keep_tool_messages():
    msgs = conversation()
    written = msgs_to_agentscope(msgs, "java")
    assert [w["role"] for w in written] == ["USER", "ASSISTANT", "TOOL", "TOOL", "ASSISTANT"]
    assert msgs_from_agentscope(written) == msgs


def test_separate_agentscope_messages_stay_separate():
    msgs = conversation()
    one_by_one = [py(m) for m in msgs]  # the results as messages of their own
    assert msgs_to_agentscope(msgs_from_agentscope(one_by_one)) == one_by_one


def test_cross_form_writes_split_python_groups_into_java_messages():
    msgs = msgs_from_agentscope([AS_ASSISTANT])
    written = msgs_to_agentscope(msgs, "java")
    assert [w["role"] for w in written] == ["ASSISTANT", "TOOL", "TOOL", "USER"]
    assert msgs_from_agentscope(written) == msgs


def test_a_patch_skips_blocks_changed_since_it_was_made():
    call = pm.ToolCallBlock(id="c1", name="f", input={"a": 1}, raw_input="garbage")
    written = py(pm.Msg.assistant(call, name="a"))
    # input and raw_input disagree: the input is kept in the patch
    assert {"op": "add", "path": "/0/content/0/input/a", "value": 1} in written["metadata"][
        "parley"
    ]
    assert msg_from_agentscope(written).tool_calls == [call]
    # AgentScope puts another call first: the patch of c1 does not land on it.
    other = dict(written["content"][0], id="c0", input='{"b": 2}')
    moved = copy.deepcopy(written)
    moved["content"].insert(0, other)
    assert msg_from_agentscope(moved).tool_calls[0] == pm.ToolCallBlock(
        id="c0", name="f", input={"b": 2}
    )
    # Nor on a text block put in its place.
    replaced = copy.deepcopy(written)
    replaced["content"][0] = {"type": "text", "text": "first"}
    assert msg_from_agentscope(replaced).content == [pm.TextBlock(text="first")]


def test_a_patch_that_is_not_json_patch_is_refused():
    written = py(pm.Msg.user("x"))
    written["metadata"]["parley"] = [{"op": "move", "path": "/0/name"}]
    with pytest.raises(MessageError, match="not a JSON Patch operation"):
        msg_from_agentscope(written)


def test_a_non_list_parley_key_is_the_senders_metadata():
    doc = dict(AS_SYSTEM, metadata={"parley": {"mine": True}})
    msg = msg_from_agentscope(doc)
    assert msg.metadata["parley"] == {"mine": True}
    assert msg_to_agentscope(msg) == doc


@pytest.mark.parametrize(
    ("doc", "error", "match"),
    [
        ([], MessageError, "must be a JSON object"),
        ({"role": "tool?"}, MessageError, "not an AgentScope role"),
        ({"role": "user", "content": 5}, MessageError, "content must be a list"),
        ({"role": "user", "content": [5]}, MessageError, r"content\[0\] must be a JSON object"),
        ({"role": "user", "content": [{"type": "nope"}]}, MessageError, "'nope'"),
        ({"role": "user", "content": [{"type": "text"}]}, ValidationError, "text"),
        ({"role": "user", "created_at": "yesterday"}, MessageError, "ISO-8601"),
        ({"role": "user", "metadata": [1]}, MessageError, "metadata must be a JSON object"),
        ({"role": "user", "content": [{"type": "tool_call"}]}, ValidationError, "ToolCallBlock"),
        (
            {"role": "user", "content": [{"type": "data", "source": {"type": "s3"}}]},
            MessageError,
            "'url' or 'base64'",
        ),
    ],
)
def test_bad_input_says_what_is_wrong(doc: Any, error: type[Exception], match: str):
    with pytest.raises(error, match=match):
        msg_from_agentscope(doc)


def test_msgs_from_agentscope_needs_a_list():
    with pytest.raises(MessageError, match="expected a list"):
        msgs_from_agentscope(AS_SYSTEM)


def test_data_nested_deeper_than_pydantic_serializes_is_refused_clearly():
    deep: Any = 1
    for _ in range(300):
        deep = {"a": deep}
    with pytest.raises(MessageError, match="cannot be converted"):
        msg_from_agentscope(dict(AS_SYSTEM, metadata={"deep": deep}))


def test_a_parley_message_holding_values_that_are_not_json_is_refused_clearly():
    with pytest.raises(MessageError, match="cannot be converted"):
        msg_to_agentscope(pm.Msg.user("x", metadata={"o": object()}))


def test_msg_to_agentscope_takes_parley_json_too():
    msg = pm.Msg.user("hi", name="bob")
    assert msg_to_agentscope(msg.model_dump(mode="json")) == py(msg)  # type: ignore[arg-type]
