"""The storage tool: key-value files, and keys that try to leave the directory."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from parley.errors import ToolArgumentsError, ToolExecutionError
from parley.messages import ToolCallBlock
from parley.tools import TOOL_REGISTRY, RunContext, Toolkit, Workspace
from parley.tools import workspace as workspace_module
from parley.tools.builtin import KeyNotExistsError, Storage, _paths
from parley.tools.builtin import storage as storage_module

ANN = RunContext.detached(thread_id="t1", user_id="ann")
BOB = RunContext.detached(thread_id="t2", user_id="bob")


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage({"storage_root_path": str(tmp_path / "store")})


def test_put_get_delete_and_list(storage: Storage) -> None:
    assert storage.put("notes/today", "buy milk") == "SUCCESS"
    assert storage.put("/notes/tomorrow", "rest") == "SUCCESS"
    assert storage.put("top", "level") == "SUCCESS"
    assert storage.get("/notes/today") == "buy milk"
    assert storage.keys() == ["/notes/today", "/notes/tomorrow", "/top"]
    assert storage.keys("notes") == ["/notes/today", "/notes/tomorrow"]
    assert storage.scan("/notes") == "/notes/today: buy milk\n/notes/tomorrow: rest"
    storage.put("notes/today", "replaced")
    assert storage.get("notes/today") == "replaced"
    assert storage.delete("notes/today") == "Deleted notes/today"
    with pytest.raises(KeyNotExistsError, match="no value is stored"):
        storage.get("notes/today")
    with pytest.raises(KeyNotExistsError):
        storage.delete("notes/today")
    assert (storage.root / "notes" / "tomorrow").read_text() == "rest"


def test_values_are_unicode_text(storage: Storage) -> None:
    storage.put("greeting", "你好, wörld ✓\nline two")
    assert storage.get("greeting") == "你好, wörld ✓\nline two"


@pytest.mark.parametrize(
    "key",
    ["../escape", "a/../../escape", "..", "notes/../../../etc/passwd", "a\\..\\..\\x", "a\x00b"],
)
def test_keys_that_leave_the_directory_are_refused(
    storage: Storage, tmp_path: Path, key: str
) -> None:
    for operation in (lambda: storage.put(key, "x"), lambda: storage.get(key)):
        with pytest.raises(ToolArgumentsError):
            operation()
    assert not (tmp_path / "escape").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["store"])


def test_an_absolute_key_stays_inside(storage: Storage) -> None:
    storage.put("/etc/passwd", "not the real one")
    assert (storage.root / "etc" / "passwd").read_text() == "not the real one"
    assert Path("/etc/passwd").read_text() != "not the real one"


def test_a_symbolic_link_out_of_the_directory_is_refused(storage: Storage, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    storage.root.mkdir(parents=True)
    (storage.root / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ToolArgumentsError, match="outside the storage"):
        storage.put("link/file", "x")
    assert list(outside.iterdir()) == []


def test_empty_keys_and_oversized_values_are_refused(tmp_path: Path) -> None:
    storage = Storage({"work_dir": str(tmp_path), "max_value_bytes": 10})
    with pytest.raises(ToolArgumentsError, match="empty"):
        storage.put("/", "x")
    with pytest.raises(ToolArgumentsError, match="larger than 10 bytes"):
        storage.put("k", "x" * 11)
    storage.put("folder/k", "v")
    with pytest.raises(ToolExecutionError, match="folder of keys"):
        storage.put("folder", "v")


def test_by_default_keys_live_in_the_conversations_folder_of_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PARLEY_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setattr(workspace_module, "_default", None)  # read the variable afresh
    storage = Storage()
    assert storage.root is None
    assert storage.call({"operate": "put", "key": "k", "value": "v"}, ctx=ANN) == "SUCCESS"
    assert (tmp_path / "ws" / "ann" / "t1" / "storage" / "k").read_text() == "v"
    assert not (tmp_path / "workspace").exists()  # not shared through the current folder


def test_each_conversation_has_its_own_keys(tmp_path: Path) -> None:
    storage = Storage({"work_dir": str(tmp_path)})
    storage.call({"operate": "put", "key": "notes/plan", "value": "Ann's plan"}, ctx=ANN)
    storage.call({"operate": "put", "key": "notes/plan", "value": "Bob's plan"}, ctx=BOB)
    assert storage.call({"operate": "get", "key": "notes/plan"}, ctx=ANN) == "Ann's plan"
    assert storage.call({"operate": "scan", "key": "/"}, ctx=BOB) == "/notes/plan: Bob's plan"
    with pytest.raises(KeyNotExistsError):
        storage.call({"operate": "get", "key": "notes/plan"}, ctx=RunContext.detached("t3"))
    folder = Workspace(tmp_path).session_dir("ann", "t1") / "storage"
    assert (folder / "notes" / "plan").read_text() == "Ann's plan"
    # Bob's folder is a sibling of Ann's: a key cannot climb to it.
    with pytest.raises(ToolArgumentsError, match=r"'\.\.'"):
        storage.call({"operate": "get", "key": "../../../bob/t2/storage/notes/plan"}, ctx=ANN)


async def test_doc_parser_reads_what_storage_wrote_in_the_same_conversation(
    tmp_path: Path,
) -> None:
    toolkit = Toolkit(
        [
            {"name": "storage", "work_dir": str(tmp_path)},
            {"name": "doc_parser", "work_dir": str(tmp_path)},
        ]
    )
    put = {"operate": "put", "key": "notes/today.md", "value": "# Today\n\nShip it."}
    assert not (
        await toolkit.run(ToolCallBlock(id="1", name="storage", input=put), ctx=ANN)
    ).is_error
    read = ToolCallBlock(id="2", name="doc_parser", input={"url": "storage/notes/today.md"})
    assert "Ship it." in str((await toolkit.run(read, ctx=ANN)).output)
    assert (await toolkit.run(read, ctx=BOB)).is_error


def test_links_out_of_the_folder_are_neither_listed_nor_read(
    storage: Storage, tmp_path: Path
) -> None:
    (tmp_path / "secret").write_text("SECRET")
    storage.put("kept", "mine")
    assert storage.root is not None
    (storage.root / "leak").symlink_to(tmp_path / "secret")
    assert storage.keys() == ["/kept"]
    assert storage.scan() == "/kept: mine"
    with pytest.raises(ToolArgumentsError, match="outside the storage"):
        storage.get("leak")
    with pytest.raises(ToolArgumentsError, match="outside the storage"):
        storage.delete("leak")
    assert (tmp_path / "secret").read_text() == "SECRET"


def test_a_link_swapped_in_after_the_check_is_not_followed(
    storage: Storage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "value").write_text("SECRET")
    assert storage.root is not None
    storage.root.mkdir(parents=True)
    (storage.root / "link").symlink_to(outside, target_is_directory=True)
    # The check sees `link` as the plain folder it was when the key was checked.
    monkeypatch.setattr(_paths, "real_path", lambda path: Path(os.path.abspath(path)))
    monkeypatch.setattr(storage_module, "real_path", _paths.real_path)
    with pytest.raises(ToolExecutionError, match="changed while it was opened"):
        storage.put("link/new", "x")
    with pytest.raises(ToolExecutionError, match="changed while it was opened"):
        storage.get("link/value")
    with pytest.raises(ToolExecutionError, match="changed while it was opened"):
        storage.delete("link/value")
    assert sorted(p.name for p in outside.iterdir()) == ["value"]
    assert (outside / "value").read_text() == "SECRET"


async def test_errors_name_the_conversations_storage_never_where_the_server_keeps_it(
    tmp_path: Path,
) -> None:
    # The code interpreter's code writes in the conversation's folder: a file where the
    # storage folder goes used to fail with the workspace's absolute path in the message.
    (Workspace(tmp_path).for_context(ANN) / "storage").write_text("planted")
    toolkit = Toolkit([{"name": "storage", "work_dir": str(tmp_path)}])
    put = {"operate": "put", "key": "k", "value": "v"}
    result = await toolkit.run(ToolCallBlock(id="1", name="storage", input=put), ctx=ANN)
    assert result.is_error
    assert str(result.output) == (
        "storage failed: ToolExecutionError: cannot use this conversation's storage: "
        "'storage' in its files is not a folder (a file or a link is there); remove or "
        "rename it"
    )
    assert str(tmp_path) not in str(result.output)
    configured = Storage({"root": str(tmp_path / "blocked" / "keys")})
    (tmp_path / "blocked").write_text("a file where a folder should be")
    with pytest.raises(ToolExecutionError) as raised:
        configured.put("k", "v")
    assert str(raised.value) == "cannot use the storage folder keys: Not a directory"


@pytest.mark.parametrize("operate", ["get", "put", "list"])
def test_a_link_put_in_place_of_the_storage_folder_is_not_followed(
    tmp_path: Path, operate: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "hostname").write_text("SECRET")
    (Workspace(tmp_path / "ws").for_context(ANN) / "storage").symlink_to(outside)
    storage = Storage({"work_dir": str(tmp_path / "ws")})
    arguments = {"operate": operate, "key": "hostname", "value": "overwritten"}
    with pytest.raises(ToolExecutionError, match="'storage' in its files is not a folder"):
        storage.call(arguments, ctx=ANN)
    assert (outside / "hostname").read_text() == "SECRET"
    assert sorted(p.name for p in outside.iterdir()) == ["hostname"]


def test_qwen_style_calls(storage: Storage) -> None:
    assert storage.call('{"operate": "put", "key": "/a/b", "value": "1"}') == "SUCCESS"
    assert storage.call({"operate": "get", "key": "/a/b"}) == "1"
    assert storage.call({"operate": "list"}) == "/a/b"
    assert storage.call({"operate": "scan", "key": "/"}) == "/a/b: 1"
    assert storage.call({"operate": "scan", "key": "/none"}) == "No keys under /none"
    with pytest.raises(ToolArgumentsError, match="needs a value"):
        storage.call({"operate": "put", "key": "k"})


async def test_errors_reach_the_model_as_error_results(storage: Storage) -> None:
    assert TOOL_REGISTRY["storage"] is Storage
    toolkit = Toolkit([storage])
    escape = ToolCallBlock(
        id="1", name="storage", input={"operate": "put", "key": "../x", "value": "v"}
    )
    result = await toolkit.run(escape)
    assert result.is_error
    assert "'..'" in str(result.output)
    unknown = ToolCallBlock(id="2", name="storage", input={"operate": "rename", "key": "k"})
    assert (await toolkit.run(unknown)).is_error
    missing = await toolkit.run(
        ToolCallBlock(id="3", name="storage", input={"operate": "get", "key": "nothing"})
    )
    assert missing.is_error
    assert "no value is stored under 'nothing'" in str(missing.output)


def test_the_builtin_package_exports_are_sorted_and_resolve() -> None:
    module = importlib.import_module("parley.tools.builtin")

    def key(item: str) -> tuple[int, str]:
        return (0 if item.isupper() else 1 if item[0].isupper() else 2), item

    assert module.__all__ == sorted(module.__all__, key=key)
    assert all(hasattr(module, name) for name in module.__all__)
    assert {"code_interpreter", "doc_parser", "storage", "web_search"} <= set(TOOL_REGISTRY)
