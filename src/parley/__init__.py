"""parley: build LLM agents on one typed message format, and serve them over HTTP."""

from importlib.metadata import PackageNotFoundError, version

from parley import _moved
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

# Old module paths (before each provider became one package) keep working for one release.
_moved.install()

try:
    __version__ = version("parley")
    """The installed distribution's version (from the git tag it was built at: hatch-vcs)."""
except PackageNotFoundError:  # the sources on the path, never installed
    __version__ = "0.0.0+unknown"
