"""`parley chat` end to end on the embedded local model: offline, no keys."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def test_parley_chat_answers_offline_with_the_local_model(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # No network: any proxy that points nowhere would fail a hub download loudly.
    env.update({"HF_HUB_OFFLINE": "1", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""})
    done = subprocess.run(
        [sys.executable, "-m", "parley", "chat", "--verbose", "What is the capital of France?"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    assert "Loading local" in done.stderr
    # --verbose: the answer's tokens, time and cost (the local model is free).
    assert re.search(r"usage: \d+ tokens in, \d+ out, \d+\.\d\d s, cost 0\.000000", done.stderr)
