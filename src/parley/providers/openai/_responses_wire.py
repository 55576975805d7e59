"""Responses API answers, whole or as stream events, as parley deltas.

Reasoning items become thinking blocks whose `extra` keeps what OpenAI needs to accept them
back (`id`, `encrypted_content`, the `summary` texts); see `responses_formatter`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from parley.models._wire import EventReader, read_json
from parley.models.accumulator import Delta, MetaDelta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.models.response import ChatUsage, FinishReason
from parley.providers.openai._errors import error_from_payload

__all__ = ["ResponsesStreamReader", "reasoning_extra", "response_deltas", "responses_usage"]

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


def responses_usage(usage: dict[str, Any]) -> ChatUsage:
    """Usage from a Responses API `usage` object."""
    details = usage.get("input_tokens_details") or {}
    return ChatUsage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cached_tokens=details.get("cached_tokens") or 0,
    )


def _summary_texts(item: dict[str, Any]) -> list[str]:
    return [str(part.get("text") or "") for part in item.get("summary") or ()]


def reasoning_extra(item: dict[str, Any]) -> dict[str, Any]:
    """What a reasoning item needs kept to be sent back: id, encrypted content, summary."""
    extra: dict[str, Any] = {"id": item.get("id"), "summary": _summary_texts(item)}
    if item.get("encrypted_content"):
        extra["encrypted_content"] = item["encrypted_content"]
    return extra


def _reasoning_text(item: dict[str, Any]) -> str:
    # The summary when one was asked for; open models (gpt-oss on vLLM) send the reasoning
    # itself as `content` parts of type `reasoning_text`.
    summary = _summary_texts(item)
    if summary:
        return "\n\n".join(summary)
    return "".join(str(p.get("text") or "") for p in item.get("content") or ())


def _finish(response: dict[str, Any]) -> FinishReason | None:
    details = response.get("incomplete_details") or {}
    return _INCOMPLETE.get(details.get("reason") or "")


def _meta(response: dict[str, Any]) -> MetaDelta:
    usage = response.get("usage")
    return MetaDelta(
        usage=responses_usage(usage) if usage else None,
        finish_reason=_finish(response),
        response_id=response.get("id"),
        model=response.get("model"),
    )


def _item_deltas(index: int, item: dict[str, Any]) -> Iterator[Delta]:
    kind = item.get("type")
    if kind == "reasoning":
        yield ThinkingDelta(_reasoning_text(item), extra=reasoning_extra(item))
    elif kind == "message":
        for part in item.get("content") or ():
            text = part.get("text") or part.get("refusal")
            if text:
                yield TextDelta(text)
    elif kind == "function_call":
        arguments = item.get("arguments") or ""
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        yield ToolCallDelta(index, item.get("call_id"), item.get("name"), arguments)


def response_deltas(body: dict[str, Any], *, model: str, provider: str) -> Iterator[Delta]:
    """The deltas of a whole (non-streamed) response.

    Raises:
        ModelError: The response failed.
    """
    if body.get("error") or body.get("status") == "failed":
        raise error_from_payload(body.get("error") or body, model=model, provider=provider)
    for index, item in enumerate(body.get("output") or ()):
        yield from _item_deltas(index, item)
    yield _meta(body)


class ResponsesStreamReader(EventReader):
    """Turns Responses API stream events into deltas.

    It is `done` when the response ended; its arguments are `EventReader`'s.
    """

    def __init__(self, *, model: str, provider: str) -> None:
        super().__init__(model=model, provider=provider)
        self._arguments_seen: dict[int, bool] = {}
        self._summary_part: tuple[int, int] | None = None
        self._handlers: dict[str, Callable[[dict[str, Any]], Iterator[Delta]]] = {
            "response.created": self._created,
            "response.output_item.added": self._item_added,
            "response.output_item.done": self._item_done,
            "response.output_text.delta": self._text,
            "response.refusal.delta": self._text,
            "response.function_call_arguments.delta": self._arguments,
            "response.reasoning_summary_text.delta": self._summary,
            "response.reasoning_text.delta": self._reasoning,
            "response.completed": self._ended,
            "response.incomplete": self._ended,
            "response.failed": self._failed,
            "error": self._error,
        }

    def feed(self, name: str, data: bytes) -> Iterator[Delta]:
        """The deltas in one event (see `read`)."""
        return self.read(name, data)

    def read(self, name: str, data: bytes) -> Iterator[Delta]:
        """The deltas in one event (`name` is the SSE event name; the JSON `type` wins).

        Raises:
            ModelOutputError: The data is not a JSON object.
            ModelError: The response failed, or the stream carried an error.
        """
        event = read_json(data, model=self.model, provider=self.provider)
        handler = self._handlers.get(event.get("type") or name)
        return handler(event) if handler is not None else iter(())

    def _created(self, event: dict[str, Any]) -> Iterator[Delta]:
        response = event.get("response") or {}
        yield MetaDelta(response_id=response.get("id"), model=response.get("model"))

    def _item_added(self, event: dict[str, Any]) -> Iterator[Delta]:
        item = event.get("item") or {}
        if item.get("type") == "function_call":
            index = event.get("output_index", 0)
            arguments = item.get("arguments") or ""
            self._arguments_seen[index] = bool(arguments)
            yield ToolCallDelta(index, item.get("call_id"), item.get("name"), arguments)

    def _item_done(self, event: dict[str, Any]) -> Iterator[Delta]:
        item = event.get("item") or {}
        index = event.get("output_index", 0)
        if item.get("type") == "reasoning":
            # The summary streamed already; what is left is what sending it back needs.
            yield ThinkingDelta(extra=reasoning_extra(item))
        elif item.get("type") == "function_call" and not self._arguments_seen.get(index):
            # A server that sent the arguments whole, only with the finished item.
            seen = index in self._arguments_seen
            yield ToolCallDelta(
                index,
                None if seen else item.get("call_id"),
                None if seen else item.get("name"),
                item.get("arguments") or "",
            )

    def _text(self, event: dict[str, Any]) -> Iterator[Delta]:
        if delta := event.get("delta"):
            yield TextDelta(delta)

    def _arguments(self, event: dict[str, Any]) -> Iterator[Delta]:
        index = event.get("output_index", 0)
        if delta := event.get("delta"):
            self._arguments_seen[index] = True
            yield ToolCallDelta(index, arguments=delta)

    def _summary(self, event: dict[str, Any]) -> Iterator[Delta]:
        part = (event.get("output_index", 0), event.get("summary_index", 0))
        delta = event.get("delta") or ""
        if self._summary_part is not None and part != self._summary_part and part[1] > 0:
            delta = "\n\n" + delta  # summary parts read as paragraphs
        self._summary_part = part
        if delta:
            yield ThinkingDelta(delta)

    def _reasoning(self, event: dict[str, Any]) -> Iterator[Delta]:
        if delta := event.get("delta"):
            yield ThinkingDelta(delta)

    def _ended(self, event: dict[str, Any]) -> Iterator[Delta]:
        self.done = True
        yield _meta(event.get("response") or {})

    def _failed(self, event: dict[str, Any]) -> Iterator[Delta]:
        response = event.get("response") or {}
        raise error_from_payload(
            response.get("error") or response, model=self.model, provider=self.provider
        )

    def _error(self, event: dict[str, Any]) -> Iterator[Delta]:
        raise error_from_payload(event, model=self.model, provider=self.provider)
