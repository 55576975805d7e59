"""Qwen-Agent's `examples/assistant_weather_bot.py`, with only its imports changed.

An `Assistant` (a Chinese instruction) with the tools `image_gen` and `amap_weather`, asked
"海淀区天气" with a PDF of poems attached to the question. The network tools stand in
locally: classes of this file registered under those names for the test (the real ones call
AMap's and an image service's APIs), so the example's `function_list` is unchanged. The
example's config (`{'model': 'qwen-max'}`) is given a `model_server`: the stand-in
OpenAI-compatible server, as the issue ran it. The server gets no `tools`: the functions
are in the system prompt. The PDF is made here; the GUI is not run.
"""

# ruff: noqa: RUF001  (the example's Chinese text, full-width punctuation as written)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from parley.compat.qwen import BaseTool
from parley.compat.qwen.agents import Assistant
from parley.testing.openai_server import OpenAIServer, Reply
from tests.compat.qwen_examples._llm_support import (
    nous_call,
    registered_stand_in,
    tools_in_prompt,
)
from tests.tools._hostile import text_pdf

ASKED: list[tuple[str, dict[str, Any]]] = []


class WeatherStandIn(BaseTool):
    """`amap_weather`, answering from a table instead of AMap's API."""

    description = "获取对应城市的天气数据"
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "location": {
                "description": "城市/区具体名称，如`北京市海淀区`请描述为`海淀区`",
                "type": "string",
            }
        },
        "required": ["location"],
    }

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        args = self._verify_json_format_args(params)
        ASKED.append(("amap_weather", args))
        return f"{args['location']}的天气是晴，温度是25度。"


class ImageStandIn(BaseTool):
    """`image_gen`, answering with a URL instead of drawing."""

    description = (
        "An image generation service that takes text descriptions as input and returns a URL "
        "of the image."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"prompt": {"description": "What to draw.", "type": "string"}},
        "required": ["prompt"],
    }

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        args = self._verify_json_format_args(params)
        ASKED.append(("image_gen", args))
        return json.dumps({"image_url": "https://image.test/haidian.png"})


def init_agent_service(model_server: str) -> Assistant:
    """The example's `init_agent_service`, the stand-in's URL as `model_server`."""
    llm_cfg = {"model": "qwen-max", "model_server": model_server}
    system = (
        "你扮演一个天气预报助手，你具有查询天气和画图能力。"
        "你需要查询相应地区的天气，然后调用给你的画图工具绘制一张城市的图，并从给定的诗词文档中选一首相关的诗词来描述天气，不要说文档以外的诗词。"
    )
    tools = ["image_gen", "amap_weather"]
    return Assistant(
        llm=llm_cfg,
        name="天气预报助手",
        description="查询天气和画图",
        system_message=system,
        function_list=tools,
    )


def test_haidian_weather_with_a_poem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # attached files are read from the working directory
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    poem = text_pdf(tmp_path / "poem.pdf", [["Spring dawn: I wake in spring and birds sing."]])
    ASKED.clear()
    steps = [
        Reply(text=nous_call("amap_weather", {"location": "海淀区"})),
        Reply(text=nous_call("image_gen", {"prompt": "Haidian district on a sunny day"})),
        Reply(text="海淀区今天晴，25度。![](https://image.test/haidian.png) Spring dawn."),
    ]
    with (
        registered_stand_in("amap_weather", WeatherStandIn),
        registered_stand_in("image_gen", ImageStandIn),
        OpenAIServer(steps) as server,
    ):
        bot = init_agent_service(server.url)
        try:
            messages = [{"role": "user", "content": [{"text": "海淀区天气"}, {"file": str(poem)}]}]
            response: list[Any] = []
            for response in bot.run(messages):  # noqa: B007
                pass
        finally:
            bot.close_sync()
        server.assert_consumed()
        first, second, third = server.bodies()

    # Each tool ran with the arguments the model wrote, in turn; the answer came last.
    assert ASKED == [
        ("amap_weather", {"location": "海淀区"}),
        ("image_gen", {"prompt": "Haidian district on a sunny day"}),
    ]
    roles = [m["role"] for m in response]
    assert roles == ["assistant", "function", "assistant", "function", "assistant"]
    assert response[1]["content"] == "海淀区的天气是晴，温度是25度。"
    assert response[-1]["content"].startswith("海淀区今天晴")
    # No native `tools`; both in the system prompt, with the poem found for the question.
    assert "tools" not in first
    system = first["messages"][0]["content"]
    assert [f["name"] for f in tools_in_prompt(system)] == ["image_gen", "amap_weather"]
    assert "Spring dawn" in system
    assert second["messages"][-1]["content"].startswith("<tool_response>\n海淀区的天气")
    assert "tools" not in third
