"""Qwen-Agent's `examples/assistant_weather_bot.py`, with only its imports changed.

An `Assistant` (a Chinese instruction) with the tools `image_gen` and `amap_weather`, asked
"海淀区天气" with a PDF of poems attached to the question. The example's config
(`{'model': 'qwen-max'}`, a `qwen_dashscope` model) is kept as it is: the DashScope stand-in
is reached through Qwen-Agent's own environment variables (`DASHSCOPE_HTTP_URL`,
`DASHSCOPE_API_KEY`), and, as in Qwen-Agent, `qwen_dashscope` sends the functions natively.
`amap_weather` is parley's own, its key from `$AMAP_TOKEN` (as in Qwen-Agent) and AMap's API
served by a local stand-in site (`$AMAP_API_BASE`). `image_gen` alone stands in: a class of
this file registered under that name for the test, since the real tool needs an image
model's `llm_cfg` in its cfg (in Qwen-Agent 0.0.34 too, which refuses the example's bare
`'image_gen'` with "llm_cfg is required!"). The PDF is made here; the GUI is not run.
"""

# ruff: noqa: RUF001  (the example's Chinese text, full-width punctuation as written)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.tools.base import BaseTool
from parley.providers.dashscope.server import Reply, ToolCall
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._doc_support import serve_files
from tests.compat.qwen_examples._llm_support import registered_stand_in
from tests.tools._hostile import text_pdf

DRAWN: list[dict[str, Any]] = []
DISTRICT = {"status": "1", "districts": [{"name": "海淀区", "adcode": "110108"}]}
WEATHER = {"status": "1", "lives": [{"weather": "晴", "temperature": "25"}]}
AMAP_PAGES = {
    "/v3/config/district": (json.dumps(DISTRICT).encode(), "application/json"),
    "/v3/weather/weatherInfo": (json.dumps(WEATHER).encode(), "application/json"),
}


class ImageStandIn(BaseTool):
    """`image_gen`, answering with a URL instead of asking an image model."""

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
        DRAWN.append(args)
        return json.dumps({"image_url": "https://image.test/haidian.png"})


def init_agent_service() -> Assistant:
    """The example's `init_agent_service`."""
    llm_cfg = {"model": "qwen-max"}
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
    monkeypatch.setenv("AMAP_TOKEN", "amap-key")
    poem = text_pdf(tmp_path / "poem.pdf", [["Spring dawn: I wake in spring and birds sing."]])
    DRAWN.clear()
    steps = [
        Reply(tool_calls=[ToolCall("amap_weather", {"location": "海淀区"})]),
        Reply(tool_calls=[ToolCall("image_gen", {"prompt": "Haidian district on a sunny day"})]),
        Reply(text="海淀区今天晴，25度。![](https://image.test/haidian.png) Spring dawn."),
    ]
    fetched: list[str] = []
    with (
        registered_stand_in("image_gen", ImageStandIn),
        serve_files(AMAP_PAGES, fetched) as amap,
        dashscope_stand_in(monkeypatch, steps) as server,
    ):
        monkeypatch.setenv("AMAP_API_BASE", amap)
        bot = init_agent_service()
        try:
            messages = [{"role": "user", "content": [{"text": "海淀区天气"}, {"file": str(poem)}]}]
            response: list[Any] = []
            for response in bot.run(messages):  # noqa: B007
                pass
        finally:
            bot.close_sync()
        server.assert_consumed()
        first, second, third = (json.loads(r.body) for r in server.generation_requests())

    # The real `amap_weather` asked AMap (the stand-in) for the district, then its weather,
    # with the key; the image tool ran with the model's arguments; the answer came last.
    assert [f.split("?")[0] for f in fetched] == [
        "/v3/config/district",
        "/v3/weather/weatherInfo",
    ]
    assert "key=amap-key" in fetched[0]
    assert "city=110108" in fetched[1]
    assert DRAWN == [{"prompt": "Haidian district on a sunny day"}]
    roles = [m["role"] for m in response]
    assert roles == ["assistant", "function", "assistant", "function", "assistant"]
    assert response[1]["content"] == "海淀区的天气是晴温度是25度。"
    assert response[-1]["content"].startswith("海淀区今天晴")
    # Native tools, none in the prompt; the poem found for the question is in the system
    # message, after the instruction.
    assert first["model"] == "qwen-max"
    tools = [t["function"]["name"] for t in first["parameters"]["tools"]]
    assert tools == ["image_gen", "amap_weather"]
    assert "<tools>" not in json.dumps(first["input"]["messages"], ensure_ascii=False)
    system = first["input"]["messages"][0]["content"]
    assert system.startswith("你扮演一个天气预报助手")
    assert "Spring dawn" in system
    # Each tool's result went back as a `tool` message after the call it answers.
    *_, call, result = second["input"]["messages"]
    assert call["tool_calls"][0]["function"]["name"] == "amap_weather"
    assert (result["role"], result["content"]) == ("tool", "海淀区的天气是晴温度是25度。")
    *_, call, result = third["input"]["messages"]
    assert call["tool_calls"][0]["function"]["name"] == "image_gen"
    assert result["role"] == "tool"
    assert "image.test/haidian.png" in result["content"]
