"""A stand-in for `mcp-server-sqlite` (which `uvx` would download): the same tools, over stdio.

Usage: `python sqlite_mcp_server.py --db-path test.db`. Written with the official `mcp`
SDK's server API over real SQLite; its tools have the reference server's names and
arguments: `read_query`, `write_query`, `create_table`, `list_tables`, `describe_table`,
`append_insight`.
"""

from __future__ import annotations

import argparse
import sqlite3
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

parser = argparse.ArgumentParser()
parser.add_argument("--db-path", required=True)
DB_PATH = parser.parse_args().db_path
INSIGHTS: list[str] = []

server = MCPServer("sqlite", log_level="WARNING")


def _run(query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    with sqlite3.connect(DB_PATH) as connection:
        connection.row_factory = sqlite3.Row
        cursor = connection.execute(query, params)
        rows = [dict(row) for row in cursor.fetchall()]
        connection.commit()
        return rows if rows or cursor.description else [{"affected_rows": cursor.rowcount}]


@server.tool()
def read_query(query: str) -> str:
    """Execute a SELECT query on the SQLite database."""
    if not query.strip().upper().startswith("SELECT"):
        raise ToolError("Only SELECT queries are allowed for read_query")
    return str(_run(query))


@server.tool()
def write_query(query: str) -> str:
    """Execute an INSERT, UPDATE, or DELETE query on the SQLite database."""
    if query.strip().upper().startswith("SELECT"):
        raise ToolError("SELECT queries are not allowed for write_query")
    return str(_run(query))


@server.tool()
def create_table(query: str) -> str:
    """Create a new table in the SQLite database."""
    if not query.strip().upper().startswith("CREATE TABLE"):
        raise ToolError("Only CREATE TABLE statements are allowed")
    _run(query)
    return "Table created successfully"


@server.tool()
def list_tables() -> str:
    """List all tables in the SQLite database."""
    return str(_run("SELECT name FROM sqlite_master WHERE type='table'"))


@server.tool()
def describe_table(table_name: str) -> str:
    """Get the schema information for a specific table."""
    return str(_run(f"PRAGMA table_info({table_name})"))


@server.tool()
def append_insight(insight: str) -> str:
    """Add a business insight to the memo."""
    INSIGHTS.append(insight)
    return "Insight added to memo"


if __name__ == "__main__":
    server.run("stdio")
