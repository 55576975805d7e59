"""Who is asking: API keys (stored hashed) mapped to users, or the toolkit's shared secret.

`Authorization: Bearer <token>`. The token is the shared `AUTH_SECRET` (its holder is the user
`default`, as all of the toolkit's clients are one), or an API key made by `parley keys create
USER` (looked up by its SHA-256). With neither configured, every request is the user `local`,
the service binds to loopback only (`ServiceSettings.bind_host`), and answers only requests
from this machine, addressed to it by a loopback name, from its own pages
(`parley.service.local`).

Some tools serve this machine only, whatever the auth (`Tool.local_only`: the code interpreter
in a sandbox weaker than bubblewrap): a run of an agent holding one is refused (403) for a
request that is not from this machine (`parley.service.local.client_address`: a proxy's
request is its client's, or no one's). With auth that is not enough: a reverse proxy on this
machine that names no client makes every request look local, so such tools are served only
once `PARLEY_TRUSTED_PROXIES` says which proxies stand in front of the service (`[]`: none).
"""

from __future__ import annotations

import hmac
from contextvars import ContextVar

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from parley.agents import Agent
from parley.errors import AuthenticationError
from parley.service.local import UNNAMED_CLIENT_HINT, check_local_request, client_address
from parley.service.settings import ServiceSettings, is_loopback
from parley.service.store import Store

__all__ = [
    "LOCAL_USER",
    "SECRET_USER",
    "authenticate",
    "check_tools_reachable",
    "current_user",
    "local_only_tools",
    "local_tools_refusal",
]

LOCAL_USER = "local"
"""The user of every request when no auth is configured."""
SECRET_USER = "default"
"""The user who holds the shared secret."""

# Why the request being handled may not run tools for this machine only (None: it may): set
# by `current_user`, which every route that starts a run depends on (an async dependency runs
# in the request's task, so the endpoint sees it); runs started outside a request (tests,
# scripts) may.
_local_tools_refused: ContextVar[str | None] = ContextVar("parley_local_tools", default=None)

_UNSET_PROXIES = (
    "PARLEY_TRUSTED_PROXIES is not set, and behind a reverse proxy on this machine every "
    "request would look local: set it to '[]' when no proxy forwards to this service, or to "
    "the proxies' addresses (they must send X-Forwarded-For)"
)
_NOT_NAMED = f"this request came through a proxy that did not say for whom: {UNNAMED_CLIENT_HINT}"

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
    _local_tools_refused.set(local_tools_refusal(request, state.settings))
    if not state.settings.auth_enabled:
        check_local_request(request, state.settings)
    token = credentials.credentials if credentials is not None else None
    return await authenticate(state.settings, state.store, token)


def local_tools_refusal(request: Request, settings: ServiceSettings) -> str | None:
    """Why `request` may not run tools that serve this machine only; None when it may.

    It may when it comes from this machine (`client_address`) and, with auth, the service
    knows which proxies stand in front of it (`trusted_proxies` set).
    """
    client = client_address(request, settings)
    if client is None:
        return _NOT_NAMED
    if not is_loopback(client):
        return "the request came from another machine; install bubblewrap to serve it to others"
    if settings.auth_enabled and settings.trusted_proxies is None:
        return _UNSET_PROXIES
    return None


def local_only_tools(agent: Agent) -> list[str]:
    """The names of the agent's tools that serve this machine only."""
    return [found.name for found in agent.toolkit if found.local_only]


def check_tools_reachable(agent: Agent) -> None:
    """Refuse a run that may not use the agent's tools for this machine only, if it has any.

    Raises:
        AuthenticationError: The request being handled may not (`local_tools_refusal`): 403.
    """
    reason = _local_tools_refused.get()
    if reason is None:
        return
    names = local_only_tools(agent)
    if names:
        raise AuthenticationError(
            f"agent {agent.name!r} has tools that serve this machine only ({', '.join(names)}:"
            f" the code interpreter without bubblewrap cannot contain hostile code), and {reason}",
            status_code=403,
        )
