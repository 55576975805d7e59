"""Qwen-Agent's `examples/multi_agent_router.py`, run with only its imports changed.

The example: a `Router` (an Assistant that answers text itself) over a vision `Assistant`
and a `ReActChat` tool agent with `image_gen` and `code_interpreter`; its `test()` sends text,
an image URL and a PDF in one user message, and its `app_tui()` keeps the chat going. The
example's llm configs (`{"model": "qwen-max"}` and `{"model": "qwen-vl-max"}`: DashScope's
`qwen_dashscope` and `qwenvl_dashscope`) are kept as written: the models are the DashScope
stand-in, reached through Qwen-Agent's own environment variables. `image_gen` (a network
tool) stands in locally, and `code_interpreter` is parley's sandbox, into which the user's
attached PDF is copied as Qwen-Agent copies it (the file is under the working directory).
"""

# The example's Chinese text keeps its full-width punctuation.
# ruff: noqa: RUF001

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from parley.compat.qwen.agents import Assistant, ReActChat, Router
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.providers.dashscope.server import Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._image_gen import JSONImageGen, stand_in_image_gen
from tests.tools._hostile import text_pdf

IMAGE = "https://dashscope.oss-cn-beijing.aliyuncs.com/images/dog_and_girl.jpeg"
POEM = "The moon over the river shines on the quiet boats."
CODE = 'import os; print(2 ** 10, os.path.isfile("poem.pdf"))'


@pytest.fixture(autouse=True)
def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # the attached PDF is the user's, under the working directory
    stand_in_image_gen(monkeypatch, JSONImageGen)


def init_agent_service() -> Router:
    # settings
    llm_cfg = {"model": "qwen-max"}
    llm_cfg_vl = {"model": "qwen-vl-max"}
    tools = ["image_gen", "code_interpreter"]

    bot_vl = Assistant(llm=llm_cfg_vl, name="多模态助手", description="可以理解图像内容。")
    bot_tool = ReActChat(
        llm=llm_cfg,
        name="工具助手",
        description="可以使用画图工具和运行代码来解决问题",
        function_list=tools,
    )
    return Router(llm=llm_cfg, agents=[bot_vl, bot_tool])


def close(bot: Router) -> None:
    for agent in [bot, *bot.agents]:
        agent.close_sync()
    bot.agents[1].function_map["code_interpreter"].close()  # type: ignore[attr-defined]


def ask(bot: Router, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response: list[dict[str, Any]] = []
    for response in bot.run(messages):
        print("bot response:", response)
    return response


def chat(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of a DashScope request."""
    messages: list[dict[str, Any]] = body["input"]["messages"]
    return messages


def test_the_router_hands_the_image_question_then_the_tool_work_to_its_helpers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resource = tmp_path / "resource"
    resource.mkdir()
    file = str(text_pdf(resource / "poem.pdf", [[POEM]]))
    steps = [
        Reply(text="Call: 多模态助手\n"),  # the model stops at `Reply:`
        Reply(text="图中是一个女孩和一只狗。"),
        Reply(text="Call: 工具助手\n"),
        Reply(text='I will draw first.\nAction: image_gen\nAction Input: {"prompt": "a cat"}\n'),
        Reply(text=f"Now the sum.\nAction: code_interpreter\nAction Input: {CODE}\n"),
        Reply(text="I now know the final answer\nFinal Answer: 1024, and the cat is drawn."),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        bot = init_agent_service()
        try:
            # test(): text, an image and a file in one message
            messages: list[dict[str, Any]] = [
                {"role": "user", "content": [{"text": "hello"}, {"image": IMAGE}, {"file": file}]}
            ]
            first = ask(bot, messages)
            # app_tui(): the chat goes on with the response as history
            messages.extend(first)
            messages.append({"role": "user", "content": "画一只猫，再算一下 2 ** 10"})
            second = ask(bot, messages)
        finally:
            close(bot)
        server.assert_consumed()
        bodies = server.bodies()

    routed, seen, routed_again, react_1, react_2, react_3 = bodies
    # The router's model: the helpers in its instructions, `Reply:` a stop word, no tools,
    # and the attached PDF's passage as knowledge.
    router_system = chat(routed)[0]["content"]
    assert "多模态助手: 可以理解图像内容。" in router_system
    assert "工具助手: 可以使用画图工具和运行代码来解决问题" in router_system
    assert POEM in router_system
    assert routed["parameters"]["stop"] == ["Reply:", "Reply:\n"]
    assert "tools" not in routed["parameters"]
    # qwen-max reads text: the image is a note in the user's text (as Qwen-Agent's text
    # models get it), and the request goes to the text endpoint.
    assert chat(routed)[-1] == {
        "role": "user",
        "content": "(Uploaded ![image](dog_and_girl.jpeg)) \nhello",
    }
    # The vision helper got the image, not the router's instructions.
    assert routed["model"] == "qwen-max"
    assert seen["model"] == "qwen-vl-max"
    assert "多模态助手" not in json.dumps(chat(seen), ensure_ascii=False)
    assert {"image": IMAGE} in chat(seen)[-1]["content"]  # on DashScope's multimodal endpoint
    paths = [r.path for r in server.generation_requests()]
    assert "multimodal-generation" in paths[1]
    assert "text-generation" in paths[0]
    assert [(m["role"], m["name"], m["content"]) for m in first] == [
        ("assistant", "多模态助手", "图中是一个女孩和一只狗。")
    ]
    # The second time the router sees the helper's turn as a hand-over.
    said = [m["content"] for m in chat(routed_again) if m["role"] == "assistant"]
    assert said == ["Call: 多模态助手\nReply:图中是一个女孩和一只狗。"]
    # ReAct: tools in the prompt, stopped at Observation, each tool's real result fed back.
    assert "tools" not in react_1["parameters"]
    assert react_1["parameters"]["stop"] == ["Observation:", "Observation:\n"]
    react_prompt = chat(react_1)[-1]["content"]
    assert "image_gen: the image_gen tool." in react_prompt
    assert "Action: one tool name from [image_gen,code_interpreter]" in react_prompt
    assert chat(react_2)[-1]["content"].endswith(
        'Observation: {"image_url": "https://images.test/a%20cat"}\nThought: '
    )
    observed = chat(react_3)[-1]["content"]
    # The user's attached PDF was copied into the interpreter's directory, as Qwen-Agent
    # copies it: the code found it there by name.
    assert observed.endswith("stdout:\n\n```\n1024 True\n```\nThought: ")
    assert "Files not copied" not in observed
    [answer] = second
    assert answer["name"] == "工具助手"
    assert answer["content"].endswith("Final Answer: 1024, and the cat is drawn.")
