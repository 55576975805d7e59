"""Qwen-Agent's `examples/gpt_mentions.py`: its agents, with imports changed.

The example builds three agents (a `ReActChat` code interpreter, a `BasicDocQA` and an
`Assistant`) and hands them to `WebUI(...).run(enable_mention=True)`, the Gradio page where
`@name` picks the agent that answers. parley has no Gradio page (`run()` says to use
`parley serve`); the agents run as the page would run them: the agent `@`-mentioned in each
of the example's suggested prompts answers it (the document question with a paper attached,
as a page user would upload one; the paper's URL served by a stand-in site). The example's
llm config (`{"model": "qwen-max"}`, a `qwen_dashscope` model) is kept as written: the model
is the DashScope stand-in, reached through Qwen-Agent's own environment variables;
`code_interpreter` is parley's sandbox.
"""

# The example's Chinese text keeps its full-width punctuation.
# ruff: noqa: RUF001

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from parley.compat.qwen.agent import Agent
from parley.compat.qwen.agents import Assistant, ReActChat
from parley.compat.qwen.agents.doc_qa import BasicDocQA
from parley.compat.qwen.agents.group_chat import mentioned_names
from parley.compat.qwen.gui import WebUI, WebUIUnavailableError
from parley.providers.dashscope.server import DashScopeServer, Reply
from tests.compat.qwen_examples._doc_support import local_web, message_text, serve_pdf

__all__ = ["local_web"]

PAPER = [
    [
        "Attention Is All You Need",
        "The dominant sequence transduction models are based on recurrent networks.",
        "We propose the Transformer, based solely on attention mechanisms.",
    ],
]


def init_agent_service() -> list[Agent]:
    llm_cfg = {"model": "qwen-max"}
    react_chat_agent = ReActChat(
        llm=llm_cfg,
        name="代码解释器",
        description="代码解释器，可用于执行Python代码。",
        system_message="you are a programming expert, skilled in writing code "
        "to solve mathematical problems and data analysis problems.",
        function_list=["code_interpreter"],
    )
    doc_qa_agent = BasicDocQA(
        llm=llm_cfg,
        name="文档问答",
        description="根据用户输入的问题和文档，从文档中找到答案",
    )
    assistant_agent = Assistant(llm=llm_cfg, name="小助理", description="I'm a helpful assistant")
    return [react_chat_agent, doc_qa_agent, assistant_agent]


def answer(agents: list[Agent], text: str, file: str | None = None) -> list[dict[str, Any]]:
    """What the page does with a message (and an uploaded file): the mentioned agent answers."""
    names = [str(a.name) for a in agents]
    [name] = mentioned_names(text, names)
    chosen = agents[names.index(name)]
    content: Any = [{"text": text}, {"file": file}] if file else text
    return chosen.run_nonstream([{"role": "user", "content": content}])  # type: ignore[return-value]


def chat(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of a DashScope request."""
    messages: list[dict[str, Any]] = body["input"]["messages"]
    return messages


def test_the_mentioned_agent_answers_each_suggested_prompt(
    dashscope_server: DashScopeServer, tmp_path: Path, local_web: None
) -> None:
    dashscope_server.add(
        Reply(text="算一下。\nAction: code_interpreter\nAction Input: print(2 ** 10)\n"),
        Reply(text="I now know the final answer\nFinal Answer: 1024"),
        Reply(text="它提出了只用注意力的 Transformer。"),
        Reply(text="你好！有什么可以帮你？"),
    )
    agents = init_agent_service()
    try:
        coded = answer(agents, "@代码解释器 2 ^ 10 = ?")
        with serve_pdf(tmp_path, "/paper.pdf", PAPER) as site:
            read = answer(agents, "@文档问答 这篇论文解决了什么问题？", f"{site}/paper.pdf")
        greeted = answer(agents, "@小助理 你好！")
    finally:
        agents[0].function_map["code_interpreter"].close()  # type: ignore[attr-defined]
        for agent in agents:
            agent.close_sync()
    dashscope_server.assert_consumed()
    react_1, react_2, doc, plain = dashscope_server.bodies()

    assert all(body["model"] == "qwen-max" for body in (react_1, react_2, doc, plain))
    assert chat(react_1)[0]["content"].startswith("you are a programming expert")
    assert "Question: @代码解释器 2 ^ 10 = ?\nThought: " in chat(react_1)[-1]["content"]
    assert "Observation:" in react_1["parameters"]["stop"]
    assert chat(react_2)[-1]["content"].endswith(
        "Observation: stdout:\n\n```\n1024\n```\nThought: "
    )
    assert coded[-1]["name"] == "代码解释器"
    assert coded[-1]["content"].endswith("Final Answer: 1024")
    # The document agent: the paper's text in its system message, the question alone after.
    doc_system = message_text(chat(doc)[0])
    assert "We propose the Transformer, based solely on attention mechanisms." in doc_system
    assert "请仔细阅读下面的参考资料" in doc_system  # its instruction, in the question's language
    assert message_text(chat(doc)[-1]) == "@文档问答 这篇论文解决了什么问题？"
    assert "tools" not in doc["parameters"]
    assert [(m["name"], m["content"]) for m in read] == [
        ("文档问答", "它提出了只用注意力的 Transformer。")
    ]
    assert chat(plain)[-1] == {"role": "user", "content": "@小助理 你好！"}
    assert [(m["name"], m["content"]) for m in greeted] == [("小助理", "你好！有什么可以帮你？")]


def test_app_gui_says_the_web_page_is_parley_serve(dashscope_server: DashScopeServer) -> None:
    agent_list = init_agent_service()
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
            messages=[{"role": "assistant", "content": [{"text": "试试看 @代码解释器 来问我~"}]}],
            enable_mention=True,
        )
    for agent in agent_list:
        agent.close_sync()
