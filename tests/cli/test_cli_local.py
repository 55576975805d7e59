"""`parley chat` end to end on the embedded local model: offline, no keys."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli._run import keyless_env, run_parley


def test_parley_chat_answers_offline_with_the_local_model(tmp_path: Path) -> None:
    done = run_parley(
        "chat", "--verbose", "What is the capital of France?", env=keyless_env(), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    assert "Loading local" in done.stderr
    # --verbose: the answer's tokens, time and cost (the local model is free).
    assert re.search(r"usage: \d+ tokens in, \d+ out, \d+\.\d\d s, cost 0\.000000", done.stderr)
