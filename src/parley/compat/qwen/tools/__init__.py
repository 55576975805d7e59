"""Qwen-Agent's tools (`qwen_agent.tools`), under the names and module paths Qwen-Agent uses.

`from qwen_agent.tools import BaseTool` becomes `from parley.compat.qwen.tools import
BaseTool`. Importing this package registers every tool by Qwen-Agent's name, so an agent's
`function_list=["image_gen", "amap_weather"]` finds them:

- `code_interpreter`, `doc_parser`, `storage`: parley's own tools (`parley.tools.builtin`;
  the code interpreter runs in parley's sandbox, not Docker);
- `python_executor` (the same sandbox, one snippet per call), `simple_doc_parser`,
  `web_extractor`, `retrieval` (parley's document parser and index), `image_gen` (an image
  model given by `llm_cfg`), `amap_weather` (AMap's web API, `$AMAP_TOKEN`);
- `MCPManager` (MCP servers from `{"mcpServers": ...}`; agents take that config in their
  `function_list` directly).

`BaseToolWithFileAccess` tools get the conversation's files from the agents (`files=`), and
copy them in only from allowed folders and public addresses (see `base`).
"""

from parley.compat.qwen.tools.amap_weather import AmapWeather
from parley.compat.qwen.tools.base import (
    TOOL_REGISTRY,
    BaseTool,
    BaseToolWithFileAccess,
    ToolServiceError,
    register_tool,
)
from parley.compat.qwen.tools.code_interpreter import CodeInterpreter
from parley.compat.qwen.tools.doc_parser import DocParser
from parley.compat.qwen.tools.image_gen import ImageGen
from parley.compat.qwen.tools.mcp_manager import MCPManager
from parley.compat.qwen.tools.python_executor import PythonExecutor
from parley.compat.qwen.tools.retrieval import Retrieval
from parley.compat.qwen.tools.simple_doc_parser import SimpleDocParser
from parley.compat.qwen.tools.storage import Storage
from parley.compat.qwen.tools.web_extractor import WebExtractor

__all__ = [
    "TOOL_REGISTRY",
    "AmapWeather",
    "BaseTool",
    "BaseToolWithFileAccess",
    "CodeInterpreter",
    "DocParser",
    "ImageGen",
    "MCPManager",
    "PythonExecutor",
    "Retrieval",
    "SimpleDocParser",
    "Storage",
    "ToolServiceError",
    "WebExtractor",
    "register_tool",
]
