"""Pulling GGUF chat models from the Hugging Face Hub, and finding the ones pulled.

`pull(NAME)` downloads a preset (`qwen3-1.7b`) or any GGUF file named `OWNER/REPO/FILE.gguf`
with `huggingface_hub` into the Hub's own cache (`HF_HUB_CACHE`, else `HF_HOME/hub`, else
`~/.cache/huggingface/hub`), where other Hub tools find it too. `HF_ENDPOINT` (a mirror) and
`HF_TOKEN` (gated repositories) are read on each call. A dropped connection is resumed where
it stopped (an HTTP Range request). The file is then checked: its first bytes must be GGUF's
magic, and its sha256 must be the preset's (else the one the Hub sends for the file); a file
that fails is removed from the cache, so no later run loads it.

`pulled_models()` and `find_pulled(NAME)` look only at the cache: no network.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parley.errors import ConfigurationError, MissingDependencyError, ModelError
from parley.providers.local.presets import Preset, close_names, preset_for, split_hub_name

__all__ = [
    "GGUF_MAGIC",
    "PulledModel",
    "cache_dir",
    "endpoint",
    "find_pulled",
    "pull",
    "pulled_models",
    "remove",
    "unknown_message",
]

GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""

_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class PulledModel:
    """A GGUF model file in the Hub's cache.

    Args:
        name: The preset's name when the file is a preset's, else `OWNER/REPO/FILE.gguf`.
        path: The cached file (a link in the cache's snapshot to its blob).
        size: Its size in bytes.
        preset: The preset it is, if any.
    """

    name: str
    path: Path
    size: int
    preset: Preset | None


@dataclass(frozen=True)
class _Target:
    """What a name asks for: a file in a Hub repository, and the checksum it must have."""

    name: str
    repo: str
    filename: str
    preset: Preset | None

    @classmethod
    def of(cls, name: str) -> _Target:
        preset = preset_for(name)
        if preset is not None:
            return cls(preset.name, preset.repo, preset.filename, preset)
        hub = split_hub_name(name)
        if hub is None:
            raise ConfigurationError(unknown_message(name))
        return cls(name, hub[0], hub[1], None)


def unknown_message(name: str) -> str:
    """The error for a name that is neither a preset nor `OWNER/REPO/FILE.gguf`."""
    close = close_names(name)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return (
        f"no preset {name!r}: {hint}`parley models pull --list` lists the presets; "
        "any GGUF file on the Hub is named OWNER/REPO/FILE.gguf"
    )


# -- where things are ----------------------------------------------------------------------


def cache_dir() -> Path:
    """The Hub's cache folder, as `huggingface_hub` finds it, read from the environment now.

    `HF_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else
    `~/.cache/huggingface/hub` (read on each call: `huggingface_hub` reads them on import).
    """
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.expandvars(explicit)).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
        home = str(Path(xdg) / "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def endpoint() -> str:
    """The Hub's address: `HF_ENDPOINT` (a mirror, or a test server), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _repo_folder(repo: str) -> Path:
    return cache_dir() / ("models--" + repo.replace("/", "--"))


# -- pulling -------------------------------------------------------------------------------


def pull(
    name: str,
    *,
    token: str | None = None,
    progress: bool = True,
    revision: str | None = None,
) -> PulledModel:
    """Download a preset or `OWNER/REPO/FILE.gguf` into the Hub's cache, and check it.

    A file already in the cache is not downloaded again (but is checked again).

    Args:
        name: A preset's name (`parley models pull --list`) or `OWNER/REPO/FILE.gguf`.
        token: A Hub token for gated or private repositories (default: `HF_TOKEN`, then the
            token `huggingface-cli login` saved).
        progress: Show a progress bar (on stderr).
        revision: A branch, tag or commit of the repository (default: `main`).

    Raises:
        ConfigurationError: An unknown preset, repository, file or revision; a gated
            repository without access; `HF_HUB_OFFLINE` set.
        ModelError: The download failed (the network, a full disk) or the file is not a GGUF
            model or not the file expected (checksum); nothing of it is left in the cache.
        MissingDependencyError: `huggingface_hub` is not installed (extra `local`).
    """
    target = _Target.of(name)
    if _offline():
        raise ConfigurationError(
            f"cannot pull {target.name}: HF_HUB_OFFLINE is set; unset it to download"
        )
    if target.preset is not None and find_pulled(target.name) is None:
        _check_space(target, target.preset.size)
    path = _download(target, token=token, progress=progress, revision=revision)
    try:
        _verify(target, path)
    except ModelError:
        _discard(path)
        raise
    return PulledModel(target.name, path, path.stat().st_size, target.preset)


def _check_space(target: _Target, size: int) -> None:
    """Refuse before downloading what cannot fit (the disk-full error would come later)."""
    folder = cache_dir()
    existing = next((p for p in [folder, *folder.parents] if p.exists()), Path("/"))
    free = shutil.disk_usage(existing).free
    if free < size:
        raise ModelError(
            f"not enough disk space to pull {target.name}: it needs {size / 1e9:.2f} GB, "
            f"{existing} has {free / 1e9:.2f} GB free; free space there or point "
            "HF_HUB_CACHE at a bigger disk",
            model=target.name,
            provider="huggingface",
        )


def _offline() -> bool:
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _hub() -> Any:
    try:
        import huggingface_hub  # noqa: PLC0415  (heavy; only pulling needs it)
    except ImportError:
        raise MissingDependencyError("huggingface_hub", "local") from None
    return huggingface_hub


def _download(target: _Target, *, token: str | None, progress: bool, revision: str | None) -> Path:
    hub = _hub()
    options: dict[str, Any] = {
        "revision": revision,
        "cache_dir": str(cache_dir()),
        "endpoint": endpoint(),
        "token": token or os.environ.get("HF_TOKEN") or None,
    }
    if not progress:
        options["tqdm_class"] = _silent_tqdm()
    with _hub_errors(target, token=options["token"], revision=revision):
        return Path(hub.hf_hub_download(target.repo, target.filename, **options))


def _silent_tqdm() -> type[Any]:
    from tqdm.auto import tqdm  # noqa: PLC0415  (huggingface_hub depends on it)

    class Silent(tqdm):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Silent


@contextlib.contextmanager
def _hub_errors(target: _Target, *, token: str | None, revision: str | None) -> Iterator[None]:
    """`huggingface_hub`'s errors as parley's: one line each, saying what to do."""
    from huggingface_hub import errors  # noqa: PLC0415

    where = f"{target.repo} on {endpoint()}"
    try:
        yield
    except errors.GatedRepoError:
        todo = (
            "your token has no access to it yet"
            if token
            else "pulling it needs a Hub token: set HF_TOKEN (or pass --token)"
        )
        raise ConfigurationError(
            f"{where} is gated: accept its licence at {endpoint()}/{target.repo} "
            f"while logged in; {todo}"
        ) from None
    except errors.RepositoryNotFoundError:
        raise ConfigurationError(
            f"no repository {where} (or it is private: set HF_TOKEN); check the name, "
            f"OWNER/REPO/FILE.gguf, or `parley models pull --list`"
        ) from None
    except errors.RevisionNotFoundError:
        raise ConfigurationError(
            f"{target.repo} has no revision {revision!r}: give a branch, tag or commit"
        ) from None
    except errors.RemoteEntryNotFoundError:
        raise ConfigurationError(
            f"{where} has no file {target.filename!r}: see its files at "
            f"{endpoint()}/{target.repo}/tree/main"
        ) from None
    except errors.LocalEntryNotFoundError as exc:
        raise ModelError(
            f"cannot reach the Hub at {endpoint()} to pull {target.name}: check the network, "
            "a proxy or HF_ENDPOINT, and try again",
            model=target.name,
            provider="huggingface",
        ) from exc
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise ModelError(
            f"the Hub answered {status} for {target.name}: try again later",
            model=target.name,
            provider="huggingface",
        ) from exc
    except OSError as exc:
        raise _os_error(target, exc) from exc


def _os_error(target: _Target, exc: OSError) -> ModelError:
    if exc.errno in {errno.ENOSPC, errno.EDQUOT}:
        size = f" ({target.preset.size / 1e9:.1f} GB)" if target.preset else ""
        return ModelError(
            f"disk full while pulling {target.name}{size} into {cache_dir()}: free space "
            "there or point HF_HUB_CACHE at a bigger disk, then pull again",
            model=target.name,
            provider="huggingface",
        )
    return ModelError(
        f"pulling {target.name} failed: {exc}; pull again to retry",
        model=target.name,
        provider="huggingface",
    )


# -- checking ------------------------------------------------------------------------------


def _verify(target: _Target, path: Path) -> None:
    """Raise unless `path` is a GGUF file with the expected sha256."""
    with path.open("rb") as file:
        head = file.read(len(GGUF_MAGIC))
    if head != GGUF_MAGIC:
        raise ModelError(
            f"{target.repo}/{target.filename} is not a GGUF model file (it starts with "
            f"{head!r}); it was removed: name a .gguf file of a GGUF repository",
            model=target.name,
            provider="huggingface",
        )
    expected = target.preset.sha256 if target.preset else None
    source = "the preset's"
    if expected is None:
        expected, source = _hub_sha256(path), "the Hub's"
    if expected is None:
        return  # not an LFS file: the Hub sends no sha256 to check against
    actual = _sha256(path)
    if actual != expected:
        raise ModelError(
            f"{target.name} does not match {source} checksum (sha256 {actual[:12]}..., "
            f"expected {expected[:12]}...); the file was removed: pull again, and if it "
            "fails again the mirror (HF_ENDPOINT) or the repository changed",
            model=target.name,
            provider="huggingface",
        )


def _hub_sha256(path: Path) -> str | None:
    """The sha256 the Hub sent for the file: its blob is named by it (the LFS ETag)."""
    name = path.resolve().name
    return name if _SHA256.fullmatch(name) else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _discard(path: Path) -> None:
    """Remove a bad download: its snapshot link, its blob and any partial file beside it."""
    blob = path.resolve()
    with contextlib.suppress(OSError):
        path.unlink()
    if blob.parent.name == "blobs":
        for leftover in [blob, *blob.parent.glob(f"{blob.name}*.incomplete")]:
            with contextlib.suppress(OSError):
                leftover.unlink()


# -- what is pulled (no network) -----------------------------------------------------------


def find_pulled(name: str) -> PulledModel | None:
    """The cached file of a preset or `OWNER/REPO/FILE.gguf`; None if not pulled. No network.

    The file of the `main` branch's commit is preferred; else the newest one pulled.
    """
    target = _Target.of(name) if preset_for(name) or split_hub_name(name) else None
    if target is None:
        return None
    path = _cached(target.repo, target.filename)
    if path is None:
        return None
    return PulledModel(target.name, path, path.stat().st_size, target.preset)


def _cached(repo: str, filename: str) -> Path | None:
    folder = _repo_folder(repo)
    snapshots = folder / "snapshots"
    if not snapshots.is_dir():
        return None
    main = folder / "refs" / "main"
    candidates: list[Path] = []
    if main.is_file():
        candidates.append(snapshots / main.read_text().strip() / filename)
    others = sorted(snapshots.iterdir(), key=_mtime, reverse=True)
    candidates += [snapshot / filename for snapshot in others]
    return next((c for c in candidates if c.is_file()), None)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def pulled_models() -> list[PulledModel]:
    """Every GGUF chat model in the Hub's cache, largest first. No network.

    Presets are named by their names, other files `OWNER/REPO/FILE.gguf`; multimodal
    projector files (`mmproj*`), which are no chat models, are left out.
    """
    root = cache_dir()
    if not root.is_dir():
        return []
    found: dict[str, PulledModel] = {}
    for folder in sorted(root.glob("models--*--*")):
        repo = folder.name.removeprefix("models--").replace("--", "/", 1)
        for filename in _gguf_files(folder / "snapshots"):
            model = find_pulled(f"{repo}/{filename}")
            if model is not None and model.name not in found:
                found[model.name] = model
    return sorted(found.values(), key=lambda m: (-m.size, m.name))


def _gguf_files(snapshots: Path) -> set[str]:
    if not snapshots.is_dir():
        return set()
    names: set[str] = set()
    for snapshot in snapshots.iterdir():
        for file in snapshot.rglob("*.gguf"):
            if file.is_file() and not file.name.lower().startswith("mmproj"):
                names.add(file.relative_to(snapshot).as_posix())
    return names


def remove(name: str) -> PulledModel | None:
    """Delete a pulled model's file from the cache (every revision of it). No network.

    Returns what was removed; None if it was not pulled.

    Raises:
        ConfigurationError: `name` is neither a preset nor `OWNER/REPO/FILE.gguf`.
    """
    target = _Target.of(name)
    pulled = find_pulled(name)
    if pulled is None:
        return None
    snapshots = _repo_folder(target.repo) / "snapshots"
    for snapshot in snapshots.iterdir():
        link = snapshot / target.filename
        if link.is_symlink() or link.is_file():
            _discard(link)
    return pulled
