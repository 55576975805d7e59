"""What the command line prints of others' text is shown, never obeyed by the terminal.

Answers, tool calls and results, the approval prompt, errors, and `serve --docs`'s log lines
of file names may hold a terminal's escape sequences (a retitled window, a cleared screen,
a CSI sequence as one C1 character) or bidi controls (a name that reads backwards). They are
printed as escapes; line breaks and tabs of answers and results, and non-ASCII letters, stay
as they are. Output is captured and checked for any control character a terminal acts on.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parley import cli
from parley._terminal import visible
from parley.agents import Agent
from parley.models import ChatModel, Credential
from parley.models.testing import ScriptedModel
from parley.providers._server.http import ScriptedHTTPServer
from parley.rag import DocumentIndex
from parley.service import ServiceSettings
from parley.service.documents import DocumentsService
from parley.tools import tool
from tests.cli.test_chat_url import (
    RUN,
    THREAD,
    Routes,
    _Terminal,
    frames,
    message,
    service,  # noqa: F401  (the fixture)
)

# What a model or a file may slip in: a window title (OSC ... BEL), a cleared screen (CSI),
# a CSI as one C1 character, a bidi override.
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e"
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202e"
# Ordinary text that must come out as it went in.
PLAIN = "Café, 中文, ü\n\tnext line"

OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What a terminal acts on, but the line breaks and tabs text keeps."""


def test_visible_escapes_controls_and_keeps_text() -> None:
    assert visible(HOSTILE + PLAIN, keep="\n\t") == SHOWN + PLAIN
    assert visible("a\nb\tc") == "a\\nb\\tc"  # a one-line thing stays one line


class _HostileModel(ScriptedModel):
    """Answers with escape sequences around ordinary text, streamed in small chunks."""

    def __init__(self, credential: Any = None, model: str = "hostile", **kwargs: Any) -> None:
        super().__init__([f"{HOSTILE}{PLAIN}"], model=model, chunk_size=2, **kwargs)


class _HostileCredential(Credential):
    type: str = "hostile-test"

    @classmethod
    def chat_model_classes(cls) -> list[type[ChatModel]]:
        return [_HostileModel]


def test_a_streamed_answer_is_shown_not_obeyed(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["chat", "--model", "hostile-test:any", "hi"]) == 0
    out = capsys.readouterr().out
    assert not OBEYED.search(out)
    assert out == f"{SHOWN}{PLAIN}\n"  # chunks cut the sequences anywhere: still escaped


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: What to look up.
    """
    return f"{HOSTILE}found\n\tit"


async def test_an_agents_calls_results_and_answer_are_shown_not_obeyed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("lookup", {"key": HOSTILE}), f"{HOSTILE}done"], stream=True
    )
    out = io.StringIO()
    await cli._agent_answer(Agent("a", model, tools=[lookup]), "go", out)
    err = capsys.readouterr().err
    assert not OBEYED.search(out.getvalue() + err)
    assert out.getvalue() == f"{SHOWN}done\n"
    # json.dumps escapes C0 characters itself; C1 and bidi controls it leaves to us.
    assert '[lookup] {"key": "\\u001b]0;owned\\u0007\\u001b[2J\\x9b31m\\u202e"}' in err
    assert f"[lookup result] {SHOWN}found\n\tit" in err


THREAD_ID = f"{THREAD}{HOSTILE}"  # a service's thread id, printed at the end


def _hostile_routes() -> Routes:
    call = {"name": f"add{HOSTILE}", "args": {"a": HOSTILE}, "id": "call_1", "type": "tool_call"}
    interrupt = {"interrupt_id": "int-1", "thread_id": THREAD_ID, "run_id": RUN, "calls": [call]}
    result = message(
        "tool",
        f"{HOSTILE}3",
        tool_call_id="call_1",
        custom_data={"parley": {"tool_name": f"add{HOSTILE}"}},
        thread_id=THREAD_ID,
    )
    return {
        "/helper/stream": lambda request: frames(
            {
                "type": "message",
                "content": message("ai", "", tool_calls=[call], thread_id=THREAD_ID),
            },
            {"type": "interrupt", "content": interrupt},
        ),
        "/approvals/int-1/stream": lambda request: frames(
            {"type": "message", "content": result},
            {"type": "token", "content": HOSTILE[:3]},  # a sequence cut between tokens
            {"type": "token", "content": HOSTILE[3:] + "It is 3."},
            {
                "type": "message",
                "content": message("ai", f"{HOSTILE}It is 3.", thread_id=THREAD_ID),
            },
            {"type": "error", "content": f"the model is down{HOSTILE}"},
        ),
    }


def test_a_services_stream_and_approval_prompt_are_shown_not_obeyed(
    service: Callable[[Routes], ScriptedHTTPServer],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = service(_hostile_routes())
    monkeypatch.setattr(sys, "stdin", _Terminal("y\n"))
    assert cli.main(["chat", "--url", server.base_url, "add"]) == 2  # the run failed at last
    out, err = capsys.readouterr()
    assert not OBEYED.search(out + err)
    assert out.startswith(f"{SHOWN}It is 3.")
    prompt = json.dumps({"a": HOSTILE}, ensure_ascii=False)
    assert f"Run add{SHOWN} {visible(prompt)}? [y/N] " in err
    assert f"[add{SHOWN} result] {SHOWN}3" in err
    assert f"the model is down{SHOWN}" in err
    assert f"thread: {THREAD}{SHOWN}" in err


async def test_serve_docs_logs_file_names_as_escapes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / f"evil{HOSTILE}.md").write_text("# Kettles\n\nDescale monthly.\n")
    (docs / f"broken{HOSTILE}.pdf").write_bytes(b"not a pdf")
    settings = ServiceSettings(docs=[str(docs)], docs_embedding="none")
    documents = DocumentsService(settings, lambda spec: ScriptedModel([]))
    documents.index = await DocumentIndex.open(tmp_path / "i.sqlite", embedding_model=None)
    caplog.set_level(logging.INFO, logger="parley.service")
    try:
        await documents.update()
    finally:
        await documents.index.close()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert not OBEYED.search(logged)
    assert f"evil{SHOWN}.md" in logged
    assert f"could not index {docs}/broken{SHOWN}.pdf: " in logged
