"""A pulled preset runs: `LocalChatModel(NAME)`, `local:NAME` specs, and the CLI around pulls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from parley.cli import main
from parley.models.spec import model_from_spec
from parley.providers.local.hub import pull
from parley.providers.local.hub_server import HubServer
from parley.providers.local.presets import Preset
from tests._requires import require_module, require_program, unavailable

SRC = Path(__file__).resolve().parents[3] / "src"


def test_a_pulled_preset_answers_by_its_name(hub: HubServer, smol_preset: Preset) -> None:
    require_module("llama_cpp", "local")
    from parley.messages import Msg  # noqa: PLC0415
    from parley.providers.local import LocalChatModel  # noqa: PLC0415

    hub.add_bundled(smol_preset.repo, smol_preset.filename)
    pulled = pull(smol_preset.name, progress=False)
    hub.stop()  # loading needs no network

    model = LocalChatModel(smol_preset.name)
    by_hub_name = model_from_spec(f"local:{smol_preset.hub_name}")

    assert model.path == pulled.path == by_hub_name.path
    assert model.context_size == by_hub_name.context_size == smol_preset.context_size
    answer = model.chat_sync([Msg.user("What is the capital of France?")])
    assert "Paris" in answer.text


def test_models_pull_prints_where_the_model_went_and_how_to_use_it(
    hub: HubServer, smol_preset: Preset, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.add_bundled(smol_preset.repo, smol_preset.filename)

    assert main(["models", "pull", smol_preset.name]) == 0

    out = capsys.readouterr().out
    assert f"pulled {smol_preset.name}: " in out
    assert f"parley chat --model local:{smol_preset.name}" in out
    assert main(["models", "pull", "--list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    row = next(line for line in listing if line.startswith(smol_preset.name + " "))
    assert " yes " in row
    assert smol_preset.hub_name in row
    assert main(["models", "local"]) == 0
    cards = capsys.readouterr().out
    local_row = next(line for line in cards.splitlines() if f" {smol_preset.name} " in line)
    assert " pulled " in local_row
    assert main(["models", "rm", smol_preset.name]) == 0
    assert main(["models", "rm", smol_preset.name]) == 1


def test_models_still_lists_one_providers_cards(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "openai"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("provider")
    assert all(r.startswith("openai") for r in rows[1:])
    assert main(["models", "--token", "t"]) == 2
    assert "go with `parley models pull`" in capsys.readouterr().err


def test_models_pull_of_an_unknown_name_is_one_line(
    hf_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", "qwen3-17b"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "did you mean qwen3-1.7b" in captured.err
    assert main(["models", "pull"]) == 2


def test_a_full_disk_fails_in_one_line_and_leaves_nothing(hub: HubServer, tmp_path: Path) -> None:
    """The pull runs with an 8 MB tmpfs as its Hub cache, in a user and mount namespace."""
    unshare = require_program("unshare", "util-linux")
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")  # 94 MiB: does not fit
    cache = tmp_path / "small"
    cache.mkdir()
    script = (
        'mount -t tmpfs -o size=8m tmpfs "$1" || exit 99\n'
        '"$2" -m parley models pull someone/Tiny-GGUF/tiny.gguf\n'
        'echo "rc=$?"\n'
        'cd "$1" && find . -path "*blobs/*" -o -path "*snapshots/*" -type f -o -name "*.gguf"\n'
    )
    env = {**os.environ, "HF_HOME": str(cache), "PYTHONPATH": str(SRC)}
    env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    namespace = [unshare, "--user", "--map-root-user", "--mount"]
    done = subprocess.run(
        [*namespace, "sh", "-c", script, "sh", str(cache), sys.executable],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    if done.returncode == 99 or "Operation not permitted" in done.stderr[:300]:
        unavailable(f"user namespaces with a tmpfs mount are not allowed here: {done.stderr}")
    lines = done.stdout.splitlines()
    assert lines[0] == "rc=2", done.stderr
    assert lines[1:] == []  # no blob, no snapshot link, no partial file
    errors = [line for line in done.stderr.splitlines() if line.startswith("parley:")]
    assert len(errors) == 1
    assert "disk full" in errors[0]
    assert "HF_HUB_CACHE" in errors[0]


def test_parley_chat_runs_a_pulled_hub_file_offline(hub: HubServer, hf_home: Path) -> None:
    require_module("llama_cpp", "local")
    name = "someone/Tiny-GGUF/tiny.gguf"
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")
    pull(name, progress=False)
    hub.stop()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # Offline, with every proxy pointing nowhere: loading a pulled model needs no network.
    env.update({"HF_HUB_OFFLINE": "1", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""})
    env["PYTHONPATH"] = str(SRC)
    question = "What is the capital of France?"
    done = subprocess.run(
        [sys.executable, "-m", "parley", "chat", "--model", f"local:{name}", question],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout


def test_parley_serve_builds_its_agent_on_a_pulled_model(hub: HubServer, hf_home: Path) -> None:
    require_module("llama_cpp", "local")
    service = require_module("parley.service", "service")
    name = "someone/Tiny-GGUF/tiny.gguf"
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")
    pulled = pull(name, progress=False)
    hub.stop()

    settings = service.ServiceSettings(model=f"local:{name}")  # what `serve --model` sets
    registry = service.build_registry(settings)
    agent = registry.get(registry.default).agent

    assert agent.model.path == pulled.path
