"""parley: build LLM agents on one typed message format, and serve them over HTTP."""

from parley.errors import ParleyError, UserError
from parley.messages import (
    AudioBlock,
    Base64Source,
    Block,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    Usage,
    VideoBlock,
)

__all__ = [
    "AudioBlock",
    "Base64Source",
    "Block",
    "FileBlock",
    "ImageBlock",
    "Msg",
    "ParleyError",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "URLSource",
    "Usage",
    "UserError",
    "VideoBlock",
]

__version__ = "0.1.0.dev0"
