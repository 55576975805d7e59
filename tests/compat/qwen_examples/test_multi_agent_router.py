"""Qwen-Agent's `examples/multi_agent_router.py`, run with only its imports changed.

The example: a `Router` (an Assistant that answers text itself) over a vision `Assistant`
and a `ReActChat` tool agent with `image_gen` and `code_interpreter`; its `test()` sends text,
an image URL and a PDF in one user message, and its `app_tui()` keeps the chat going. Here
the model is a `parley.testing` OpenAI-wire server (`model_server` added to the example's
llm configs, which name DashScope's models), `image_gen` (a network tool) stands in
locally, and `code_interpreter` is parley's sandbox.
"""

# The example's Chinese text keeps its full-width punctuation.
# ruff: noqa: RUF001

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any, ClassVar

import pytest

from parley.compat.qwen import BaseTool
from parley.compat.qwen.agents import Assistant, ReActChat, Router
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.testing.openai_server import OpenAIServer, Reply
from parley.tools import TOOL_REGISTRY
from tests.tools._hostile import text_pdf

IMAGE = "https://dashscope.oss-cn-beijing.aliyuncs.com/images/dog_and_girl.jpeg"
POEM = "The moon over the river shines on the quiet boats."


class LocalImageGen(BaseTool):
    """`image_gen` standing in locally: a picture URL made from the prompt."""

    name = "image_gen"
    description = "Draws a picture from a text description and returns its URL."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"prompt": {"type": "string"}},
        "required": ["prompt"],
    }

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        prompt = self._verify_json_format_args(params)["prompt"]
        return json.dumps({"image_url": f"https://images.test/{urllib.parse.quote(prompt)}"})


@pytest.fixture(autouse=True)
def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # the attached PDF is the user's, under the working directory
    monkeypatch.setitem(TOOL_REGISTRY, "image_gen", LocalImageGen)


def init_agent_service(server: OpenAIServer) -> Router:
    # settings (the example's, with the stand-in server added)
    local = {"model_server": server.url, "api_key": "EMPTY"}
    llm_cfg = {"model": "qwen-max", **local}
    llm_cfg_vl = {"model": "qwen-vl-max", **local}
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


def test_the_router_hands_the_image_question_then_the_tool_work_to_its_helpers(
    tmp_path: Path,
) -> None:
    resource = tmp_path / "resource"
    resource.mkdir()
    file = str(text_pdf(resource / "poem.pdf", [[POEM]]))
    steps = [
        Reply(text="Call: 多模态助手\n"),  # the model stops at `Reply:`
        Reply(text="图中是一个女孩和一只狗。"),
        Reply(text="Call: 工具助手\n"),
        Reply(text='I will draw first.\nAction: image_gen\nAction Input: {"prompt": "a cat"}\n'),
        Reply(text="Now the sum.\nAction: code_interpreter\nAction Input: print(2 ** 10)\n"),
        Reply(text="I now know the final answer\nFinal Answer: 1024, and the cat is drawn."),
    ]
    with OpenAIServer(steps) as server:
        bot = init_agent_service(server)
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
    router_system = routed["messages"][0]["content"]
    assert "多模态助手: 可以理解图像内容。" in router_system
    assert "工具助手: 可以使用画图工具和运行代码来解决问题" in router_system
    assert POEM in router_system
    assert routed["stop"] == ["Reply:", "Reply:\n"]
    assert "tools" not in routed
    # The vision helper got the image, not the router's instructions.
    assert routed["model"] == "qwen-max"
    assert seen["model"] == "qwen-vl-max"
    assert "多模态助手" not in json.dumps(seen["messages"], ensure_ascii=False)
    parts = seen["messages"][-1]["content"]
    assert {"type": "image_url", "image_url": {"url": IMAGE}} in parts
    assert [(m["role"], m["name"], m["content"]) for m in first] == [
        ("assistant", "多模态助手", "图中是一个女孩和一只狗。")
    ]
    # The second time the router sees the helper's turn as a hand-over.
    said = [m["content"] for m in routed_again["messages"] if m["role"] == "assistant"]
    assert said == ["Call: 多模态助手\nReply:图中是一个女孩和一只狗。"]
    # ReAct: tools in the prompt, stopped at Observation, each tool's real result fed back.
    assert "tools" not in react_1
    assert react_1["stop"] == ["Observation:", "Observation:\n"]
    react_prompt = react_1["messages"][-1]["content"]
    assert "image_gen: the image_gen tool." in react_prompt
    assert "Action: one tool name from [image_gen,code_interpreter]" in react_prompt
    assert react_2["messages"][-1]["content"].endswith(
        'Observation: {"image_url": "https://images.test/a%20cat"}\nThought: '
    )
    observed = react_3["messages"][-1]["content"]
    assert observed.endswith("stdout:\n\n```\n1024\n```\nThought: ")
    # The attached PDF was handed to the code interpreter, which copies in only files under
    # its `file_roots` (none configured here), and says so (Qwen-Agent copies any).
    assert "Files not copied: " in observed
    assert "poem.pdf (outside this conversation's files and the file_roots)" in observed
    [answer] = second
    assert answer["name"] == "工具助手"
    assert answer["content"].endswith("Final Answer: 1024, and the cat is drawn.")
