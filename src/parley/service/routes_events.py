"""`GET /runs/{run_id}/stream`: a run's events from its event log, picked up where a client was.

Any replica serves it, for a run running anywhere or ended (until its log's retention): the
frames come from the store (`parley.service.events`), each with its `id:`. `Last-Event-ID`
says where to start: absent, live events only (from now); `-1`, every event from the
start; an id the stream gave, the frames after it, exactly once. An id that is not one of
the run's is 400, a log dropped after its retention 410, another user's run 404. The stream
ends after the run's end (`[DONE]`); a run that had ended gives, with no header, `[DONE]`
alone (nothing is live any more: read `GET /runs/{run_id}`). A client leaving does not stop
the run: this stream only reads it.

Once the stream has started, a failure is told in it, not as a status: a log dropped
meanwhile (its retention ran out between the check and the first read) is an `error` frame
and `[DONE]`, as the toolkit ends a failed stream; any other (the database gone) cuts the
stream with no `[DONE]`, and the client picks it up again with `Last-Event-ID`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse

from parley.errors import NotFoundError, ServiceError
from parley.service.auth import current_user
from parley.service.runs_protocol import EventLog, EventsExpiredError
from parley.service.schema import ErrorDetail, EventsMode, error_responses
from parley.service.sse import DONE, event_frames, frame, parse_frame_id, with_heartbeats
from parley.service.state import ServiceState, get_state
from parley.service.strict import StrictRoute

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["runs"], route_class=StrictRoute)

State = Annotated[ServiceState, Depends(get_state)]
User = Annotated[str, Depends(current_user)]

_SSE: dict[int | str, dict[str, Any]] = {
    **error_responses(401, 404),
    400: {
        "model": ErrorDetail,
        "description": "`Last-Event-ID` is not an id of this run's stream (nor -1).",
    },
    410: {
        "model": ErrorDetail,
        "description": "The run's events are no longer kept (PARLEY_EVENT_RETENTION).",
    },
    200: {
        "description": "Server-sent events: the run's frames, each with its `id:`, "
        "`: heartbeat` comments while the run is quiet, then `data: [DONE]`.",
        "content": {
            "text/event-stream": {
                "example": 'id: 3\ndata: {"type": "text_delta", "text": "Hello", '
                '"thread_id": "t", "run_id": "r"}\n\ndata: [DONE]\n\n'
            }
        },
    },
}


def event_log(state: ServiceState) -> EventLog:
    """The service's event log.

    Raises:
        ServiceError: The service was built without one (503).
    """
    if state.events is None:
        raise ServiceError("this service keeps no run event log", status_code=503)
    return state.events


@router.get("/runs/{run_id}/stream", responses=_SSE)
async def stream_run(
    run_id: str,
    state: State,
    user: User,
    events: Annotated[
        EventsMode, Query(description="Frames: parley's events (default) or the toolkit's.")
    ] = "parley",
    stream_tokens: Annotated[bool, Query(description="Whether to send text deltas.")] = True,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """A run's events as server-sent events, from where `Last-Event-ID` says, then live."""
    record = await state.store.get_run(run_id, user)
    if record is None:
        raise NotFoundError(f"run {run_id!r} not found", status_code=404)
    seen = parse_frame_id(run_id, last_event_id)
    log = event_log(state)
    # From the event the client was in (its later frames may be due), or from now.
    after = None if seen is None else max(seen[0] - 1, 0)
    if seen is not None:
        await log.check(run_id, seen[0])  # 400 and 410 before the stream starts
    else:
        await log.check(run_id, None)
    frames = event_frames(
        log.follow(run_id, after),
        thread_id=record.thread_id,
        run_id=run_id,
        mode=events,
        stream_tokens=stream_tokens,
        seen=seen,
    )
    headers = {
        "Cache-Control": "no-store",
        "X-Accel-Buffering": "no",
        "X-Thread-Id": record.thread_id,
        "X-Run-Id": run_id,
        "Location": f"/runs/{run_id}/stream",
        "Content-Location": f"/runs/{run_id}",
    }
    return StreamingResponse(
        _told(with_heartbeats(frames), run_id), media_type="text/event-stream", headers=headers
    )


async def _told(frames: AsyncIterator[str], run_id: str) -> AsyncIterator[str]:
    """`frames`; a failure after the headers went is told in the stream (see the module)."""
    try:
        async for text in frames:
            yield text
    except EventsExpiredError as exc:
        yield frame({"type": "error", "content": str(exc)})
        yield DONE
    except Exception:
        log.warning("run %s: a reader's stream broke off", run_id, exc_info=True)
    finally:  # now, not when the garbage collector gets to it: it holds a reader's place
        close = getattr(frames, "aclose", None)
        if close is not None:
            await close()
