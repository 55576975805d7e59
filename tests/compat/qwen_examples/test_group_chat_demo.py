"""Qwen-Agent's `examples/group_chat_demo.py`: its agent calls, with imports changed.

The example is a Gradio app: it imports `qwen_agent.gui.gradio_dep` (Gradio and ModelScope
Studio's widgets) at the top, so as a file it cannot run on parley, which has no Gradio UI
(`parley.compat.qwen.gui.gradio_dep` raises ImportError saying so). Its agent code runs:
`app()` drives a `GroupChat` one speaker at a time (`need_batch_response=False`), keeping
the `@` mentions itself and stopping at the user's turn; `app_create()` lets a
`GroupChatCreator` design the roles. Those calls are made here as the example makes them,
with the example's llm config as written (`{"model": "qwen-max"}`, a `qwen_dashscope`
model): the models are the DashScope stand-in, reached through Qwen-Agent's own
environment variables; `image_gen` (a network tool) stands in locally.
"""

# The example's Chinese text keeps its full-width punctuation.
# ruff: noqa: RUF001

from __future__ import annotations

import json
from typing import Any

import json5
import pytest

from parley.compat.qwen.agents import GroupChat, GroupChatCreator
from parley.compat.qwen.agents.user_agent import PENDING_USER_INPUT
from parley.compat.qwen.schema import ContentItem, Message
from parley.providers.dashscope.server import DashScopeServer, Reply
from tests.compat.qwen_examples._image_gen import stand_in_image_gen

CFGS: dict[str, Any] = {
    "background": "一个陌生人互帮互助群聊",
    "agents": [
        {
            "name": "小塘",
            "description": "一个勤劳的打工人，每天沉迷工作，日渐消瘦。（这是一个真实用户）",
            "is_human": True,
        },
        {
            "name": "甄嬛",
            "description": "一位后宫妃嫔",
            "instructions": "你是甄嬛，你正在想办法除掉皇后，你说话风格为文言文，"
            "每次说完话会调image_gen工具画一幅图，展示心情。",
            "knowledge_files": [],
            "selected_tools": ["image_gen"],
        },
        {
            "name": "ikun",
            "description": "熟悉蔡徐坤的动态",
            "instructions": "你是蔡徐坤的粉丝，说话很简短，喜欢用颜文字表达心情，"
            "你最近迷恋看《甄嬛传》",
            "knowledge_files": [],
            "selected_tools": [],
        },
        {
            "name": "大头",
            "description": "是一个体育生，不喜欢追星",
            "instructions": "你是一个体育生，热爱运动，你不喜欢追星，你喜欢安利别人健身",
            "knowledge_files": [],
            "selected_tools": [],
        },
    ],
}
MAX_ROUND = 3


@pytest.fixture(autouse=True)
def _image_gen(monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in_image_gen(monkeypatch)


def chat(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of a DashScope request."""
    messages: list[dict[str, Any]] = body["input"]["messages"]
    return messages


def app(bot: GroupChat, messages: list[Message], cfgs: dict[str, Any]) -> list[str]:
    """The example's `app()` without its Gradio display: what it prints, in order."""
    printed = []
    mentioned_agents_name: list[str] = []
    for _ in range(MAX_ROUND):
        content = messages[-1].get_text_content().strip() if messages else ""
        if "@" in content:
            for x in content.split("@"):
                for agent in cfgs["agents"]:
                    if x.startswith(agent["name"]):
                        if agent["name"] not in mentioned_agents_name:
                            mentioned_agents_name.append(agent["name"])
                        break
        response: list[Any] = []
        for response in bot.run(
            messages, need_batch_response=False, mentioned_agents_name=mentioned_agents_name
        ):
            if response and response[-1].content == PENDING_USER_INPUT:
                break
        if not response:
            printed.append("No one wants to talk anymore!")
            break
        if mentioned_agents_name:
            assert response[-1].name == mentioned_agents_name[0]
            mentioned_agents_name.pop(0)
        if response[-1].content == PENDING_USER_INPUT:
            printed.append("Waiting for user input!")
            break
        messages.extend(response)
        printed += [f"{m.name}: {m.content}" for m in response]
    return printed


def test_app_lets_the_mentioned_speak_then_the_hosts_pick_then_waits_for_the_user(
    dashscope_server: DashScopeServer,
) -> None:
    dashscope_server.add(
        Reply(text="你好呀(＾▽＾)"),  # ikun, mentioned by the user
        Reply(text="大头"),  # the host picks the next speaker
        Reply(text="@小塘 一起去健身吧！"),  # 大头, who mentions the user
    )
    bot = GroupChat(agents=CFGS, llm={"model": "qwen-max"})
    messages = [Message("user", content=[ContentItem(text="@ikun 你好")], name="小塘")]
    try:
        printed = app(bot, messages, CFGS)
    finally:
        bot.close_sync()
    dashscope_server.assert_consumed()
    ikun, host, datou = dashscope_server.bodies()

    assert printed == [
        "ikun: 你好呀(＾▽＾)",
        "大头: @小塘 一起去健身吧！",
        "Waiting for user input!",
    ]
    assert chat(ikun)[-1]["content"] == "小塘: @ikun 你好\nikun: "
    assert chat(host)[-1]["content"] == "小塘: @ikun 你好\nikun: 你好呀(＾▽＾)"
    assert chat(datou)[-1]["content"] == "小塘: @ikun 你好\nikun: 你好呀(＾▽＾)\n大头: "
    assert "你是一个体育生" in chat(datou)[0]["content"]
    assert all(body["model"] == "qwen-max" for body in (ikun, host, datou))


def test_app_create_designs_roles_that_make_a_group_chat(dashscope_server: DashScopeServer) -> None:
    role = {"name": "书虫", "description": "爱读书的人", "instructions": "你是书虫，你爱推荐好书。"}
    reply = (
        "<Background>: 一个读书会群聊\n"
        f"<Config>: {json.dumps(role, ensure_ascii=False)}\n"
        "<Answer>: 还需要别的角色吗？"
    )
    dashscope_server.add(Reply(text=reply))
    agent = GroupChatCreator(llm={"model": "qwen-max"})
    messages_create = [Message("user", "创建一个读书会群聊")]
    new_cfgs: dict[str, Any] = {"background": "", "agents": [CFGS["agents"][0]]}
    display_content = ""
    response: list[Any] = []
    for response in agent.run(messages=messages_create):
        display_content = ""
        for rsp in response:
            if rsp.name == "role_config":
                cfg = json5.loads(rsp.content)
                if cfg["name"] not in [x["name"] for x in new_cfgs["agents"]]:
                    new_cfgs["agents"].append(cfg)
                display_content += f"\n\n{cfg['name']}: {cfg['description']}\n{cfg['instructions']}"
            elif rsp.name == "background":
                new_cfgs["background"] = rsp.content
                display_content += f"\n群聊背景：{rsp.content}"
            else:
                display_content += f"\n{rsp.content}"
    dashscope_server.assert_consumed()
    [body] = dashscope_server.bodies()
    created = GroupChat(agents=new_cfgs, llm={"model": "qwen-max"})
    agent.close_sync()
    created.close_sync()

    assert "<Config>" in chat(body)[0]["content"]
    assert new_cfgs["background"].strip() == "一个读书会群聊"
    assert new_cfgs["agents"][1] == role
    assert display_content.strip().endswith("还需要别的角色吗？")
    assert created.agent_names == ["小塘", "书虫"]


def test_the_gradio_widgets_module_says_there_is_no_gradio_ui() -> None:
    with pytest.raises(ImportError, match="parley serve"):
        from parley.compat.qwen.gui.gradio_dep import gr, mgr, ms  # noqa: F401, PLC0415
