"""What doc_parser may touch: files under its roots only, and downloads of public addresses only.

Files live in a real workspace under tmp_path; downloads come from real servers on 127.0.0.1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from parley.messages import ToolCallBlock
from parley.tools import RunContext, Toolkit, Workspace
from parley.tools.builtin import DocParser, _net, _paths
from tests.tools._web import Body, Endless, Redirect, Site, serve

pytestmark = pytest.mark.timeout(60)

ANN = RunContext.detached(thread_id="t1", user_id="ann")
BOB = RunContext.detached(thread_id="t2", user_id="bob")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "ws")
    (workspace.for_context(ANN) / "notes.md").write_text("# Notes\n\nAnn's notes.")
    (workspace.root / ".env").write_text("API_KEY=SECRET-123\n")  # two folders above Ann's
    return workspace


@pytest.fixture
def site() -> Iterator[Site]:
    with serve() as running:
        running.routes["/doc.txt"] = Body(b"Fetched text.")
        yield running


async def read(parser: DocParser, url: str, ctx: RunContext[None] = ANN) -> tuple[bool, str]:
    """What the model sees: (is it an error, the text)."""
    call = ToolCallBlock(id="1", name="doc_parser", input={"url": url})
    result = await Toolkit([parser]).run(call, ctx=ctx)
    return result.is_error, str(result.output)


# -- files -------------------------------------------------------------------------------------


async def test_relative_paths_start_in_the_conversations_folder(workspace: Workspace) -> None:
    parser = DocParser({"work_dir": str(workspace.root)})
    assert await read(parser, "notes.md") == (
        False,
        "Document: notes.md (Markdown)\n\n# Notes\n\nAnn's notes.",
    )
    failed, text = await read(parser, "notes.md", BOB)  # Bob's thread has no such file
    assert failed
    assert "no such file: notes.md" in text
    # A Qwen-Agent style caller names the conversation with `session`.
    (workspace.session_dir(None, "s9") / "q.txt").write_text("from s9")
    assert "from s9" in str(parser.call({"url": "q.txt"}, session="s9"))


@pytest.mark.parametrize(
    "url",
    [
        "../../.env",
        "{root}/.env",
        "file://{root}/.env",
        "notes/../../../.env",
        "/etc/hostname",
        "/proc/self/environ",
        "file:///etc/passwd",
        "~/.bashrc",
    ],
)
async def test_paths_outside_the_folder_are_refused_naming_it(
    workspace: Workspace, url: str
) -> None:
    parser = DocParser({"work_dir": str(workspace.root)})
    failed, text = await read(parser, url.format(root=workspace.root))
    assert failed
    assert "PathNotAllowedError" in text
    # Named as the model knows it, not by where the server keeps it.
    assert "may only use this conversation's files (a relative path starts there)" in text
    assert str(workspace.for_context(ANN)) not in text
    assert "SECRET" not in text


async def test_a_symbolic_link_out_of_the_folder_is_refused(
    workspace: Workspace, tmp_path: Path
) -> None:
    folder = workspace.for_context(ANN)
    (tmp_path / "secret.txt").write_text("SECRET")
    (folder / "innocent.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "shortcut.md").symlink_to(folder / "notes.md")  # a link inside is fine
    parser = DocParser({"work_dir": str(workspace.root)})
    failed, text = await read(parser, "innocent.txt")
    assert failed
    assert "outside the allowed folders" in text
    assert "SECRET" not in text
    assert await read(parser, "shortcut.md") == (
        False,
        "Document: notes.md (Markdown)\n\n# Notes\n\nAnn's notes.",
    )


@pytest.mark.parametrize("name", ["sub/secret.txt", "leak.txt"])
async def test_a_link_swapped_in_after_the_check_is_not_followed(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    folder = workspace.for_context(ANN)
    (folder / "sub").symlink_to(outside, target_is_directory=True)  # a folder turned link
    (folder / "leak.txt").symlink_to(outside / "secret.txt")  # a file turned link
    # The check sees the paths as they were when checked: plain folders and files.
    monkeypatch.setattr(_paths, "real_path", lambda path: Path(os.path.abspath(path)))
    failed, text = await read(DocParser({"work_dir": str(workspace.root)}), name)
    assert failed
    assert "changed while it was opened" in text
    assert "SECRET" not in text


async def test_devices_and_pipes_are_not_read(workspace: Workspace) -> None:
    folder = workspace.for_context(ANN)
    os.mkfifo(folder / "pipe.txt")  # opening it for reading would wait for a writer
    parser = DocParser({"work_dir": str(workspace.root)})
    failed, text = await read(parser, "pipe.txt")
    assert failed
    assert "pipe.txt is a device, pipe or socket, not a regular file" in text
    failed, text = await read(parser, "/dev/zero")
    assert failed
    assert "PathNotAllowedError" in text


async def test_configured_roots_replace_the_conversations_folder(tmp_path: Path) -> None:
    first, second = tmp_path / "docs", tmp_path / "shared"
    first.mkdir()
    second.mkdir()
    (first / "a.txt").write_text("in docs")
    (second / "b.txt").write_text("in shared")
    (tmp_path / "c.txt").write_text("SECRET")
    parser = DocParser({"roots": [str(first), str(second)]})
    assert "in docs" in (await read(parser, "a.txt"))[1]
    assert "in shared" in (await read(parser, str(second / "b.txt")))[1]
    failed, text = await read(parser, "../c.txt")
    assert failed
    assert "may only use files in its folders docs or shared" in text
    assert "(a relative path starts in the first)" in text
    assert str(tmp_path) not in text


# -- downloads ---------------------------------------------------------------------------------


async def test_downloads_from_loopback_are_refused_unless_allowed(site: Site) -> None:
    failed, text = await read(DocParser({"allow_http": True}), f"{site.base}/doc.txt")
    assert failed
    assert "127.0.0.1 is a loopback address" in text
    assert site.seen == []
    allowed = DocParser({"allow_http": True, "allowed_hosts": ["127.0.0.1"]})
    assert await read(allowed, f"{site.base}/doc.txt") == (
        False,
        "Document: doc.txt (text)\n\nFetched text.",
    )


async def test_a_redirect_from_an_allowed_host_to_a_disallowed_one_is_refused(site: Site) -> None:
    site.routes["/go"] = Redirect(f"http://127.0.0.1:{site.port}/secret")
    site.routes["/secret"] = Body(b"SECRET")
    parser = DocParser({"allow_http": True, "allowed_hosts": ["localhost"]})
    failed, text = await read(parser, f"http://localhost:{site.port}/go")
    assert failed
    assert "127.0.0.1 is a loopback address" in text
    assert "redirected there from" in text
    assert site.paths == ["/go"]


async def test_a_public_name_resolving_to_a_private_address_is_refused(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr(_net, "resolve", rebinding)
    parser = DocParser({"allow_http": True})
    failed, text = await read(parser, f"http://docs.example.com:{site.port}/doc.txt")
    assert failed
    assert "docs.example.com resolves to 127.0.0.1, which is a loopback address" in text
    assert asked == ["docs.example.com"]
    assert site.seen == []


async def test_a_huge_download_is_cut_at_the_cap(site: Site) -> None:
    endless = Endless()
    site.routes["/huge.txt"] = endless
    parser = DocParser({"allow_http": True, "allow_private": True, "max_download_bytes": 100_000})
    failed, text = await read(parser, f"{site.base}/huge.txt")
    assert failed
    assert "larger than 100000 bytes" in text
    assert endless.hung_up.wait(timeout=10)  # it stopped reading: the server's writes failed


@pytest.mark.timeout(30)
async def test_a_download_has_one_deadline_however_slowly_bytes_come(site: Site) -> None:
    # A byte every 50 ms meets any per-read timeout; only a deadline for the whole ends it.
    trickle = Endless(delay=0.05, chunk=b"x", limit=200)  # 10 seconds of it
    site.routes["/slow.txt"] = trickle
    parser = DocParser({"allow_http": True, "allow_private": True, "download_timeout": 0.5})
    failed, text = await read(parser, f"{site.base}/slow.txt")
    assert failed
    assert "did not finish within 0.5 seconds" in text
    assert trickle.hung_up.wait(timeout=10)
