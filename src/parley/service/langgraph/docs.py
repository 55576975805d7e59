"""The OpenAPI `responses` of LangGraph's routes: each status they answer, documented."""

from __future__ import annotations

from typing import Any

from parley.service.schema import ErrorDetail, error_responses

__all__ = ["EVENT_STREAM", "JSON_RESULT", "answers"]

_MORE = {
    400: "A `Last-Event-ID` that is not one of the run's events (send one its stream gave, "
    "-1 for all, or none for live events only).",
    410: "The run's events are no longer kept (`event_retention`); read its thread instead.",
}

EVENT_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "LangGraph's stream parts as server-sent events (`event:`, `data:`, "
        "`id:`), `metadata` first; `: heartbeat` comments while idle.",
        "content": {"text/event-stream": {"example": 'event: metadata\r\ndata: {"run_id":...}'}},
    }
}
JSON_RESULT: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The thread's values when the run ended (`__interrupt__` when it waits "
        "for an approval, `__error__` when it failed); newlines before it while it runs.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


def answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The responses of a route's error answers (401 is on every route).

    A 422 (an unknown assistant, message type or stream mode, an option parley does not
    support) has the shape of FastAPI's, which documents it.
    """
    known = [c for c in codes if c not in _MORE]
    out = error_responses(401, *known)
    for code in codes:
        if code in _MORE:
            out[code] = {"model": ErrorDetail, "description": _MORE[code]}
    return out
