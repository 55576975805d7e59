"""MCP: the `mcpServers` config and the optional dependency (no server needed)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from parley.errors import ConfigurationError, MissingDependencyError, UserError
from parley.tools import Toolkit
from parley.tools.mcp import (
    HTTPServerConfig,
    MCPManager,
    MCPServerConnection,
    StdioServerConfig,
    parse_mcp_config,
)
from tests._requires import require_module


def servers(**entries: Any) -> dict[str, Any]:
    return {"mcpServers": entries}


def test_stdio_and_http_servers_are_typed_with_defaults() -> None:
    parsed = parse_mcp_config(
        servers(
            files={"command": "npx", "args": ["-y", "server-files"], "env": {"DEBUG": "1"}},
            search={"url": "http://127.0.0.1:8000/mcp", "headers": {"X-Key": "k"}},
            legacy={"url": "http://127.0.0.1:9000/sse"},
            forced={"url": "http://127.0.0.1:9000/events", "type": "sse", "timeout": 5},
            plain={"type": "http", "url": "https://example.invalid/mcp", "connect_timeout": 2},
        )
    )
    files, search, legacy, forced, plain = parsed
    assert files == StdioServerConfig(
        name="files", command="npx", args=("-y", "server-files"), env={"DEBUG": "1"}
    )
    assert (files.timeout, files.connect_timeout, files.target) == (
        60.0,
        30.0,
        "npx -y server-files",
    )
    assert isinstance(search, HTTPServerConfig)
    assert (search.transport, search.headers) == ("streamable-http", {"X-Key": "k"})
    # Qwen-Agent assumes SSE for every url without a type; parley only for a `/sse` path.
    assert isinstance(legacy, HTTPServerConfig)
    assert legacy.transport == "sse"
    assert isinstance(forced, HTTPServerConfig)
    assert (forced.transport, forced.timeout) == ("sse", 5.0)
    assert isinstance(plain, HTTPServerConfig)
    assert (plain.transport, plain.connect_timeout) == ("streamable-http", 2.0)


def test_qwen_agent_style_stdio_config_parses() -> None:
    # As the Qwen-Agent seed and its README write it.
    config = {
        "mcpServers": {
            "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
            "sqlite": {
                "command": "uvx",
                "args": ["mcp-server-sqlite", "--db-path", "test.db"],
                "env": {"PYTHONUNBUFFERED": "1"},
            },
        }
    }
    assert [s.name for s in parse_mcp_config(config)] == ["memory", "sqlite"]


def test_secrets_stay_out_of_reprs() -> None:
    (server,) = parse_mcp_config(
        servers(api={"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer s3"}})
    )
    assert "s3" not in repr(server)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"servers": {}}, "an MCP config is"),
        ([], "an MCP config is"),
        ({"mcpServers": {}, "extra": 1}, "unknown key(s) beside mcpServers: extra"),
        (servers(a={"command": "x", "arg": ["typo"]}), "mcpServers.a: unknown key(s) 'arg'"),
        (servers(a={"url": "http://h/mcp", "env": {}}), "unknown key(s) 'env' for an HTTP server"),
        (servers(a={}), "needs a 'command' (a stdio server) or a 'url'"),
        (servers(a={"command": "x", "url": "http://h/mcp"}), "not both"),
        (servers(a={"type": "websocket", "url": "ws://h"}), "type 'websocket' is not one of"),
        (servers(a={"type": "stdio"}), "'command' must be a non-empty string"),
        (servers(a={"command": ""}), "'command' must be a non-empty string"),
        (servers(a={"command": "x", "args": "-v"}), "'args' must be a list of strings"),
        (servers(a={"command": "x", "args": [1]}), "'args' must be a list of strings"),
        (servers(a={"command": "x", "env": {"N": 1}}), "'env' must map strings to strings"),
        (servers(a={"command": "x", "cwd": 3}), "'cwd' must be a string"),
        (servers(a={"type": "sse"}), "'url' must be an http(s) URL"),
        (servers(a={"url": "ftp://h/mcp"}), "'url' must be an http(s) URL"),
        (servers(a={"command": "x", "timeout": 0}), "'timeout' must be a positive number"),
        (servers(a={"command": "x", "timeout": True}), "'timeout' must be a positive number"),
        (servers(a={"url": "http://h", "sse_read_timeout": "5"}), "'sse_read_timeout' must be"),
        (servers(**{"my server": {"command": "x"}}), "use letters, digits, '_' and '-'"),
        (servers(a=["x"]), "mcpServers.a: expected an object"),
    ],
)
def test_bad_configs_say_what_is_wrong(config: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_mcp_config(config)
    assert message in str(caught.value)


def test_header_values_are_not_echoed_in_errors() -> None:
    config = servers(a={"url": "http://h/mcp", "headers": {"Authorization": ["Bearer s3"]}})
    with pytest.raises(ConfigurationError) as caught:
        parse_mcp_config(config)
    assert "s3" not in str(caught.value)


async def test_bad_config_fails_before_anything_starts() -> None:
    with pytest.raises(ConfigurationError, match="unknown key"):
        MCPManager(servers(a={"command": "x", "argz": []}))
    toolkit = Toolkit()
    with pytest.raises(ConfigurationError, match="needs a 'command'"):
        await toolkit.add_mcp_servers(servers(a={}))
    assert len(toolkit) == 0


def test_an_mcp_config_given_as_a_tool_points_to_add_mcp_servers() -> None:
    with pytest.raises(UserError, match="add_mcp_servers"):
        Toolkit([servers(a={"command": "x"})])


async def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now raises ImportError
    connection = MCPServerConnection(StdioServerConfig(name="a", command="x"))
    with pytest.raises(MissingDependencyError) as caught:
        await connection.connect()
    assert "pip install 'parley[mcp]'" in str(caught.value)


async def test_an_sdk_of_another_major_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    require_module("mcp", "mcp")
    monkeypatch.setattr("importlib.metadata.version", lambda name: "1.27.0")
    connection = MCPServerConnection(StdioServerConfig(name="a", command="x"))
    with pytest.raises(UserError, match=r"parley needs mcp 2\.x, found mcp 1\.27\.0"):
        await connection.connect()
