"""`image_gen`, a network tool in Qwen-Agent's examples, standing in locally for their tests."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, ClassVar

import pytest

from parley.compat.qwen import BaseTool
from parley.tools import TOOL_REGISTRY


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
        return f"https://images.test/{prompt}.png"


class JSONImageGen(LocalImageGen):
    """`image_gen` answering as the network tool does: `{"image_url": ...}`, the prompt quoted."""

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        prompt = self._verify_json_format_args(params)["prompt"]
        return json.dumps({"image_url": f"https://images.test/{urllib.parse.quote(prompt)}"})


def stand_in_image_gen(
    monkeypatch: pytest.MonkeyPatch, tool: type[LocalImageGen] = LocalImageGen
) -> None:
    """Register `tool` as `image_gen` for one test (the registry is put back after it)."""
    monkeypatch.setitem(TOOL_REGISTRY, "image_gen", tool)
