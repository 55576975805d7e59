"""A local server that speaks Ollama's API, scripted per test, with faults on demand.

`POST /api/chat` answers whole (JSON) or streamed (NDJSON) as each request asks, and
`POST /api/embed` with vectors, from a queue of scripted steps, and every request is
recorded. `GET /api/tags` and `POST /api/show` describe the models the server is given
(`ServedModel`). Drive it through
the official `ollama` SDK, or through parley's Ollama model:

    >>> from parley import Msg
    >>> from parley.providers.ollama import OllamaChatModel
    >>> with OllamaServer([Reply(text="Hello!")]) as server:
    ...     model = OllamaChatModel(server.credential(), "qwen3")
    ...     print(model.chat_sync([Msg.user("Hi")]).text)
    ...     model.close_sync()
    Hello!

Steps: `Reply` (an answer, with optional faults: a slow start, slow lines, a cut stream, a
malformed line, an `{"error": ...}` line), `HTTPError` (a status with Ollama's
`{"error": "..."}` body, e.g. `HTTPError.rate_limit(retry_after=0.1)` or
`HTTPError.not_found("llama3")`), `Reset` (the connection dropped without an answer), `Raw`
(bytes as given), or a function of the request that returns one. A request with no step
left is answered 500 and reported by `assert_consumed()`, which also fails on steps never
used.

`/api/embed` takes `Embeddings` steps (a vector per input, `vector_for(text, size)`, of the
size the request's `dimensions` asks, else 8; with optional faults: vectors missing, listed
out of order) and the same faults, its `prompt_eval_count` counting the words.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import SecretStr

from parley.providers._server.embeddings import Embeddings, text_tokens, vector_for
from parley.providers._server.http import RecordedRequest, Responder
from parley.providers._server.scripted import ScriptedServer, send_stream
from parley.providers._server.steps import ErrorAnswer, Raw, Reset, retry_headers
from parley.providers.ollama._server_wire import Reply, ToolCall, chat_lines, chat_object
from parley.providers.ollama.credentials import OllamaCredential

__all__ = [
    "Embeddings",
    "HTTPError",
    "OllamaServer",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Reset",
    "ServedModel",
    "Step",
    "ToolCall",
    "vector_for",
]


@dataclass
class HTTPError(ErrorAnswer):
    """An error status with Ollama's error body, `{"error": message}`.

    Args:
        status: The HTTP status.
        message: The error's text.
        headers: Extra headers (see `ErrorAnswer`).
        body: The whole body, instead of the provider-shaped one (see `ErrorAnswer`).
        delay: Seconds before answering (see `ErrorAnswer`).
    """

    message: str = "scripted error"

    @classmethod
    def rate_limit(cls, retry_after: float | None = None) -> HTTPError:
        """A 429 asking to wait `retry_after` seconds (`Retry-After`)."""
        return cls(429, "too many requests", headers=retry_headers(retry_after))

    @classmethod
    def not_found(cls, model: str) -> HTTPError:
        """The 404 Ollama answers for a model it has not pulled."""
        return cls(404, f"model '{model}' not found")

    def error_body(self) -> Any:
        """Ollama's error body."""
        return {"error": self.message}


@dataclass
class ServedModel:
    """A model the server has, for `/api/tags` and `/api/show`.

    Args:
        name: Its name, `family:tag`.
        capabilities: What `/api/show` says it can do (`completion`, `tools`, `thinking`,
            `vision`, `audio`, `embedding`).
        context_length: Its `model_info`'s `<architecture>.context_length`.
        embedding_length: Its `model_info`'s `<architecture>.embedding_length` (the size of
            an embedding model's vectors).
        architecture: Its `general.architecture`.
        parameter_size: Its size, as Ollama writes it (`8.2B`).
        deleted: Listed by `/api/tags`, but `/api/show` answers 404 (as for a model deleted
            between the two).
    """

    name: str
    capabilities: list[str] = field(default_factory=lambda: ["completion"])
    context_length: int | None = None
    embedding_length: int | None = None
    architecture: str = "llama"
    parameter_size: str = "8.0B"
    deleted: bool = False

    def details(self) -> dict[str, Any]:
        """Its `details`."""
        return {
            "parent_model": "",
            "format": "gguf",
            "family": self.architecture,
            "families": [self.architecture],
            "parameter_size": self.parameter_size,
            "quantization_level": "Q4_K_M",
        }

    def tag(self) -> dict[str, Any]:
        """Its entry in `/api/tags`."""
        return {
            "name": self.name,
            "model": self.name,
            "modified_at": "2025-05-10T08:06:48.639712648-07:00",
            "size": 4_683_075_271,
            "digest": "0a8c266910232fd3291e71e5ba1e058cc5af9d411192cf88b6d30e92b6e73163",
            "details": self.details(),
        }

    def show(self) -> dict[str, Any]:
        """Its `/api/show` answer."""
        info: dict[str, Any] = {"general.architecture": self.architecture}
        if self.context_length is not None:
            info[f"{self.architecture}.context_length"] = self.context_length
        if self.embedding_length is not None:
            info[f"{self.architecture}.embedding_length"] = self.embedding_length
        return {
            "modelfile": f"FROM {self.name}",
            "parameters": "",
            "template": "{{ .Prompt }}",
            "details": self.details(),
            "model_info": info,
            "capabilities": self.capabilities,
            "modified_at": "2025-05-10T08:06:48.639712648-07:00",
        }


Answer: TypeAlias = Reply | Embeddings | HTTPError | Reset | Raw
Step: TypeAlias = Answer | Callable[[RecordedRequest], "Step"]
"""What the server answers to one chat or embedding request."""


class OllamaServer(ScriptedServer):
    """An Ollama-compatible server on 127.0.0.1, scripted by steps (see the module docs).

    Args:
        steps: The answers to `/api/chat` and `/api/embed`, one per request, in order.
        models: The models `/api/tags` and `/api/show` describe.
        startup_timeout: Seconds to wait for the server to start.
    """

    answer_types = (Reply, Embeddings, HTTPError, Reset, Raw)

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        models: Iterable[ServedModel] = (),
        startup_timeout: float = 5.0,
    ) -> None:
        super().__init__(steps, startup_timeout=startup_timeout)
        self.models = list(models)
        """The models the server has (change it freely between requests)."""

    # -- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The server's base URL, `http://127.0.0.1:<port>`."""
        return self._http.base_url

    def credential(self, headers: dict[str, str] | None = None) -> OllamaCredential:
        """An `OllamaCredential` for this server, with extra `headers` if given."""
        secret = {name: SecretStr(value) for name, value in (headers or {}).items()}
        return OllamaCredential(host=self.url, headers=secret)

    # -- script -----------------------------------------------------------------------------

    def bodies(self, path: str = "/api/chat") -> list[Any]:
        """The JSON bodies of the requests received on `path` (the chat requests')."""
        return [r.json for r in self.requests if r.path.split("?", 1)[0] == path]

    # -- answering --------------------------------------------------------------------------

    def _handle(self, request: RecordedRequest, out: Responder) -> None:
        route = (request.method, request.path.split("?", 1)[0])
        if route in (("POST", "/api/chat"), ("POST", "/api/embed")):
            self._answer(request, out)
        elif route == ("GET", "/api/tags"):
            out.send_json(200, {"models": [model.tag() for model in self.models]})
        elif route == ("POST", "/api/show"):
            self._show(request, out)
        elif route == ("GET", "/api/version"):
            out.send_json(200, {"version": "0.12.0"})
        else:
            out.send(404, b"404 page not found", content_type="text/plain")

    def _show(self, request: RecordedRequest, out: Responder) -> None:
        body = request.json or {}
        name = body.get("model") or body.get("name") or ""
        found = next((m for m in self.models if m.name == name and not m.deleted), None)
        if found is None:
            out.send_json(404, {"error": f"model '{name}' not found"})
        else:
            out.send_json(200, found.show())

    def _answer(self, request: RecordedRequest, out: Responder) -> None:
        embed = request.path.split("?", 1)[0] == "/api/embed"
        step = self._next(request)
        if self._answer_alike(request, step, out, {"error": "no scripted response left"}):
            return
        if embed != isinstance(step, Embeddings):
            raise TypeError(f"a {type(step).__name__} step cannot answer {request.path}")
        if isinstance(step, Embeddings):
            out.sleep(step.delay)
            out.send_json(200, embed_object(step, request.json or {}))
        else:
            self._reply(request, step, out)

    @staticmethod
    def _reply(request: RecordedRequest, reply: Reply, out: Responder) -> None:
        body = request.json or {}
        model = str(body.get("model") or "")
        out.sleep(reply.delay)
        if body.get("stream") is False:  # Ollama streams unless told not to
            out.send_json(200, chat_object(reply, model))
            return
        lines = chat_lines(reply, model)
        error = _error_line(reply.error)
        malformed = b'{"message": {"content": \n'
        send_stream(out, lines, reply, malformed=malformed, error=error, content_type=_NDJSON)


def embed_object(step: Embeddings, body: dict[str, Any]) -> dict[str, Any]:
    """The `/api/embed` answer to a request body (Ollama's `api.EmbedResponse`).

    Ollama's vectors have no index, so `reverse` sends them in the wrong order unmarked.
    """
    value = body.get("input")
    texts = [value] if isinstance(value, str) else [str(t) for t in value or []]
    vectors = step.vectors(texts, body.get("dimensions"))
    answer: dict[str, Any] = {
        "model": str(body.get("model") or ""),
        "embeddings": vectors[::-1] if step.reverse else vectors,
        "total_duration": 14_143_917,
        "load_duration": 1_019_500,
    }
    if step.usage is None:
        answer["prompt_eval_count"] = sum(map(text_tokens, texts))
    else:
        answer.update(step.usage)
    return answer


_NDJSON = "application/x-ndjson"


def _error_line(message: str) -> bytes:
    return json.dumps({"error": message}).encode() + b"\n"
