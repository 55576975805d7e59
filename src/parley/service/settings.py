"""The service's settings: `PARLEY_*` environment variables, a `.env` file, or arguments.

Every field reads from `PARLEY_<FIELD>` (`PARLEY_DATABASE_URL`, `PARLEY_PORT`, ...), from a
`.env` file in the working directory, or from keyword arguments, which win. Dict and list
fields take JSON (`PARLEY_MODEL_ALIASES='{"fake": null, "ollama": "ollama:qwen3"}'`). The
toolkit's own variable for its shared secret, `AUTH_SECRET`, works too.
"""

from __future__ import annotations

import functools
import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from parley.compat.service_toolkit import DEFAULT_MODEL

__all__ = ["DEFAULT_DATABASE_URL", "IPNetwork", "ServiceSettings", "is_loopback"]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///parley.db"
"""The embedded default: an SQLite file in the working directory."""


def _default_aliases() -> dict[str, str | None]:
    # `/info` lists these, and the toolkit's client refuses a whole `/info` naming one its
    # `AllModelEnum` lacks: so only names every client knows (`fake` is in every release,
    # `openai-compatible` in every one since March 2025). Both mean "the agent's own model".
    return {"fake": None, "openai-compatible": None}


class ServiceSettings(BaseSettings):
    """How `parley serve` runs: where, on which database, with which agents and auth."""

    model_config = SettingsConfigDict(
        env_prefix="PARLEY_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",  # a .env shared with other programs holds their keys too
        populate_by_name=True,
    )

    host: str = Field(
        "127.0.0.1",
        description="Address to bind (loopback only without auth, which then also answers "
        "only requests addressed to a loopback name: `parley.service.local`).",
    )
    port: int = Field(8080, ge=0, le=65535, description="Port to bind (0: any free port).")
    workers: int = Field(1, ge=1, description="Worker processes (PostgreSQL only, above 1).")
    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy async URL: sqlite+aiosqlite:///file.db or "
        "postgresql+asyncpg://user:password@host/db.",
    )
    auth_secret: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("auth_secret", "PARLEY_AUTH_SECRET", "AUTH_SECRET"),
        description="The toolkit's shared bearer secret; its holder is the user `default`.",
    )
    api_keys: bool = Field(
        False, description="Require API keys (`parley keys create USER`) for every request."
    )
    agents: list[str] = Field(
        default_factory=list,
        description="Agents to serve, as `module:attribute` (an Agent, a factory, or a list).",
    )
    agents_file: Path | None = Field(
        None, description="A TOML or YAML file listing agents (see `parley.service.registry`)."
    )
    default_agent: str | None = Field(None, description="The agent `/invoke` and `/stream` use.")
    model: str | None = Field(
        None,
        description="The built-in agent's model, as `provider:model` (`local`: the embedded "
        "one, offline). Unset: the model the user already has, chosen at start-up "
        "(`parley.providers.auto`: a provider key in the environment, an Ollama server, the "
        "largest pulled model, else the embedded one).",
    )
    served_models: list[str] | dict[str, str] | None = Field(
        None,
        description="Models `/v1/chat/completions` serves as themselves, beside the agents "
        "(a client's `tools` go to the model and its tool calls come back): model specs "
        '(`["local", "openai:gpt-4o-mini"]`, each named by its spec), or names mapped to '
        'specs (`{"qwen": "dashscope:qwen-plus"}`). Clients name only these; none can name '
        "another provider or URL. Unset: the settings' `model` when the built-in agent is "
        "served (the chosen one when it is unset), else none; `[]`: none.",
    )
    docs: list[str] = Field(
        default_factory=list,
        description="Files, folders or URLs the `documents` agent answers from, citing them "
        "(the default agent then); indexed at start-up and kept current as files change.",
    )
    docs_index: str | None = Field(
        None,
        description="Where the documents' index lives: an SQLite file or a PostgreSQL URL "
        "(default: one file per set of documents in ~/.cache/parley/indexes/).",
    )
    docs_embedding: str = Field(
        "local",
        description="The documents' embedding model as `provider:model` (`local`: offline), "
        "or `none` for keyword search only.",
    )
    docs_parse_timeout: float = Field(
        120.0,
        gt=0,
        description="Seconds a document's parse may take; its parser process is killed past "
        "them and the document is not indexed.",
    )
    docs_parse_memory_bytes: int = Field(
        1024 * 1024 * 1024,
        ge=64 * 1024 * 1024,
        description="The address space of a document's parser process; a document that "
        "needs more is not indexed.",
    )
    model_aliases: dict[str, str | None] = Field(
        default_factory=_default_aliases,
        description="Model names clients may send (`UserInput.model`), each mapped to a "
        "parley model spec, or null for the agent's own model. `/info` lists these names, so "
        "keep to names the toolkit's client knows (`fake`, `openai-compatible`, `ollama`, "
        f"...). `{DEFAULT_MODEL}`, which older toolkit clients send with every request, means "
        "the agent's own model unless named here.",
    )
    busy_timeout: float = Field(
        30.0, ge=0, description="Seconds a request waits for a busy thread before a 409."
    )
    run_concurrency: int = Field(
        16,
        ge=0,
        description="Runs this process's workers run at once (0: none; it only serves HTTP, "
        "and `parley worker` processes run the runs).",
    )
    lease_seconds: float = Field(
        30.0,
        gt=0,
        description="How long a worker's claim on a run lasts unless renewed (it renews it "
        "every third of that); a run whose worker died is taken over after it.",
    )
    max_attempts: int = Field(
        3,
        ge=1,
        description="Times a run is started in all (its first start and its takeovers) "
        "before it is ended as an error.",
    )
    event_retention: float = Field(
        3600.0,
        gt=0,
        description="Seconds a run's events are kept after it ends, for streams to be "
        "picked up again (after: 410).",
    )
    event_flush_interval: float = Field(
        0.05,
        ge=0,
        le=10,
        description="Seconds a run's events wait for more before they are stored as one "
        "batch (0: at once); what a run's end finds waiting is stored with its end. Only "
        "streams read from the log (picked up again, or on another replica) see events "
        "this much later.",
    )
    gc_freeze: bool = Field(
        True,
        description="Once started, move what the process holds (its modules, the app, its "
        "agents: the heap it starts with) out of the garbage collector's sight "
        "(`gc.freeze()`), so that a full collection scans only what came after: these took "
        "100 ms and more under load, the most of a request's p99. Given back at shutdown.",
    )
    max_body_bytes: int = Field(
        10 * 1024 * 1024,
        ge=1,
        description="The largest request body taken, in bytes (inline images and files "
        "included); a larger one is refused with 413 as it arrives, before it is read whole.",
    )
    max_message_chars: int = Field(
        200_000,
        ge=1,
        description="The most characters one message of a request may hold (its text, tool "
        "calls' arguments and results; media count against max_body_bytes); a longer one is "
        "refused (422, or 400 on /v1).",
    )
    send_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds a stream waits for a client to take its next frame; a client "
        "slower than that is dropped (its connection closed), and its run goes on and is "
        "stored.",
    )
    stream_buffer_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1,
        description="How much of a run's events (text, audio) may wait for a client that "
        "reads slower than the run writes; past it, the client is dropped as above.",
    )
    trusted_proxies: list[str] | None = Field(
        None,
        description="The reverse proxies in front of this service (addresses or networks, "
        '`["127.0.0.1"]`), or `[]` for none. A request from one of them is judged by the '
        "client its X-Forwarded-For names, and is not from this machine without that header. "
        "Tools that serve this machine only (the code interpreter outside bubblewrap) are "
        "served with auth only once this is set: a proxy on this machine makes every request "
        "look local. Unset, forwarding headers from this machine mean a proxy: not local.",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins (`https://chat.example`) whose pages may call the API from a "
        "browser; without auth, pages of this machine may too, and no other.",
    )
    tts: str = Field(
        "local",
        description="The voice that speaks answers when a stream asks for speech "
        '(`"speak": true`), as `provider[:model]` (`local`: offline); realtime when the '
        "provider has a realtime model. Built at the first such request.",
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    access_log: bool = Field(
        True,
        description="Log a line for each request once its response is sent (logger "
        "`parley.access`, uvicorn's format; `parley serve` writes it where uvicorn wrote its "
        "own, which it turns off: uvicorn writes its line before the response).",
    )
    tracing: bool = Field(
        False,
        description="Trace requests, runs, model calls and tools with OpenTelemetry, exported "
        "as the OTEL_* variables say (OTLP over HTTP by default; see docs/tracing.md). The "
        "OTEL_* variables alone turn it on too.",
    )
    tracing_content: bool = Field(
        False,
        description="Record prompts, answers, tool arguments and results on the spans (as "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true does).",
    )

    @field_validator("auth_secret", mode="before")
    @classmethod
    def _empty_secret_is_none(cls, value: object) -> object:
        # `AUTH_SECRET=` left empty in a .env means no secret, as in the toolkit; kept, it
        # would turn auth on with a secret no request can send (and lift the loopback bind).
        return None if value == "" else value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, proxies: list[str] | None) -> list[str] | None:
        for proxy in proxies or []:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"trusted_proxies: {proxy!r} is not an IP address or network (a name "
                    "cannot be checked against a connection's address)"
                ) from None
        return proxies

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, url: str) -> str:
        if not url.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError(
                "database_url must start with sqlite+aiosqlite:// or postgresql+asyncpg:// "
                f"(the async drivers parley ships with), got {url.split(':', 1)[0]!r}"
            )
        return url

    @property
    def auth_enabled(self) -> bool:
        """Whether requests must authenticate (a shared secret, API keys, or both)."""
        return self.auth_secret is not None or self.api_keys

    @property
    def is_sqlite(self) -> bool:
        """Whether the store is an SQLite file (one process serves it)."""
        return self.database_url.startswith("sqlite")

    @functools.cached_property
    def proxy_networks(self) -> tuple[IPNetwork, ...]:
        """`trusted_proxies` as networks (empty when unset)."""
        return tuple(ipaddress.ip_network(p, strict=False) for p in self.trusted_proxies or [])

    def bind_host(self) -> str:
        """The host to bind: loopback whatever was asked when no auth is configured."""
        if self.auth_enabled or is_loopback(self.host):
            return self.host
        return "127.0.0.1"


@functools.lru_cache(maxsize=1024)  # asked of every request's client address
def is_loopback(host: str) -> bool:
    """Whether `host` names this machine (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1, from a dual-stack socket
    return address.is_loopback
