"""agent-service-toolkit's schema, and `Msg` to and from its `ChatMessage`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from parley import messages as pm
from parley.compat.service_toolkit import (
    PARLEY_KEY,
    TOOLKIT_KEY,
    ChatHistory,
    ChatMessage,
    Feedback,
    FeedbackResponse,
    ServiceMetadata,
    StreamInput,
    UserInput,
    chat_message_to_msg,
    chat_messages_to_msgs,
    msg_to_chat_message,
    msgs_to_chat_messages,
)
from parley.errors import MessageError, ParleyError
from tests.strategies import ids, json_objects, json_values, msgs, names, text

WHEN = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
WHEN_JSON = "2025-01-02T03:04:05.678901Z"
TYPES = ["human", "ai", "tool", "custom"]

props = settings(deadline=None)


def parley_record(chat: ChatMessage) -> dict[str, Any]:
    return chat.custom_data[PARLEY_KEY]


def one_chat_message(msg: pm.Msg) -> bool:
    return msg.role != "tool" or len(msg.content) == 1


# -- the schema, as upstream ----------------------------------------------------------------


def test_chat_message_json_has_upstream_fields_and_defaults():
    assert ChatMessage(type="ai", content="x").model_dump() == {
        "type": "ai",
        "content": "x",
        "tool_calls": [],
        "tool_call_id": None,
        "run_id": None,
        "response_metadata": {},
        "custom_data": {},
    }


def test_chat_message_defaults_are_not_shared():
    first, second = ChatMessage(type="ai", content=""), ChatMessage(type="ai", content="")
    first.custom_data["k"] = 1
    first.tool_calls.append({"name": "f", "args": {}, "id": None})
    assert second.custom_data == {}
    assert second.tool_calls == []


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "system", "content": "x"},
        {"type": "ai", "content": None},
        {"type": "ai", "content": "x", "tool_calls": [{"name": "f", "args": {}}]},  # id required
    ],
)
def test_chat_message_rejects_what_upstream_rejects(bad):
    with pytest.raises(ValidationError):
        ChatMessage.model_validate(bad)


def test_chat_message_ignores_unknown_keys_and_extra_tool_call_keys():
    chat = ChatMessage.model_validate(
        {
            "type": "ai",
            "content": "",
            "future": 1,
            "tool_calls": [{"name": "f", "args": {"a": 1}, "id": None, "x": 2}],
        }
    )
    assert chat.tool_calls == [{"name": "f", "args": {"a": 1}, "id": None}]
    assert "future" not in chat.model_dump()


def test_user_and_stream_input_json():
    assert UserInput(message="hi").model_dump() == {
        "message": "hi",
        "model": None,  # the toolkit's since September 2025: the service's default model
        "thread_id": None,
        "user_id": None,
        "agent_config": {},
    }
    assert StreamInput(message="hi", model=None).model_dump()["stream_tokens"] is True
    assert StreamInput(message="hi", model=None).model_dump()["model"] is None


def test_other_models():
    info = ServiceMetadata.model_validate(
        {
            "agents": [{"key": "chatbot", "description": "A bot."}],
            "models": ["fake"],
            "default_agent": "chatbot",
            "default_model": "fake",
        }
    )
    assert info.agents[0].key == "chatbot"
    assert Feedback(run_id="r", key="stars", score=0.8).model_dump() == {
        "run_id": "r",
        "key": "stars",
        "score": 0.8,
        "kwargs": {},
    }
    assert FeedbackResponse().model_dump() == {"status": "success"}
    history = ChatHistory.model_validate({"messages": [{"type": "human", "content": "hi"}]})
    assert history.messages[0].content == "hi"


@pytest.mark.parametrize(
    ("chat_type", "title"),
    [
        ("ai", "=" * 34 + " Ai Message " + "=" * 34),
        ("human", "=" * 32 + " Human Message " + "=" * 33),
        ("tool", "=" * 33 + " Tool Message " + "=" * 33),
        ("custom", "=" * 32 + " Custom Message " + "=" * 32),
    ],
)
def test_pretty_repr_matches_upstream(chat_type, title, capsys):
    chat = ChatMessage(type=chat_type, content="Hello")
    assert chat.pretty_repr() == f"{title}\n\nHello"
    assert len(title) == 80
    chat.pretty_print()
    assert capsys.readouterr().out == f"{title}\n\nHello\n"


# -- Msg to ChatMessage ----------------------------------------------------------------------


def test_user_text_is_a_human_message_with_only_id_and_time_recorded():
    chat = msg_to_chat_message(pm.Msg.user("Hello", id="m1", created_at=WHEN))
    assert chat.type == "human"
    assert chat.content == "Hello"
    assert chat.custom_data == {PARLEY_KEY: {"id": "m1", "created_at": WHEN_JSON}}
    assert chat.response_metadata == {}


def test_assistant_text_and_tool_calls():
    msg = pm.Msg.assistant(
        "Let me look.",
        pm.ToolCallBlock(id="c1", name="weather", input={"city": "Tokyo"}),
        pm.ToolCallBlock(id="c2", name="time", input={}),
        id="m1",
        created_at=WHEN,
    )
    chat = msg_to_chat_message(msg, run_id="run-1")
    assert chat.type == "ai"
    assert chat.content == "Let me look."
    assert chat.tool_calls == [
        {"name": "weather", "args": {"city": "Tokyo"}, "id": "c1", "type": "tool_call"},
        {"name": "time", "args": {}, "id": "c2", "type": "tool_call"},
    ]
    assert chat.run_id == "run-1"
    assert "content" not in parley_record(chat)  # the views rebuild the blocks


def test_blocks_the_views_cannot_rebuild_are_recorded_without_what_the_views_carry():
    msg = pm.Msg.assistant(
        pm.ThinkingBlock(thinking="hmm", signature="sig"),
        "Checking.",
        pm.ToolCallBlock(id="c1", name="f", input={"a": 1}, raw_input='{"a": 1}'),
    )
    chat = msg_to_chat_message(msg)
    assert chat.content == "Checking."
    assert parley_record(chat)["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text"},
        {"type": "tool_call", "raw_input": '{"a": 1}'},
    ]
    assert chat_message_to_msg(chat) == msg


def test_several_text_blocks_are_joined_for_display_and_recorded_whole():
    msg = pm.Msg.user("one", "two", pm.ImageBlock.from_url("https://example.com/a.png"))
    chat = msg_to_chat_message(msg)
    assert chat.content == "one\ntwo"
    assert parley_record(chat)["content"][:2] == [
        {"type": "text", "text": "one"},
        {"type": "text", "text": "two"},
    ]
    assert chat_message_to_msg(chat) == msg


def test_tool_result_is_a_tool_message():
    msg = pm.Msg.tool_result("c1", "sunny", name="weather", is_error=True, created_at=WHEN, id="t")
    chat = msg_to_chat_message(msg)
    assert (chat.type, chat.content, chat.tool_call_id) == ("tool", "sunny", "c1")
    assert parley_record(chat) == {
        "id": "t",
        "created_at": WHEN_JSON,
        "tool_name": "weather",
        "is_error": True,
    }


def test_tool_output_blocks_give_their_text():
    output = [pm.TextBlock(text="a chart:"), pm.ImageBlock.from_url("https://example.com/c.png")]
    chat = msg_to_chat_message(pm.Msg.tool_result("c1", output, name="plot"))
    assert chat.content == "a chart:"
    assert parley_record(chat)["content"][0] == {"type": "text"}


def test_a_tool_message_with_several_results_needs_the_list_functions():
    results = [pm.ToolResultBlock(tool_call_id=f"c{i}", name="f", output=str(i)) for i in range(3)]
    msg = pm.Msg(role="tool", content=results, metadata={"k": "v"})
    with pytest.raises(MessageError, match="msgs_to_chat_messages"):
        msg_to_chat_message(msg)
    chats = msgs_to_chat_messages([msg], run_id="r")
    assert [c.tool_call_id for c in chats] == ["c0", "c1", "c2"]
    assert [c.run_id for c in chats] == ["r", "r", "r"]
    assert parley_record(chats[2]) == {"id": msg.id, "part": 2, "tool_name": "f"}
    [back] = chat_messages_to_msgs(chats)
    assert back.content == msg.content
    assert back.metadata == {"k": "v", TOOLKIT_KEY: {"run_id": "r"}}


def test_same_id_tool_messages_in_a_row_stay_apart():
    first = pm.Msg.tool_result("c1", "1", name="f", id="same")
    second = pm.Msg.tool_result("c2", "2", name="f", id="same")
    assert chat_messages_to_msgs(msgs_to_chat_messages([first, second])) == [first, second]


def test_system_message_is_custom_and_marked():
    msg = pm.Msg.system("Be brief.")
    chat = msg_to_chat_message(msg)
    assert chat.type == "custom"
    assert parley_record(chat)["role"] == "system"
    assert chat_message_to_msg(chat) == msg


def test_usage_goes_to_response_metadata_as_langchain_reports_it():
    usage = pm.Usage(input_tokens=10, output_tokens=5, cached_tokens=4, elapsed=1.5)
    chat = msg_to_chat_message(pm.Msg.assistant("hi", usage=usage))
    assert chat.response_metadata == {
        "token_usage": {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
        "usage_metadata": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_token_details": {"cache_read": 4},
        },
    }
    assert parley_record(chat)["elapsed"] == 1.5
    assert chat_message_to_msg(chat).usage == usage


def test_name_and_metadata_are_recorded():
    msg = pm.Msg.user("hi", name="alice", metadata={"lang": "en"})
    record = parley_record(msg_to_chat_message(msg))
    assert (record["name"], record["metadata"]) == ("alice", {"lang": "en"})


# -- ChatMessage to Msg ----------------------------------------------------------------------


def test_a_toolkit_conversation_reads_as_messages():
    # As the toolkit's service sends them: LangChain's ChatOpenAI metadata, no parley record.
    token_usage = {
        "prompt_tokens": 80,
        "completion_tokens": 20,
        "total_tokens": 100,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    }
    history = ChatHistory.model_validate(
        {
            "messages": [
                {"type": "human", "content": "Weather in Tokyo?"},
                {
                    "type": "ai",
                    "content": "",
                    "tool_calls": [
                        {"name": "Weather", "args": {"city": "Tokyo"}, "id": "call_1"},
                    ],
                    "run_id": "r1",
                    "response_metadata": {"token_usage": token_usage, "model_name": "gpt-4o"},
                },
                {"type": "tool", "content": "25C", "tool_call_id": "call_1", "run_id": "r1"},
                {"type": "ai", "content": "Sunny, 25C.", "run_id": "r1"},
            ]
        }
    )
    human, call, result, answer = chat_messages_to_msgs(history.messages)
    assert human.role == "user"
    assert human.text == "Weather in Tokyo?"
    assert call.role == "assistant"
    assert call.tool_calls == [
        pm.ToolCallBlock(id="call_1", name="Weather", input={"city": "Tokyo"})
    ]
    assert call.usage == pm.Usage(input_tokens=80, output_tokens=20)
    assert call.metadata[TOOLKIT_KEY] == {
        "run_id": "r1",
        # OpenAI's own token_usage has more than parley writes: kept as it was
        "response_metadata": {"token_usage": token_usage, "model_name": "gpt-4o"},
    }
    assert result.tool_results == [
        pm.ToolResultBlock(tool_call_id="call_1", name="Weather", output="25C")
    ]
    assert answer.text == "Sunny, 25C."
    again = msgs_to_chat_messages([call])[0]
    assert again.response_metadata["token_usage"] == token_usage
    assert again.response_metadata["model_name"] == "gpt-4o"
    assert again.run_id == "r1"


def test_a_custom_message_from_an_agent_is_an_assistant_message_and_goes_back():
    data = {"name": "task", "state": "new", "data": {}}
    chat = ChatMessage(type="custom", content="", custom_data=data)
    msg = chat_message_to_msg(chat)
    assert msg.role == "assistant"
    assert msg.content == []
    assert msg.metadata == {TOOLKIT_KEY: {"type": "custom", "custom_data": data}}
    back = msg_to_chat_message(msg)
    assert back.type == "custom"
    assert {k: v for k, v in back.custom_data.items() if k != PARLEY_KEY} == data


def test_a_dict_is_accepted():
    msg = chat_message_to_msg({"type": "ai", "content": "hi"})
    assert msg.text == "hi"


def test_a_tool_call_without_id_gets_one():
    chat = ChatMessage(type="ai", content="", tool_calls=[{"name": "f", "args": {}, "id": None}])
    [call] = chat_message_to_msg(chat).tool_calls
    assert call.id


def test_a_lone_tool_result_has_no_tool_name():
    msg = chat_message_to_msg(ChatMessage(type="tool", content="x", tool_call_id="c"))
    assert msg.tool_results[0].name == ""


@pytest.mark.parametrize(
    ("chat", "error", "match"),
    [
        (ChatMessage(type="tool", content="x"), MessageError, "tool_call_id"),
        (
            ChatMessage(
                type="tool",
                content="x",
                tool_call_id="c",
                tool_calls=[{"name": "f", "args": {}, "id": "c"}],
            ),
            MessageError,
            "cannot hold tool_calls",
        ),
        (
            ChatMessage(
                type="human", content="", tool_calls=[{"name": "f", "args": {}, "id": "c"}]
            ),
            ValidationError,
            "cannot be in a user message",
        ),
        (
            ChatMessage(
                type="ai",
                content="",
                tool_calls=[{"name": "f", "args": {}, "id": "c"}],
                custom_data={PARLEY_KEY: {"content": []}},
            ),
            MessageError,
            "fewer tool calls",
        ),
        (
            ChatMessage(
                type="ai",
                content="",
                custom_data={PARLEY_KEY: {"content": [{"type": "tool_call"}]}},
            ),
            MessageError,
            "more tool calls",
        ),
        (
            ChatMessage(type="ai", content="", custom_data={PARLEY_KEY: 5}),
            ValidationError,
            "_Extras",
        ),
        (
            ChatMessage(type="ai", content="", custom_data={PARLEY_KEY: {"bogus": 1}}),
            ValidationError,
            "bogus",
        ),
    ],
)
def test_bad_chat_messages_say_what_is_wrong(chat, error, match):
    with pytest.raises(error, match=match):
        chat_message_to_msg(chat)


# -- round trips -----------------------------------------------------------------------------


def through_json(chat: ChatMessage) -> ChatMessage:
    return ChatMessage.model_validate_json(chat.model_dump_json())


@props
@given(msgs().filter(one_chat_message))
def test_every_msg_survives_the_round_trip(msg):
    chat = msg_to_chat_message(msg)
    assert chat_message_to_msg(chat) == msg
    back = chat_message_to_msg(through_json(chat))
    assert back == msg
    assert back.model_dump_json() == msg.model_dump_json()


@props
@given(st.lists(msgs(), max_size=5))
def test_every_msg_list_survives_the_round_trip(messages):
    chats = [through_json(chat) for chat in msgs_to_chat_messages(messages)]
    assert chat_messages_to_msgs(chats) == messages


@props
@given(msgs().filter(one_chat_message), ids)
def test_a_run_id_is_kept(msg, run_id):
    back = chat_message_to_msg(msg_to_chat_message(msg, run_id=run_id))
    assert back.metadata == {**msg.metadata, TOOLKIT_KEY: {"run_id": run_id}}
    assert back.model_copy(update={"metadata": msg.metadata}) == msg


toolkit_records = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(TYPES),
        "run_id": ids,
        "tool_call_id": ids,
        "response_metadata": json_objects,
        "custom_data": json_objects,
    },
)


@props
@given(st.lists(msgs(), min_size=1, max_size=3), json_values | toolkit_records)
def test_msgs_holding_a_toolkit_record_survive_the_round_trip(messages, record):
    first = messages[0]
    messages[0] = first.model_copy(update={"metadata": {**first.metadata, TOOLKIT_KEY: record}})
    assert chat_messages_to_msgs(msgs_to_chat_messages(messages)) == messages


tool_calls = st.fixed_dictionaries({"name": names, "args": json_objects, "id": ids})
token_usages = st.fixed_dictionaries(
    {"prompt_tokens": st.integers(0, 10**6), "completion_tokens": st.integers(0, 10**6)},
    optional={
        "total_tokens": st.integers(0, 10**6),
        "prompt_tokens_details": st.fixed_dictionaries({"cached_tokens": st.integers(0, 10)}),
    },
)
response_metadata = json_objects | st.builds(
    lambda rest, usage: {**rest, "token_usage": usage}, json_objects, token_usages
)


def toolkit_messages() -> st.SearchStrategy[ChatMessage]:
    """ChatMessages as the toolkit's own service sends them: no parley record."""
    common = {
        "content": text,
        "run_id": st.none() | ids,
        "response_metadata": response_metadata,
        "custom_data": json_objects.filter(lambda data: PARLEY_KEY not in data),
    }
    return st.one_of(
        st.builds(
            ChatMessage,
            type=st.sampled_from(["human", "custom"]),
            tool_call_id=st.none() | ids,
            **common,
        ),
        st.builds(
            ChatMessage,
            type=st.just("ai"),
            tool_calls=st.lists(tool_calls, max_size=3),
            tool_call_id=st.none() | ids,
            **common,
        ),
        st.builds(ChatMessage, type=st.just("tool"), tool_call_id=ids, **common),
    )


@props
@given(toolkit_messages())
def test_a_toolkit_message_goes_back_unchanged_but_for_parley_additions(chat):
    back = msg_to_chat_message(chat_message_to_msg(through_json(chat)))
    fields = ("type", "content", "tool_call_id", "run_id")
    assert [getattr(back, f) for f in fields] == [getattr(chat, f) for f in fields]
    assert back.tool_calls == [{**call, "type": "tool_call"} for call in chat.tool_calls]
    assert {k: v for k, v in back.custom_data.items() if k != PARLEY_KEY} == chat.custom_data
    kept = {k: back.response_metadata.get(k) for k in chat.response_metadata}
    assert kept == chat.response_metadata
    assert set(back.response_metadata) - set(chat.response_metadata) <= {
        "token_usage",
        "usage_metadata",
    }


# -- fuzz ------------------------------------------------------------------------------------

any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def or_any(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A plausible value, or any JSON at all."""
    return good | any_json


template_items = or_any(
    st.sampled_from(
        [
            {"type": "text"},
            {"type": "text", "text": "t"},
            {"type": "tool_call"},
            {"type": "tool_call", "raw_input": "{"},
            {"type": "tool_call", "id": "c", "name": "f"},
            {"type": "thinking", "thinking": "t"},
            {"type": "image", "source": "https://example.com/a.png"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "!"}},
            {"type": "tool_result", "tool_call_id": "c", "name": "f"},
        ]
    )
)
message_ids = st.sampled_from(["m1", "m2"])  # few, so that parts meet their heads
parley_records = st.fixed_dictionaries(
    {},
    optional={
        "id": or_any(message_ids),
        "created_at": or_any(st.just(WHEN_JSON)),
        "name": or_any(names),
        "role": or_any(st.sampled_from(["system", "user", "assistant", "tool"])),
        "metadata": or_any(
            json_objects | st.builds(lambda v: {TOOLKIT_KEY: v}, json_values | toolkit_records)
        ),
        "elapsed": or_any(st.floats(allow_nan=False)),
        "content": or_any(st.lists(template_items, max_size=4)),
        "tool_name": or_any(names),
        "is_error": or_any(st.booleans()),
        "part": or_any(st.integers(-1, 3)),
    },
)
chat_like = st.fixed_dictionaries(
    {"type": st.sampled_from(TYPES), "content": text},
    optional={
        "tool_calls": st.lists(
            st.fixed_dictionaries({"name": names, "args": json_objects, "id": st.none() | ids}),
            max_size=3,
        ),
        "tool_call_id": ids,
        "run_id": st.none() | ids,
        "response_metadata": response_metadata,
        "custom_data": st.builds(
            lambda rest, record: {**rest, PARLEY_KEY: record}, json_objects, parley_records
        ),
    },
)
"""ChatMessages whose fields are valid, carrying parley records that may be anything."""


@props
@given(any_json | chat_like)
def test_arbitrary_json_raises_only_parley_or_validation_errors(value):
    try:
        chat = ChatMessage.model_validate(value)
        chat_message_to_msg(chat)
    except (ValidationError, ParleyError):
        pass


@props
@given(st.lists(chat_like, max_size=4))
def test_arbitrary_chat_message_lists_raise_only_parley_or_validation_errors(values):
    try:
        back = chat_messages_to_msgs(values)
    except (ValidationError, ParleyError):
        return
    # whatever was read is a valid message list, and converts back
    assert chat_messages_to_msgs(msgs_to_chat_messages(back)) == back
