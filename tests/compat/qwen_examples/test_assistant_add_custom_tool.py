"""Qwen-Agent's `examples/assistant_add_custom_tool.py`, with only its imports changed.

An `Assistant` with a custom tool (`my_image_gen`, reading its arguments with
`json5.loads(params)`), the built-in `code_interpreter` and a PDF, asked to "draw a dog". The
example's config (`{'model': 'qwen-max'}`, a `qwen_dashscope` model) is kept as it is: the
DashScope stand-in is reached through Qwen-Agent's own environment variables
(`DASHSCOPE_HTTP_URL`, `DASHSCOPE_API_KEY`). As in Qwen-Agent, `qwen_dashscope` uses the raw
API: the functions go natively (`parameters.tools`), and the model calls them natively. The
PDF is made here (Qwen-Agent's `resource/doc.pdf` is not copied); the GUI (`app_gui`) is not
run; the tool is registered under the example's name (`my_image_gen`).
"""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

import json5
import pytest

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.tools.base import BaseTool, register_tool
from parley.providers.dashscope.server import Reply, ToolCall
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.tools._hostile import text_pdf

DRAWN: list[str] = []


@register_tool("my_image_gen")
class MyImageGen(BaseTool):
    description = (
        "AI painting (image generation) service, input text description, and return the "
        "image URL drawn based on text information."
    )
    parameters = [
        {
            "name": "prompt",
            "type": "string",
            "description": "Detailed description of the desired image content, in English",
            "required": True,
        }
    ]

    def call(self, params: str, **kwargs: Any) -> str:  # type: ignore[override]
        prompt = json5.loads(params)["prompt"]
        DRAWN.append(prompt)
        prompt = urllib.parse.quote(prompt)
        return json.dumps(
            {"image_url": f"https://image.pollinations.ai/prompt/{prompt}"}, ensure_ascii=False
        )


def init_agent_service(root: Path) -> Assistant:
    """The example's `init_agent_service` (`root` stands for its `ROOT_RESOURCE`)."""
    llm_cfg = {"model": "qwen-max"}
    system = (
        "According to the user's request, you first draw a picture and then automatically "
        "run code to download the picture and select an image operation from the given "
        "document to process the image"
    )
    tools = ["my_image_gen", "code_interpreter"]
    return Assistant(
        llm=llm_cfg,
        name="AI painting",
        description="AI painting service",
        system_message=system,
        function_list=tools,
        files=[os.path.join(root, "doc.pdf")],
    )


def test_draw_a_dog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    text_pdf(tmp_path / "doc.pdf", [["Image operations."], ["Rotate: Image.rotate(90)."]])
    DRAWN.clear()
    steps = [
        Reply(tool_calls=[ToolCall("my_image_gen", {"prompt": "a cute dog"})]),
        Reply(text="Here is the dog: https://image.pollinations.ai/prompt/a%20cute%20dog"),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        bot = init_agent_service(tmp_path)
        try:
            messages = [{"role": "user", "content": "draw a dog"}]
            response: list[Any] = []
            for response in bot.run(messages=messages):  # noqa: B007
                pass
        finally:
            bot.close_sync()
        server.assert_consumed()
        first, second = (json.loads(r.body) for r in server.generation_requests())

    # The tool ran with the model's arguments; its result went back; the answer came last.
    assert DRAWN == ["a cute dog"]
    assert [m["role"] for m in response] == ["assistant", "function", "assistant"]
    assert json.loads(response[1]["content"]) == {
        "image_url": "https://image.pollinations.ai/prompt/a%20cute%20dog"
    }
    assert response[-1]["content"].startswith("Here is the dog")
    assert all(m["name"] == "AI painting" for m in response if m["role"] == "assistant")
    # Native tools: both functions go in `parameters.tools`, none in the prompt; the system
    # message holds the instruction and the PDF's knowledge.
    assert first["model"] == "qwen-max"
    tools = [t["function"]["name"] for t in first["parameters"]["tools"]]
    assert tools == ["my_image_gen", "code_interpreter"]
    system = first["input"]["messages"][0]["content"]
    assert "<tools>" not in json.dumps(first["input"]["messages"])
    assert system.startswith("According to the user's request")
    assert "Rotate: Image.rotate(90)." in system
    # The tool's result went back after the call it answers.
    *_, call, result = second["input"]["messages"]
    assert call["role"] == "assistant"
    assert call["tool_calls"][0]["function"]["name"] == "my_image_gen"
    assert result["role"] == "tool"
    assert json.loads(result["content"])["image_url"].endswith("a%20cute%20dog")
