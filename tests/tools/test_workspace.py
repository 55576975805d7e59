"""Workspace directories and session keys: one per (user, thread), never shared by two.

Ids come from clients (thread ids) and from configuration (user ids), so they may hold `/`,
spaces, dots or look like another id's directory name; no two different pairs may reach the
same directory or the same session of a tool, and plain ids keep the names they had.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from pathlib import Path

from parley.tools.context import session_key
from parley.tools.workspace import Workspace

TRICKY = [
    "a b",
    "a_b",
    # main's name for "a b": readable part, `-`, 12 hex digits of its hash
    "a_b-" + hashlib.sha256(b"a b").hexdigest()[:12],
    "a/b",
    "a%2Fb",
    "bob/notes",
    "notes",
    "acme/bob",
    "acme",
    "",
    ".",
    "..",
    "_a",
    "a" * 49,
    "a" * 48,
    "é",
    "e",
]


def test_plain_ids_keep_their_directory_names(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    thread = str(uuid.uuid4())  # the service's thread ids
    memory = f"memory_{uuid.uuid4().hex}"  # an agent's own memory
    assert workspace.session_dir("alice", thread) == tmp_path / "alice" / thread
    assert workspace.session_dir(None, memory) == tmp_path / "local" / memory
    assert workspace.session_dir("team.one", "t-1") == tmp_path / "team.one" / "t-1"


def test_no_two_users_and_threads_share_a_directory(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    users = [user for user in TRICKY if user]  # no user is the local user, as None is
    pairs = list(itertools.product(users, TRICKY))
    folders = {pair: workspace.session_dir(*pair, create=False) for pair in pairs}
    assert len(set(folders.values())) == len(pairs)
    for folder in folders.values():
        assert folder.parent.parent == tmp_path  # two levels down, never out nor up
        assert folder.name not in ("", ".", "..")


def test_no_two_users_and_threads_share_a_session_key() -> None:
    assert session_key("alice", "A") == "alice/A"
    assert session_key(None, "A") == "local/A"
    assert session_key("acme", "bob/notes") != session_key("acme/bob", "notes")
    keys = {session_key(user, thread) for user in TRICKY if user for thread in TRICKY}
    assert len(keys) == len([u for u in TRICKY if u]) * len(TRICKY)
