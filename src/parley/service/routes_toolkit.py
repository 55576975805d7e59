"""agent-service-toolkit's endpoints, with its JSON: info, invoke, stream, history, feedback.

As the toolkit's current service has them: each of invoke, stream and history also under an
agent (`/{agent_id}/...`), the bare path meaning the default agent.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Response
from fastapi.responses import StreamingResponse

from parley.agents.events import RunEnded
from parley.compat.service_toolkit import (
    AgentInfo,
    ChatHistoryInput,
    Feedback,
    FeedbackResponse,
    UserInput,
)
from parley.messages import Msg
from parley.service.auth import current_user
from parley.service.bounds import check_messages
from parley.service.runs import RunHandle
from parley.service.runs_protocol import MultitaskStrategy
from parley.service.schema import (
    ModelInfo,
    ServiceChatHistory,
    ServiceChatMessage,
    ServiceInfo,
    ServiceStreamInput,
    ServiceUserInput,
    error_responses,
)
from parley.service.sse import chat_message_dicts
from parley.service.state import (
    ServiceState,
    collect,
    get_state,
    is_thread_id,
    new_thread_id,
    run_headers,
    sse_response,
)
from parley.service.strict import StrictRoute

__all__ = ["answer_of", "router"]

router = APIRouter(tags=["agent-service-toolkit"], route_class=StrictRoute)

State = Annotated[ServiceState, Depends(get_state)]
User = Annotated[str, Depends(current_user)]

_AUTH = error_responses(401)
# A run: an unknown agent (404), a busy thread (409), and for an
# answer waited for, a failed run (502); a stream reports that last one in a frame.
_INVOKE = error_responses(401, 404, 409, 502)
_SSE: dict[int | str, dict[str, Any]] = {
    **error_responses(401, 404, 409),
    200: {
        "description": "Server-sent events: token, message, interrupt and error frames, "
        "then `data: [DONE]`.",
        "content": {
            "text/event-stream": {
                "example": 'data: {"type": "token", "content": "Hello"}\n\ndata: [DONE]\n\n'
            }
        },
    },
}


@router.get("/info", responses=_AUTH)
async def info(state: State, _user: User) -> ServiceInfo:
    """The agents served, the model names clients may ask for, and the model that runs."""
    aliases = list(state.settings.model_aliases)
    choice = state.model_choice
    return ServiceInfo(
        agents=[AgentInfo(key=e.key, description=e.description) for e in state.registry],
        models=aliases,
        default_agent=state.registry.default,
        default_model=aliases[0] if aliases else "",
        model=ModelInfo(**dataclasses.asdict(choice)) if choice is not None else None,
    )


async def _start(state: ServiceState, user: str, agent_id: str, body: UserInput) -> RunHandle:
    entry = state.registry.get(agent_id)
    # Only a stream of parley frames carries speech (toolkit frames have no audio frame).
    speak = isinstance(body, ServiceStreamInput) and body.speak and body.events == "parley"
    speech = state.speech(speak)
    agent = state.agent_for(entry, body.model)
    thread_id = new_thread_id(body.thread_id)
    message = Msg.user(body.message)
    check_messages([message], state.settings.max_message_chars, ("body", "message"))
    strategy: MultitaskStrategy = (
        body.multitask_strategy
        if isinstance(body, ServiceUserInput | ServiceStreamInput)
        else "reject"
    )
    return await state.runs.start(
        agent,
        agent_key=entry.key,
        user_id=user,
        thread_id=thread_id,
        message=message,
        middleware=speech,
        multitask_strategy=strategy,
        model=body.model,
        speak=speak,
    )


async def answer_of(handle: RunHandle, response: Response) -> ServiceChatMessage:
    """Wait for the run; its final message as a `ChatMessage` (the headers name the run).

    Raises:
        HTTPException: The run failed (502: the model or the agent failed). Its answer names
            the thread and run too: a client that sent no thread id learns where its message
            went, and can read the run.
    """
    ended, error = await collect(handle)
    response.headers.update(run_headers(handle))
    if ended.status == "error":
        raise HTTPException(
            502, f"the run failed: {error or 'unknown error'}", headers=run_headers(handle)
        )
    return _final_message(ended, handle)


def _final_message(ended: RunEnded, handle: RunHandle) -> ServiceChatMessage:
    data: dict[str, Any]
    if ended.final is None:  # stopped before the model wrote anything
        data = {"type": "ai", "content": "", "run_id": handle.run_id, "thread_id": handle.thread_id}
    else:
        data = chat_message_dicts(ended.final, run_id=handle.run_id, thread_id=handle.thread_id)[0]
    return ServiceChatMessage.model_validate(data)


@router.post("/invoke", responses=_INVOKE)
async def invoke_default(
    body: ServiceUserInput, state: State, user: User, response: Response
) -> ServiceChatMessage:
    """Run the default agent on a message; its final answer."""
    return await _invoke(state, user, state.registry.default, body, response)


@router.post("/{agent_id}/invoke", responses=_INVOKE)
async def invoke(
    agent_id: str, body: ServiceUserInput, state: State, user: User, response: Response
) -> ServiceChatMessage:
    """Run an agent on a message; its final answer (type `ai`)."""
    return await _invoke(state, user, agent_id, body, response)


async def _invoke(
    state: ServiceState, user: str, agent_id: str, body: ServiceUserInput, response: Response
) -> ServiceChatMessage:
    handle = await _start(state, user, agent_id, body)
    return await answer_of(handle, response)


@router.post("/stream", response_class=StreamingResponse, responses=_SSE)
async def stream_default(body: ServiceStreamInput, state: State, user: User) -> StreamingResponse:
    """Stream the default agent's run on a message."""
    return await _stream(state, user, state.registry.default, body)


@router.post("/{agent_id}/stream", response_class=StreamingResponse, responses=_SSE)
async def stream(
    agent_id: str, body: ServiceStreamInput, state: State, user: User
) -> StreamingResponse:
    """Stream an agent's run on a message, as server-sent events."""
    return await _stream(state, user, agent_id, body)


async def _stream(
    state: ServiceState, user: str, agent_id: str, body: ServiceStreamInput
) -> StreamingResponse:
    # Started before the response, so an unknown agent (404), a busy thread (409) or a bad
    # model (422) is an HTTP error, not a frame.
    handle = await _start(state, user, agent_id, body)
    return sse_response(
        handle, body, send_timeout=state.settings.send_timeout, on_disconnect=body.on_disconnect
    )


@router.post("/history", responses=_AUTH)
async def history(
    body: ChatHistoryInput, state: State, user: User, response: Response
) -> ServiceChatHistory:
    """A thread's messages as `ChatMessage`s (system messages left out); unknown: none."""
    return await _history(state, user, body, response)


@router.post("/{agent_id}/history", responses=error_responses(401, 404))
async def agent_history(
    agent_id: str, body: ChatHistoryInput, state: State, user: User, response: Response
) -> ServiceChatHistory:
    """As `/history` (the toolkit's client asks its agent's): an unknown agent is 404.

    A thread is the caller's whatever agents answered in it, so the agent only has to exist.
    """
    state.registry.get(agent_id)
    return await _history(state, user, body, response)


async def _history(
    state: ServiceState, user: str, body: ChatHistoryInput, response: Response
) -> ServiceChatHistory:
    if not is_thread_id(body.thread_id):  # no thread has it, and no header could carry it
        return ServiceChatHistory(messages=[], thread_id=body.thread_id)
    response.headers["X-Thread-Id"] = body.thread_id
    thread = await state.store.get_thread(body.thread_id, user)
    if thread is None:
        return ServiceChatHistory(messages=[], thread_id=body.thread_id)
    rows = await state.store.get_messages(body.thread_id, user)
    messages = [
        ServiceChatMessage.model_validate(data)
        for msg, run_id in rows
        if msg.role != "system"  # the toolkit's app shows `custom` messages as task data
        for data in chat_message_dicts(msg, run_id=run_id, thread_id=body.thread_id)
    ]
    return ServiceChatHistory(messages=messages, thread_id=body.thread_id)


@router.post("/feedback", responses=error_responses(401, 404))
async def feedback(body: Feedback, state: State, user: User) -> FeedbackResponse:
    """Record feedback on one of the caller's runs."""
    await state.store.add_feedback(body.run_id, user, body.key, body.score, body.kwargs)
    return FeedbackResponse()


@router.get("/health", responses=error_responses(503))
async def health(state: State) -> dict[str, str]:
    """Whether the service and its database answer."""
    await state.check_database()
    return {"status": "ok"}
