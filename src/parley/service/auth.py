"""Who is asking: API keys (stored hashed) mapped to users, or the toolkit's shared secret.

`Authorization: Bearer <token>`. The token is the shared `AUTH_SECRET` (its holder is the user
`default`, as all of the toolkit's clients are one), or an API key made by `parley keys create
USER` (looked up by its SHA-256). With neither configured, every request is the user `local`,
the service binds to loopback only (`ServiceSettings.bind_host`), and answers only requests
from this machine, addressed to it by a loopback name, from its own pages
(`parley.service.local`).

Some tools serve this machine only, whatever the auth (`Tool.local_only`: the code interpreter
in a sandbox weaker than bubblewrap): a run of an agent holding one is refused (403) for a
request from another machine.
"""

from __future__ import annotations

import hmac
from contextvars import ContextVar

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from parley.agents import Agent
from parley.errors import AuthenticationError
from parley.service.local import check_local_request
from parley.service.settings import ServiceSettings, is_loopback
from parley.service.store import Store

__all__ = [
    "LOCAL_USER",
    "SECRET_USER",
    "authenticate",
    "check_tools_reachable",
    "current_user",
    "local_only_tools",
]

LOCAL_USER = "local"
"""The user of every request when no auth is configured."""
SECRET_USER = "default"
"""The user who holds the shared secret."""

# Whether the request being handled came from another machine: set by `current_user`, which
# every route that starts a run depends on (an async dependency runs in the request's task,
# so the endpoint sees it); runs started outside a request (tests, scripts) count as local.
_remote_client: ContextVar[bool] = ContextVar("parley_remote_client", default=False)

_bearer = HTTPBearer(auto_error=False, description="An API key, or the shared AUTH_SECRET.")


async def authenticate(settings: ServiceSettings, store: Store, token: str | None) -> str:
    """The user `token` identifies.

    Raises:
        AuthenticationError: Auth is on and the token is missing, unknown or revoked.
    """
    if not settings.auth_enabled:
        return LOCAL_USER
    if not token:
        raise AuthenticationError(
            "missing credentials: send 'Authorization: Bearer <API key>'", status_code=401
        )
    secret = settings.auth_secret
    if secret is not None and hmac.compare_digest(
        token.encode(), secret.get_secret_value().encode()
    ):
        return SECRET_USER
    if settings.api_keys:
        user = await store.user_for_key(token)
        if user is not None:
            return user
    raise AuthenticationError("invalid or revoked API key", status_code=401)


async def current_user(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
) -> str:
    """FastAPI dependency: the requesting user's id.

    Raises:
        AuthenticationError: Bad credentials (401), or, with no auth configured, a client
            from another machine or a page of another site (403).
        ServiceError: With no auth configured, a request not addressed to this machine by a
            loopback name (421, DNS rebinding) or a JSON body not sent as JSON (415); see
            `parley.service.local`.
    """
    state = request.app.state.parley
    _remote_client.set(not _from_this_machine(request))
    if not state.settings.auth_enabled:
        check_local_request(request, state.settings)
    token = credentials.credentials if credentials is not None else None
    return await authenticate(state.settings, state.store, token)


def _from_this_machine(request: Request) -> bool:
    # No client address (a Unix socket, an in-process transport) is this machine too.
    return request.client is None or is_loopback(request.client.host)


def local_only_tools(agent: Agent) -> list[str]:
    """The names of the agent's tools that serve this machine only."""
    return [found.name for found in agent.toolkit if found.local_only]


def check_tools_reachable(agent: Agent) -> None:
    """Refuse a run for another machine when the agent holds a tool for this machine only.

    Raises:
        AuthenticationError: The request being handled came from another machine (403).
    """
    if not _remote_client.get():
        return
    names = local_only_tools(agent)
    if names:
        raise AuthenticationError(
            f"agent {agent.name!r} has tools that serve this machine only ({', '.join(names)}:"
            " the code interpreter without bubblewrap cannot contain hostile code); install "
            "bubblewrap to serve it to others",
            status_code=403,
        )
