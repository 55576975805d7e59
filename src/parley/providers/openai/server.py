"""A local server that speaks OpenAI's wire format, scripted per test, with faults on demand.

It serves `POST /v1/chat/completions` (and Azure OpenAI's
`/openai/deployments/{deployment}/chat/completions?api-version=...`, at `azure_endpoint`)
and `POST /v1/responses`, whole (JSON) or streamed (server-sent events) as each request
asks, `POST /v1/embeddings` and `POST /v1/audio/speech`, from a queue of scripted steps, and
records every request. Drive it through the official SDK, or through parley's OpenAI models:

    >>> from parley import Msg
    >>> from parley.providers.openai import OpenAIChatModel
    >>> with OpenAIServer([Reply(text="Hello!")]) as server:
    ...     model = OpenAIChatModel(server.credential(), "gpt-4o-mini")
    ...     print(model.chat_sync([Msg.user("Hi")]).text)
    ...     model.close_sync()
    Hello!

Steps: `Reply` (an answer, with optional faults: a slow start, slow chunks, a cut stream, a
malformed chunk, an error event), `HTTPError` (a status with an OpenAI-shaped body and
headers, e.g. `HTTPError.rate_limit(retry_after=0.1)`), `Reset` (the connection dropped
without an answer), `Raw` (bytes as given), or a function of the request that returns one.
A request with no step left is answered 500 and reported by `assert_consumed()`, which also
fails on steps never used.

`/v1/embeddings` takes `Embeddings` steps (a vector per input, `vector_for(text, size)`, of
the size the request's `dimensions` asks, else 8; with optional faults: vectors missing,
listed out of order) and the same faults, and answers as floats or base64 as the request's
`encoding_format` asks, its `usage` counting the words. The vectors show which input they
came from, so a test checks the order:

    >>> from parley.providers.openai.embeddings import OpenAIEmbeddingModel
    >>> with OpenAIServer([Embeddings()]) as server:
    ...     model = OpenAIEmbeddingModel(server.credential(), "text-embedding-3-small")
    ...     vectors = model.call_sync(["a", "b"], dimensions=4).embeddings
    ...     print(vectors == [vector_for("a", 4), vector_for("b", 4)])
    True

`/v1/audio/speech` takes `Speech` steps: the request's `input` in a scripted voice whose
samples are computable (`speech_pcm(text, speed)`: a tone per character), in the format the
request asks for, streamed in chunks; with optional faults: a slow start, slow chunks, the
connection cut after some bytes. A bad request (no `input`, an unknown voice, an input over
4096 characters...) is answered 400 with OpenAI's error body before any step is used:

    >>> from parley.tts import read_wav
    >>> from parley.providers.openai.speech import OpenAITTSModel
    >>> with OpenAIServer([Speech()]) as server:
    ...     model = OpenAITTSModel(server.credential(), "gpt-4o-mini-tts")
    ...     wav = model.synthesize_sync("Hi").audio_bytes
    ...     print(read_wav(wav)[0] == speech_pcm("Hi"))
    True
"""

from __future__ import annotations

import base64
import json
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias
from urllib.parse import parse_qs

from pydantic import SecretStr

from parley.providers._server.embeddings import Embeddings, text_tokens, vector_for
from parley.providers._server.http import RecordedRequest, Responder
from parley.providers._server.scripted import ScriptedServer, send_stream
from parley.providers._server.steps import ErrorAnswer, Raw, Reset, retry_headers
from parley.providers.openai._server_wire import (
    Reply,
    ToolCall,
    chat_chunks,
    chat_completion,
    response_events,
    response_object,
)
from parley.providers.openai._speech_server_wire import Speech, speech_error, speech_pcm
from parley.providers.openai.azure import AzureOpenAICredential
from parley.providers.openai.credentials import OpenAICompatibleCredential, OpenAICredential

__all__ = [
    "Embeddings",
    "HTTPError",
    "OpenAIServer",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Reset",
    "Speech",
    "Step",
    "ToolCall",
    "speech_pcm",
    "vector_for",
]


@dataclass
class HTTPError(ErrorAnswer):
    """An error status with an OpenAI-shaped error body.

    Args:
        status: The HTTP status.
        message: The error's message.
        code: The error's `code` (e.g. `context_length_exceeded`, `content_filter`).
        headers: Extra headers (see `ErrorAnswer`).
        body: The whole body, instead of the provider-shaped one (see `ErrorAnswer`).
        delay: Seconds before answering (see `ErrorAnswer`).
    """

    message: str = "scripted error"
    code: str | None = None

    @classmethod
    def rate_limit(
        cls, retry_after: float | None = None, *, retry_after_ms: float | None = None
    ) -> HTTPError:
        """A 429 asking to wait `retry_after` seconds (`Retry-After`) or ms (`retry-after-ms`)."""
        headers = retry_headers(retry_after) | retry_headers(retry_after_ms, "retry-after-ms")
        return cls(429, "Rate limit reached", code="rate_limit_exceeded", headers=headers)

    def error_body(self) -> Any:
        """OpenAI's error body."""
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": None, "code": self.code}}


Answer: TypeAlias = Reply | Embeddings | Speech | HTTPError | Reset | Raw
Step: TypeAlias = Answer | Callable[[RecordedRequest], "Step"]
"""What the server answers to one request."""

_PATHS = ("/v1/chat/completions", "/v1/responses")
_EMBEDDINGS = "/v1/embeddings"
_SPEECH = "/v1/audio/speech"
_AZURE_CHAT = re.compile(r"/openai/deployments/[^/?]+/chat/completions")
"""Azure OpenAI's chat path: the deployment in the path, `api-version` in the query."""


class OpenAIServer(ScriptedServer):
    """An OpenAI-compatible server on 127.0.0.1, scripted by steps (see the module docs).

    Args:
        steps: The answers, one per request, in order.
        startup_timeout: Seconds to wait for the server to start.
    """

    answer_types = (Reply, Embeddings, Speech, HTTPError, Reset, Raw)

    # -- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The API's base URL, `http://127.0.0.1:<port>/v1`."""
        return f"{self._http.base_url}/v1"

    @property
    def azure_endpoint(self) -> str:
        """The root an Azure OpenAI client takes as its resource's endpoint (no `/v1`)."""
        return self._http.base_url

    def credential(self, api_key: str = "sk-test") -> OpenAICredential:
        """An `OpenAICredential` for this server."""
        return OpenAICredential(api_key=SecretStr(api_key), base_url=self.url)

    def azure_credential(
        self, api_key: str = "azure-key", api_version: str = "2024-06-01"
    ) -> AzureOpenAICredential:
        """An `AzureOpenAICredential` for this server (its `azure_endpoint`)."""
        return AzureOpenAICredential(
            api_key=SecretStr(api_key), base_url=self.azure_endpoint, api_version=api_version
        )

    def compatible_credential(self, api_key: str | None = None) -> OpenAICompatibleCredential:
        """An `OpenAICompatibleCredential` for this server."""
        key = SecretStr(api_key) if api_key is not None else None
        return OpenAICompatibleCredential(api_key=key, base_url=self.url)

    # -- answering --------------------------------------------------------------------------

    def _handle(self, request: RecordedRequest, out: Responder) -> None:
        path, _, query = request.path.partition("?")
        if _AZURE_CHAT.fullmatch(path):
            if "api-version" not in parse_qs(query):
                # Azure answers a request without its API version so.
                out.send_json(404, {"error": {"code": "404", "message": "Resource not found"}})
                return
            path = _PATHS[0]  # answered as the chat path
        if request.method != "POST" or path not in (*_PATHS, _EMBEDDINGS, _SPEECH):
            out.send_json(404, {"error": {"message": f"no route {request.method} {path}"}})
            return
        invalid = speech_error(request.json) if path == _SPEECH else None
        if invalid is not None:
            out.send_json(400, invalid)  # checked before any step, as OpenAI checks first
            return
        step = self._next(request)
        if self._answer_alike(request, step, out, _MISSING):
            return
        if not isinstance(step, _ANSWERS.get(path, Reply)):
            raise TypeError(f"a {type(step).__name__} step cannot answer {path}")
        if isinstance(step, Embeddings):
            out.sleep(step.delay)
            out.send_json(200, embedding_list(step, request.json or {}))
        elif isinstance(step, Speech):
            self._speak(step, request.json, out)
        elif isinstance(step, Reply):
            self._reply(path, request, step, out)

    def _reply(self, path: str, request: RecordedRequest, reply: Reply, out: Responder) -> None:
        body = request.json or {}
        model = str(body.get("model") or "")
        out.sleep(reply.delay)
        chat = path.endswith("/chat/completions")
        if not body.get("stream"):
            whole = chat_completion(reply, model) if chat else response_object(reply, model)
            out.send_json(200, whole)
            return
        if chat:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [
                _sse("", data) for data in chat_chunks(reply, model, include_usage=include_usage)
            ]
            error = _sse("", json.dumps({"error": reply.error}))
        else:
            events = [_sse(name, data) for name, data in response_events(reply, model)]
            # The event's own `type` last: a Chat Completions error's `type` (`server_error`)
            # would otherwise stand in for it, and the event would read as no error at all.
            error = _sse("error", json.dumps({**reply.error, "type": "error"}))
        malformed = b'data: {"choices": [{"delta": \n\n'
        send_stream(out, events, reply, malformed=malformed, error=error)

    @staticmethod
    def _speak(step: Speech, body: dict[str, Any], out: Responder) -> None:
        data, content_type = step.audio(body)
        out.sleep(step.delay)
        out.start_stream(content_type)
        for chunk in step.chunks(data):
            out.sleep(step.chunk_delay)
            out.chunk(chunk)
        step.finished_at = time.perf_counter()
        if step.cut_after is not None and step.cut_after < len(data):
            out.drop(reset=step.reset)
        else:
            out.end_stream()


_MISSING = {"error": {"message": "no scripted response left", "type": "test"}}
_ANSWERS: dict[str, type] = {_EMBEDDINGS: Embeddings, _SPEECH: Speech}
"""The step each path other than the chat ones takes (they take `Reply`)."""


def _texts(value: Any) -> list[str]:
    """The request's `input` as texts (token arrays as their JSON)."""
    items = value if isinstance(value, list) and not _is_tokens(value) else [value]
    return [item if isinstance(item, str) else json.dumps(item) for item in items]


def _is_tokens(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(item, int) for item in value)


def _base64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def embedding_list(step: Embeddings, body: dict[str, Any]) -> dict[str, Any]:
    """The `list` of embeddings answering a `/v1/embeddings` request body."""
    texts = _texts(body.get("input"))
    vectors = step.vectors(texts, body.get("dimensions"))
    encode = _base64 if body.get("encoding_format") == "base64" else None
    data = [
        {"object": "embedding", "index": index, "embedding": encode(v) if encode else v}
        for index, v in enumerate(vectors)
    ]
    if step.reverse:
        data.reverse()
    answer: dict[str, Any] = {"object": "list", "data": data, "model": str(body.get("model") or "")}
    if step.usage is None:
        tokens = sum(map(text_tokens, texts))
        answer["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
    elif step.usage:
        answer["usage"] = step.usage
    return answer


def _sse(name: str, data: str) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {data}\n\n".encode()
