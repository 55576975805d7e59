"""What parley itself does in a directory the sandboxed code writes: never through a link.

Parley runs as root in containers; its workers run as `nobody`. The code in the sandbox may
replace anything in its work directory with a symbolic link to a place of the host, then wait
for parley to touch it: here it plants links to a host folder (root's, 0700, with a key file)
and to a host file (a fake `.env`, 0600) at every path parley touches (the scratch folder
`.parley` and its folders, a file copied in, output files, the `storage` folder, the
directory removed with its thread), in every sandbox mode, and checks that the host's folder
and file keep their owner, mode and contents, and that each call gets a clear result.
"""

from __future__ import annotations

import ast
import hashlib
import os
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from parley.tools import RunContext
from parley.tools.builtin import CodeInterpreter
from parley.tools.builtin.sandbox import SandboxMode
from parley.tools.builtin.storage import Storage
from tests.tools._sandbox_modes import make

pytestmark = pytest.mark.timeout(120)

CTX = RunContext.detached(thread_id="t", user_id="alice")


@dataclass
class Host:
    """A folder and a file of the host, outside the workspace."""

    folder: Path
    env: Path

    def target(self, kind: str) -> str:
        return str(self.folder if kind == "folder" else self.env)

    def fingerprint(self) -> dict[str, tuple[int, int, int, str]]:
        """Owner, group, mode and contents of the folder, what it holds, and the file."""
        found = {}
        for path in [self.folder, *sorted(self.folder.iterdir()), self.env]:
            info = path.lstat()
            content = "" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path)] = (info.st_uid, info.st_gid, info.st_mode, content)
        return found


@pytest.fixture
def host(tmp_path: Path) -> Host:
    folder = tmp_path / "host-keys"
    folder.mkdir(mode=0o700)
    (folder / "key.pem").write_text("-----BEGIN PRIVATE KEY-----")
    (folder / "key.pem").chmod(0o600)
    env = tmp_path / ".env"
    env.write_text("OPENAI_API_KEY=sk-host-secret\n")
    env.chmod(0o600)
    return Host(folder, env)


@pytest.fixture
def ci(mode: SandboxMode, tmp_path: Path) -> Iterator[CodeInterpreter]:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("payload")
    with make(mode, tmp_path / "ws", file_roots=[str(shared)]) as interpreter:
        yield interpreter


def plant(path: str, target: str) -> str:
    """Code that replaces `path` (whatever is there) with a link to `target`."""
    return textwrap.dedent(
        f"""
        import os, shutil
        path = {path!r}
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
        os.symlink({target!r}, path)
        """
    )


def assert_no_secret(*texts: str | None) -> None:
    for text in texts:
        assert "sk-host-secret" not in (text or "")
        assert "PRIVATE KEY" not in (text or "")


@pytest.mark.parametrize("kind", ["folder", "file"])
@pytest.mark.parametrize("path", [".parley", ".parley/tmp", ".parley/matplotlib", ".parley/cache"])
def test_a_link_planted_in_the_scratch_folder_is_never_followed(
    ci: CodeInterpreter, host: Host, path: str, kind: str
) -> None:
    ci.run_code("x = 1", ctx=CTX)
    before = host.fingerprint()
    # The worker exits: the next call starts a new one, which is when parley prepares the
    # directory (it gave `.parley` away, link followed, before).
    exited = ci.run_code(plant(path, host.target(kind)) + "os._exit(0)", ctx=CTX)
    assert exited.error is not None
    assert "exited with status 0" in exited.error
    again = ci.run_code("import os\nprint('back', os.path.isdir('.parley/tmp'))", ctx=CTX)
    assert again.error is None, again.error
    assert again.stdout == "back True\n"
    assert again.notice is not None
    assert "restarted" in again.notice
    assert host.fingerprint() == before
    assert not os.path.islink(ci.work_dir("t", "alice") / path)


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_a_link_planted_where_a_file_is_copied_in_is_replaced_not_followed(
    ci: CodeInterpreter, host: Host, tmp_path: Path, kind: str
) -> None:
    planted = ci.run_code(plant("data.txt", host.target(kind)), ctx=CTX)
    assert planted.error is None, planted.error
    before = host.fingerprint()
    data = tmp_path / "shared" / "data.txt"
    run = ci.run_code(
        "import os\nopen('data.txt').read(), os.getuid()", ctx=CTX, files=[data.as_uri()]
    )
    assert run.error is None, run.error
    assert run.result is not None
    text, uid = ast.literal_eval(run.result)
    assert text == "payload"
    assert run.notice is None  # nothing refused
    assert host.fingerprint() == before
    copied = ci.work_dir("t", "alice") / "data.txt"
    assert not copied.is_symlink()
    assert copied.stat().st_uid == uid  # the session's own user (its directory's owner)


def test_a_file_copied_in_before_the_first_worker_is_the_sessions_own(
    ci: CodeInterpreter, tmp_path: Path
) -> None:
    # Copied while the new directory is still parley's (root's), then given, with the
    # directory, to the uid the session's first worker runs as: the code may change it.
    data = tmp_path / "shared" / "data.txt"
    run = ci.run_code(
        "import os\nopen('data.txt', 'a').write('!')\nopen('data.txt').read(), os.getuid()",
        ctx=CTX,
        files=[data.as_uri()],
    )
    assert run.error is None, run.error
    assert run.result is not None
    text, uid = ast.literal_eval(run.result)
    assert text == "payload!"
    work_dir = ci.work_dir("t", "alice")
    assert (work_dir / "data.txt").stat().st_uid == work_dir.stat().st_uid == uid


def test_a_folder_where_a_file_is_copied_in_is_a_clear_refusal(
    ci: CodeInterpreter, tmp_path: Path
) -> None:
    ci.run_code("import os\nos.mkdir('data.txt')", ctx=CTX)
    data = tmp_path / "shared" / "data.txt"
    run = ci.run_code("import os\nos.path.isdir('data.txt')", ctx=CTX, files=[str(data)])
    assert run.result == "True"
    assert run.notice is not None
    assert "a folder of that name is in the conversation's directory" in run.notice


def test_output_files_that_are_links_are_listed_and_never_read(
    ci: CodeInterpreter, host: Host
) -> None:
    before = host.fingerprint()
    run = ci.run_code(
        plant("out.txt", host.target("file")) + plant("report", host.target("folder")),
        ctx=CTX,
    )
    assert run.error is None, run.error
    assert run.files == ["out.txt", "report"]
    assert_no_secret(run.stdout, run.stderr, run.result, run.to_text())
    assert host.fingerprint() == before


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_a_storage_folder_replaced_by_a_link_is_refused(
    ci: CodeInterpreter, host: Host, tmp_path: Path, kind: str
) -> None:
    storage = Storage({"work_dir": str(tmp_path / "ws")})
    assert storage.put("note", "mine", ctx=CTX) == "SUCCESS"  # the folder is made, root's
    ci.run_code("import os\nos.rename('storage', 'old-storage')", ctx=CTX)
    ci.run_code(plant("storage", host.target(kind)), ctx=CTX)
    before = host.fingerprint()
    for attempt in (
        lambda: storage.put("pwned", "x", ctx=CTX),
        lambda: storage.get("key.pem", ctx=CTX),
        lambda: storage.keys(ctx=CTX),
    ):
        with pytest.raises(Exception, match=r"not a folder \(a file or a link is there\)"):
            attempt()
    assert host.fingerprint() == before


async def test_removing_a_thread_removes_the_links_not_what_they_point_to(
    ci: CodeInterpreter, host: Host
) -> None:
    code = (
        "import os\nos.makedirs('deep/er')\n"
        + plant("folder-link", host.target("folder"))
        + plant("file-link", host.target("file"))
        + plant("deep/er/link", host.target("folder"))
        + plant(".parley/tmp/link", host.target("file"))
    )
    assert ci.run_code(code, ctx=CTX).error is None
    before = host.fingerprint()
    await ci.end_session("alice", "t")
    assert not ci.work_dir("t", "alice").exists()
    assert host.fingerprint() == before


def test_a_work_directory_that_is_a_link_is_not_used(ci: CodeInterpreter, host: Host) -> None:
    # Not something the code can do (the folder holding it is parley's), but parley opens
    # the work directory itself without following a link all the same.
    work_dir = ci.work_dir("linked", "alice")
    work_dir.parent.mkdir(parents=True, exist_ok=True)
    work_dir.symlink_to(host.folder)
    before = host.fingerprint()
    run = ci.run_code("print('ran')", session="linked", user_id="alice")
    assert run.stdout == ""
    assert run.error is not None
    assert "its work directory cannot be used" in run.error
    assert "is a link or a file, not a folder" in run.error
    assert host.fingerprint() == before
