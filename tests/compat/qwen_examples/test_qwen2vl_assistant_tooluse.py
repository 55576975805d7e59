"""Qwen-Agent's `examples/qwen2vl_assistant_tooluse.py`, run with only its imports changed.

A `FnCallAgent` on a vision model (`qwenvl_dashscope`, `fncall_prompt_type: "qwen"`,
`max_retries: 10`) with the example's `crop_and_resize` (a `BaseToolWithFileAccess` that
opens the image, crops the asked rectangle and returns the crop as an image item and a
text) and `code_interpreter`. The example's weather and express-tracking tools need
market-place AppCodes: without them in the environment the example leaves them out (and
says so), as here. The example's config is kept as written: DashScope is the stand-in,
reached through Qwen-Agent's environment variables.

The example's picture (`resource/screenshot_with_plot.jpeg`) is not copied: a picture drawn
with PIL takes its place, in a folder the test runs from (as the example runs from its
own). Two calls are scripted: one by the picture's file name (found in the tool's
`work_dir`, where the agent copied the conversation's images, as Qwen-Agent does), one by
an `http://` URL, which the tool's `requests.get` fetches from a local HTTP server.
"""

# ruff: noqa: RUF001  (the example's Chinese text, full-width punctuation as written)

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any, ClassVar

import pytest
import requests

from parley.compat.qwen.agents import FnCallAgent
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.compat.qwen.llm.schema import ContentItem
from parley.compat.qwen.tools.base import BaseToolWithFileAccess, register_tool
from parley.providers.dashscope.server import MULTIMODAL_PATH, Reply
from tests._requires import require_module
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._doc_support import serve_files
from tests.compat.qwen_examples._llm_support import qwen_call

Image = require_module("PIL.Image", "dev")

ROOT_RESOURCE = "resource"
SIZE = (200, 100)
PICTURE = "screenshot_with_plot.jpeg"


@register_tool("crop_and_resize", allow_overwrite=True)
class CropResize(BaseToolWithFileAccess):
    """The example's tool, as written there (its Chinese texts kept)."""

    description = (
        "这是一个放大镜功能，截取局部图像并放大从而查看更多细节，如果你无法直接看清细节时可以调用"
    )
    parameters: ClassVar[list[dict[str, Any]]] = [
        {
            "name": "image",
            "type": "string",
            "description": "输入图片本地路径或URL",
            "required": True,
        },
        {
            "name": "rectangle",
            "type": "string",
            "description": "需要截取的局部图像区域，使用左上角坐标和右下角坐标表示"
            "（原点在图像左上角、向右为x轴正方向、向下为y轴正方向），格式：(x1,y1),(x2,y2)",
            "required": True,
        },
    ]

    def _extract_coordinates(self, text: str) -> tuple[int, int, int, int]:
        pattern = r"\((\d+),\s*(\d+)\)"
        matches = re.findall(pattern, text)
        coordinates = [(int(x), int(y)) for x, y in matches]
        if len(coordinates) >= 2:
            x1, y1 = coordinates[0]
            x2, y2 = coordinates[1]
            return x1, y1, x2, y2
        pattern = r"\((\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)"
        matches = re.findall(pattern, text)
        boxes = [(int(x1), int(y1), int(x2), int(y2)) for x1, y1, x2, y2 in matches]
        return boxes[0]

    def _expand_box(
        self, x1: float, y1: float, x2: float, y2: float, factor: float = 1
    ) -> tuple[float, float, float, float]:
        xc = (x1 + x2) / 2
        yc = (y1 + y2) / 2
        w_new = (x2 - x1) * factor
        h_new = (y2 - y1) * factor
        return xc - w_new / 2, yc - h_new / 2, xc + w_new / 2, yc + h_new / 2

    def call(
        self, params: str | dict[str, Any], files: list[str] | None = None, **kwargs: Any
    ) -> list[ContentItem]:
        super().call(params=params, files=files)
        params = self._verify_json_format_args(params)

        image_arg = params["image"]  # local path or url
        rectangle = params["rectangle"]

        if image_arg.startswith("http"):
            response = requests.get(image_arg, timeout=10)
            response.raise_for_status()
            image = Image.open(BytesIO(response.content))
        elif os.path.exists(image_arg):
            image = Image.open(image_arg)
        else:
            image = Image.open(os.path.join(self.work_dir, image_arg))

        coordinates = self._extract_coordinates(rectangle)
        x1, y1, x2, y2 = self._expand_box(*coordinates, factor=1.35)
        w, h = image.size
        x1, y1 = round(x1 / 1000 * w), round(y1 / 1000 * h)
        x2, y2 = round(x2 / 1000 * w), round(y2 / 1000 * h)
        x1, y1, x2, y2 = max(x1, 0), max(y1, 0), min(x2, w), min(y2, h)
        cropped_image = image.crop((x1, y1, x2, y2))

        output_path = os.path.abspath(os.path.join(self.work_dir, f"{uuid.uuid4()}.png"))
        cropped_image.save(output_path)
        return [
            ContentItem(image=output_path),
            ContentItem(text=f"（ 这张放大的局部区域的图片的URL是 {output_path} ）"),
        ]


def init_agent_service() -> FnCallAgent:
    llm_cfg_vl = {
        "model_type": "qwenvl_dashscope",
        "model": "qwen-vl-max-0809",
        "api_key": os.getenv("DASHSCOPE_API_KEY"),
        "generate_cfg": {"max_retries": 10, "fncall_prompt_type": "qwen"},
    }
    tools = ["crop_and_resize", "code_interpreter"]
    # The example adds its market-place tools only when their AppCodes are set.
    assert "AppCode_WeatherHour24" not in os.environ
    assert "AppCode_Area2Weather" not in os.environ
    assert "AppCode_ExpressTracking" not in os.environ
    return FnCallAgent(
        llm=llm_cfg_vl, name="Qwen2-VL", description="function calling", function_list=tools
    )


def picture_bytes() -> bytes:
    """A white picture with a black right half (the "table" to zoom into)."""
    image = Image.new("RGB", SIZE, "white")
    image.paste((0, 0, 0), (SIZE[0] // 2, 0, SIZE[0], SIZE[1]))
    out = BytesIO()
    image.save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture
def picture_site() -> Iterator[str]:
    """A local HTTP server serving the picture at `/<PICTURE>`; its base URL."""
    with serve_files({f"/{PICTURE}": (picture_bytes(), "image/jpeg")}) as site:
        yield site


@pytest.mark.parametrize("where", ["by_name", "by_url"])
def test_the_agent_zooms_into_the_picture_and_sees_the_crop(
    where: str, picture_site: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the example runs from its own folder
    monkeypatch.setenv("PARLEY_WORKSPACE", str(tmp_path / "workspace"))
    (tmp_path / "resource").mkdir()
    (tmp_path / "resource" / PICTURE).write_bytes(picture_bytes())
    image_arg = PICTURE if where == "by_name" else f"{picture_site}/{PICTURE}"
    call = qwen_call("crop_and_resize", {"image": image_arg, "rectangle": "(600,0),(1000,1000)"})
    steps = [Reply(text=call), Reply(text="放大后的表格是黑色的。")]
    with dashscope_stand_in(monkeypatch, steps) as server:
        bot = init_agent_service()
        messages = [
            {
                "role": "user",
                "content": [
                    {"image": os.path.abspath(os.path.join(ROOT_RESOURCE, PICTURE))},
                    {"text": "调用工具放大右边的表格"},
                ],
            }
        ]
        try:
            for response in bot.run(messages=messages):  # noqa: B007
                pass
        finally:
            bot.close_sync()
        server.assert_consumed()
        requests_seen = server.generation_requests()

    assert [r.path.split("?")[0] for r in requests_seen] == [MULTIMODAL_PATH] * 2
    first, second = (json.loads(r.body) for r in requests_seen)
    system = first["input"]["messages"][0]["content"][0]["text"]
    assert "crop_and_resize" in system
    assert "code_interpreter" in system
    assert "express_tracking" not in system
    # The crop went back to the model as an image after the call (the qwen format folds
    # the call and its result into the turn), with the tool's text.
    result = second["input"]["messages"][-1]["content"]
    texts = "".join(part.get("text", "") for part in result)
    assert f'"image": "{image_arg}"' in texts
    assert "✿RESULT✿" in texts
    assert "这张放大的局部区域的图片的URL是" in texts
    picture, crop = (part["image"] for part in result if "image" in part)
    assert picture.startswith("data:image/jpeg;base64,")
    assert crop.startswith("data:image/png;base64,")
    [function] = [m for m in response if m["role"] == "function"]
    [image] = [item["image"] for item in function["content"] if item.get("image")]
    # The tool returned a path; the response holds it as a `file://` URL (parley's media
    # are URLs; Qwen-Agent's readers take both forms).
    assert image.startswith("file:///")
    with Image.open(image.removeprefix("file://")) as cropped:
        # x 600..1000 widened by 1.35 is 530..1070 of 1000: 106..200 of 200 pixels.
        assert cropped.size == (94, SIZE[1])
        assert cropped.convert("L").getpixel((cropped.size[0] - 1, 0)) < 40  # the black half
    assert response[-1]["content"] == "放大后的表格是黑色的。"
