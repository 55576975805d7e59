"""How Qwen-Agent's `qwenvl_oai` and `qwenomni_oai` send media on the OpenAI wire.

Qwen-Agent passes an audio URL as it is (`input_audio.data` holding the URL) and a video
given by its frames as DashScope's compatible mode takes it (`{"type": "video", "video":
[frame URLs]}`); local files go inline as `data:` URLs. OpenAI's own formatter refuses an
audio URL (OpenAI takes audio inline only) and sends one source per video, so these model
types use this formatter, which differs in those two cases only.
"""

from __future__ import annotations

from typing import Any

from parley.messages.blocks import AudioBlock, ImageBlock, VideoBlock
from parley.models import _media
from parley.providers.openai.formatter import OpenAIChatFormatter

__all__ = ["QwenOAIMediaFormatter"]


class QwenOAIMediaFormatter(OpenAIChatFormatter):
    """OpenAI chat messages with audio URLs and video frames as Qwen's services take them."""

    def _part(self, block: Any) -> dict[str, Any]:
        if isinstance(block, AudioBlock):
            url = _media.remote_url(block)
            if url:
                return {"type": "input_audio", "input_audio": {"data": url}}
        if isinstance(block, VideoBlock) and block.frames:
            frames = [_media.url_or_data(ImageBlock(source=frame)) for frame in block.frames]
            return {"type": "video", "video": frames}
        return super()._part(block)
