"""Qwen-Agent's `Agent` base class: custom agents written as Qwen-Agent teaches run unchanged.

A custom agent implements `_run` and calls `self._call_llm` and `self._call_tool` in a loop
(Qwen-Agent's docs, "Agent Development", and its `FnCallAgent._run`). The shapes asserted
are Qwen-Agent 0.0.34's (`qwen_agent/agent.py`, `llm/base.py`): `_call_llm` yields the
response so far (reasoning, content, one message per function call with
`extra["function_id"]`), `run` puts the system message first and names the messages after
the agent.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from parley.agents import PromptedToolsModel, one_tool_round
from parley.compat.qwen import (
    FUNCTION,
    MAX_LLM_CALL_PER_RUN,
    SYSTEM,
    Agent,
    BaseTool,
    BasicAgent,
    ContentItem,
    FnCallAgent,
    FunctionCall,
    Message,
    register_tool,
)
from parley.compat.qwen.llm import BaseChatModel, ModelServiceError
from parley.errors import ConfigurationError, MessageError, ModelHTTPError, UserError
from parley.messages import ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel
from parley.providers.openai import OpenAICompatibleChatModel
from parley.providers.openai.server import OpenAIServer
from tests._requires import require_module
from tests.compat._qwen_tools import CityWeather, ParisWeather, demo_mcp_servers, plain


@register_tool("qwen_base_weather")
class WeatherTool(CityWeather):
    """A Qwen-Agent tool, as its docs write one (the call is `CityWeather`'s)."""


@register_tool("qwen_base_probe")
class ProbeTool(BaseTool):
    """Returns what it was given: arguments, keyword arguments; fails or draws on request."""

    description = "Probe."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"mode": {"type": "string"}},
        "required": ["mode"],
    }
    seen: ClassVar[list[dict[str, Any]]] = []

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> Any:
        mode = self._verify_json_format_args(params)["mode"]
        type(self).seen.append(kwargs)
        if mode == "fail":
            raise RuntimeError("the probe broke")
        if mode == "draw":
            return [ContentItem(text="a cat:"), ContentItem(image="https://x.test/cat.png")]
        if mode == "data":
            return {"temperature": 21, "unit": "C"}
        return f"probed {mode}"


class ToolLoopAgent(Agent):
    """A custom agent as Qwen-Agent teaches it: `_call_llm` and `_call_tool` in a loop.

    Written as Qwen-Agent's own `FnCallAgent._run` is: call the model with the tools'
    descriptions, yield the response so far, run each function call found by `_detect_tool`
    and append a function message answering it, until a turn calls no function.
    """

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[list[Message]]:
        messages = copy.deepcopy(messages)
        response: list[Message] = []
        for _ in range(MAX_LLM_CALL_PER_RUN):
            output: list[Message] = []
            for output in self._call_llm(
                messages=messages,
                functions=[tool.function for tool in self.function_map.values()],
                extra_generate_cfg={"lang": lang},
            ):
                if output:
                    yield response + output
            response.extend(output)
            messages.extend(output)
            used_any_tool = False
            for out in output:
                use_tool, tool_name, tool_args, _ = self._detect_tool(out)
                if use_tool:
                    tool_result = self._call_tool(tool_name, tool_args, messages=messages, **kwargs)
                    fn_msg = Message(
                        role=FUNCTION,
                        name=tool_name,
                        content=tool_result,
                        extra={"function_id": out.extra.get("function_id", "1")},
                    )
                    messages.append(fn_msg)
                    response.append(fn_msg)
                    yield response
                    used_any_tool = True
            if not used_any_tool:
                break
        yield response


class SpyingAgent(ToolLoopAgent):
    """Records each `_call_tool`: the test's only addition to the custom agent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tool_calls: list[tuple[str, Any, Any]] = []

    def _call_tool(self, tool_name: str, tool_args: Any = "{}", **kwargs: Any) -> Any:
        result = super()._call_tool(tool_name, tool_args, **kwargs)
        self.tool_calls.append((tool_name, tool_args, result))
        return result


USER = [{"role": "user", "content": "Weather in Paris?"}]


# -- the custom agent, on three models -----------------------------------------------------------


def test_a_custom_agent_calls_tools_through_call_tool_and_answers() -> None:
    model = ScriptedModel(
        [
            ChatResponse(
                content=[
                    ThinkingBlock(thinking="Paris, then answer."),
                    ToolCallBlock(id="call_1", name="qwen_base_weather", input={"city": "Paris"}),
                ],
                finish_reason="tool_calls",
            ),
            "Sunny in Paris.",
        ]
    )
    bot = SpyingAgent(["qwen_base_weather"], llm=model, name="bot")

    snapshots = list(bot.run(USER))

    assert bot.tool_calls == [
        ("qwen_base_weather", '{"city": "Paris"}', "Sunny, 21 degrees C in Paris")
    ]
    assert [plain(m) for m in snapshots[-1]] == [
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Paris, then answer.",
            "name": "bot",
        },
        {
            "role": "assistant",
            "content": "",
            "name": "bot",
            "function_call": {"name": "qwen_base_weather", "arguments": '{"city": "Paris"}'},
            "function_id": "call_1",
        },
        {
            "role": "function",
            "content": "Sunny, 21 degrees C in Paris",
            "name": "qwen_base_weather",
            "function_id": "call_1",
        },
        {"role": "assistant", "content": "Sunny in Paris.", "name": "bot"},
    ]
    # Dicts in, dicts out; the response grew, the answer streamed in several steps.
    assert all(isinstance(m, dict) for s in snapshots for m in s)
    answers = [s[-1]["content"] for s in snapshots if len(s) == 4]
    assert answers[0] == "Sunn"
    assert answers[-1] == "Sunny in Paris."
    # The model got the tool's schema (from Qwen's list form), then the result to its call.
    [spec] = model.requests[0].tools
    assert (spec.name, spec.parameters["required"]) == ("qwen_base_weather", ["city"])
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert second[2].tool_results[0].tool_call_id == "call_1"
    assert second[1].content[0] == ThinkingBlock(thinking="Paris, then answer.")
    model.assert_consumed()


def test_a_custom_agent_makes_real_calls_through_the_openai_sdk() -> None:
    exchange = ParisWeather("qwen_base_weather", "call_9")
    with OpenAIServer(exchange.steps()) as server:
        bot = SpyingAgent(
            ["qwen_base_weather"],
            llm={
                "model": "qwen3-8b",
                "model_server": server.url,
                "api_key": "EMPTY",
                # The provider's native tools (Qwen-Agent's default is the prompt).
                "generate_cfg": {"use_raw_api": True},
            },
            system_message="You are helpful.",
        )
        try:
            response = bot.run_nonstream([Message("user", "Weather in Paris?")])
        finally:
            bot.close_sync()
        server.assert_consumed()
        first, second = server.bodies()

    assert bot.tool_calls == [
        ("qwen_base_weather", '{"city": "Paris"}', "Sunny, 21 degrees C in Paris")
    ]
    assert all(isinstance(m, Message) for m in response)
    assert [plain(m) for m in response] == exchange.response()
    exchange.check_requests(first, second)
    assert first["tools"][0]["function"]["parameters"]["required"] == ["city"]
    assert second["messages"][-1]["content"] == "Sunny, 21 degrees C in Paris"


@pytest.mark.timeout(300)
def test_a_custom_agent_runs_on_the_embedded_local_model() -> None:
    """SmolLM2-135M calls the tool on the turn's first call (the model's policy lets it
    choose, and it calls whenever it may), then must answer: the custom agent's loop ends."""
    require_module("llama_cpp", "local")
    WeatherTool.asked.clear()
    bot = SpyingAgent(
        ["qwen_base_weather"],
        llm={"model_type": "local", "generate_cfg": {"seed": 7, "max_tokens": 64}},
        system_message="You are a helpful assistant.",
    )

    response = bot.run_nonstream([{"role": "user", "content": "What is the weather in Paris?"}])

    [(name, arguments, result)] = bot.tool_calls
    assert name == "qwen_base_weather"
    assert json.loads(arguments) == WeatherTool.asked[0]
    assert "paris" in WeatherTool.asked[0]["city"].lower()
    assert result == f"Sunny, 21 degrees C in {WeatherTool.asked[0]['city']}"
    calls = [m for m in response if "function_call" in m]
    results = [m for m in response if m["role"] == "function"]
    assert len(calls) == len(results) == 1
    assert results[0]["extra"]["function_id"] == calls[0]["extra"]["function_id"]
    assert results[0]["content"] == result
    assert response[-1]["role"] == "assistant"
    assert "function_call" not in response[-1]
    assert response[-1]["content"].strip()


# -- run -----------------------------------------------------------------------------------------


class Echo(Agent):
    """Yields what `_run` was given: the messages and arguments `run` prepared."""

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[list[Message]]:
        self.given = (messages, lang, kwargs)
        yield [Message("assistant", f"{len(messages)} messages, {lang}")]
        yield [Message("assistant", "done"), Message("function", "r", name="tool")]


def test_run_puts_the_system_message_first_or_merges_it_as_qwen_does() -> None:
    bot = Echo(llm=ScriptedModel(), system_message="Be brief.")
    bot.run_nonstream([Message("user", "hi")])
    assert [m.model_dump() for m in bot.given[0]] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    bot.run_nonstream(
        [{"role": "system", "content": "In French."}, {"role": "user", "content": "hi"}]
    )
    assert bot.given[0][0].content == "Be brief.\n\nIn French."
    listed = [Message("system", [ContentItem(text="In French.")]), Message("user", "hi")]
    bot.run_nonstream(listed)
    assert bot.given[0][0].content == [
        ContentItem(text="Be brief.\n\n"),
        ContentItem(text="In French."),
    ]
    # The caller's messages are copies: unchanged.
    assert listed[0].content == [ContentItem(text="In French.")]
    # Without a system message, nothing is added.
    quiet = Echo(llm=ScriptedModel())
    quiet.run_nonstream([Message("user", "hi")])
    assert [m.role for m in quiet.given[0]] == ["user"]


def test_run_picks_lang_and_hands_other_arguments_to_run() -> None:
    bot = Echo(llm=ScriptedModel())
    bot.run_nonstream([Message("user", "今天天气怎么样?")])
    assert bot.given[1:] == ("zh", {})
    bot.run_nonstream([Message("user", "Weather today?")], knowledge="K", max_ref_token=9)
    assert bot.given[1:] == ("en", {"knowledge": "K", "max_ref_token": 9})
    bot.run_nonstream([Message("user", "今天")], lang="en")
    assert bot.given[1] == "en"
    # Chinese in an assistant message does not count, as in Qwen-Agent.
    bot.run_nonstream([Message("user", "hi"), Message("assistant", "你好")])
    assert bot.given[1] == "en"


def test_run_names_unnamed_messages_after_the_agent_and_answers_in_kind() -> None:
    named = Echo(llm=ScriptedModel(), name="bot")
    snapshots = list(named.run([{"role": "user", "content": "hi"}]))
    assert snapshots == [
        [{"role": "assistant", "content": "1 messages, en", "name": "bot"}],
        [
            {"role": "assistant", "content": "done", "name": "bot"},
            {"role": "function", "content": "r", "name": "tool"},  # already named
        ],
    ]
    as_messages = named.run_nonstream([Message("user", "hi")])
    assert all(isinstance(m, Message) for m in as_messages)
    assert Echo(llm=ScriptedModel()).run_nonstream([Message("user", "hi")])[0].name is None
    # Nothing in (as Qwen-Agent): Messages out.
    assert isinstance(named.run_nonstream([])[0], Message)


def test_arun_and_arun_nonstream_are_the_async_twins() -> None:
    async def main() -> tuple[list[Any], Any]:
        bot = Echo(llm=ScriptedModel(), name="bot")
        snapshots = [s async for s in bot.arun([{"role": "user", "content": "hi"}])]
        return snapshots, await bot.arun_nonstream([Message("user", "hi")])

    snapshots, whole = asyncio.run(main())
    in_sync = Echo(llm=ScriptedModel(), name="bot").run([{"role": "user", "content": "hi"}])
    assert snapshots == list(in_sync)
    assert [m.content for m in whole] == ["done", "r"]


def test_bad_input_raises() -> None:
    with pytest.raises(ConfigurationError, match=r"Echo got unknown arguments: \['colour'\]"):
        Echo(llm=ScriptedModel(), colour="red")
    with pytest.raises(ConfigurationError, match="Echo takes no files="):
        Echo(llm=ScriptedModel(), files=["a.pdf"])
    with pytest.raises(ConfigurationError, match="rag_cfg"):
        Echo(llm=ScriptedModel(), rag_cfg={"k": 1})
    with pytest.raises(ConfigurationError, match="llm must be"):
        Echo(llm="qwen-max")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="abstract"):
        Agent(llm=ScriptedModel())  # type: ignore[abstract]


# -- _call_llm -----------------------------------------------------------------------------------


class Once(Agent):
    """Calls the model once with what the test sets."""

    functions: list[dict[str, Any]] | None = None
    cfg: dict[str, Any] | None = None

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[Any]:
        return self._call_llm(messages, self.functions, extra_generate_cfg=self.cfg)


def test_call_llm_streams_the_response_so_far_then_the_completed_messages() -> None:
    model = ScriptedModel(
        [
            ChatResponse(
                content=[
                    ThinkingBlock(thinking="hmm"),
                    TextBlock(text="Let me look."),
                    ToolCallBlock(id="c1", name="f", input={"q": "cats"}),
                ]
            )
        ]
    )
    bot = Once(llm=model)
    snapshots = list(bot._call_llm([Message("user", "cats?")], [{"name": "f", "parameters": {}}]))

    last = snapshots[-1]
    assert [plain(m) for m in last] == [
        {"role": "assistant", "content": "", "reasoning_content": "hmm"},
        {"role": "assistant", "content": "Let me look."},
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "f", "arguments": '{"q": "cats"}'},
            "function_id": "c1",
        },
    ]
    # Growing snapshots in the shape Qwen-Agent streams, the last one carrying parley's record.
    assert [m.content for m in snapshots[1][1:2]] == ["Let "]
    assert "parley" not in (snapshots[-2][0].extra or {})
    assert set(last[0].extra or {}) >= {"parley"}
    assert last[0].extra["parley"]["usage"]["output_tokens"] > 0  # type: ignore[index]
    # Without streaming: the same whole list.
    model.add(ChatResponse(content=[TextBlock(text="Whole.")]))
    [whole] = bot._call_llm([Message("user", "again")], stream=False)
    assert whole.content == "Whole."


def test_call_llm_reads_qwens_function_descriptions_and_generate_cfg() -> None:
    model = ScriptedModel(["ok", "ok", "ok"])
    bot = Once(llm=model)
    bot.extra_generate_cfg = {"temperature": 0.3, "stop": ["<a>"]}
    weather = WeatherTool().function
    openai_form = {"type": "function", "function": {"name": "g", "description": "G."}}
    bot._call_llm(
        [{"role": "user", "content": "hi"}],
        [weather, openai_form],
        stream=False,
        extra_generate_cfg={"lang": "zh", "seed": 3, "stop": ["<b>", "<a>"], "top_p": 0.5},
    )
    request = model.requests[0]
    assert [(t.name, t.description) for t in request.tools] == [
        ("qwen_base_weather", "Get the current weather for a city."),
        ("g", "G."),
    ]
    assert request.tools[0].parameters == {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name."}},
        "required": ["city"],
    }
    parameters = request.parameters.model_dump(exclude_none=True)
    assert parameters == {"temperature": 0.3, "seed": 3, "top_p": 0.5, "stop": ["<a>", "<b>"]}
    # Dicts in, dicts out.
    [answer] = bot._call_llm([{"role": "user", "content": "hi"}], stream=False)
    assert isinstance(answer, dict)
    assert answer["content"] == "ok"


def test_call_llm_trims_the_prompt_to_max_input_tokens() -> None:
    model = ScriptedModel(["ok", "ok", "ok"])
    bot = Once(llm=model)
    history = [
        Message("user", "old question " * 200),
        Message("assistant", "old answer " * 200),
        Message("user", "new question"),
    ]
    bot._call_llm(history, stream=False, extra_generate_cfg={"max_input_tokens": 100})
    bot.extra_generate_cfg = {"max_input_tokens": 100}
    bot._call_llm(history, stream=False)
    assert [[m.text for m in r.messages] for r in model.requests] == [["new question"]] * 2
    bot.extra_generate_cfg = {}
    bot._call_llm(history, stream=False)  # the scripted model has no context size: all of it
    assert len(model.requests[-1].messages) == 3


def test_call_llm_tool_choice() -> None:
    tools = [WeatherTool().function, ProbeTool().function]
    asked = [Message("user", "go")]
    after_a_call = [
        *asked,
        Message("assistant", "", function_call=FunctionCall("qwen_base_weather", "{}")),
        Message("function", "sun", name="qwen_base_weather"),
    ]

    def choice(history: list[Message], cfg: dict[str, Any] | None = None, **agent: Any) -> Any:
        model = ScriptedModel(["ok"])
        bot = Once(llm=model)
        bot.extra_generate_cfg = agent
        bot._call_llm(history, tools, stream=False, extra_generate_cfg=cfg)
        return model.requests[0].tool_choice

    # The call's own choice, on any call.
    assert choice(after_a_call, {"function_choice": "qwen_base_probe"}) == "qwen_base_probe"
    assert choice(asked, {"function_choice": "none"}) == "none"
    # The agent's: auto and none on every call, a name on a turn's first call only.
    assert choice(after_a_call, function_choice="none") == "none"
    assert choice(asked, function_choice="qwen_base_probe") == "qwen_base_probe"
    assert choice(after_a_call, function_choice="qwen_base_probe") is None
    # Otherwise the model's own policy, counted from the latest user message.
    assert choice(asked) is None

    def local_like(history: list[Message]) -> Any:
        model = ScriptedModel(["ok"])
        model.default_tool_choice = one_tool_round
        Once(llm=model)._call_llm(history, tools, stream=False)
        return model.requests[0].tool_choice

    assert local_like(asked) == "auto"
    assert local_like(after_a_call) == "none"
    assert local_like([*after_a_call, Message("user", "and Rome?")]) == "auto"


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        ({"messages": []}, MessageError, "can not be empty"),
        ({"extra_generate_cfg": {"best_of": 2}}, ConfigurationError, "best_of"),
        ({"extra_generate_cfg": {"function_choice": "nope"}}, ValueError, "nope"),
        ({"extra_generate_cfg": {"function_choice": 3}}, ValueError, "bad function_choice"),
        ({"functions": [{"description": "no name"}]}, ValueError, "tool description"),
        ({"functions": [{"name": "f", "parameters": [{"type": "x"}]}]}, ValueError, "no name"),
        ({"extra_generate_cfg": "hot"}, ConfigurationError, "must be a dict"),
    ],
)
def test_call_llm_refuses_what_it_cannot_use(
    call: dict[str, Any], error: type[Exception], match: str
) -> None:
    bot = Once(llm=ScriptedModel())
    arguments = {"messages": [Message("user", "hi")], "stream": False, **call}
    with pytest.raises(error, match=match):
        bot._call_llm(**arguments)


def test_a_model_failure_raises_from_call_llm() -> None:
    bot = Once(llm=ScriptedModel([ModelHTTPError(500, message="boom")]))
    with pytest.raises(ModelServiceError, match="boom") as raised:
        list(bot._call_llm([Message("user", "hi")]))
    # Qwen-Agent's error, carrying the status as its code (and parley's error as its cause).
    assert (raised.value.code, raised.value.message) == ("500", "boom")
    assert isinstance(raised.value.exception, ModelHTTPError)


# -- _call_tool, _init_tool, _detect_tool --------------------------------------------------------


def test_call_tool_returns_text_media_or_the_failure_as_text() -> None:
    bot = Once(["qwen_base_probe"], llm=ScriptedModel())
    ProbeTool.seen.clear()
    assert bot._call_tool("qwen_base_probe", '{"mode": "x"}', messages=["m"]) == "probed x"
    assert bot._call_tool("qwen_base_probe", {"mode": "y"}) == "probed y"
    assert ProbeTool.seen == [{"messages": ["m"]}, {}]  # keyword arguments reach the tool
    assert bot._call_tool("qwen_base_probe", '{"mode": "draw"}') == [
        ContentItem(text="a cat:"),
        ContentItem(image="https://x.test/cat.png"),
    ]
    assert json.loads(bot._call_tool("qwen_base_probe", '{"mode": "data"}')) == {  # type: ignore[arg-type]
        "temperature": 21,
        "unit": "C",
    }
    failed = bot._call_tool("qwen_base_probe", '{"mode": "fail"}')
    assert "RuntimeError: the probe broke" in failed
    assert "no tool 'nope'" in bot._call_tool("nope")
    assert "qwen_base_probe" in bot._call_tool("nope")  # the tools it has
    assert "mode" in bot._call_tool("qwen_base_probe", "{}")  # the argument missing


def test_init_tool_takes_qwens_function_list_entries(caplog: pytest.LogCaptureFixture) -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    probe = ProbeTool({"name_for_human": "P"})
    with caplog.at_level(logging.WARNING, "parley.compat.qwen"):
        bot = Once(
            ["qwen_base_weather", {"name": "qwen_base_weather", "x": 1}, probe, add],
            llm=ScriptedModel(),
        )
    assert list(bot.function_map) == ["qwen_base_weather", "qwen_base_probe", "add"]
    assert bot.function_map["qwen_base_weather"].cfg == {"name": "qwen_base_weather", "x": 1}
    assert bot.function_map["qwen_base_probe"] is probe
    assert "Repeatedly adding tool qwen_base_weather" in caplog.text
    assert bot._call_tool("add", '{"a": 2, "b": 3}') == "5"
    later = ProbeTool()
    bot._init_tool(later)  # a later entry replaces
    assert bot.function_map["qwen_base_probe"] is later
    with pytest.raises(ValueError, match="no tool registered as 'nope'"):
        Once(["nope"], llm=ScriptedModel())
    with pytest.raises(ValueError, match="cannot use 3"):
        Once([3], llm=ScriptedModel())  # type: ignore[list-item]


def test_detect_tool_reads_a_function_call() -> None:
    bot = Once(llm=ScriptedModel())
    call = Message("assistant", "", function_call=FunctionCall("f", '{"a": 1}'))
    assert bot._detect_tool(call) == (True, "f", '{"a": 1}', "")
    assert bot._detect_tool(Message("assistant", "hi")) == (False, None, None, "hi")
    items = [ContentItem(text="x")]
    assert bot._detect_tool({"role": "assistant", "content": items}) == (False, None, None, items)


@pytest.mark.timeout(90)
def test_a_custom_agent_calls_mcp_tools_opened_on_the_first_run() -> None:
    require_module("mcp.server.mcpserver", "mcp")
    servers = demo_mcp_servers()
    model = ScriptedModel([ScriptedModel.tool_call("demo-add", {"a": 2, "b": 3}, "c1"), "5"])
    bot = SpyingAgent([servers], llm=model)
    try:
        assert bot.function_map == {}
        response = bot.run_nonstream(USER)
        assert "demo-add" in bot.function_map
        assert "demo-add" in [t.name for t in model.requests[0].tools]
        assert bot.tool_calls == [("demo-add", '{"a": 2, "b": 3}', "5")]
        assert [m["role"] for m in response] == ["assistant", "function", "assistant"]
    finally:
        bot.close_sync()
    model.assert_consumed()


# -- BasicAgent, FnCallAgent, and a subclass that adds knowledge ---------------------------------


def test_basic_agent_just_calls_the_model() -> None:
    model = ScriptedModel(["Bonjour."])
    bot = BasicAgent(["qwen_base_weather"], llm=model, system_message="Be French.", name="fr")
    response = bot.run_nonstream(USER, seed=5)
    assert [plain(m) for m in response] == [
        {"role": "assistant", "content": "Bonjour.", "name": "fr"}
    ]
    [request] = model.requests
    assert request.tools == []  # its tools are never offered
    assert request.parameters.seed == 5
    assert [(m.role, m.text) for m in request.messages] == [
        ("system", "Be French."),
        ("user", "Weather in Paris?"),
    ]


def test_fncall_agent_is_an_agent_with_its_helpers() -> None:
    bot = FnCallAgent(["qwen_base_probe"], llm=ScriptedModel(["hi"]))
    assert isinstance(bot, Agent)
    assert bot._call_tool("qwen_base_probe", '{"mode": "z"}') == "probed z"
    assert bot._detect_tool(Message("assistant", "x"))[0] is False
    [answer] = bot._call_llm([Message("user", "hi")], stream=False)
    assert answer.content == "hi"
    with pytest.raises(UserError, match=r"but lang and seed, got \['colour'\]"):
        bot.run_nonstream(USER, colour="red")


def test_fncall_agents_loop_runs_on_extra_generate_cfg_and_the_runs_seed() -> None:
    """Qwen-Agent's loop hands the agent's `extra_generate_cfg` and `run(seed=...)` to every
    model call: a subclass's stop words and settings reach the model."""
    model = ScriptedModel(
        [ScriptedModel.tool_call("qwen_base_probe", {"mode": "a"}), "done", "again", "plain"],
        parameters={"stop": ["<end>"]},
    )
    bot = FnCallAgent(["qwen_base_probe", "qwen_base_weather"], llm=model)
    bot.extra_generate_cfg = {
        "stop": ["Reply:"],
        "temperature": 0.2,
        "lang": "zh",
        "parallel_function_calls": False,
        "function_choice": "qwen_base_probe",
    }
    bot.run_nonstream(USER, seed=4)
    first, second = model.requests
    for request in (first, second):
        assert request.parameters.stop == ["<end>", "Reply:"]  # united with the model's own
        assert (request.parameters.temperature, request.parameters.seed) == (0.2, 4)
        assert request.parameters.parallel_tool_calls is False
    assert first.tool_choice == "qwen_base_probe"  # a name: the run's first call only
    assert second.tool_choice is None
    # The agent's own model is left as it was; a later run without a seed has none.
    assert model.parameters.stop == ["<end>"]
    bot.extra_generate_cfg = {"function_choice": "none"}
    bot.run_nonstream(USER)
    assert model.requests[-1].parameters.seed is None
    assert model.requests[-1].tool_choice == "none"
    # Without settings, the loop is the agent's own.
    bot.extra_generate_cfg = {}
    bot.run_nonstream(USER)
    assert model.requests[-1].parameters.temperature is None
    model.assert_consumed()
    bot.extra_generate_cfg = {"best_of": 2}
    with pytest.raises(ConfigurationError, match="extra_generate_cfg: unknown parameter 'best_of'"):
        bot.run_nonstream(USER)
    bot.extra_generate_cfg = {"function_choice": "nope"}
    with pytest.raises(ConfigurationError, match="nope"):
        bot.run_nonstream(USER)
    bot.extra_generate_cfg = {}
    with pytest.raises(UserError, match="seed must be an integer"):
        bot.run_nonstream(USER, seed="7")


KNOWLEDGE = "# Knowledge Base\n\nThe launch is in March."


class KnowledgeAgent(FnCallAgent):
    """Puts knowledge in the system message before the loop, as Qwen-Agent's `Assistant`
    does with what it retrieved (`_prepend_knowledge_prompt`)."""

    def _run(
        self, messages: list[Message], lang: str = "en", knowledge: str = "", **kwargs: Any
    ) -> Iterator[Any]:
        messages = copy.deepcopy(messages)
        prompt = knowledge or KNOWLEDGE
        if messages and messages[0].role == SYSTEM:
            messages[0].content = f"{messages[0].content}\n\n{prompt}"
        else:
            messages.insert(0, Message(SYSTEM, prompt))
        return super()._run(messages, lang=lang, **kwargs)


def test_a_fncall_agent_subclass_can_add_knowledge_before_the_loop() -> None:
    model = ScriptedModel(["In March.", "In April.", "In May."])
    bot = KnowledgeAgent(llm=model, system_message="Be brief.")
    assert bot.run_nonstream([Message("user", "When is the launch?")])[-1].content == "In March."
    assert bot.run_nonstream(USER, knowledge="Launch: April.")[-1]["content"] == "In April."

    async def main() -> Any:
        return await bot.arun_nonstream(USER)

    assert asyncio.run(main())[-1]["content"] == "In May."
    systems = [r.messages[0] for r in model.requests]
    assert [m.text for m in systems] == [
        f"Be brief.\n\n{KNOWLEDGE}",
        "Be brief.\n\nLaunch: April.",
        f"Be brief.\n\n{KNOWLEDGE}",  # arun goes through the subclass's _run too
    ]


def test_media_tool_results_reach_the_model_as_blocks() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("qwen_base_probe", {"mode": "draw"}), "A cat."])
    bot = ToolLoopAgent(["qwen_base_probe"], llm=model)
    response = bot.run_nonstream([Message("user", "draw")])
    assert response[1].content == [
        ContentItem(text="a cat:"),
        ContentItem(image="https://x.test/cat.png"),
    ]
    result = model.requests[1].messages[-1].tool_results[0]
    assert result.output == [
        TextBlock(text="a cat:"),
        ImageBlock.from_url("https://x.test/cat.png"),
    ]


def test_llm_config_dicts_build_the_model() -> None:
    bot = Once(llm={"model": "m", "model_server": "http://localhost:1/v1", "api_key": "k"})
    assert isinstance(bot.llm, BaseChatModel)
    assert bot.llm.model == "m"
    # Tools go in the prompt by default (Qwen-Agent's `nous`), around parley's model.
    assert isinstance(bot.llm.chat_model, PromptedToolsModel)  # type: ignore[attr-defined]
    assert type(bot.llm.chat_model.inner) is OpenAICompatibleChatModel  # type: ignore[attr-defined]


def test_fncall_agents_text_model_gets_pictures_as_notes_and_a_vl_model_gets_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Qwen-Agent's `chat` does for a text model (`qwen_dashscope`): a picture in the
    conversation becomes a note in the text, so `qwen-max` is asked on DashScope's text
    endpoint; a VL model (`qwenvl_dashscope`) gets the picture itself."""
    from parley.providers.dashscope.server import DashScopeServer  # noqa: PLC0415
    from parley.providers.dashscope.server import Reply as DSReply  # noqa: PLC0415

    picture = "https://images.test/dog_and_girl.jpeg"
    messages = [Message("user", [ContentItem(image=picture), ContentItem(text="看图说话")])]
    with DashScopeServer([DSReply(text="a story"), DSReply(text="a dog")]) as server:
        monkeypatch.setenv("DASHSCOPE_HTTP_URL", server.url)
        monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-test")
        for model in ("qwen-max", "qwen-vl-max"):
            bot = FnCallAgent(llm={"model": model})
            bot.run_nonstream(copy.deepcopy(messages))
            bot.close_sync()
        server.assert_consumed()
        text, vision = server.generation_requests()
    assert text.path.endswith("/text-generation/generation")
    content = text.json["input"]["messages"][-1]["content"]
    items = content if isinstance(content, list) else [{"text": content}]
    assert all(set(item) == {"text"} for item in items)
    assert "dog_and_girl.jpeg" in "".join(item["text"] for item in items)
    assert vision.path.endswith("/multimodal-generation/generation")
    assert {"image": picture} in vision.json["input"]["messages"][-1]["content"]
