"""The message format: `Msg`, its content blocks, media sources and usage."""

from parley.messages._base import DictLikeModel
from parley.messages.blocks import (
    AudioBlock,
    Base64Source,
    Block,
    BlockType,
    FileBlock,
    ImageBlock,
    MediaBlock,
    OutputBlock,
    Source,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    VideoBlock,
    source_from_str,
)
from parley.messages.msg import (
    Msg,
    MsgList,
    Role,
    msgs_from_json,
    msgs_to_json,
    new_call_id,
    new_id,
)
from parley.messages.think import has_think_tags, split_think
from parley.messages.usage import Usage

__all__ = [
    "AudioBlock",
    "Base64Source",
    "Block",
    "BlockType",
    "DictLikeModel",
    "FileBlock",
    "ImageBlock",
    "MediaBlock",
    "Msg",
    "MsgList",
    "OutputBlock",
    "Role",
    "Source",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "URLSource",
    "Usage",
    "VideoBlock",
    "has_think_tags",
    "msgs_from_json",
    "msgs_to_json",
    "new_call_id",
    "new_id",
    "source_from_str",
    "split_think",
]
