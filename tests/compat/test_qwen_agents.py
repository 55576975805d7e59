"""Qwen-Agent's `FnCallAgent` on parley's loop: function lists, llm configs, run's snapshots.

The shapes asserted are Qwen-Agent 0.0.34's (checked against it, /tmp/notes/qwen_schema.md):
a response is, per model turn, a reasoning message, a content message and one message per
function call with `extra["function_id"]`, then one function message per result with the
same id; `run` yields the whole response so far, and `run_nonstream` its last list.
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any, ClassVar

import pytest

from parley.agents import (
    MessageCompleted,
    PromptedToolsModel,
    RunEnded,
    RunStarted,
    TextDelta,
    ToolResult,
)
from parley.agents.prompted import NousFormat
from parley.compat.qwen import (
    MAX_LLM_CALL_PER_RUN,
    TOOL_REGISTRY,
    BaseTool,
    FnCallAgent,
    Message,
    register_tool,
)
from parley.compat.qwen.llm import ModelServiceError
from parley.compat.qwen.llm.fncall_prompts import QwenFormat
from parley.errors import ConfigurationError, DocumentError, MessageError, ModelHTTPError
from parley.messages import TextBlock, ThinkingBlock, ToolCallBlock
from parley.models.base import ChatModel
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel
from parley.providers.dashscope import DashScopeChatModel
from parley.providers.openai import (
    DashScopeCompatibleChatModel,
    OpenAIChatModel,
    OpenAICompatibleChatModel,
)
from parley.providers.openai.server import OpenAIServer, Reply
from parley.tools import TOOL_REGISTRY as PARLEY_REGISTRY
from parley.tools import Tool
from parley.tools import register_tool as parley_register_tool
from tests._requires import require_module
from tests.compat._qwen_tools import CityWeather, ParisWeather, demo_mcp_servers, plain


def parley_model(bot: FnCallAgent) -> ChatModel:
    """The parley model under an agent's llm (inside the prompt-tools wrapper, if any)."""
    model = bot.llm_config.model
    return model.inner if isinstance(model, PromptedToolsModel) else model


@register_tool("qwen_agents_weather")
class WeatherTool(CityWeather):
    """A Qwen-Agent tool as seed 001 writes one (the call is `CityWeather`'s)."""


@register_tool("qwen_agents_echo")
class EchoTool(BaseTool):
    description = "Repeat the text, after the configured prefix."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        return self.cfg.get("prefix", "") + self._verify_json_format_args(params)["text"]


def call(name: str, call_id: str, **arguments: Any) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=arguments)


def two_calls_then_answer() -> list[Any]:
    """Reasoning, text and two parallel calls; then the answer."""
    return [
        ChatResponse(
            content=[
                ThinkingBlock(thinking="Two cities, two lookups."),
                TextBlock(text="Let me check."),
                call("qwen_agents_weather", "call_a", city="Paris"),
                call("qwen_agents_weather", "call_b", city="Rome"),
            ],
            finish_reason="tool_calls",
        ),
        "Both are sunny.",
    ]


USER = [{"role": "user", "content": "Weather in Paris and Rome?"}]


# -- the imports ---------------------------------------------------------------------------------


def test_the_qwen_names_are_parleys_tools() -> None:
    assert BaseTool is Tool
    assert register_tool is parley_register_tool
    assert TOOL_REGISTRY is PARLEY_REGISTRY
    assert TOOL_REGISTRY["qwen_agents_weather"] is WeatherTool
    assert WeatherTool.name == "qwen_agents_weather"
    assert MAX_LLM_CALL_PER_RUN == 20


# -- function_list -------------------------------------------------------------------------------


def test_a_registered_qwen_tool_runs_by_name() -> None:
    WeatherTool.asked.clear()
    model = ScriptedModel(
        [ScriptedModel.tool_call("qwen_agents_weather", {"city": "Paris"}, "c1"), "Sunny."]
    )
    bot = FnCallAgent(function_list=["qwen_agents_weather"], llm=model, name="bot")

    response = bot.run_nonstream(USER)

    assert WeatherTool.asked == [{"city": "Paris"}]
    assert [plain(m) for m in response] == [
        {
            "role": "assistant",
            "content": "",
            "name": "bot",
            "function_call": {"name": "qwen_agents_weather", "arguments": '{"city": "Paris"}'},
            "function_id": "c1",
        },
        {
            "role": "function",
            "content": "Sunny, 21 degrees C in Paris",
            "name": "qwen_agents_weather",
            "function_id": "c1",
        },
        {"role": "assistant", "content": "Sunny.", "name": "bot"},
    ]
    # The model was given the tool's schema, from Qwen's list form.
    [spec] = model.requests[0].tools
    assert spec.name == "qwen_agents_weather"
    assert spec.parameters["required"] == ["city"]
    model.assert_consumed()


def test_dict_entries_configure_the_tool_and_instances_are_used_as_given() -> None:
    model = ScriptedModel(
        [
            ChatResponse(
                content=[
                    call("qwen_agents_echo", "c1", text="hi"),
                    call("qwen_agents_weather", "c2", city="Oslo"),
                ]
            ),
            "Done.",
        ]
    )
    bot = FnCallAgent(
        [{"name": "qwen_agents_echo", "prefix": ">> "}, WeatherTool({"name_for_human": "W"})],
        llm=model,
    )

    response = bot.run_nonstream([Message("user", "go")])

    assert bot.function_map["qwen_agents_echo"].cfg["prefix"] == ">> "
    assert bot.function_map["qwen_agents_weather"].name_for_human == "W"
    results = [m for m in response if m.role == "function"]
    assert [m.content for m in results] == [">> hi", "Sunny, 21 degrees C in Oslo"]


def test_the_later_of_two_entries_for_a_tool_wins_as_in_qwen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "parley.compat.qwen"):
        bot = FnCallAgent(
            ["qwen_agents_echo", {"name": "qwen_agents_echo", "prefix": "!"}],
            llm=ScriptedModel(),
        )
    assert bot.function_map["qwen_agents_echo"].cfg == {"name": "qwen_agents_echo", "prefix": "!"}
    assert "Repeatedly adding tool qwen_agents_echo" in caplog.text


def test_typed_functions_are_tools_too() -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 2, "b": 3}, "c1"), "5"])
    response = FnCallAgent([add], llm=model).run_nonstream(USER)
    assert response[1]["content"] == "5"


def test_an_unregistered_name_is_refused_as_qwen_does() -> None:
    with pytest.raises(ConfigurationError, match="no tool registered as 'no_such_tool'"):
        FnCallAgent(["no_such_tool"], llm=ScriptedModel())
    with pytest.raises(ValueError, match="no_such_tool"):  # Qwen-Agent raises ValueError
        FnCallAgent([{"name": "no_such_tool"}], llm=ScriptedModel())


def test_a_missing_file_and_bad_rag_cfg_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match=r"doc\.pdf"):
        FnCallAgent(
            llm=ScriptedModel(),
            files=[str(tmp_path / "doc.pdf")],
            rag_cfg={"index_path": str(tmp_path / "i.sqlite")},
        )
    with pytest.raises(ConfigurationError, match="rag_cfg has unknown keys"):
        FnCallAgent(llm=ScriptedModel(), rag_cfg={"topk": 3})
    with pytest.raises(ConfigurationError, match="unknown arguments"):
        FnCallAgent(llm=ScriptedModel(), colour="red")


def test_run_yields_the_whole_response_so_far_growing_to_run_nonstreams_list() -> None:
    bot = FnCallAgent(["qwen_agents_weather"], llm=ScriptedModel(two_calls_then_answer()))
    snapshots = list(bot.run(USER))
    whole = FnCallAgent(
        ["qwen_agents_weather"], llm=ScriptedModel(two_calls_then_answer())
    ).run_nonstream(USER)

    # Monotonic: no message goes away, and each one only grows.
    for before, after in itertools.pairwise(snapshots):
        assert len(after) >= len(before)
        for old_message, new_message in zip(before, after, strict=False):
            old, new = plain(old_message), plain(new_message)
            assert old["role"] == new["role"]
            assert new["content"].startswith(old["content"])
            assert new.get("reasoning_content", "").startswith(old.get("reasoning_content", ""))
            if "function_call" in old:
                assert old["function_id"] == new["function_id"]
                assert new["function_call"]["arguments"].startswith(
                    old["function_call"]["arguments"]
                )
    # Text streamed in more than one step, and the last list is run_nonstream's.
    assert next(s[1]["content"] for s in snapshots if len(s) == 2) != "Let me check."
    assert [plain(m) for m in snapshots[-1]] == [plain(m) for m in whole]
    # Qwen-Agent's order and pairing: reasoning, text, calls, results, answer.
    assert [plain(m) for m in whole] == [
        {"role": "assistant", "content": "", "reasoning_content": "Two cities, two lookups."},
        {"role": "assistant", "content": "Let me check."},
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "qwen_agents_weather", "arguments": '{"city": "Paris"}'},
            "function_id": "call_a",
        },
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "qwen_agents_weather", "arguments": '{"city": "Rome"}'},
            "function_id": "call_b",
        },
        {
            "role": "function",
            "content": "Sunny, 21 degrees C in Paris",
            "name": "qwen_agents_weather",
            "function_id": "call_a",
        },
        {
            "role": "function",
            "content": "Sunny, 21 degrees C in Rome",
            "name": "qwen_agents_weather",
            "function_id": "call_b",
        },
        {"role": "assistant", "content": "Both are sunny."},
    ]


def test_dicts_in_give_dicts_out_and_messages_give_messages() -> None:
    steps = two_calls_then_answer
    as_dicts = FnCallAgent(["qwen_agents_weather"], llm=ScriptedModel(steps())).run(USER)
    assert all(isinstance(m, dict) for snapshot in as_dicts for m in snapshot)

    messages = [Message("user", "Weather in Paris and Rome?")]
    bot = FnCallAgent(["qwen_agents_weather"], llm=ScriptedModel(steps()))
    assert all(isinstance(m, Message) for snapshot in bot.run(messages) for m in snapshot)

    # Mixed input answers with Messages, as Qwen-Agent does.
    mixed = [{"role": "system", "content": "Be brief."}, Message("user", "Weather?")]
    bot = FnCallAgent(["qwen_agents_weather"], llm=ScriptedModel(steps()))
    assert all(isinstance(m, Message) for m in bot.run_nonstream(mixed))


def test_function_results_pair_with_their_calls_in_call_order() -> None:
    response = FnCallAgent(
        ["qwen_agents_weather"], llm=ScriptedModel(two_calls_then_answer())
    ).run_nonstream([Message("user", "Weather?")])
    calls = [m for m in response if m.function_call is not None]
    results = [m for m in response if m.role == "function"]
    assert [m.extra["function_id"] for m in calls] == ["call_a", "call_b"]
    assert [m.extra["function_id"] for m in results] == ["call_a", "call_b"]
    assert [m.name for m in results] == ["qwen_agents_weather"] * 2
    assert "Rome" in results[1].content


def test_a_response_given_back_as_history_reads_back_the_same() -> None:
    model = ScriptedModel([*two_calls_then_answer(), "You are welcome."])
    bot = FnCallAgent(["qwen_agents_weather"], llm=model, name="bot")
    history: list[dict[str, Any]] = list(USER)
    history += bot.run_nonstream(history)
    history.append({"role": "user", "content": "Thanks!"})

    answer = bot.run_nonstream(history)

    assert answer[-1]["content"] == "You are welcome."
    first_run, second_run = model.requests[0], model.requests[-1]
    sent = second_run.messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    # The very messages the first run made, ids and all.
    assert sent[:3] == model.requests[1].messages
    assert sent[0] == first_run.messages[0]
    model.assert_consumed()


def test_the_system_message_is_put_first_or_merged_into_a_leading_one() -> None:
    model = ScriptedModel(["one", "two"])
    bot = FnCallAgent(llm=model, system_message="You are terse.")
    bot.run_nonstream(USER)
    bot.run_nonstream([{"role": "system", "content": "Answer in French."}, *USER])
    first, second = (r.messages for r in model.requests)
    assert [(m.role, m.text) for m in first[:1]] == [("system", "You are terse.")]
    assert [(m.role, m.text) for m in second[:2]] == [
        ("system", "You are terse.\n\nAnswer in French."),
        ("user", USER[0]["content"]),
    ]


def test_an_unnamed_agent_leaves_its_messages_unnamed() -> None:
    [message] = FnCallAgent(llm=ScriptedModel(["hi"])).run_nonstream(USER)
    assert "name" not in message
    [named] = FnCallAgent(llm=ScriptedModel(["hi"]), name="bot").run_nonstream(USER)
    assert named["name"] == "bot"


def test_errors_raise_from_run() -> None:
    bot = FnCallAgent(llm=ScriptedModel([ModelHTTPError(500, message="boom")]))
    with pytest.raises(ModelServiceError, match="boom") as raised:  # Qwen-Agent's error
        bot.run_nonstream(USER)
    assert raised.value.code == "500"
    assert isinstance(raised.value.__cause__, ModelHTTPError)
    with pytest.raises(MessageError, match="empty"):
        list(bot.run([]))


def test_stopping_early_ends_the_run_and_leaves_the_agent_usable() -> None:
    model = ScriptedModel([*two_calls_then_answer(), "Hello again."], chunk_delay=0.01)
    bot = FnCallAgent(["qwen_agents_weather"], llm=model)
    snapshots = bot.run(USER)
    first = next(snapshots)
    snapshots.close()  # mid-stream: the run stops, its tools never run
    assert first[0]["reasoning_content"] == "Two cities, two lookups."
    model.steps.popleft()  # the answer that run never asked for
    assert bot.run_nonstream(USER)[-1]["content"] == "Hello again."
    model.assert_consumed()


def test_the_run_stops_at_max_iters() -> None:
    calls = [ScriptedModel.tool_call("qwen_agents_echo", {"text": str(i)}) for i in range(2)]
    bot = FnCallAgent(["qwen_agents_echo"], llm=ScriptedModel(calls), max_iters=2)
    response = bot.run_nonstream(USER)
    assert [m["role"] for m in response] == ["assistant", "function"] * 2


# -- parley's own streaming ----------------------------------------------------------------------


async def test_stream_yields_parleys_delta_events() -> None:
    bot = FnCallAgent(["qwen_agents_weather"], llm=ScriptedModel(two_calls_then_answer()))
    events = [event async for event in bot.stream(USER)]
    assert isinstance(events[0], RunStarted)
    assert isinstance(events[-1], RunEnded)
    assert events[-1].status == "completed"
    assert sum(isinstance(e, ToolResult) for e in events) == 2
    texts = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert texts == "Let me check.Both are sunny."
    completed = [e.msg.role for e in events if isinstance(e, MessageCompleted)]
    assert completed == ["assistant", "tool", "assistant"]


async def test_arun_and_arun_nonstream_are_the_async_twins() -> None:
    bot = FnCallAgent(["qwen_agents_weather"], llm=ScriptedModel(two_calls_then_answer()))
    snapshots = [s async for s in bot.arun(USER)]
    assert len(snapshots) > 5
    again = FnCallAgent(["qwen_agents_weather"], llm=ScriptedModel(two_calls_then_answer()))
    whole = await again.arun_nonstream(USER)
    assert [plain(m) for m in snapshots[-1]] == [plain(m) for m in whole]


def test_stream_sync_is_the_sync_twin() -> None:
    bot = FnCallAgent(llm=ScriptedModel(["hi"]))
    assert [type(e).__name__ for e in bot.stream_sync(USER)][-1] == "RunEnded"


# -- llm configs ---------------------------------------------------------------------------------


def test_an_oai_config_builds_a_compatible_model_with_its_parameters(tmp_path: Path) -> None:
    bot = FnCallAgent(
        ["qwen_agents_weather"],
        llm={
            "model": "Qwen/Qwen3-8B",
            "model_server": "http://localhost:8000/v1",
            "api_key": "EMPTY",
            "cache_dir": str(tmp_path),
            "generate_cfg": {
                "top_p": 0.8,
                "temperature": 0.7,
                "max_tokens": 2000,
                "max_input_tokens": 6000,
                "max_retries": 5,
                "seed": 42,
                "stop": "<|endoftext|>",
                "function_choice": "auto",
                "parallel_function_calls": False,
                "top_k": 20,
                "request_timeout": 30,
            },
        },
    )
    model = parley_model(bot)
    assert type(model) is OpenAICompatibleChatModel
    assert model.model == "Qwen/Qwen3-8B"
    assert model.credential.endpoint() == "http://localhost:8000/v1"  # type: ignore[union-attr]
    assert model.parameters.model_dump(exclude_none=True) == {
        "top_p": 0.8,
        "temperature": 0.7,
        "max_tokens": 2000,
        "seed": 42,
        "stop": ["<|endoftext|>"],
        "top_k": 20,
    }
    assert model.retry.max_retries == 5
    assert model.timeout == 30
    assert model.cache is not None
    assert bot.agent.parallel_tool_calls is False
    assert bot.agent.tool_choice == "auto"
    assert bot.agent.budget.limit == 6000


def test_model_types_map_to_parleys_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    # `model_server='dashscope'` without a type is `qwen_dashscope` (deduced from the name, as
    # Qwen-Agent does): DashScope's native API, as Qwen-Agent's SDK calls it, native tools.
    native = FnCallAgent(llm={"model": "qwen-max", "model_server": "dashscope"})
    assert type(native.llm_config.model) is DashScopeChatModel
    assert native.llm.model_type == "qwen_dashscope"
    assert type(parley_model(FnCallAgent(llm={"model": "qwen3-235b-a22b"}))) is DashScopeChatModel
    # `oai` with `model_server='dashscope'`: DashScope's OpenAI-compatible mode, tools prompted.
    compatible = FnCallAgent(
        llm={"model": "qwen-max", "model_type": "oai", "model_server": "dashscope"}
    )
    assert isinstance(compatible.llm_config.model, PromptedToolsModel)
    dashscope = parley_model(compatible)
    assert type(dashscope) is DashScopeCompatibleChatModel
    assert dashscope.credential.endpoint().endswith("/compatible-mode/v1")  # type: ignore[union-attr]
    openai = parley_model(FnCallAgent(llm={"model_type": "oai"}))
    assert type(openai) is OpenAIChatModel
    assert openai.model == "gpt-4o-mini"
    assert openai.credential.key() == "sk-env"  # type: ignore[union-attr]
    # A parley provider by its credential type (a parley extension).
    deepseek = FnCallAgent(llm={"model_type": "deepseek", "api_key": "sk-x"}).llm_config.model
    assert deepseek.provider == "deepseek"  # native tools: a parley provider's own


def test_nous_puts_tools_in_the_prompt() -> None:
    bot = FnCallAgent(
        llm={
            "model": "m",
            "model_server": "http://localhost:8000/v1",
            "generate_cfg": {"fncall_prompt_type": "nous"},
        }
    )
    model = bot.llm_config.model
    assert isinstance(model, PromptedToolsModel)
    assert type(model.inner) is OpenAICompatibleChatModel
    assert isinstance(model.fmt, NousFormat)
    # The default, as in Qwen-Agent; `qwen` is the other format; `use_raw_api` sends tools.
    default = FnCallAgent(llm={"model": "m", "model_server": "http://x/v1"}).llm_config.model
    assert isinstance(default, PromptedToolsModel)
    assert isinstance(default.fmt, NousFormat)
    qwen = FnCallAgent(
        llm={
            "model": "m",
            "model_server": "http://x/v1",
            "generate_cfg": {"fncall_prompt_type": "qwen"},
        }
    ).llm_config.model
    assert isinstance(qwen, PromptedToolsModel)
    assert isinstance(qwen.fmt, QwenFormat)
    raw = FnCallAgent(
        llm={"model": "m", "model_server": "http://x/v1", "generate_cfg": {"use_raw_api": True}}
    )
    assert type(raw.llm_config.model) is OpenAICompatibleChatModel
    assert raw.llm.use_raw_api


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model": "m", "model_type": "azure"}, "needs the resource's endpoint"),
        ({"model": "m", "model_type": "transformers"}, "Transformers"),
        ({"model": "m", "model_type": "nope"}, "model_type 'nope' is unknown"),
        ({"model": "gpt-4o"}, "cannot tell the model type"),
        (
            {"model": "m", "model_server": "http://x/v1", "generate_cfg": {"best_of": 2}},
            "'best_of' is no parameter of OpenAICompatibleChatModel",
        ),
        (
            {"model": "m", "model_server": "http://x/v1", "generate_cfg": {"temperature": 9}},
            "temperature",
        ),
        (
            {"model": "m", "model_server": "http://x/v1", "generate_cfg": {"max_retries": "3"}},
            "max_retries",
        ),
        (
            {
                "model": "m",
                "model_server": "http://x/v1",
                "generate_cfg": {"fncall_prompt_type": "hermes"},
            },
            "'nous'",
        ),
        ({"model_type": "local", "api_key": "k"}, "takes no api_key"),
    ],
)
def test_configs_parley_cannot_honour_are_refused(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        FnCallAgent(llm=config)


def test_a_function_choice_naming_no_tool_is_refused() -> None:
    config = {"model": "m", "model_server": "http://x/v1"}
    forced = FnCallAgent(
        ["qwen_agents_echo"],
        llm={**config, "generate_cfg": {"function_choice": "qwen_agents_echo"}},
    )
    assert forced.agent.choose_tool(0) == "qwen_agents_echo"
    assert forced.agent.choose_tool(1) is None  # the first call only
    with pytest.raises(ConfigurationError, match="'nope' is not one of the tools"):
        FnCallAgent(
            ["qwen_agents_echo"], llm={**config, "generate_cfg": {"function_choice": "nope"}}
        )


def test_keys_qwen_ignores_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "parley.compat.qwen"):
        bot = FnCallAgent(
            llm={
                "model": "m",
                "model_server": "http://x/v1",
                "flavour": "mint",
                "generate_cfg": {"lang": "zh", "incremental_output": True},
            }
        )
    assert type(parley_model(bot)) is OpenAICompatibleChatModel
    assert "flavour" in caplog.text
    assert "lang" in caplog.text
    assert "incremental_output" not in caplog.text


def test_a_config_dict_makes_a_real_call_through_the_sdk() -> None:
    exchange = ParisWeather("qwen_agents_weather", "call_1")
    with OpenAIServer(exchange.steps()) as server:
        bot = FnCallAgent(
            ["qwen_agents_weather"],
            llm={
                "model": "qwen3-8b",
                "model_server": server.url,
                "api_key": "EMPTY",
                "generate_cfg": {
                    "temperature": 0.5,
                    "max_tokens": 100,
                    "seed": 7,
                    "use_raw_api": True,  # native tools (Qwen-Agent's default: the prompt)
                },
            },
            system_message="You are helpful.",
        )
        try:
            response = bot.run_nonstream(USER)
        finally:
            bot.close_sync()
        server.assert_consumed()
        first, second = server.bodies()

    assert [plain(m) for m in response] == exchange.response()
    exchange.check_requests(first, second)
    assert (first["temperature"], first["max_tokens"], first["seed"]) == (0.5, 100, 7)


def test_a_nous_config_parses_calls_from_the_servers_text() -> None:
    call_text = (
        '<tool_call>\n{"name": "qwen_agents_echo", "arguments": {"text": "x"}}\n</tool_call>'
    )
    with OpenAIServer([Reply(text=call_text), Reply(text="Said x.")]) as server:
        bot = FnCallAgent(
            ["qwen_agents_echo"],
            llm={
                "model": "m",
                "model_server": server.url,
                "generate_cfg": {"fncall_prompt_type": "nous"},
            },
        )
        try:
            response = bot.run_nonstream(USER)
        finally:
            bot.close_sync()
        first, second = server.bodies()

    assert "tools" not in first
    assert "<tools>" in first["messages"][0]["content"]
    assert [m["role"] for m in response] == ["assistant", "function", "assistant"]
    assert response[0]["function_call"] == {
        "name": "qwen_agents_echo",
        "arguments": '{"text": "x"}',
    }
    assert response[1]["extra"]["function_id"] == response[0]["extra"]["function_id"]
    assert "<tool_response>" in second["messages"][-1]["content"]


def test_max_input_tokens_trims_the_oldest_turns() -> None:
    history = [
        {"role": "user", "content": "old question " * 200},
        {"role": "assistant", "content": "old answer " * 200},
        {"role": "user", "content": "new question"},
    ]
    with OpenAIServer([Reply(text="ok")]) as server:
        bot = FnCallAgent(
            llm={
                "model": "m",
                "model_server": server.url,
                "generate_cfg": {"max_input_tokens": 100},
            }
        )
        try:
            bot.run_nonstream(history)
        finally:
            bot.close_sync()
        [body] = server.bodies()
    assert body["messages"] == [{"role": "user", "content": "new question"}]
    unbounded = FnCallAgent(
        llm={"model": "m", "model_server": "http://x/v1", "generate_cfg": {"max_input_tokens": 0}}
    )
    assert unbounded.agent.budget.limit is None


# -- MCP -----------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_mcp_servers_open_on_the_first_run_and_their_tools_answer() -> None:
    require_module("mcp.server.mcpserver", "mcp")
    servers = demo_mcp_servers()
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("demo-add", {"a": 2, "b": 3}, "c1"),
            "2 + 3 = 5",
            ScriptedModel.tool_call("demo-echo", {"text": "again"}, "c2"),
            "again",
        ]
    )
    bot = FnCallAgent(["qwen_agents_echo", servers], llm=model)
    try:
        assert list(bot.function_map) == ["qwen_agents_echo"]  # nothing started yet

        response = bot.run_nonstream(USER)

        assert "demo-add" in bot.function_map
        assert [t.name for t in model.requests[0].tools][:1] == ["qwen_agents_echo"]
        assert {"demo-add", "demo-echo"} <= {t.name for t in model.requests[0].tools}
        assert response[1] == {
            "role": "function",
            "content": "5",
            "name": "demo-add",
            "extra": response[1]["extra"],
        }
        assert response[1]["extra"]["function_id"] == "c1"
        # The second run uses the open session.
        assert bot.run_nonstream(USER)[1]["content"] == "again"
    finally:
        bot.close_sync()
    model.assert_consumed()


# -- the embedded local model --------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_the_local_model_calls_a_registered_qwen_tool() -> None:
    """SmolLM2-135M calls a tool whenever it may: the first call is forced, the next may not
    call tools (parley's `tool_choice` policy); the arguments are the model's own."""
    require_module("llama_cpp", "local")
    WeatherTool.asked.clear()
    bot = FnCallAgent(
        ["qwen_agents_weather"],
        llm={"model_type": "local", "generate_cfg": {"seed": 7, "max_tokens": 64}},
        system_message="You are a helpful assistant.",
        tool_choice=lambda index: "qwen_agents_weather" if index == 0 else "none",
        max_iters=3,
    )

    response = bot.run_nonstream([{"role": "user", "content": "What is the weather in Paris?"}])

    calls = [m for m in response if "function_call" in m]
    results = [m for m in response if m["role"] == "function"]
    assert len(calls) == len(results) == 1
    assert json.loads(calls[0]["function_call"]["arguments"]) == WeatherTool.asked[0]
    assert "paris" in WeatherTool.asked[0]["city"].lower()
    assert results[0]["content"] == f"Sunny, 21 degrees C in {WeatherTool.asked[0]['city']}"
    assert results[0]["extra"]["function_id"] == calls[0]["extra"]["function_id"]
    assert response[-1]["role"] == "assistant"
    assert response[-1]["content"].strip()
