"""Qwen-Agent's `examples/gpt_mentions.py`: its agents, with imports changed.

The example builds three agents (a `ReActChat` code interpreter, a `BasicDocQA` and an
`Assistant`) and hands them to `WebUI(...).run(enable_mention=True)`, the Gradio page where
`@name` picks the agent that answers. parley has no Gradio page (`run()` says to use
`parley serve`); the agents run as the page would run them: the agent `@`-mentioned in each
of the example's suggested prompts answers it. `BasicDocQA` (`qwen_agent.agents.doc_qa`)
belongs to the document agents, not built on this branch: this test covers the other two.
The model is a `parley.testing` OpenAI-wire server (`model_server` added to the example's
`{"model": "qwen-max"}`); `code_interpreter` is parley's sandbox.
"""

# The example's Chinese text keeps its full-width punctuation.
# ruff: noqa: RUF001

from __future__ import annotations

from typing import Any

import pytest

from parley.compat.qwen.agent import Agent
from parley.compat.qwen.agents import Assistant, ReActChat
from parley.compat.qwen.agents.group_chat import mentioned_names
from parley.compat.qwen.gui import WebUI, WebUIUnavailableError
from parley.testing.openai_server import OpenAIServer, Reply


def init_agent_service(server: OpenAIServer) -> list[Agent]:
    llm_cfg = {"model": "qwen-max", "model_server": server.url, "api_key": "EMPTY"}
    react_chat_agent = ReActChat(
        llm=llm_cfg,
        name="代码解释器",
        description="代码解释器，可用于执行Python代码。",
        system_message="you are a programming expert, skilled in writing code "
        "to solve mathematical problems and data analysis problems.",
        function_list=["code_interpreter"],
    )
    assistant_agent = Assistant(llm=llm_cfg, name="小助理", description="I'm a helpful assistant")
    return [react_chat_agent, assistant_agent]


def answer(agents: list[Agent], text: str) -> list[dict[str, Any]]:
    """What the page does with a message: the mentioned agent answers it."""
    names = [str(a.name) for a in agents]
    [name] = mentioned_names(text, names)
    chosen = agents[names.index(name)]
    return chosen.run_nonstream([{"role": "user", "content": text}])  # type: ignore[return-value]


def test_the_mentioned_agent_answers_each_suggested_prompt() -> None:
    steps = [
        Reply(text="算一下。\nAction: code_interpreter\nAction Input: print(2 ** 10)\n"),
        Reply(text="I now know the final answer\nFinal Answer: 1024"),
        Reply(text="你好！有什么可以帮你？"),
    ]
    with OpenAIServer(steps) as server:
        agents = init_agent_service(server)
        try:
            coded = answer(agents, "@代码解释器 2 ^ 10 = ?")
            greeted = answer(agents, "@小助理 你好！")
        finally:
            agents[0].function_map["code_interpreter"].close()  # type: ignore[attr-defined]
            for agent in agents:
                agent.close_sync()
        server.assert_consumed()
        react_1, react_2, plain = server.bodies()

    assert react_1["messages"][0]["content"].startswith("you are a programming expert")
    assert "Question: @代码解释器 2 ^ 10 = ?\nThought: " in react_1["messages"][-1]["content"]
    assert react_2["messages"][-1]["content"].endswith(
        "Observation: stdout:\n\n```\n1024\n```\nThought: "
    )
    assert coded[-1]["name"] == "代码解释器"
    assert coded[-1]["content"].endswith("Final Answer: 1024")
    assert plain["messages"][-1] == {"role": "user", "content": "@小助理 你好！"}
    assert [(m["name"], m["content"]) for m in greeted] == [("小助理", "你好！有什么可以帮你？")]


def test_app_gui_says_the_web_page_is_parley_serve() -> None:
    with OpenAIServer([]) as server:
        agent_list = init_agent_service(server)
        chatbot_config = {
            "prompt.suggestions": [
                "@代码解释器 2 ^ 10 = ?",
                "@文档问答 这篇论文解决了什么问题？",
                "@小助理 你好！",
            ],
            "verbose": True,
        }
        ui = WebUI(agent_list, chatbot_config=chatbot_config)
        assert ui.agent_list == agent_list
        with pytest.raises(WebUIUnavailableError, match="parley serve"):
            ui.run(
                messages=[
                    {"role": "assistant", "content": [{"text": "试试看 @代码解释器 来问我~"}]}
                ],
                enable_mention=True,
            )
        for agent in agent_list:
            agent.close_sync()
