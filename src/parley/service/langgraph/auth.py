"""Who is asking, as every route decides it, with LangGraph's SDKs' way of sending a key too.

LangGraph's clients send their `apiKey` as `X-Api-Key`; parley's routes read
`Authorization: Bearer`. On LangGraph's routes either works (Bearer first): the key is then
checked exactly as everywhere (`parley.service.auth.current_user`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from parley.service.auth import current_user

__all__ = ["PREFIX", "langgraph_user"]

PREFIX = "/langgraph"
"""Where LangGraph's API is mounted (its own paths, `/threads`..., are parley's at the root).

Each router has it in its routes' paths, so a route's path is the one the schema lists."""

_bearer = HTTPBearer(auto_error=False, description="An API key, or the shared AUTH_SECRET.")


async def langgraph_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    x_api_key: Annotated[str | None, Header(description="An API key (LangGraph's SDKs).")] = None,
) -> str:
    """FastAPI dependency: the requesting user's id (see `current_user`)."""
    if credentials is None and x_api_key:
        credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=x_api_key)
    return await current_user(request, credentials)
