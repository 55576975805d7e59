"""End to end on the embedded local model: an agent calls a real tool and answers with it.

SmolLM2-135M is too small to decide well when to call a tool and when to answer, so the run
uses a tool-choice policy: the first call is forced to the tool (its arguments still the
model's own, written under a grammar from the tool's schema), the next one may not call
tools. Everything else is the real loop, the real tool and the real model.
"""

from __future__ import annotations

from typing import Any

from parley.agents import Agent, MessageCompleted, ToolCallEnded, ToolResult
from parley.providers.local import LocalChatModel
from parley.tools import tool
from tests._requires import require_module

require_module("llama_cpp", "local")


async def test_the_local_model_calls_a_real_tool_and_answers_with_its_result() -> None:
    asked: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city.

        Args:
            city: The city name.
        """
        asked.append(city)
        return f"Sunny, 21 degrees C in {city}"

    agent = Agent(
        "weather",
        LocalChatModel(parameters={"seed": 7, "max_tokens": 64}),
        system_prompt="You are a helpful assistant.",
        tools=[get_weather],
        tool_choice=lambda index: "get_weather" if index == 0 else "none",
        max_iters=3,
    )

    events: list[Any] = [event async for event in agent.stream("What is the weather in Paris?")]

    # The tool ran on the arguments the model wrote.
    [ended] = [e for e in events if isinstance(e, ToolCallEnded)]
    assert ended.call.name == "get_weather"
    assert "paris" in str(ended.call.input.get("city", "")).lower()
    assert asked == [ended.call.input["city"]]
    [result] = [e.result for e in events if isinstance(e, ToolResult)]
    assert not result.is_error
    assert result.output == f"Sunny, 21 degrees C in {asked[0]}"

    # The result reached the model, and the run ended on its text answer.
    completed = [e.msg for e in events if isinstance(e, MessageCompleted)]
    assert [m.role for m in completed] == ["assistant", "tool", "assistant"]
    end = events[-1]
    assert end.status == "completed"
    assert end.final == completed[-1]
    assert end.final.text.strip()
    assert not end.final.tool_calls
    assert end.usage.input_tokens > 0
    history = await agent.memory.get()
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2].tool_results[0].output == result.output
