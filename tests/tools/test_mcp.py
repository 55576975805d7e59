"""MCP servers as tools, against a real server written with the SDK (tests/tools/mcp_servers).

The server runs in a subprocess: over stdio (parley starts it), and over streamable HTTP and
SSE (the test starts it on a free local port). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from parley.errors import ConfigurationError, ToolExecutionError
from parley.messages import AudioBlock, FileBlock, ImageBlock, TextBlock, ToolCallBlock
from parley.tools import Toolkit
from parley.tools.mcp import (
    MCPManager,
    MCPServerConnection,
    MCPServerError,
    MCPTimeoutError,
    MCPTool,
    MCPToolError,
    close_mcp_servers,
    parse_mcp_config,
    to_tool_output,
)
from tests._requires import require_module

require_module("mcp.server.mcpserver", "mcp")

from mcp_types import (  # noqa: E402 - the SDK's, once it is known to be installed
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

pytestmark = pytest.mark.timeout(90)

SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
)
TOOLS = ["add", "echo", "red_pixel", "readme", "fail", "slow", "meet", "pid"]


def stdio(script: Path = SERVER, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(script), "stdio"], **extra}


def config(**entries: Any) -> dict[str, Any]:
    return {"mcpServers": entries}


def connection(**entry: Any) -> MCPServerConnection:
    (server,) = parse_mcp_config(config(demo=entry or stdio()))
    return MCPServerConnection(server)


def call(name: str, **arguments: Any) -> ToolCallBlock:
    return ToolCallBlock(id=f"call-{name}", name=name, input=arguments)


async def server_pid(toolkit: Toolkit, name: str = "demo-pid") -> int:
    result = await toolkit.run(call(name))
    assert not result.is_error, result.output
    assert isinstance(result.output, str)
    return int(result.output)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
async def toolkit() -> AsyncIterator[Toolkit]:
    kit = Toolkit()
    await kit.add_mcp_servers(config(demo=stdio(timeout=5)))
    yield kit
    await close_mcp_servers(kit)


# -- stdio ------------------------------------------------------------------------------------


async def test_tools_are_listed_and_named_server_dash_tool(toolkit: Toolkit) -> None:
    assert toolkit.names == [f"demo-{name}" for name in TOOLS]
    add = toolkit.get("demo-add")
    assert isinstance(add, MCPTool)
    assert (add.tool_name, add.connection.name) == ("add", "demo")
    (spec,) = [s for s in toolkit.specs() if s.name == "demo-add"]
    assert spec.description == "Add two integers."
    assert spec.parameters["type"] == "object"
    assert spec.parameters["required"] == ["a", "b"]
    assert spec.parameters["properties"]["a"]["type"] == "integer"


async def test_the_servers_idempotent_and_read_only_hints_make_a_tool_idempotent(
    toolkit: Toolkit,
) -> None:
    # The demo server annotates `add` idempotentHint and `echo` readOnlyHint; no other.
    flags = {tool.name: tool.idempotent for tool in toolkit}
    assert flags == {f"demo-{name}": name in ("add", "echo") for name in TOOLS}


async def test_a_continued_run_reruns_only_the_servers_idempotent_calls(toolkit: Toolkit) -> None:
    from parley.agents import INTERRUPTED, Agent, InMemoryMemory  # noqa: PLC0415
    from parley.messages import Msg  # noqa: PLC0415
    from parley.models.testing import ScriptedModel  # noqa: PLC0415

    # A turn whose process died before its calls answered: `add` may run again, `slow` not.
    open_turn = Msg(
        role="assistant", content=[call("demo-add", a=2, b=40), call("demo-slow", seconds=0)]
    )
    memory = InMemoryMemory([Msg.user("Add, then wait."), open_turn])
    agent = Agent("mcp", ScriptedModel(["42, and the wait was interrupted."]), tools=toolkit)
    await agent.continue_reply(memory=memory)
    outputs = [(r.name, r.output, r.is_error) for r in (await memory.get())[2].tool_results]
    assert outputs == [("demo-add", "42", False), ("demo-slow", INTERRUPTED, True)]


async def test_text_results_come_back_as_text(toolkit: Toolkit) -> None:
    added, echoed, resource = await toolkit.run_all(
        [call("demo-add", a=2, b=40), call("demo-echo", text="héllo"), call("demo-readme")]
    )
    assert (added.is_error, added.output) == (False, "42")
    assert echoed.output == "héllo"
    assert resource.output == "read me"


async def test_image_results_come_back_as_image_blocks(toolkit: Toolkit) -> None:
    result = await toolkit.run(call("demo-red_pixel"))
    assert not result.is_error
    assert isinstance(result.output, list)
    (image,) = result.output
    assert isinstance(image, ImageBlock)
    assert image.source.media_type == "image/png"
    assert image.source.type == "base64"
    assert base64.b64decode(image.source.data) == PNG


async def test_a_tool_error_becomes_an_error_result_the_model_reads(toolkit: Toolkit) -> None:
    result = await toolkit.run(call("demo-fail", reason="the disk is full"))
    assert result.is_error
    assert isinstance(result.output, str)
    assert "MCPToolError" in result.output
    assert "the disk is full" in result.output
    tool = toolkit.get("demo-fail")
    assert tool is not None
    with pytest.raises(MCPToolError) as caught:
        await tool.acall({"reason": "again"})
    assert isinstance(caught.value, ToolExecutionError)
    assert (caught.value.server, caught.value.tool_name) == ("demo", "demo-fail")


async def test_arguments_are_checked_against_the_servers_schema(toolkit: Toolkit) -> None:
    result = await toolkit.run(call("demo-add", a=1, b="two"))
    assert result.is_error
    assert "b: 'two' is not of type 'integer'" in str(result.output)


async def test_a_call_past_its_timeout_fails_and_the_session_goes_on() -> None:
    kit = Toolkit()
    await kit.add_mcp_servers(config(demo=stdio(timeout=0.5)))
    try:
        pid = await server_pid(kit)
        # The tool would take an hour: an answer at all means the call did not wait for it
        # (the bound only keeps a broken timeout from hanging the test).
        async with asyncio.timeout(60):
            result = await kit.run(call("demo-slow", seconds=3600))
        assert result.is_error
        assert "MCPTimeoutError" in str(result.output)
        assert "'slow' did not finish within 0.5 seconds" in str(result.output)
        assert (await kit.run(call("demo-add", a=1, b=1))).output == "2"
        assert await server_pid(kit) == pid  # the same server, not a restarted one
    finally:
        await close_mcp_servers(kit)


async def test_a_timeout_raises_mcp_timeout_error_when_called_directly() -> None:
    async with connection(**stdio(timeout=0.3)) as conn:
        with pytest.raises(MCPTimeoutError) as caught:
            await conn.call_tool("slow", {"seconds": 30})
        assert caught.value.server == "demo"


async def test_a_command_that_does_not_exist_names_the_server() -> None:
    toolkit = Toolkit()
    with pytest.raises(MCPServerError) as caught:
        await toolkit.add_mcp_servers(config(ghost={"command": "parley-no-such-mcp-server"}))
    message = str(caught.value)
    assert message.startswith("MCP server 'ghost' (parley-no-such-mcp-server) could not be started")
    assert "the command 'parley-no-such-mcp-server' was not found" in message
    assert caught.value.server == "ghost"
    assert len(toolkit) == 0


async def test_a_missing_working_directory_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere")
    with pytest.raises(MCPServerError, match=r"the working directory .* does not exist"):
        await connection(**stdio(cwd=missing)).connect()


async def test_a_server_that_exits_at_start_gives_its_code_and_stderr() -> None:
    entry = {"command": sys.executable, "args": [str(SERVER), "fail-at-start"]}
    with pytest.raises(MCPServerError) as caught:
        await connection(**entry).connect()
    message = str(caught.value)
    assert "MCP server 'demo'" in message
    assert "the server process exited with code 3" in message
    assert "demo server: cannot open the database" in message


async def test_a_server_that_never_answers_times_out_the_handshake() -> None:
    # A server that never answers and never exits: only the handshake timeout ends the wait
    # (the bound only keeps a broken one from hanging the test).
    entry = {"command": sys.executable, "args": ["-c", "import time; time.sleep(3600)"]}
    with pytest.raises(MCPServerError, match=r"no MCP handshake within 1 seconds"):
        async with asyncio.timeout(60):
            await connection(**entry, connect_timeout=1).connect()


async def test_a_server_killed_mid_session_is_restarted_on_the_next_call(
    toolkit: Toolkit, caplog: pytest.LogCaptureFixture
) -> None:
    pid = await server_pid(toolkit)
    os.kill(pid, signal.SIGKILL)
    with caplog.at_level(logging.WARNING, logger="parley.tools.mcp"):
        result = await toolkit.run(call("demo-add", a=3, b=4))
    assert (result.is_error, result.output) == (False, "7")
    assert "killed by signal 9" in caplog.text
    assert "reconnecting" in caplog.text
    assert await server_pid(toolkit) != pid


async def test_concurrent_calls_after_a_crash_share_one_reconnection(toolkit: Toolkit) -> None:
    pid = await server_pid(toolkit)
    os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(0.2)
    results = await toolkit.run_all([call("demo-pid") for _ in range(4)])
    assert not any(r.is_error for r in results), [r.output for r in results]
    pids = {r.output for r in results}
    assert len(pids) == 1
    assert pids != {str(pid)}


async def test_a_server_that_cannot_come_back_gives_a_clear_error_result(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    shutil.copy(SERVER, script)
    kit = Toolkit()
    await kit.add_mcp_servers(config(flaky=stdio(script)))
    try:
        pid = await server_pid(kit, "flaky-pid")
        script.write_text(
            "import sys\nprint('config file is gone', file=sys.stderr)\nsys.exit(4)\n"
        )
        os.kill(pid, signal.SIGKILL)
        result = await kit.run(call("flaky-add", a=1, b=2))
        assert result.is_error
        message = str(result.output)
        assert "MCPServerError: MCP server 'flaky'" in message
        assert "could not be started: the server process exited with code 4" in message
        assert "config file is gone" in message
    finally:
        await close_mcp_servers(kit)


async def test_parallel_calls_run_concurrently(toolkit: Toolkit) -> None:
    # Each call waits in the server until all six are there at once.
    results = await toolkit.run_all([call("demo-meet", group="six", size=6) for _ in range(6)])
    assert [r.output for r in results] == ["met"] * 6


async def test_calls_one_after_the_other_do_not_meet(toolkit: Toolkit) -> None:
    """The barrier above proves overlap: calls in turn are alone."""
    first = await toolkit.run(call("demo-meet", group="two", size=2, wait=0.5))
    assert first.output == "alone: 1 of 2 arrived"


async def test_close_stops_the_server_and_a_later_call_reopens_it() -> None:
    conn = connection()
    await conn.connect()
    assert conn.connected
    tools = {t.tool_name: t for t in await conn.list_tools()}
    first = int(str(await tools["pid"].acall({})))
    await conn.close()
    assert not conn.connected
    deadline = time.monotonic() + 5
    while alive(first) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not alive(first)
    assert await tools["add"].acall({"a": 1, "b": 1}) == "2"
    assert conn.connected
    await conn.close()
    await conn.close()  # closing twice is fine


async def test_a_call_cut_by_close_is_not_sent_again() -> None:
    conn = connection()
    await conn.connect()
    pending = asyncio.create_task(conn.call_tool("slow", {"seconds": 30}))
    await asyncio.sleep(0.3)
    await conn.close()
    with pytest.raises(MCPServerError, match=r"was closed while calling 'slow'"):
        await asyncio.wait_for(pending, 10)
    assert not conn.connected


async def test_the_manager_opens_all_servers_and_closes_them() -> None:
    async with MCPManager(config(one=stdio(), two=stdio())) as manager:
        names = [t.name for t in manager.tools]
        assert names[:2] == ["one-add", "one-echo"]
        assert "two-pid" in names
        assert all(c.connected for c in manager.connections.values())
        toolkit = Toolkit(manager.tools)
        assert (await toolkit.run(call("two-add", a=1, b=2))).output == "3"
    assert not any(c.connected for c in manager.connections.values())


async def test_one_failing_server_closes_the_others_and_names_every_failure() -> None:
    manager = MCPManager(
        config(good=stdio(), bad={"command": "parley-no-such-a"}, worse={"command": "parley-no-b"})
    )
    with pytest.raises(MCPServerError) as caught:
        await manager.connect()
    message = str(caught.value)
    assert message.startswith("2 MCP servers failed:")
    assert "MCP server 'bad'" in message
    assert "MCP server 'worse'" in message
    assert caught.value.server == "bad, worse"
    assert not manager.connections["good"].connected


async def test_tool_names_already_in_the_toolkit_are_refused() -> None:
    toolkit = Toolkit()
    await toolkit.add_mcp_servers(config(demo=stdio()))
    try:
        with pytest.raises(ConfigurationError, match="already has tools named demo-add"):
            await toolkit.add_mcp_servers(config(demo=stdio()))
        assert len(toolkit) == len(TOOLS)
    finally:
        await close_mcp_servers(toolkit)


def test_sync_call_works_from_sync_code() -> None:
    # Qwen-Agent style: `tool.call(params)` with no event loop running. The tools were listed
    # on a loop that has ended since; the call opens a session on its own loop.
    manager = MCPManager(config(demo=stdio()))
    tools = {t.tool_name: t for t in asyncio.run(manager.connect())}
    assert tools["add"].call('{"a": 20, "b": 22}') == "42"
    assert tools["echo"].call({"text": "again"}) == "again"


async def test_sync_call_inside_a_running_loop_points_to_acall(toolkit: Toolkit) -> None:
    tool = toolkit.get("demo-add")
    assert tool is not None
    with pytest.raises(Exception, match=r"await tool\.acall"):
        tool.call({"a": 1, "b": 2})


# -- HTTP -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HTTPServer:
    """The demo server over HTTP in a subprocess, on a fixed port it can be restarted on."""

    def __init__(self, mode: str, log: Path) -> None:
        self.mode = mode
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        path = "sse" if self.mode == "sse" else "mcp"
        return f"http://127.0.0.1:{self.port}/{path}"

    def start(self, wait: float = 20.0) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER), self.mode, str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + wait
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the server was not up in {wait} s") from None
                time.sleep(0.05)
            else:
                return

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _served(transport: str, tmp_path: Path) -> Iterator[HTTPServer]:
    server = HTTPServer(transport, tmp_path / f"{transport}.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HTTPServer]:
    yield from _served("http", tmp_path)


@pytest.fixture
def sse_server(tmp_path: Path) -> Iterator[HTTPServer]:
    yield from _served("sse", tmp_path)


async def test_streamable_http_lists_and_calls(http_server: HTTPServer) -> None:
    toolkit = Toolkit()
    entry = {"url": http_server.url, "headers": {"X-Parley-Test": "1"}, "timeout": 5}
    await toolkit.add_mcp_servers(config(web=entry))
    try:
        assert toolkit.names == [f"web-{name}" for name in TOOLS]
        added, image, failed = await toolkit.run_all(
            [call("web-add", a=5, b=6), call("web-red_pixel"), call("web-fail", reason="nope")]
        )
        assert added.output == "11"
        assert isinstance(image.output, list)
        assert isinstance(image.output[0], ImageBlock)
        assert failed.is_error
        assert "nope" in str(failed.output)
        slow = await toolkit.run(call("web-slow", seconds=0.2))
        assert slow.output == "done"
    finally:
        await close_mcp_servers(toolkit)


async def test_http_timeout(http_server: HTTPServer) -> None:
    async with connection(url=http_server.url, timeout=0.3) as conn:
        with pytest.raises(MCPTimeoutError, match=r"did not finish within 0\.3 seconds"):
            await conn.call_tool("slow", {"seconds": 30})
        assert (await conn.call_tool("add", {"a": 1, "b": 2})).content[0] == TextContent(text="3")


async def test_http_connection_refused_names_the_server_and_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(MCPServerError) as caught:
        await connection(url=url, connect_timeout=5).connect()
    message = str(caught.value)
    assert message.startswith(f"MCP server 'demo' ({url}) could not be reached")
    assert f"cannot connect to {url}" in message


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_restarted_http_server_is_reconnected_to(
    http_server: HTTPServer, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under "legacy" (the initialize handshake, as servers before 2026-07-28 speak it) the
    # server keeps a session, which a restart forgets: the SDK reports "Session terminated".
    monkeypatch.setattr("parley.tools.mcp._connection._CONNECT_MODE", mode)
    toolkit = Toolkit()
    await toolkit.add_mcp_servers(config(web={"url": http_server.url, "timeout": 5}))
    try:
        first = await server_pid(toolkit, "web-pid")
        await asyncio.to_thread(http_server.stop)
        await asyncio.to_thread(http_server.start)
        result = await toolkit.run(call("web-add", a=1, b=2))
        assert (result.is_error, result.output) == (False, "3")
        assert await server_pid(toolkit, "web-pid") != first
    finally:
        await close_mcp_servers(toolkit)


async def test_an_http_server_gone_for_good_gives_a_clear_error_result(
    http_server: HTTPServer,
) -> None:
    toolkit = Toolkit()
    await toolkit.add_mcp_servers(config(web={"url": http_server.url, "connect_timeout": 5}))
    try:
        await asyncio.to_thread(http_server.stop)
        result = await toolkit.run(call("web-add", a=1, b=2))
        assert result.is_error
        message = str(result.output)
        assert "MCPServerError: MCP server 'web'" in message
        assert f"cannot connect to {http_server.url}" in message
    finally:
        await close_mcp_servers(toolkit)


async def test_sse_transport(sse_server: HTTPServer) -> None:
    async with MCPManager(config(old={"url": sse_server.url, "timeout": 5})) as manager:
        toolkit = Toolkit(manager.tools)
        assert "old-add" in toolkit
        assert (await toolkit.run(call("old-add", a=2, b=3))).output == "5"


# -- results ----------------------------------------------------------------------------------


def result(*content: Any, **extra: Any) -> CallToolResult:
    return CallToolResult(content=list(content), **extra)


def test_text_parts_are_joined() -> None:
    assert to_tool_output(result(TextContent(text="a"), TextContent(text="b"))) == "a\nb"
    assert to_tool_output(result()) == ""


def test_structured_content_alone_becomes_json() -> None:
    assert to_tool_output(result(structured_content={"n": 1})) == '{"n": 1}'


def test_media_and_resources_become_blocks() -> None:
    png = base64.b64encode(PNG).decode()
    output = to_tool_output(
        result(
            TextContent(text="here"),
            ImageContent(data=png, mime_type="image/png"),
            AudioContent(data=png, mime_type="audio/wav"),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///tmp/report.pdf", blob=png, mime_type="application/pdf"
                )
            ),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///tmp/pic", blob=png, mime_type="image/gif"
                )
            ),
            EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="notes")),
            ResourceLink(name="log", uri="file:///var/log/x", mime_type="text/plain"),
        )
    )
    assert isinstance(output, list)
    text, image, audio, pdf, gif, notes, link = output
    assert text == TextBlock(text="here")
    assert isinstance(image, ImageBlock)
    assert isinstance(audio, AudioBlock)
    assert audio.source.media_type == "audio/wav"
    assert isinstance(pdf, FileBlock)
    assert (pdf.filename, pdf.source.media_type) == ("report.pdf", "application/pdf")
    assert isinstance(gif, ImageBlock)
    assert notes == TextBlock(text="notes")
    assert link == TextBlock(text="[resource log at file:///var/log/x, text/plain]")


def test_unusable_media_becomes_a_note_not_a_crash() -> None:
    output = to_tool_output(
        result(TextContent(text="x"), ImageContent(data="not base64!", mime_type="image/png"))
    )
    assert isinstance(output, str)
    assert "the server sent 'image/png' content that is not usable" in output
