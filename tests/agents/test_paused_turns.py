"""A turn the model paused (`ChatResponse.paused`) is continued by the agent loop, not taken
as the answer: on the scripted model, and on Claude through the `anthropic` SDK against the
local Messages API server (Anthropic's `pause_turn`, a long turn of server tools)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parley.agents import Agent, InMemoryMemory, MaxItersReached, MessageCompleted, TextDelta
from parley.messages import Msg, TextBlock
from parley.models import ChatResponse, ChatUsage
from parley.models.testing import ScriptedModel
from parley.providers.anthropic.server import AnthropicServer, Reply, ServerBlock, Text, ToolUse
from tests.sample_tools import add

pytest_plugins = ["tests.models.anthropic_fixtures"]

ModelFactory = Callable[..., Any]
"""The `make_model` fixture (see `tests.models.anthropic_fixtures`)."""

WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}


def paused(text: str) -> ChatResponse:
    """A scripted answer whose turn the model paused."""
    return ChatResponse(
        content=[TextBlock(text=text)],
        finish_reason="stop",
        usage=ChatUsage(input_tokens=5, output_tokens=2),
        metadata={"paused": True},
    )


async def collect(run: Any) -> list[Any]:
    return [event async for event in run]


def texts(msg: Msg) -> list[str]:
    """A message's text blocks, each on its own."""
    return [block.text for block in msg.get_blocks("text")]


# -- any model that marks its answer paused --------------------------------------------------------


async def test_a_paused_turn_is_continued_and_the_answer_is_the_whole_turn() -> None:
    model = ScriptedModel([paused("Searching... "), "Found it."], stream=True)
    agent = Agent("finder", model, tools=[add], tool_choice="required")
    memory = InMemoryMemory()
    run = agent.stream("Find it.", memory=memory)
    events = await collect(run)

    assert run.status == "completed"
    assert run.iterations == 2
    assert run.final is not None
    # The whole turn, not its last part.
    assert texts(run.final) == ["Searching... ", "Found it."]
    assert run.final.usage is not None
    assert run.final.usage.output_tokens == 2 + 3  # both calls of the turn
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(texts(run.final))
    # Memory keeps the parts as they came, the paused one marked.
    stored = await memory.get()
    assert [(m.role, m.text) for m in stored] == [
        ("user", "Find it."),
        ("assistant", "Searching... "),
        ("assistant", "Found it."),
    ]
    assert stored[1].metadata["paused"] is True
    assert "paused" not in stored[2].metadata
    assert [e.msg for e in events if isinstance(e, MessageCompleted)] == stored[1:]
    # The continuation is the paused message sent back last, with the turn's tool choice.
    first, second = model.requests
    assert second.messages[-1] == stored[1]
    assert first.tool_choice == second.tool_choice == "required"
    model.assert_consumed()


async def test_a_continuation_that_calls_a_tool_ends_the_paused_turn() -> None:
    call = ScriptedModel.tool_call("add", {"a": 2, "b": 3}, call_id="call_1")
    model = ScriptedModel([paused("Let me add. "), call, "It is 5."], stream=True)
    agent = Agent("adder", model, tools=[add])
    memory = InMemoryMemory()
    reply = await agent.reply("2 + 3?", memory=memory)

    assert reply.text == "It is 5."  # a new turn after the tool: nothing paused before it
    assert [m.role for m in await memory.get()] == [
        "user",
        "assistant",
        "assistant",
        "tool",
        "assistant",
    ]
    model.assert_consumed()


# -- Claude's pause_turn ---------------------------------------------------------------------------


def search_result(call_id: str, title: str) -> dict[str, Any]:
    """A `web_search_tool_result` block, as the API sends it."""
    return {
        "type": "web_search_tool_result",
        "tool_use_id": call_id,
        "content": [
            {
                "type": "web_search_result",
                "title": title,
                "url": f"https://example.com/{title.lower()}",
                "encrypted_content": "EqQBCgIYAhIM",
                "page_age": None,
            }
        ],
    }


def search(call_id: str, query: str) -> ToolUse:
    return ToolUse("web_search", {"query": query}, call_id, kind="server_tool_use")


# The server paused after its second search call, before that search's result.
PAUSED_REPLY = [
    Text("Searching. "),
    search("srvtoolu_1", "Oslo weather"),
    ServerBlock(search_result("srvtoolu_1", "Oslo")),
    Text("Oslo is cold. "),
    search("srvtoolu_2", "Bergen weather"),
]
PAUSED_WIRE = [
    {"type": "text", "text": "Searching. "},
    {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "Oslo weather"},
    },
    search_result("srvtoolu_1", "Oslo"),
    {"type": "text", "text": "Oslo is cold. "},
    {
        "type": "server_tool_use",
        "id": "srvtoolu_2",
        "name": "web_search",
        "input": {"query": "Bergen weather"},
    },
]
CONTINUATION = [ServerBlock(search_result("srvtoolu_2", "Bergen")), Text("Bergen is wet.")]
CONTINUATION_WIRE = [
    search_result("srvtoolu_2", "Bergen"),
    {"type": "text", "text": "Bergen is wet."},
]
QUESTION = {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Bergen?"}]}


async def test_claude_s_paused_turn_is_sent_back_as_it_came_and_continued(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(content=PAUSED_REPLY, stop_reason="pause_turn", output_tokens=30),
        Reply(content=CONTINUATION, output_tokens=12),
        Reply(text="You're welcome."),
    )
    model = make_model(parameters={"server_tools": [WEB_SEARCH]})
    memory = InMemoryMemory()
    agent = Agent("weather", model, system_prompt="Be brief.")
    run = agent.stream("Weather in Oslo and Bergen?", memory=memory)
    events = await collect(run)

    assert run.status == "completed"
    assert run.iterations == 2
    assert run.usage.output_tokens == 30 + 12
    assert run.final is not None
    assert texts(run.final) == ["Searching. ", "Oslo is cold. ", "Bergen is wet."]
    assert len(run.final.content) == len(PAUSED_WIRE) + len(CONTINUATION_WIRE)
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == "".join(texts(run.final))

    # The second request carried the paused answer last, each block as the API sent it.
    first, second = server.bodies()
    assert first["messages"] == [QUESTION]
    assert second["messages"] == [QUESTION, {"role": "assistant", "content": PAUSED_WIRE}]
    assert second["system"] == first["system"]
    assert second["tools"] == first["tools"] == [WEB_SEARCH]

    # Memory: the question, the paused part (marked), the continuation.
    stored = await memory.get()
    assert [m.role for m in stored] == ["user", "assistant", "assistant"]
    assert stored[1].metadata["paused"] is True
    assert stored[1].metadata["response_id"] != stored[2].metadata["response_id"]
    assert "paused" not in stored[2].metadata
    assert stored[2].text == "Bergen is wet."

    # The conversation goes on: the two parts go back as the one assistant turn they are.
    await agent.reply("Thanks!", memory=memory)
    assert server.bodies()[2]["messages"] == [
        QUESTION,
        {"role": "assistant", "content": PAUSED_WIRE + CONTINUATION_WIRE},
        {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
    ]
    server.assert_consumed()


async def test_claude_pausing_every_time_ends_at_max_iters(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(*[Reply(text=f"part {n}. ", stop_reason="pause_turn") for n in range(3)])
    model = make_model(parameters={"server_tools": [WEB_SEARCH]})
    memory = InMemoryMemory()
    run = Agent("looper", model, max_iters=3).stream("Research everything.", memory=memory)
    events = await collect(run)

    assert run.status == "max_iters"
    assert [e.iters for e in events if isinstance(e, MaxItersReached)] == [3]
    assert run.final is not None
    assert texts(run.final) == ["part 0. ", "part 1. ", "part 2. "]  # the turn so far
    stored = await memory.get()
    assert [m.text for m in stored[1:]] == ["part 0. ", "part 1. ", "part 2. "]
    assert all(m.metadata["paused"] for m in stored[1:])
    # Each continuation sent the paused parts so far as the last, assistant turn.
    last_turns = [body["messages"][-1] for body in server.bodies()]
    assert [turn["role"] for turn in last_turns] == ["user", "assistant", "assistant"]
    assert [block["text"] for block in last_turns[2]["content"]] == ["part 0. ", "part 1. "]
    server.assert_consumed()


def test_a_non_agent_caller_reads_the_flag_on_chat(server: AnthropicServer) -> None:
    from parley.providers.anthropic import AnthropicChatModel  # noqa: PLC0415  (needs the SDK)

    server.add(Reply(content=PAUSED_REPLY, stop_reason="pause_turn"), Reply(content=CONTINUATION))
    model = AnthropicChatModel(server.credential(), "claude-sonnet-5-5")
    history = [Msg.user("Weather in Oslo and Bergen?")]
    answer = model.chat_sync(history)
    while answer.paused:  # what an agent does: the answer back, last, until the turn ends
        history.append(answer.to_msg())
        answer = model.chat_sync(history)
    model.close_sync()
    assert answer.text == "Bergen is wet."
    assert server.bodies()[1]["messages"][-1] == {"role": "assistant", "content": PAUSED_WIRE}


# -- what a paused turn leaves for the next request ------------------------------------------------


def assert_server_calls_answered(body: dict[str, Any]) -> None:
    """What the Messages API checks: in an assistant turn another message follows, each
    server tool call has its result after it (unless the turn also calls client tools,
    whose results come next and let the server run its own)."""
    messages = body["messages"]
    for turn in messages[:-1]:
        if turn["role"] != "assistant":
            continue
        blocks = turn["content"]
        if any(block["type"] == "tool_use" for block in blocks):
            continue
        for position, block in enumerate(blocks):
            if block["type"] == "server_tool_use":
                later = {b.get("tool_use_id") for b in blocks[position + 1 :]}
                assert block["id"] in later, f"{block['id']} has no result in {turn}"


async def test_a_turn_paused_at_max_iters_leaves_a_valid_next_request(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(content=PAUSED_REPLY, stop_reason="pause_turn"), Reply(text="As far as I got.")
    )
    model = make_model(parameters={"server_tools": [WEB_SEARCH]})
    memory = InMemoryMemory()
    agent = Agent("weather", model, max_iters=1)
    run = agent.stream("Weather in Oslo and Bergen?", memory=memory)
    await collect(run)
    assert run.status == "max_iters"
    # Memory keeps the turn as it came, its last search without a result.
    assert (await memory.get())[-1].metadata["paused"] is True

    await agent.reply("Stop there, thanks.", memory=memory)
    second = server.bodies()[1]
    assert_server_calls_answered(second)
    # The unanswered search is left out; what was answered stays as the API sent it.
    assert second["messages"] == [
        QUESTION,
        {"role": "assistant", "content": PAUSED_WIRE[:-1]},
        {"role": "user", "content": [{"type": "text", "text": "Stop there, thanks."}]},
    ]
    server.assert_consumed()


async def test_a_cancelled_turn_leaves_a_valid_next_request(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    waiting = "Waiting for the search to come back with something useful. " * 8
    server.add(
        Reply(
            content=[Text("Searching. "), search("srvtoolu_9", "Oslo weather"), Text(waiting)],
            chunk_delay=0.005,  # slow enough to be cancelled while it writes
        ),
        Reply(text="All right."),
    )
    model = make_model(parameters={"server_tools": [WEB_SEARCH]})
    memory = InMemoryMemory()
    agent = Agent("weather", model)
    run = agent.stream("Weather in Oslo?", memory=memory)
    async for event in run:
        if isinstance(event, TextDelta) and event.text.startswith("Wait"):
            run.cancel()  # the search's call is in, its result will never be
    assert run.status == "interrupted"
    partial = (await memory.get())[-1]
    assert partial.metadata["interrupted"] is True

    await agent.reply("Never mind.", memory=memory)
    second = server.bodies()[1]
    assert_server_calls_answered(second)
    [answer] = [m for m in second["messages"] if m["role"] == "assistant"]
    assert [b["type"] for b in answer["content"]] == ["text", "text"]
    assert answer["content"][0]["text"] == "Searching. "


CODE = {"type": "code_execution_20250825", "name": "code_execution"}
CONTAINER = {"id": "container_011CRfE7", "expires_at": "2026-12-01T12:00:00Z"}


def code_run(call_id: str, output: str) -> ServerBlock:
    return ServerBlock(
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": call_id,
            "content": {
                "type": "bash_code_execution_result",
                "stdout": output,
                "stderr": "",
                "return_code": 0,
                "content": [],
            },
        }
    )


def code_call(call_id: str, command: str) -> ToolUse:
    return ToolUse("bash_code_execution", {"command": command}, call_id, kind="server_tool_use")


async def test_a_paused_code_execution_turn_goes_on_in_its_container(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(
            content=[
                code_call("srvtoolu_c1", "echo 6*7 | bc"),
                code_run("srvtoolu_c1", "42\n"),
                code_call("srvtoolu_c2", "ls"),
            ],
            stop_reason="pause_turn",
            container=CONTAINER,
        ),
        Reply(
            content=[code_run("srvtoolu_c2", "out.txt\n"), Text("It is 42.")], container=CONTAINER
        ),
    )
    model = make_model(parameters={"server_tools": [CODE]})
    memory = InMemoryMemory()
    reply = await Agent("coder", model).reply("What is 6*7? Use code.", memory=memory)

    assert reply.text == "It is 42."
    first, second = server.bodies()
    assert "container" not in first
    assert second["container"] == CONTAINER["id"]  # the continuation runs where it began
    assert (await memory.get())[1].metadata["container"] == CONTAINER["id"]
    server.assert_consumed()


def test_a_non_agent_caller_continues_in_the_container_too(server: AnthropicServer) -> None:
    from parley.providers.anthropic import AnthropicChatModel  # noqa: PLC0415  (needs the SDK)

    server.add(
        Reply(
            content=[code_call("srvtoolu_c1", "ls")], stop_reason="pause_turn", container=CONTAINER
        ),
        Reply(content=[code_run("srvtoolu_c1", "a.txt\n"), Text("One file.")]),
    )
    model = AnthropicChatModel(server.credential(), "claude-sonnet-5-5")
    history = [Msg.user("Which files are there?")]
    answer = model.chat_sync(history)  # whole: the container in the message
    assert answer.paused
    history.append(answer.to_msg())
    assert model.chat_sync(history).text == "One file."
    model.close_sync()
    assert server.bodies()[1]["container"] == CONTAINER["id"]
