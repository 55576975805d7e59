# ruff: noqa: RUF001  (the example's Chinese text, full-width punctuation as written)
"""Qwen-Agent's `examples/qwen2vl_function_calling.py`, with only its imports changed.

A vision model (`qwenvl_dashscope`, the `qwen` prompt format, `max_retries: 10`) looks at an
image and calls `image_gen`; the example runs the function and hands back a function
message holding the drawn image and a text. The DashScope stand-in plays the model, reached
through Qwen-Agent's environment variables. The example's `image_gen` downloads the picture
(`save_url_to_local_work_dir`, a network call): here it writes a local PNG instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from parley.compat.qwen.llm import get_chat_model
from parley.compat.qwen.llm.schema import ContentItem
from parley.providers.dashscope.server import Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._llm_support import qwen_call

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
DRAWN: list[str] = []
QUESTION = "图片中的内容是什么？请画一张内容相同，风格类似的图片。把女人换成男人"
DOG = "https://dashscope.oss-cn-beijing.aliyuncs.com/images/dog_and_girl.jpeg"


def image_gen(prompt: str, folder: Path) -> str:
    """The example's function, drawing locally: the picture's path."""
    DRAWN.append(prompt)
    path = folder / "pic.png"
    path.write_bytes(PNG)
    return str(path)


FUNCTIONS = [
    {
        "name": "image_gen",
        "description": "AI绘画（图像生成）服务，输入文本描述，返回根据文本信息绘制的图片URL。",
        "parameters": {
            "name": "prompt",
            "type": "string",
            "description": (
                "详细描述了希望生成的图像具有什么内容，例如人物、环境、动作等细节描述，使用英文"
            ),
            "required": True,
        },
    },
]


def example(folder: Path) -> list[Any]:
    """The example's `test()`: the conversation at its end."""
    llm_cfg_oai = {
        "model_type": "qwenvl_dashscope",
        "model": "qwen-vl-max-0809",
        "api_key": "sk-test",
        "generate_cfg": {"max_retries": 10, "fncall_prompt_type": "qwen"},
    }
    llm = get_chat_model(llm_cfg_oai)
    try:
        messages: list[Any] = [
            {
                "role": "user",
                "content": [
                    {"image": DOG},
                    {"text": QUESTION},
                ],
            }
        ]
        responses: list[Any] = []
        for responses in llm.chat(messages=messages, functions=FUNCTIONS, stream=True):  # noqa: B007
            pass
        messages.extend(responses)
        for rsp in responses:
            if rsp.get("function_call", None):
                func_name = rsp["function_call"]["name"]
                func_args = json.loads(rsp["function_call"]["arguments"])
                image_url = image_gen(func_args["prompt"], folder)
                messages.append(
                    {
                        "role": "function",
                        "name": func_name,
                        "content": [
                            ContentItem(image=image_url),
                            ContentItem(text=f"（ 这张图片的URL是 {image_url} ）"),
                        ],
                    }
                )
        for responses in llm.chat(messages=messages, functions=FUNCTIONS, stream=True):  # noqa: B007
            pass
        messages.extend(responses)
        return messages
    finally:
        llm.close_sync()


def test_the_vision_model_calls_image_gen_and_sees_its_picture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    DRAWN.clear()
    steps = [
        Reply(
            text="图中是一只狗和一个女孩。\n"
            + qwen_call("image_gen", {"prompt": "a dog and a man"})
        ),
        Reply(text="画好了，一只狗和一个男人。"),
    ]
    with dashscope_stand_in(monkeypatch, steps, api_key=None) as server:
        messages = example(tmp_path)
        server.assert_consumed()
        first, second = (json.loads(r.body) for r in server.generation_requests())

    assert DRAWN == ["a dog and a man"]
    assert messages[-1]["content"] == "画好了，一只狗和一个男人。"
    # The functions were in the prompt (the `qwen` format, in Chinese), not sent natively.
    assert "tools" not in first["parameters"]
    system = json.dumps(first["input"]["messages"][0], ensure_ascii=False)
    assert "### image_gen" in system
    assert "✿FUNCTION✿: 工具名称，必须是[image_gen]之一。" in system
    assert first["parameters"]["stop"] == ["✿RESULT✿", "✿RETURN✿"]
    # The picture the function drew went back to the model with the call's result.
    last = second["input"]["messages"][-1]
    assert last["role"] == "user"
    text = "".join(part.get("text", "") for part in last["content"])
    assert "✿FUNCTION✿: image_gen\n✿ARGS✿: {" in text
    assert "✿RESULT✿: " in text
    assert any("image" in part for part in last["content"][1:])
