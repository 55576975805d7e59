"""LangGraph's server API over parley's agents, threads and runs, mounted at `/langgraph`.

What LangGraph's SDKs (`langgraph-sdk` for Python, `@langchain/langgraph-sdk` for
JavaScript, its React `useStream`, agent-chat-ui) call to run agents: assistants (each served
agent is one), threads (their state and history) and runs (create, stream, wait, join, join a
stream again with `Last-Event-ID`, cancel), with the stream modes `values`,
`messages-tuple`, `updates` and `custom`, and parley's approvals as interrupts resumed with
`command.resume`. Point a client at `http://host:8080/langgraph`.

- `convert`: parley's messages as LangChain message dicts, and back.
- `streams`: a run's events as LangGraph's stream parts and SSE frames.
- `state`: a thread as LangGraph's `Thread` and `ThreadState`.
- `backend`: the one place that starts and follows runs.
- `responses`: runs as `Run`s, their streams and results (headers, heartbeats).
- `auth`, `docs`, `models`: who asks (Bearer or X-Api-Key), the documented answers, bodies.
- `routes_threads`, `routes_runs`: the routes.
"""

from __future__ import annotations

from fastapi import APIRouter

from parley.service.langgraph import routes_runs, routes_threads

__all__ = ["router"]

router = APIRouter()  # the routers carry the prefix (`auth.PREFIX`)
router.include_router(routes_threads.router)
router.include_router(routes_runs.router)
