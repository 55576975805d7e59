"""A plain string as agent input (seed 001's data flow: strings, dicts and Messages in)."""

from __future__ import annotations

from parley.agents import Agent as ParleyAgent
from parley.agents.multi import GroupChat
from parley.compat.qwen import Assistant, BasicAgent, FnCallAgent
from parley.models.testing import ScriptedModel


def test_a_qwen_agent_runs_on_a_string() -> None:
    model = ScriptedModel(["Hello there."])
    bot = FnCallAgent(llm=model, name="bot")
    *_, last = bot.run("Hi!")
    assert isinstance(last[0], dict)  # a string is answered with dicts
    assert (last[0]["role"], last[0]["content"], last[0]["name"]) == (
        "assistant",
        "Hello there.",
        "bot",
    )
    (request,) = model.requests
    assert [(m.role, m.text) for m in request.messages] == [("user", "Hi!")]


def test_run_nonstream_and_basic_agents_take_a_string() -> None:
    bot = BasicAgent(llm=ScriptedModel(["ok"]))
    assert bot.run_nonstream("hello")[-1]["content"] == "ok"
    assistant = Assistant(llm=ScriptedModel(["fine"]))
    assert assistant.run_nonstream("how are you?")[-1]["content"] == "fine"


async def test_a_qwen_agents_parley_stream_takes_a_string() -> None:
    model = ScriptedModel(["streamed"])
    bot = FnCallAgent(llm=model)
    events = [event async for event in bot.stream("go")]
    assert events[-1].type == "run_ended"
    assert model.requests[0].messages[-1].text == "go"


async def test_parleys_own_agents_take_a_string() -> None:
    model = ScriptedModel(["one", "two"])
    agent = ParleyAgent("a", model)
    assert (await agent.reply("first")).text == "one"
    events = [event async for event in agent.stream("second")]
    assert events[-1].type == "run_ended"
    chat = GroupChat([ParleyAgent("x", ScriptedModel(["hi"]))], max_rounds=1)
    result = await chat.run("Start.")
    assert result.messages[0].text == "Start."
