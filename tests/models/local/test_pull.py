"""`parley.providers.local.hub.pull` against the Hub's stand-in: downloads, resumes, refusals.

Every test runs with an `HF_HOME` of its own and `HF_ENDPOINT` on 127.0.0.1: no network.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from parley.errors import ConfigurationError, ModelError
from parley.providers.local import hub as hubmod
from parley.providers.local._gguf import resolve_gguf
from parley.providers.local.hub_server import HubServer
from parley.providers.local.presets import PRESETS, Preset, preset_for, split_hub_name
from tests.models.local.conftest import Bundled

NAME = "someone/Tiny-GGUF/tiny.gguf"


def _files(home: Path) -> list[str]:
    """Every file left in the Hub cache (model data only: blobs and snapshot links)."""
    hub_cache = home / "hub"
    found = [p for p in hub_cache.rglob("*") if p.is_file() or p.is_symlink()]
    return sorted(
        str(p.relative_to(hub_cache)) for p in found if "blobs" in p.parts or "snapshots" in p.parts
    )


def _resolves(server: HubServer) -> list[tuple[str, str | None]]:
    return [(r.method, r.headers.get("range")) for r in server.requests if "/resolve/" in r.path]


def test_a_hub_file_is_pulled_into_the_hub_cache_and_found_without_network(
    hub: HubServer, hf_home: Path, bundled: Bundled
) -> None:
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")

    pulled = hubmod.pull(NAME, progress=False)

    assert pulled.name == NAME
    assert pulled.preset is None
    assert pulled.path.is_relative_to(hf_home / "hub" / "models--someone--Tiny-GGUF")
    assert pulled.size == bundled.size
    assert hashlib.sha256(pulled.path.read_bytes()).hexdigest() == bundled.sha256
    # The blob is named by the sha256 the Hub sent (what the check compared against).
    assert pulled.path.resolve().name == bundled.sha256
    hub.stop()  # from here on, nothing may need the Hub
    assert hubmod.find_pulled(NAME) == pulled
    assert hubmod.pulled_models() == [pulled]
    assert resolve_gguf(NAME) == pulled.path


def test_a_file_behind_the_hubs_storage_redirect_is_pulled_without_the_token_leaving(
    hub: HubServer, bundled: Bundled
) -> None:
    hub.add_bundled("someone/Gated-GGUF", "tiny.gguf")
    hub.gate("someone/Gated-GGUF", "hf_granted")
    hub.cdn_redirect = True

    pulled = hubmod.pull("someone/Gated-GGUF/tiny.gguf", token="hf_granted", progress=False)

    assert hashlib.sha256(pulled.path.read_bytes()).hexdigest() == bundled.sha256
    storage = [r for r in hub.requests if r.path.startswith("/cdn/")]
    assert [r.method for r in storage] == ["GET"]
    assert storage[0].headers["host"].startswith("localhost:")
    assert "authorization" not in storage[0].headers  # the token stays with the Hub


def test_a_file_already_pulled_is_checked_but_not_downloaded_again(
    hub: HubServer, bundled: Bundled
) -> None:
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")
    first = hubmod.pull(NAME, progress=False)

    again = hubmod.pull(NAME, progress=False)

    assert again == first
    assert [m for m, _ in _resolves(hub)].count("GET") == 1


def test_an_interrupted_download_resumes_where_it_stopped(hub: HubServer, bundled: Bundled) -> None:
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")
    hub.cut_downloads = 1  # the first download's body stops half-way

    pulled = hubmod.pull(NAME, progress=False)

    gets = [rng for method, rng in _resolves(hub) if method == "GET"]
    assert gets[0] is None
    assert len(gets) == 2
    assert gets[1] is not None
    assert gets[1].startswith("bytes=")
    assert int(gets[1].removeprefix("bytes=").rstrip("-")) > 0  # not from the start
    assert hashlib.sha256(pulled.path.read_bytes()).hexdigest() == bundled.sha256


def test_a_corrupted_download_is_refused_and_removed(hub: HubServer, hf_home: Path) -> None:
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")
    hub.corrupt = True  # bytes changed, the announced sha256 kept

    with pytest.raises(ModelError, match=r"does not match the Hub's checksum.*removed"):
        hubmod.pull(NAME, progress=False)

    assert _files(hf_home) == []
    assert hubmod.find_pulled(NAME) is None
    with pytest.raises(ConfigurationError, match=f"parley models pull {NAME}"):
        resolve_gguf(NAME)
    # Pulling again, from a Hub that now sends the right bytes, works.
    hub.corrupt = False
    assert hubmod.pull(NAME, progress=False).size > 0


def test_a_file_that_is_not_gguf_is_refused_and_removed(hub: HubServer, hf_home: Path) -> None:
    hub.add("someone/Tiny-GGUF", "page.gguf", b"<!doctype html><title>Sign in</title>")

    with pytest.raises(ModelError, match="is not a GGUF model file") as caught:
        hubmod.pull("someone/Tiny-GGUF/page.gguf", progress=False)

    assert "\n" not in str(caught.value)
    assert _files(hf_home) == []


def test_a_preset_whose_file_does_not_match_its_checksum_is_refused(
    hub: HubServer, hf_home: Path
) -> None:
    preset = PRESETS["qwen3-0.6b"]
    hub.add_bundled(preset.repo, preset.filename)  # SmolLM2's bytes, not Qwen3's

    with pytest.raises(ModelError, match="does not match the preset's checksum"):
        hubmod.pull(preset.name, progress=False)

    assert _files(hf_home) == []
    assert hubmod.find_pulled(preset.name) is None


def test_a_preset_larger_than_the_free_space_is_refused_before_downloading(
    hub: HubServer, hf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = PRESETS["qwen3-0.6b"]
    monkeypatch.setitem(PRESETS, real.name, dataclasses.replace(real, size=10**18))  # 1 EB

    with pytest.raises(ModelError, match=r"not enough disk space to pull qwen3-0\.6b"):
        hubmod.pull(real.name, progress=False)

    assert hub.requests == []


def test_an_unknown_preset_names_close_ones_and_asks_nothing_of_the_hub(
    hub: HubServer,
) -> None:
    with pytest.raises(ConfigurationError, match=r"did you mean qwen3-1\.7b") as caught:
        hubmod.pull("qwen3-17b", progress=False)

    assert "parley models pull --list" in str(caught.value)
    assert hub.requests == []


def test_an_unknown_repository_or_file_is_a_configuration_error(hub: HubServer) -> None:
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")

    with pytest.raises(ConfigurationError, match="no repository nobody/Nothing-GGUF"):
        hubmod.pull("nobody/Nothing-GGUF/x.gguf", progress=False)
    with pytest.raises(ConfigurationError, match=r"has no file 'other\.gguf'"):
        hubmod.pull("someone/Tiny-GGUF/other.gguf", progress=False)
    with pytest.raises(ConfigurationError, match="has no revision 'v9'"):
        hubmod.pull(NAME, progress=False, revision="v9")


def test_a_gated_repository_needs_a_token_with_access(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add_bundled("someone/Gated-GGUF", "tiny.gguf")
    hub.gate("someone/Gated-GGUF", "hf_granted")
    name = "someone/Gated-GGUF/tiny.gguf"

    with pytest.raises(ConfigurationError, match=r"gated: accept its licence.*set HF_TOKEN"):
        hubmod.pull(name, progress=False)
    with pytest.raises(ConfigurationError, match="your token has no access to it yet"):
        hubmod.pull(name, progress=False, token="hf_refused")
    monkeypatch.setenv("HF_TOKEN", "hf_granted")
    pulled = hubmod.pull(name, progress=False)

    assert pulled.size > 0
    sent = {r.headers.get("authorization") for r in hub.requests if r.method == "GET"}
    assert sent == {"Bearer hf_granted"}


def test_the_token_argument_wins_over_hf_token(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add_bundled("someone/Gated-GGUF", "tiny.gguf")
    hub.gate("someone/Gated-GGUF", "hf_argument")
    monkeypatch.setenv("HF_TOKEN", "hf_environment")

    assert hubmod.pull("someone/Gated-GGUF/tiny.gguf", token="hf_argument", progress=False)


def test_hf_hub_offline_refuses_to_pull(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    with pytest.raises(ConfigurationError, match="HF_HUB_OFFLINE is set"):
        hubmod.pull(NAME, progress=False)
    assert hub.requests == []


def test_remove_deletes_a_pulled_file(hub: HubServer, hf_home: Path) -> None:
    hub.add_bundled("someone/Tiny-GGUF", "tiny.gguf")
    pulled = hubmod.pull(NAME, progress=False)

    assert hubmod.remove(NAME) == pulled
    assert _files(hf_home) == []
    assert hubmod.remove(NAME) is None


def test_names_of_hub_files() -> None:
    assert split_hub_name("Qwen/Qwen3-1.7B-GGUF/Qwen3-1.7B-Q8_0.gguf") == (
        "Qwen/Qwen3-1.7B-GGUF",
        "Qwen3-1.7B-Q8_0.gguf",
    )
    assert split_hub_name("a/b/sub/c.GGUF") == ("a/b", "sub/c.GGUF")
    for not_hub in ["qwen3-1.7b", "a/b.gguf", "a//c.gguf", "a/b/../c.gguf", "a/b/c.bin"]:
        assert split_hub_name(not_hub) is None
    preset = PRESETS["qwen3-1.7b"]
    assert preset_for("qwen3-1.7b") is preset
    assert preset_for("Qwen/Qwen3-1.7B-GGUF/Qwen3-1.7B-Q8_0.gguf") is preset
    assert preset_for("Qwen/Qwen3-1.7B-GGUF/other.gguf") is None


def test_an_unpulled_preset_says_how_to_pull_it(hf_home: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"parley models pull qwen3-1\.7b"):
        resolve_gguf("qwen3-1.7b")
    with pytest.raises(ConfigurationError, match=r"did you mean qwen3-1\.7b"):
        resolve_gguf("qwen3-17b")


def test_the_presets_the_issue_asks_for_are_there_and_complete() -> None:
    wanted = {
        "qwen3-0.6b": "hermes",
        "qwen3-1.7b": "hermes",
        "qwen3-4b": "hermes",
        "qwen2.5-1.5b-instruct": "hermes",
        "qwen2.5-7b-instruct": "hermes",
        "llama3.2-1b-instruct": "llama3",
        "llama3.2-3b-instruct": "llama3",
        "phi-4-mini": "phi4",
        "gemma3-1b": "gemma",
        "gemma3-4b": "gemma",
        "smollm3-3b": "hermes",
    }
    assert {name: PRESETS[name].tool_format for name in wanted} == wanted
    for preset in PRESETS.values():
        _check_preset(preset)


def _check_preset(preset: Preset) -> None:
    assert split_hub_name(preset.hub_name) == (preset.repo, preset.filename)
    assert preset.sha256 is None or len(preset.sha256) == 64
    assert preset.size > 100_000_000
    assert preset.licence
    assert 0 < preset.context_size <= preset.max_context


def test_pulled_models_lists_presets_by_name_largest_first_without_projectors(
    hub: HubServer, smol_preset: Preset, bundled: Bundled
) -> None:
    small = bundled.path.read_bytes()[: 1 << 20]  # a GGUF header: enough to pass the magic
    hub.add("someone/Small-GGUF", "small.gguf", small)
    hub.add("someone/Small-GGUF", "mmproj-small.gguf", small)
    hub.add_bundled(smol_preset.repo, smol_preset.filename)
    for name in ["someone/Small-GGUF/small.gguf", "someone/Small-GGUF/mmproj-small.gguf"]:
        hubmod.pull(name, progress=False)
    hubmod.pull(smol_preset.name, progress=False)
    hub.stop()

    listed = [(m.name, m.size, m.preset) for m in hubmod.pulled_models()]

    assert listed == [
        (smol_preset.name, bundled.size, smol_preset),
        ("someone/Small-GGUF/small.gguf", 1 << 20, None),
    ]
