"""Fixtures of the pull tests: a Hub cache of the test's own, and the Hub's stand-in."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from parley.providers.local import presets
from parley.providers.local.hub_server import HubServer, bundled_gguf

_HUB_VARIABLES = (
    "HF_HOME",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "XDG_CACHE_HOME",
    "HF_TOKEN",
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
)


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty `HF_HOME` of this test's own (nothing of the machine's Hub cache is seen)."""
    for name in _HUB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    # Where no test server answers: a test that forgot `hub` fails instead of going out.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    return home


@pytest.fixture
def hub(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """The Hub's stand-in on 127.0.0.1, with `HF_ENDPOINT` pointing at it."""
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.base_url)
        yield server
    assert not server.errors, server.errors


@dataclasses.dataclass(frozen=True)
class Bundled:
    """The embedded model's GGUF file, which the stand-in serves under other names."""

    path: Path
    sha256: str
    size: int


@pytest.fixture(scope="session")
def bundled() -> Bundled:
    """The shipped SmolLM2 GGUF file and its sha256."""
    path = bundled_gguf()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Bundled(path, digest, path.stat().st_size)


@pytest.fixture
def smol_preset(bundled: Bundled, monkeypatch: pytest.MonkeyPatch) -> presets.Preset:
    """The `qwen3-0.6b` preset, but with the SmolLM2 file's checksum and size.

    The stand-in serves SmolLM2 under Qwen3-0.6B's repository and file name; the preset's
    real checksum would (rightly) refuse it.
    """
    real = presets.PRESETS["qwen3-0.6b"]
    fake = dataclasses.replace(real, sha256=bundled.sha256, size=bundled.size)
    monkeypatch.setitem(presets.PRESETS, real.name, fake)
    return fake
