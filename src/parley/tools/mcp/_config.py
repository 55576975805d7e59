"""An `mcpServers` config, as Qwen-Agent (and Claude Desktop) write it, checked and typed.

::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                  "env": {"DEBUG": "1"}},
        "search": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ..."}},
        "legacy": {"url": "http://127.0.0.1:9000/sse", "type": "sse"},
    }}

A server with a `command` runs as a subprocess over stdio; one with a `url` is reached over
streamable HTTP, or over SSE with `"type": "sse"`. Qwen-Agent assumes SSE for every `url`
without a `type`; parley assumes SSE only for a URL whose path ends in `/sse` and streamable
HTTP otherwise, since streamable HTTP replaced SSE in the 2025-03-26 protocol. Every server
also takes `timeout` (seconds per call, default 60) and `connect_timeout` (seconds to start and
finish the handshake, default 30). Unknown keys are errors, so a typo does not go unnoticed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from parley.errors import ConfigurationError

__all__ = ["HTTPServerConfig", "MCPServerConfig", "StdioServerConfig", "parse_mcp_config"]

DEFAULT_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 30.0
DEFAULT_SSE_READ_TIMEOUT = 300.0

# A server's name starts its tools' names, which providers restrict to these characters.
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_COMMON_KEYS = frozenset({"type", "timeout", "connect_timeout"})
_STDIO_KEYS = _COMMON_KEYS | {"command", "args", "env", "cwd"}
_HTTP_KEYS = _COMMON_KEYS | {"url", "headers", "sse_read_timeout"}
_HTTP_TYPES: dict[str, Literal["streamable-http", "sse"]] = {
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "http": "streamable-http",
    "sse": "sse",
}


@dataclass(frozen=True)
class StdioServerConfig:
    """A server parley starts as a subprocess and speaks to over its stdin and stdout.

    Args:
        name: The server's name; its tools are named `<name>-<tool>`.
        command: The program to run.
        args: Its arguments.
        env: Variables set for it, over the few the SDK passes on (HOME, PATH, USER, ...).
        cwd: Its working directory (parley's by default).
        timeout: Seconds one call may take.
        connect_timeout: Seconds to start the server and finish the handshake.
    """

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    cwd: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @property
    def target(self) -> str:
        """The command line, for messages."""
        return " ".join((self.command, *self.args))


@dataclass(frozen=True)
class HTTPServerConfig:
    """A running server reached over streamable HTTP or SSE.

    Args:
        name: The server's name; its tools are named `<name>-<tool>`.
        url: The endpoint (`http://host:port/mcp`, or `.../sse` for SSE).
        transport: `streamable-http` or `sse`.
        headers: Sent with every request (authorization, ...).
        timeout: Seconds one call may take.
        connect_timeout: Seconds to connect and finish the handshake.
        sse_read_timeout: Seconds an open event stream may stay silent.
    """

    name: str
    url: str
    transport: Literal["streamable-http", "sse"] = "streamable-http"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    sse_read_timeout: float = DEFAULT_SSE_READ_TIMEOUT

    @property
    def target(self) -> str:
        """The endpoint, for messages."""
        return self.url


MCPServerConfig = StdioServerConfig | HTTPServerConfig
"""One server of an `mcpServers` config."""


def parse_mcp_config(config: Mapping[str, Any]) -> list[MCPServerConfig]:
    """Check an `{"mcpServers": {...}}` config and type each server.

    Raises:
        ConfigurationError: The config is not of that shape, a server has unknown keys, neither
            a `command` nor a `url`, both, or a value of the wrong type.
    """
    if not isinstance(config, Mapping) or not isinstance(config.get("mcpServers"), Mapping):
        raise ConfigurationError(
            'an MCP config is {"mcpServers": {"<name>": {"command": ...} or {"url": ...}}}, '
            f"got a {type(config).__name__}"
        )
    extra = sorted(set(config) - {"mcpServers"})
    if extra:
        raise ConfigurationError(f"unknown key(s) beside mcpServers: {', '.join(extra)}")
    return [_server(name, entry) for name, entry in config["mcpServers"].items()]


def _server(name: object, entry: object) -> MCPServerConfig:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"MCP server name {name!r}: use letters, digits, '_' and '-' (it prefixes tool names)"
        )
    where = f"mcpServers.{name}"
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"{where}: expected an object, got {entry!r}")
    kind = entry.get("type")
    if kind is not None and kind != "stdio" and kind not in _HTTP_TYPES:
        raise ConfigurationError(
            f"{where}: type {kind!r} is not one of stdio, streamable-http (or http), sse"
        )
    if "command" in entry and "url" in entry:
        raise ConfigurationError(f"{where}: give a command (stdio) or a url (HTTP), not both")
    if "command" in entry or kind == "stdio":
        return _stdio(name, where, entry)
    if "url" in entry or kind is not None:
        return _http(name, where, entry)
    raise ConfigurationError(
        f"{where}: needs a 'command' (a stdio server) or a 'url' (an HTTP server)"
    )


def _check_keys(where: str, entry: Mapping[str, Any], known: frozenset[str], kind: str) -> None:
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))} for {kind} server "
            f"(known: {', '.join(sorted(known))})"
        )


def _stdio(name: str, where: str, entry: Mapping[str, Any]) -> StdioServerConfig:
    _check_keys(where, entry, _STDIO_KEYS, "a stdio")
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ConfigurationError(f"{where}: 'command' must be a non-empty string, got {command!r}")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigurationError(f"{where}: 'cwd' must be a string, got {cwd!r}")
    return StdioServerConfig(
        name=name,
        command=command,
        args=tuple(_strings(where, "args", entry.get("args", []))),
        env=_string_map(where, "env", entry.get("env", {})),
        cwd=cwd,
        timeout=_seconds(where, entry, "timeout", DEFAULT_TIMEOUT),
        connect_timeout=_seconds(where, entry, "connect_timeout", DEFAULT_CONNECT_TIMEOUT),
    )


def _http(name: str, where: str, entry: Mapping[str, Any]) -> HTTPServerConfig:
    _check_keys(where, entry, _HTTP_KEYS, "an HTTP")
    url = entry.get("url")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        raise ConfigurationError(f"{where}: 'url' must be an http(s) URL, got {url!r}")
    kind = entry.get("type")
    if kind is None:
        kind = "sse" if urlsplit(url).path.rstrip("/").endswith("/sse") else "streamable-http"
    return HTTPServerConfig(
        name=name,
        url=url,
        transport=_HTTP_TYPES[kind],
        headers=_string_map(where, "headers", entry.get("headers", {})),
        timeout=_seconds(where, entry, "timeout", DEFAULT_TIMEOUT),
        connect_timeout=_seconds(where, entry, "connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        sse_read_timeout=_seconds(where, entry, "sse_read_timeout", DEFAULT_SSE_READ_TIMEOUT),
    )


def _strings(where: str, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigurationError(f"{where}: {key!r} must be a list of strings, got {value!r}")
    return list(value)


def _string_map(where: str, key: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        # The values are not shown: headers and env often hold secrets.
        raise ConfigurationError(f"{where}: {key!r} must map strings to strings")
    return dict(value)


def _seconds(where: str, entry: Mapping[str, Any], key: str, default: float) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigurationError(f"{where}: {key!r} must be a positive number of seconds")
    return float(value)
