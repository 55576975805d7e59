"""Qwen-Agent's `examples/group_chat_chess.py`, run with only its imports changed.

The example: a `GroupChat` made from a config (a board with `code_interpreter`, an NPC
player, and the user as a human player), its speakers picked by the auto host; `test()`
sends the user's first move. The example's llm config (`{"model": "qwen-max"}`, a
`qwen_dashscope` model) is kept as written: every model (the host's and the members') is the
DashScope stand-in, reached through Qwen-Agent's own environment variables. `app_gui()`
builds the WebUI, whose `run()` says to use `parley serve`.
"""

# The example's Chinese text keeps its full-width punctuation.
# ruff: noqa: RUF001

from __future__ import annotations

import json
from typing import Any

import pytest

from parley.compat.qwen.agents import GroupChat
from parley.compat.qwen.agents.user_agent import PENDING_USER_INPUT
from parley.compat.qwen.gui import WebUI, WebUIUnavailableError
from parley.compat.qwen.schema import Message
from parley.providers.dashscope.server import Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in

NPC_NAME = "小明"
USER_NAME = "小塘"
CFGS = {
    "background": "一个五子棋群组，棋盘为5*5，黑棋玩家和白棋玩家交替下棋，"
    "每次玩家下棋后，棋盘进行更新并展示。"
    f"{NPC_NAME}下白棋，{USER_NAME}下黑棋。",
    "agents": [
        {
            "name": "棋盘",
            "description": "负责更新棋盘",
            "instructions": "你扮演一个五子棋棋盘，你可以根据原始棋盘和玩家下棋的位置坐标，"
            "把新的棋盘用矩阵展示出来。"
            "棋盘中用0代表无棋子、用1表示黑棋、用-1表示白棋。用坐标<i,j>表示位置，i代表行，j代表列，"
            "棋盘左上角位置为<0,0>。",
            "selected_tools": ["code_interpreter"],
        },
        {
            "name": NPC_NAME,
            "description": "白棋玩家",
            "instructions": "你扮演一个玩五子棋的高手，你下白棋。"
            "棋盘中用0代表无棋子、用1黑棋、用-1白棋。"
            "用坐标<i,j>表示位置，i代表行，j代表列，棋盘左上角位置为<0,0>，请决定你要下在哪里，"
            "你可以随意下到一个位置，不要说你是AI助手不会下！返回格式为坐标：\n<i,j>\n除了这个坐标，"
            "不要返回其他任何内容",
        },
        {"name": USER_NAME, "description": "黑棋玩家", "is_human": True},
    ],
}
BOARD = "[[0,0,0,0,0],[0,1,0,0,0],[0,0,0,0,0],[0,0,0,0,0],[0,0,0,0,0]]"


def chat(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of a DashScope request."""
    messages: list[dict[str, Any]] = body["input"]["messages"]
    return messages


def test_the_host_picks_board_npc_then_the_user_whose_turn_pauses_the_chat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = [
        Reply(text="棋盘"),  # the host
        Reply(text=BOARD),  # the board
        Reply(text=NPC_NAME),  # the host
        Reply(text="<2,2>"),  # the NPC
        Reply(text=USER_NAME),  # the host: the user's turn, which pauses the chat
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        bot = GroupChat(agents=CFGS, llm={"model": "qwen-max"})
        messages = [Message("user", "<1,1>", name=USER_NAME)]
        response: list[Any] = []
        try:
            for response in bot.run(messages=messages):
                print("bot response:", response)
        finally:
            bot.close_sync()
        server.assert_consumed()
        host_1, board, host_2, npc, host_3 = server.bodies()

    assert [(m.name, m.role, m.content) for m in response] == [
        ("棋盘", "assistant", BOARD),
        (NPC_NAME, "assistant", "<2,2>"),
        (USER_NAME, "user", PENDING_USER_INPUT),
    ]
    # The host reads the roles and the chat as `name: text` lines; its prompt is Chinese.
    host_system = chat(host_1)[0]["content"]
    assert "棋盘: 负责更新棋盘\n小明: 白棋玩家\n小塘: 黑棋玩家" in host_system
    assert "[STOP]" in host_system
    assert chat(host_1)[-1]["content"] == "小塘: <1,1>"
    assert chat(host_3)[-1]["content"] == f"小塘: <1,1>\n棋盘: {BOARD}\n小明: <2,2>"
    assert chat(host_2)[-1]["content"] == f"小塘: <1,1>\n棋盘: {BOARD}"
    # Each member: its role from the config, the chat from its seat, its own name last.
    board_system = chat(board)[0]["content"]
    assert CFGS["background"] in board_system
    assert "你扮演一个五子棋棋盘" in board_system
    assert "小明, 小塘" in board_system
    # Its tool is offered natively (qwen_dashscope), the NPC's request has none.
    assert [t["function"]["name"] for t in board["parameters"]["tools"]] == ["code_interpreter"]
    assert all(body["model"] == "qwen-max" for body in (host_1, board, host_2, npc, host_3))
    assert chat(board)[-1] == {"role": "user", "content": "小塘: <1,1>\n棋盘: "}
    assert chat(npc)[-1] == {
        "role": "user",
        "content": f"小塘: <1,1>\n棋盘: {BOARD}\n小明: ",
    }
    assert "code_interpreter" not in json.dumps(npc, ensure_ascii=False)


def test_app_gui_builds_the_web_ui_whose_run_points_to_parley_serve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with dashscope_stand_in(monkeypatch):
        bot = GroupChat(agents=CFGS, llm={"model": "qwen-max"})
        chatbot_config = {
            "user.name": "小塘",
            "prompt.suggestions": [
                "开始！我先手，落子 <1,1>",
                "我后手，请小明先开始",
                "新开一盘，我先开始",
            ],
            "verbose": True,
        }
        with pytest.raises(WebUIUnavailableError, match="parley serve"):
            WebUI(bot, chatbot_config=chatbot_config).run()
        bot.close_sync()
