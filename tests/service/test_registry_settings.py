"""Settings (`PARLEY_*`, `.env`, `AUTH_SECRET`), the agent registry (Python, `module:attr`,
TOML and YAML files), and the model names clients may ask for.
"""

from __future__ import annotations

import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from parley.agents import Agent
from parley.errors import ConfigurationError, NotFoundError
from parley.models.base import ChatModel
from parley.models.testing import ScriptedModel
from parley.service import AgentRegistry, ServiceSettings, build_registry
from parley.service.store import RunRecord
from tests.service._support import run_records
from tests.service.conftest import MakeService

_SETTINGS_ENV = (
    "AUTH_SECRET",
    "PARLEY_AUTH_SECRET",
    "PARLEY_API_KEYS",
    "PARLEY_HOST",
    "PARLEY_PORT",
    "PARLEY_DATABASE_URL",
    "PARLEY_AGENTS",
    "PARLEY_AGENTS_FILE",
    "PARLEY_DEFAULT_AGENT",
    "PARLEY_MODEL",
    "PARLEY_MODEL_ALIASES",
    "PARLEY_BUSY_TIMEOUT",
    "PARLEY_CORS_ORIGINS",
    "PARLEY_LOG_LEVEL",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test starts with no setting from the machine: no variables, no .env."""
    monkeypatch.chdir(tmp_path)
    for name in _SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)


# -- settings ----------------------------------------------------------------------------------


def test_defaults() -> None:
    settings = ServiceSettings()
    assert settings.host == "127.0.0.1"
    assert settings.port == 8080
    assert settings.database_url == "sqlite+aiosqlite:///parley.db"
    assert settings.is_sqlite
    assert not settings.auth_enabled
    assert settings.agents == []
    assert settings.model is None  # chosen at start-up: parley.providers.auto
    assert settings.model_aliases == {"fake": None, "openai-compatible": None}
    assert settings.busy_timeout == 30.0


def test_parley_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_PORT", "9001")
    monkeypatch.setenv("PARLEY_API_KEYS", "true")
    monkeypatch.setenv("PARLEY_DATABASE_URL", "postgresql+asyncpg://u:p@db/parley")
    monkeypatch.setenv("PARLEY_AGENTS", '["myapp.agents:weather", "myapp.agents:team"]')
    monkeypatch.setenv("PARLEY_MODEL_ALIASES", '{"gpt-4o-mini": null, "fake": "openai:gpt-4o"}')
    monkeypatch.setenv("PARLEY_BUSY_TIMEOUT", "2.5")
    monkeypatch.setenv("PARLEY_CORS_ORIGINS", '["http://localhost:3000"]')
    monkeypatch.setenv("PARLEY_DEFAULT_AGENT", "weather")
    monkeypatch.setenv("PARLEY_EVENT_FLUSH_INTERVAL", "0")

    settings = ServiceSettings()
    assert settings.port == 9001
    assert settings.api_keys
    assert settings.auth_enabled
    assert not settings.is_sqlite
    assert settings.agents == ["myapp.agents:weather", "myapp.agents:team"]
    assert settings.model_aliases == {"gpt-4o-mini": None, "fake": "openai:gpt-4o"}
    assert settings.busy_timeout == 2.5
    assert settings.cors_origins == ["http://localhost:3000"]
    assert settings.default_agent == "weather"
    assert settings.event_flush_interval == 0
    # Arguments win over the environment.
    assert ServiceSettings(port=7000).port == 7000


def test_a_dotenv_file_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        textwrap.dedent(
            """
            # shared with other programs: their keys are ignored
            OPENAI_API_KEY=sk-not-ours
            PARLEY_HOST=0.0.0.0
            PARLEY_PORT=8123
            PARLEY_API_KEYS=1
            PARLEY_AGENTS_FILE=agents.toml
            AUTH_SECRET=from-dotenv
            """
        )
    )
    settings = ServiceSettings()
    assert settings.host == "0.0.0.0"
    assert settings.port == 8123
    assert settings.api_keys
    assert settings.agents_file == Path("agents.toml")
    assert settings.auth_secret is not None
    assert settings.auth_secret.get_secret_value() == "from-dotenv"
    assert settings.bind_host() == "0.0.0.0"
    # A variable wins over the file.
    monkeypatch.setenv("PARLEY_PORT", "8124")
    assert ServiceSettings().port == 8124


@pytest.mark.parametrize("variable", ["AUTH_SECRET", "PARLEY_AUTH_SECRET"])
def test_the_shared_secret_is_read_and_kept_secret(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "hunter2")
    settings = ServiceSettings()
    assert settings.auth_secret is not None
    assert settings.auth_secret.get_secret_value() == "hunter2"
    assert settings.auth_enabled
    assert not settings.api_keys
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings.model_dump())


def test_an_empty_secret_is_no_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`AUTH_SECRET=` as a .env leaves it: no auth (as in the toolkit), so loopback only."""
    (tmp_path / ".env").write_text("AUTH_SECRET=\nPARLEY_HOST=0.0.0.0\n")
    settings = ServiceSettings()
    assert settings.auth_secret is None
    assert not settings.auth_enabled
    assert settings.bind_host() == "127.0.0.1"
    monkeypatch.setenv("AUTH_SECRET", "")
    assert ServiceSettings().auth_secret is None


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///parley.db",
        "postgresql://u:p@host/db",
        "mysql+aiomysql://u:p@host/db",
        "parley.db",
        "",
    ],
)
def test_a_database_url_without_an_async_driver_is_refused(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ServiceSettings(database_url=url)
    message = str(caught.value)
    assert "database_url" in message
    assert "sqlite+aiosqlite://" in message
    assert "postgresql+asyncpg://" in message


def test_other_bad_settings_are_refused() -> None:
    with pytest.raises(ValidationError, match="port"):
        ServiceSettings(port=70000)
    with pytest.raises(ValidationError, match="busy_timeout"):
        ServiceSettings(busy_timeout=-1)
    with pytest.raises(ValidationError, match="log_level"):
        ServiceSettings(log_level="chatty")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="event_flush_interval"):
        ServiceSettings(event_flush_interval=-0.1)


# -- the registry, from Python -----------------------------------------------------------------


def _agent(name: str, *answers: str, description: str = "") -> Agent:
    return Agent(name, ScriptedModel(list(answers)), description=description)


def test_register_agents_by_name_the_first_is_the_default() -> None:
    registry = AgentRegistry()
    first = registry.register(_agent("weather", description="Weather"))
    registry.register(_agent("news"), description="Headlines")
    assert [e.key for e in registry] == ["weather", "news"]
    assert len(registry) == 2
    assert "news" in registry
    assert "sports" not in registry
    assert registry.default == "weather"
    assert first.description == "Weather"
    assert registry.get("news").description == "Headlines"

    registry.register(_agent("sports"), default=True)
    assert registry.default == "sports"
    registry.default = "news"
    assert registry.default == "news"


def test_registry_mistakes_are_configuration_errors() -> None:
    registry = AgentRegistry([_agent("weather")])
    with pytest.raises(ConfigurationError, match="registered already"):
        registry.register(_agent("weather"))
    with pytest.raises(ConfigurationError, match="needs a key"):
        registry.register(lambda: _agent("x"))
    with pytest.raises(ConfigurationError, match="'sports' is not registered"):
        registry.default = "sports"
    assert registry.default == "weather"
    with pytest.raises(ConfigurationError, match="no agent"):
        _ = AgentRegistry().default
    with pytest.raises(NotFoundError) as unknown:
        registry.get("sports")
    assert unknown.value.status_code == 404


@pytest.mark.parametrize(
    "key",
    [
        *("info", "invoke", "stream", "history", "feedback", "health", "threads", "runs"),
        *("approvals", "agents", "v1", "static", "docs", "openapi.json"),
    ],
)
def test_keys_the_service_routes_use_are_reserved(key: str) -> None:
    with pytest.raises(ConfigurationError, match="taken by the service"):
        AgentRegistry().register(_agent("x"), key=key)


@pytest.mark.parametrize("key", ["", "a/b", " padded", "padded ", ".hidden", "_private"])
def test_keys_that_are_no_url_segment_are_refused(key: str) -> None:
    with pytest.raises(ConfigurationError, match="URL segment"):
        AgentRegistry().register(_agent(key))  # the agent's name is its key
    if key:
        with pytest.raises(ConfigurationError, match="URL segment"):
            AgentRegistry().register(_agent("fine"), key=key)


def test_a_factory_is_called_once_on_first_use() -> None:
    calls: list[str] = []

    def make() -> Agent:
        calls.append("made")
        return _agent("research")

    registry = AgentRegistry()
    entry = registry.register(make, key="research", description="Digs")
    assert calls == []
    assert [e.key for e in registry] == ["research"]  # listed without being built
    agent = entry.agent
    assert calls == ["made"]
    assert entry.agent is agent
    assert registry.get("research").agent is agent
    assert calls == ["made"]


def test_threads_asking_at_once_build_the_agent_once() -> None:
    calls: list[str] = []
    gate = threading.Barrier(8)

    def make() -> Agent:
        calls.append("made")
        time.sleep(0.05)  # slow, as loading a model is: the others ask meanwhile
        return _agent("research")

    entry = AgentRegistry().register(make, key="research")

    def ask() -> Agent:
        gate.wait(5)
        return entry.agent

    with ThreadPoolExecutor(8) as pool:
        built = list(pool.map(lambda _: ask(), range(8)))
    assert calls == ["made"]
    assert all(agent is built[0] for agent in built)


async def test_the_warm_up_and_the_first_request_build_the_agent_once(
    service: MakeService,
) -> None:
    calls: list[str] = []

    def make() -> Agent:
        calls.append("made")
        time.sleep(0.2)
        return _agent("slow-start", "hello")

    registry = AgentRegistry()
    registry.register(make, key="slow-start")
    svc = await service(registry=registry)  # its start-up builds the default agent (a thread)
    answer = await svc.client.post("/invoke", json={"message": "hi"})
    assert answer.json()["content"] == "hello"
    assert calls == ["made"]


def test_a_factory_that_builds_no_agent_fails_on_use() -> None:
    registry = AgentRegistry()
    registry.register(lambda: "not an agent", key="broken")  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationError, match="'broken' returned str, not an Agent"):
        _ = registry.get("broken").agent


# -- the registry, from names ------------------------------------------------------------------


_MODULE = textwrap.dedent(
    """
    from parley.agents import Agent
    from parley.models.testing import ScriptedModel
    from parley.service import AgentRegistry

    CALLS = []

    weather = Agent("weather", ScriptedModel(["sunny"]), description="Weather")


    def make_research():
        CALLS.append("research")
        return Agent("research-agent", ScriptedModel(["found"]))


    team = [Agent("alpha", ScriptedModel(["a"])), Agent("beta", ScriptedModel(["b"]))]

    registry = AgentRegistry()
    registry.register(Agent("gamma", ScriptedModel(["g"])), description="G")
    registry.register(make_research, key="delta", description="D")


    class Holder:
        inner = Agent("nested", ScriptedModel(["n"]))


    not_an_agent = 42
    mixed = [Agent("fine", ScriptedModel()), "a string"]
    """
)


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """An importable module of agents, under a name of this test's own."""
    name = f"parley_test_agents_{uuid.uuid4().hex[:12]}"
    directory = tmp_path / "modules"
    directory.mkdir()
    (directory / f"{name}.py").write_text(_MODULE)
    monkeypatch.syspath_prepend(str(directory))
    yield name
    sys.modules.pop(name, None)


def test_load_an_agent_a_factory_a_list_a_registry_and_a_dotted_name(module: str) -> None:
    registry = AgentRegistry()
    registry.load(f"{module}:weather")
    registry.load(f"{module}:make_research")
    registry.load(f"{module}:team")
    registry.load(f"{module}:registry")
    registry.load(f"{module}:Holder.inner", key="inner", description="Inside")

    assert [e.key for e in registry] == [
        "weather",
        "make_research",
        "alpha",
        "beta",
        "gamma",
        "delta",
        "inner",
    ]
    calls = sys.modules[module].CALLS
    assert calls == []  # factories wait for their first use
    assert registry.get("weather").description == "Weather"
    assert registry.get("gamma").description == "G"
    assert registry.get("delta").description == "D"
    assert registry.get("inner").description == "Inside"
    assert registry.get("inner").agent.name == "nested"
    assert registry.get("make_research").agent.name == "research-agent"
    assert registry.get("delta").agent.name == "research-agent"
    assert calls == ["research", "research"]  # once per entry
    assert registry.default == "weather"


def test_load_with_a_key_of_its_own(module: str) -> None:
    registry = AgentRegistry()
    registry.load(f"{module}:make_research", key="research", description="Digs")
    assert [e.key for e in registry] == ["research"]
    assert registry.get("research").description == "Digs"


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("no_colon", "'module:attribute'"),
        ("{m}:", "'module:attribute'"),
        (":weather", "'module:attribute'"),
        ("parley_no_such_module_xyz:agent", "cannot import 'parley_no_such_module_xyz'"),
        ("{m}:missing", "has no attribute 'missing'"),
        ("{m}:Holder.missing", "has no attribute 'Holder.missing'"),
        ("{m}:not_an_agent", "is a int; name an Agent"),
        ("{m}:mixed", "lists a str, not an Agent"),
    ],
)
def test_bad_targets_name_the_problem(module: str, target: str, problem: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        AgentRegistry().load(target.format(m=module))
    assert problem in str(caught.value)


def _write(path: Path, content: str) -> Path:
    path.write_text(textwrap.dedent(content))
    return path


def test_an_agents_file_in_toml(module: str, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "agents.toml",
        f"""
        default = "beta"

        [[agents]]
        target = "{module}:weather"
        description = "Tells the weather"

        [[agents]]
        target = "{module}:make_research"
        key = "research"

        [[agents]]
        target = "{module}:team"
        """,
    )
    registry = AgentRegistry()
    registry.load_file(path)
    assert [e.key for e in registry] == ["weather", "research", "alpha", "beta"]
    assert registry.default == "beta"
    assert registry.get("weather").description == "Tells the weather"
    assert sys.modules[module].CALLS == []


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_an_agents_file_in_yaml(module: str, tmp_path: Path, suffix: str) -> None:
    path = _write(
        tmp_path / f"agents{suffix}",
        f"""
        default: research
        agents:
          - target: "{module}:weather"
          - target: "{module}:make_research"
            key: research
            description: Digs things up
        """,
    )
    registry = AgentRegistry()
    registry.load_file(path)
    assert [e.key for e in registry] == ["weather", "research"]
    assert registry.default == "research"
    assert registry.get("research").description == "Digs things up"


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("missing.toml", None, "cannot read agents file"),
        ("broken.toml", "agents = [", "is not valid"),
        ("broken.yaml", "agents: [unclosed", "is not valid"),
        ("list.yaml", "- target: x:y", "must hold a table"),
        ("agents.toml", "agents = 3", "`agents` must be a list"),
        ("agents.toml", "[[agents]]\nkey = 'x'", "agents[0] needs a `target` string"),
        ("agents.yaml", "agents:\n  - just a string", "agents[0] needs a `target` string"),
        ("agents.toml", 'default = "nobody"', "the default agent 'nobody' is not registered"),
    ],
)
def test_bad_agents_files_name_the_problem(
    tmp_path: Path, name: str, content: str | None, problem: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigurationError) as caught:
        AgentRegistry().load_file(path)
    assert problem in str(caught.value)


def test_build_registry_from_settings(module: str, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "agents.toml",
        f"""
        [[agents]]
        target = "{module}:team"
        """,
    )
    settings = ServiceSettings(
        agents=[f"{module}:weather"], agents_file=path, default_agent="alpha"
    )
    registry = build_registry(settings)
    assert [e.key for e in registry] == ["weather", "alpha", "beta"]
    assert registry.default == "alpha"
    with pytest.raises(ConfigurationError, match="'nobody' is not registered"):
        build_registry(ServiceSettings(agents=[f"{module}:weather"], default_agent="nobody"))


def test_with_no_agents_named_the_builtin_one_is_served_lazily() -> None:
    registry = build_registry(ServiceSettings())
    (entry,) = registry
    assert entry.key == "assistant"
    assert registry.default == "assistant"
    # The embedded model is offered no tool, and its description says so without loading it.
    assert entry.description == "A helpful assistant (the embedded model, without tools)."
    assert entry._agent is None  # its model is not loaded by naming it
    hosted = build_registry(ServiceSettings(model="openai:gpt-4o-mini"))
    assert "sandbox" in next(iter(hosted)).description


async def test_the_service_serves_the_agents_its_settings_name(
    service: MakeService, module: str
) -> None:
    svc = await service(registry=build_registry(ServiceSettings(agents=[f"{module}:team"])))
    agents = (await svc.client.get("/agents")).json()
    assert [a["key"] for a in agents] == ["alpha", "beta"]
    answer = await svc.client.post("/beta/invoke", json={"message": "hi"})
    assert answer.json()["content"] == "b"
    assert (await svc.client.post("/gamma/invoke", json={"message": "hi"})).status_code == 404


# -- model names -------------------------------------------------------------------------------


class _Specs:
    """Stands in for `model_from_spec`: a scripted model per spec, built once each."""

    def __init__(self) -> None:
        self.built: dict[str, ScriptedModel] = {}

    def __call__(self, spec: str) -> ChatModel:
        assert spec not in self.built, f"{spec} built twice"
        model = ScriptedModel([f"{spec} answers {i}" for i in range(5)], model=spec)
        self.built[spec] = model
        return model


@pytest.fixture
def specs(monkeypatch: pytest.MonkeyPatch) -> _Specs:
    made = _Specs()
    monkeypatch.setattr("parley.service.state.model_from_spec", made)
    return made


_ALIASES: dict[str, Any] = {"gpt-4o-mini": None, "fake": "scripted:other", "ollama": None}


async def _latest_run(svc: Any, thread_id: str) -> RunRecord:
    return (await run_records(svc.state.store, thread_id))[-1]


async def test_an_alias_to_null_is_the_agents_own_model(
    service: MakeService, specs: _Specs
) -> None:
    own = ScriptedModel(["own 0", "own 1", "own 2"], model="own-model")
    svc = await service(Agent("helper", own), model_aliases=_ALIASES)
    for body in (
        {"message": "hi", "thread_id": "t", "model": "gpt-4o-mini"},
        {"message": "hi", "thread_id": "t", "model": "ollama"},
        {"message": "hi", "thread_id": "t"},  # the toolkit's default name
    ):
        answer = await svc.client.post("/invoke", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["content"].startswith("own ")
        assert (await _latest_run(svc, "t")).model == "own-model"
    assert specs.built == {}


async def test_an_alias_to_a_spec_runs_the_agent_on_that_model(
    service: MakeService, specs: _Specs
) -> None:
    own = ScriptedModel(["own answer"], model="own-model")
    svc = await service(Agent("helper", own, system_prompt="Be kind."), model_aliases=_ALIASES)

    first = await svc.client.post("/invoke", json={"message": "hi", "model": "fake"})
    second = await svc.client.post("/invoke", json={"message": "again", "model": "fake"})
    assert first.json()["content"] == "scripted:other answers 0"
    assert second.json()["content"] == "scripted:other answers 1"  # the same model, kept
    assert list(specs.built) == ["scripted:other"]
    other = specs.built["scripted:other"]
    # The same agent otherwise: its system prompt goes to the other model.
    assert other.requests[0].messages[0].text == "Be kind."
    assert (await _latest_run(svc, first.json()["thread_id"])).model == "scripted:other"
    assert own.requests == []

    # The agent itself keeps its own model.
    mine = await svc.client.post("/invoke", json={"message": "hi", "model": "gpt-4o-mini"})
    assert mine.json()["content"] == "own answer"
    assert svc.state.registry.get("helper").agent.model is own


@pytest.mark.parametrize("path", ["/invoke", "/stream", "/helper/invoke", "/helper/stream"])
async def test_an_unknown_model_name_is_422(service: MakeService, path: str) -> None:
    svc = await service(Agent("helper", ScriptedModel()), model_aliases=_ALIASES)
    response = await svc.client.post(path, json={"message": "hi", "model": "gpt-5-ultra"})
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "model"]
    assert "gpt-5-ultra" in error["msg"]
    assert "fake" in error["msg"]  # it says what is offered
    assert await svc.state.store.list_threads("local") == []
