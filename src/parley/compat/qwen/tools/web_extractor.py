"""Qwen-Agent's `web_extractor`: the text of one web page.

The page is downloaded only from a public address (the tool's `FetchPolicy`: cfg
`allow_private`, `allowed_hosts`, or `$PARLEY_FETCH_ALLOWED_HOSTS`), into the tool's
`work_dir`, and parsed by parley's document parser (HTML, and PDFs or other documents a
link may lead to).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from parley.compat.qwen.tools._documents import parse_copy, plain_text
from parley.compat.qwen.tools.base import BaseToolWithFileAccess, register_tool
from parley.errors import ToolArgumentsError
from parley.rag.ingest import is_url

__all__ = ["WebExtractor"]


@register_tool("web_extractor")
class WebExtractor(BaseToolWithFileAccess):
    """Gets a web page's text (see the module docs)."""

    description = "Get content of one webpage."
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The webpage url."}},
        "required": ["url"],
    }

    def call(
        self, params: str | dict[str, Any], files: Sequence[str] | None = None, **kwargs: Any
    ) -> str:
        """Download the page and return its text.

        Raises:
            ToolArgumentsError: The url is no http(s) URL (a local path, say).
            FetchNotAllowedError: It points at an address the policy refuses.
        """
        url = str(self._verify_json_format_args(params)["url"])
        if not is_url(url):
            raise ToolArgumentsError(
                f"{url!r} is not a web page's http(s) URL; web_extractor reads web pages only",
                tool_name=self.name,
            )
        (copy,) = self.copy_files([url])
        return plain_text(parse_copy(copy, self.work_dir))
