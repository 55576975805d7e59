"""Who is asking: API keys (stored hashed) mapped to users, or the toolkit's shared secret.

`Authorization: Bearer <token>`. The token is the shared `AUTH_SECRET` (its holder is the user
`default`, as all of the toolkit's clients are one), or an API key made by `parley keys create
USER` (looked up by its SHA-256). With neither configured, every request is the user `local`,
the service binds to loopback only (`ServiceSettings.bind_host`), and answers only requests
from this machine, addressed to it by a loopback name, from its own pages
(`parley.service.local`).
"""

from __future__ import annotations

import hmac

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from parley.errors import AuthenticationError
from parley.service.local import check_local_request
from parley.service.settings import ServiceSettings
from parley.service.store import Store

__all__ = ["LOCAL_USER", "SECRET_USER", "authenticate", "current_user"]

LOCAL_USER = "local"
"""The user of every request when no auth is configured."""
SECRET_USER = "default"
"""The user who holds the shared secret."""

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
    if not state.settings.auth_enabled:
        check_local_request(request, state.settings)
    token = credentials.credentials if credentials is not None else None
    return await authenticate(state.settings, state.store, token)
