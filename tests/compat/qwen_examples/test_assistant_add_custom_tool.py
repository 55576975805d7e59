"""Qwen-Agent's `examples/assistant_add_custom_tool.py`, with only its imports changed.

An `Assistant` with a custom tool (`my_image_gen`, reading its arguments with
`json5.loads(params)`), the built-in `code_interpreter` and a PDF, asked to "draw a dog". The
example's config (`{'model': 'qwen-max'}`) is given a `model_server`: the stand-in
OpenAI-compatible server, as the issue ran it (without one it is DashScope's). As in
Qwen-Agent, the server gets no `tools`: the functions are in the system prompt and the model
writes its call in its text. The PDF is made here (Qwen-Agent's `resource/doc.pdf` is not
copied); the GUI (`app_gui`) is not run; the tool is registered under a name of this file's
own (`my_image_gen`, the example's).
"""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

import json5
import pytest

# Qwen-Agent's `qwen_agent.tools.base` is `parley.compat.qwen.tools.base` once the tools
# package lands (another part of issue 19); the same names are here meanwhile.
from parley.compat.qwen import BaseTool, register_tool
from parley.compat.qwen.agents import Assistant
from parley.testing.openai_server import OpenAIServer, Reply
from tests.compat.qwen_examples._llm_support import nous_call, tools_in_prompt
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


def init_agent_service(root: Path, model_server: str) -> Assistant:
    """The example's `init_agent_service`, the stand-in's URL as `model_server`."""
    llm_cfg = {"model": "qwen-max", "model_server": model_server}
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
        Reply(text=nous_call("my_image_gen", {"prompt": "a cute dog"})),
        Reply(text="Here is the dog: https://image.pollinations.ai/prompt/a%20cute%20dog"),
    ]
    with OpenAIServer(steps) as server:
        bot = init_agent_service(tmp_path, server.url)
        try:
            messages = [{"role": "user", "content": "draw a dog"}]
            response: list[Any] = []
            for response in bot.run(messages=messages):  # noqa: B007
                pass
        finally:
            bot.close_sync()
        server.assert_consumed()
        first, second = server.bodies()

    # The tool ran with the model's arguments; its result went back; the answer came last.
    assert DRAWN == ["a cute dog"]
    assert [m["role"] for m in response] == ["assistant", "function", "assistant"]
    assert json.loads(response[1]["content"]) == {
        "image_url": "https://image.pollinations.ai/prompt/a%20cute%20dog"
    }
    assert response[-1]["content"].startswith("Here is the dog")
    assert all(m["name"] == "AI painting" for m in response if m["role"] == "assistant")
    # No native `tools`: both functions are described in the system prompt, after the
    # instruction and the PDF's knowledge.
    assert "tools" not in first
    system = first["messages"][0]["content"]
    assert [f["name"] for f in tools_in_prompt(system)] == ["my_image_gen", "code_interpreter"]
    assert "Rotate: Image.rotate(90)." in system
    assert second["messages"][-1]["content"].startswith('<tool_response>\n{"image_url"')
