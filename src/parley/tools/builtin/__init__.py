"""Built-in tools, registered under Qwen-Agent's names.

`code_interpreter` (sandboxed, stateful Python), `doc_parser` (documents into text with their
pages), `storage` (key-value files) and `web_search` (a pluggable search backend). Importing
this package registers them; their heavier dependencies (the `tools` extra) are imported only
when a tool needs them.
"""

from parley.tools.builtin._net import FetchNotAllowedError, FetchPolicy, ResponseTooLargeError
from parley.tools.builtin._paths import PathNotAllowedError
from parley.tools.builtin.code_interpreter import CodeInterpreter, CodeOptions, Execution
from parley.tools.builtin.doc_parser import (
    BytesOptions,
    DocParser,
    ParsedDocument,
    ParseLimitError,
    ParseLimits,
    ParseOptions,
    aparse_document,
    parse_document,
)
from parley.tools.builtin.sandbox import (
    SandboxLimits,
    SandboxMode,
    available_sandbox_modes,
    detect_sandbox_mode,
)
from parley.tools.builtin.search_backends import (
    BraveSearch,
    BraveSearchCredential,
    SearXNGSearch,
    SerperCredential,
    SerperSearch,
)
from parley.tools.builtin.storage import KeyNotExistsError, Storage
from parley.tools.builtin.web_search import SearchBackend, SearchResult, WebSearch, format_results

__all__ = [
    "BraveSearch",
    "BraveSearchCredential",
    "BytesOptions",
    "CodeInterpreter",
    "CodeOptions",
    "DocParser",
    "Execution",
    "FetchNotAllowedError",
    "FetchPolicy",
    "KeyNotExistsError",
    "ParseLimitError",
    "ParseLimits",
    "ParseOptions",
    "ParsedDocument",
    "PathNotAllowedError",
    "ResponseTooLargeError",
    "SandboxLimits",
    "SandboxMode",
    "SearXNGSearch",
    "SearchBackend",
    "SearchResult",
    "SerperCredential",
    "SerperSearch",
    "Storage",
    "WebSearch",
    "aparse_document",
    "available_sandbox_modes",
    "detect_sandbox_mode",
    "format_results",
    "parse_document",
]
