"""Qwen-Agent's `image_gen`: an image from a description, made by an image model.

As in Qwen-Agent 0.0.34 the cfg's `llm_cfg` (required) names the model that draws (a
Qwen-Agent llm config, or a parley `ChatModel`); the tool asks it with the prompt and
returns its answer's content: the images as `ContentItem(image=...)`, or its text (a URL
to the image, say) when it answers in text. `size` is kept for Qwen-Agent's configs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from parley.compat.qwen.schema import USER, ContentItem, Message
from parley.compat.qwen.tools.base import BaseTool, register_tool
from parley.errors import ConfigurationError

__all__ = ["ImageGen"]


@register_tool("image_gen", allow_overwrite=True)
class ImageGen(BaseTool):
    """Makes an image from a description (cfg: `llm_cfg`, `size`)."""

    description = (
        "An image generation service that takes text descriptions as input and returns a URL "
        "of the image."
    )
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "description": (
                    "Detailed description of the desired content of the generated image. Keep "
                    "the specific requirements of the original request, such as text, intact."
                ),
            }
        },
        "required": ["prompt"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        llm_cfg = self.cfg.get("llm_cfg")
        if not llm_cfg:
            raise ConfigurationError(
                "image_gen needs llm_cfg in its cfg: the image model's llm config, e.g. "
                "{'name': 'image_gen', 'llm_cfg': {'model': 'wanx-v1', 'model_server': ...}}"
            )
        from parley.compat.qwen.agent import BasicAgent  # noqa: PLC0415  (agents import tools)

        self.agent = BasicAgent(llm=llm_cfg, system_message=None)
        self.size = str(self.cfg.get("size", "1024*1024"))

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str | list[ContentItem]:
        """Ask the image model; its images (or its text)."""
        prompt = str(self._verify_json_format_args(params)["prompt"])
        answer = self.agent.run_nonstream([Message(USER, [ContentItem(text=prompt)])])
        if not answer:
            return ""
        last = answer[-1]
        content = last.content if isinstance(last, Message) else last["content"]
        return (
            content
            if isinstance(content, str)
            else [ContentItem.model_validate(c) for c in content]
        )
