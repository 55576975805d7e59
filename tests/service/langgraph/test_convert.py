"""parley's messages as LangChain's message dicts and back (`parley.service.langgraph.convert`).

The dicts are checked against LangChain's own message classes (langchain-core, which the
SDK brings): what parley sends, LangChain reads as the same message.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import convert_to_messages, messages_from_dict

from parley.errors import MessageError
from parley.messages import ImageBlock, Msg, ToolCallBlock, Usage
from parley.service.langgraph.convert import input_messages, message_dicts, messages_of


def _langchain(data: dict[str, object]) -> object:
    (msg,) = messages_from_dict([{"type": data["type"], "data": data}])
    return msg


def test_a_conversation_as_langchain_reads_it() -> None:
    call = ToolCallBlock(id="call_1", name="get_weather", input={"city": "Paris"})
    msgs = [
        Msg.system("Be brief."),
        Msg.user("Weather?"),
        Msg.assistant(call, usage=Usage(input_tokens=10, output_tokens=5)),
        Msg.tool_result("call_1", "sunny", name="get_weather"),
        Msg.tool_result("call_2", "no such city", name="get_weather", is_error=True),
        Msg.assistant("Sunny."),
    ]
    dicts = messages_of(msgs)
    assert [d["type"] for d in dicts] == ["system", "human", "ai", "tool", "tool", "ai"]
    ai = dicts[2]
    assert ai["tool_calls"] == [
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
    ]
    assert ai["usage_metadata"] == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    assert dicts[4]["status"] == "error"
    read = [_langchain(d) for d in dicts]
    assert read[2].tool_calls[0]["args"] == {"city": "Paris"}  # type: ignore[attr-defined]
    assert read[3].tool_call_id == "call_1"  # type: ignore[attr-defined]
    assert read[5].content == "Sunny."  # type: ignore[attr-defined]
    assert [m.id for m in read] == [d["id"] for d in dicts]  # type: ignore[attr-defined]


def test_a_tool_message_with_two_results_is_two() -> None:
    both = Msg(
        role="tool",
        content=[
            *Msg.tool_result("a", "1", name="t").content,
            *Msg.tool_result("b", "2", name="t").content,
        ],
    )
    dicts = message_dicts(both)
    assert [(d["tool_call_id"], d["id"]) for d in dicts] == [("a", both.id), ("b", f"{both.id}-1")]


def test_input_in_langchains_and_openais_forms() -> None:
    items = [
        {"type": "system", "content": "Be brief."},
        {"role": "user", "content": "hi", "id": "client-id"},
        {
            "type": "ai",
            "content": "",
            "tool_calls": [{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}],
        },
        {"role": "tool", "content": "done", "tool_call_id": "c1", "name": "f"},
        {
            "type": "human",
            "content": [
                {"type": "text", "text": "and this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ],
        },
    ]
    msgs = input_messages(items)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert msgs[1].id == "client-id"
    assert msgs[2].tool_calls[0].input == {"x": 1}
    assert msgs[3].tool_results[0].tool_call_id == "c1"
    assert msgs[4].text == "and this?"
    assert msgs[4].get_blocks(ImageBlock)[0].source.url == "https://example.com/a.png"  # type: ignore[union-attr]
    # LangChain's own classes, dumped, read the same
    lc = [m.model_dump() for m in convert_to_messages([("human", "from langchain")])]
    assert input_messages(lc)[0].text == "from langchain"
    back = message_dicts(msgs[4])[0]["content"]
    assert back[1] == {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ({"type": "robot", "content": "x"}, "human, ai, system or tool"),
        ({"type": "tool", "content": "x"}, "tool_call_id"),
        ({"type": "human", "content": [{"type": "video"}]}, "not supported"),
        ({"type": "human", "content": 7}, "string or a list"),
        (42, "not a message object"),
    ],
)
def test_bad_input_says_what_is_wrong(item: object, says: str) -> None:
    with pytest.raises(MessageError, match=says):
        input_messages([item])
