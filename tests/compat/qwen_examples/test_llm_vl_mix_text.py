# ruff: noqa: RUF001  (the example's Chinese text, full-width punctuation as written)
"""Qwen-Agent's `examples/llm_vl_mix_text.py`, with only its imports changed.

One conversation alternates between a vision model (`qwen-vl-max`, `qwenvl_dashscope`) and
a text model (`qwen-max`, `qwen_dashscope`, given a function it calls natively, as
Qwen-Agent's raw API does for that type), both on the DashScope stand-in (reached through
Qwen-Agent's environment variables): the image questions go to the multimodal endpoint, the
text ones to text generation.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from parley.compat.qwen.llm import get_chat_model
from parley.compat.qwen.llm.schema import ContentItem, Message
from parley.providers.dashscope.server import (
    MULTIMODAL_PATH,
    TEXT_PATH,
    Reply,
    ToolCall,
)
from tests.compat.qwen_examples._dashscope import dashscope_stand_in

DOG = "https://dashscope.oss-cn-beijing.aliyuncs.com/images/dog_and_girl.jpeg"
CAT = "https://seopic.699pic.com/photo/60098/4947.jpg_wh1200.jpg"
FUNCTIONS = [
    {
        "name": "image_gen",
        "name_for_human": "AI绘画",
        "description": (
            "AI绘画（图像生成）服务，输入文本描述和图像分辨率，返回根据文本信息绘制的图片URL。"
        ),
        "parameters": {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "详细描述，使用英文"}},
            "required": ["prompt"],
        },
        "args_format": "参数为json格式",
    }
]


def example() -> list[Any]:
    """The example's `test()`: the conversation at its end."""
    llm_cfg = {"model": "qwen-max", "model_server": "dashscope"}
    llm_cfg_vl = {"model": "qwen-vl-max", "model_server": "dashscope"}
    llm_vl = get_chat_model(llm_cfg_vl)
    llm = get_chat_model(llm_cfg)
    try:
        messages: list[Any] = [
            {"role": "user", "content": [{"text": "框出小狗并描述"}, {"image": DOG}]}
        ]
        for x in llm_vl.chat(messages, stream=True):  # noqa: B007
            pass
        messages.extend(x)
        messages.append(Message("user", [ContentItem(text="描述更详细一点")]))
        for x in llm_vl.chat(messages, stream=True):  # noqa: B007
            pass
        messages.extend(x)
        messages.append({"role": "user", "content": "你是？"})
        for x in llm.chat(messages, stream=True):  # noqa: B007
            pass
        messages.extend(x)
        messages.append({"role": "user", "content": "画个可爱小猫"})
        for x in llm.chat(messages, functions=FUNCTIONS, stream=True):  # noqa: B007
            pass
        messages.extend(x)
        messages.append({"role": "function", "name": "image_gen", "content": f"![fig-001]({CAT})"})
        for x in llm.chat(messages, functions=FUNCTIONS, stream=True):  # noqa: B007
            pass
        messages.extend(x)
        messages.append(
            {"role": "user", "content": [{"text": "可以描述下这张图片吗？"}, {"image": CAT}]}
        )
        for x in llm_vl.chat(messages, stream=True):  # noqa: B007
            pass
        messages.extend(x)
        return messages
    finally:
        llm.close_sync()
        llm_vl.close_sync()


def test_vision_and_text_models_share_one_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [
        Reply(text="一只小狗和一个女孩。"),
        Reply(text="小狗坐在沙滩上。"),
        Reply(text="我是通义千问。"),
        Reply(tool_calls=[ToolCall("image_gen", {"prompt": "a cute kitten"}, id="c1")]),
        Reply(text=f"画好了：![fig-001]({CAT})"),
        Reply(text="一只可爱的小猫。"),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        messages = example()
        server.assert_consumed()
        requests = server.generation_requests()

    paths = [r.path.split("?")[0] for r in requests]
    assert [p.removeprefix("/api/v1") for p in paths] == [
        MULTIMODAL_PATH.removeprefix("/api/v1"),
        MULTIMODAL_PATH.removeprefix("/api/v1"),
        TEXT_PATH.removeprefix("/api/v1"),
        TEXT_PATH.removeprefix("/api/v1"),
        TEXT_PATH.removeprefix("/api/v1"),
        MULTIMODAL_PATH.removeprefix("/api/v1"),
    ]
    bodies = [json.loads(r.body) for r in requests]
    assert [b["model"] for b in bodies] == ["qwen-vl-max"] * 2 + ["qwen-max"] * 3 + ["qwen-vl-max"]
    assert {"image": DOG} in bodies[0]["input"]["messages"][-1]["content"]
    assert [t["function"]["name"] for t in bodies[3]["parameters"]["tools"]] == ["image_gen"]
    # The example's list mixes dicts and `Message`s, so the model answered with `Message`s.
    read = [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]
    [call] = [m.function_call for m in read if m.function_call]
    assert (call.name, json.loads(call.arguments)) == ("image_gen", {"prompt": "a cute kitten"})
    # The text model read the images as notes (Qwen-Agent's text models do not see them).
    assert "（上传了 ![图片](dog_and_girl.jpeg)）" in json.dumps(
        bodies[2]["input"]["messages"], ensure_ascii=False
    )
    assert messages[-1]["content"] == "一只可爱的小猫。"
