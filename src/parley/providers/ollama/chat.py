"""`OllamaChatModel`: a model an Ollama server runs, through its `/api/chat`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic_core import to_json

from parley._sync import run_sync
from parley.errors import ModelConnectionError, ModelError
from parley.models.accumulator import Delta, StreamAccumulator
from parley.models.base import ChatModel, ChatRequest
from parley.models.cards import ModelCard
from parley.models.credentials import Credential
from parley.models.formatter import Formatter
from parley.models.parameters import Parameters
from parley.models.response import ChatResponse
from parley.models.retry import call_with_retries
from parley.models.tools import ToolSpec
from parley.providers.ollama._cards import bundled_card, card_from_server
from parley.providers.ollama._errors import PROVIDER, error_from_response, ollama_errors
from parley.providers.ollama._sdk import OllamaClients
from parley.providers.ollama._wire import ChatReader, iter_lines, parse_object
from parley.providers.ollama.credentials import OllamaCredential
from parley.providers.ollama.formatter import OllamaChatFormatter, OllamaMultiAgentFormatter
from parley.providers.ollama.parameters import OllamaParameters

if TYPE_CHECKING:
    import httpx

__all__ = ["OllamaChatModel", "offered_tools"]


def offered_tools(request: ChatRequest) -> list[ToolSpec]:
    """The tools to send for the request's `tool_choice`.

    Ollama has no `tool_choice`: `none` sends no tools, a tool's name sends only that tool
    (the model may still answer in text), `auto` and `required` send them all (`required`
    cannot be enforced).
    """
    choice = request.tool_choice
    if choice == "none":
        return []
    if choice in (None, "auto", "required"):
        return request.tools
    return [spec for spec in request.tools if spec.name == choice]


def _body(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes: raw, unless the server compressed them (a proxy may)."""
    if "content-encoding" in response.headers:
        return response.aiter_bytes()
    return response.aiter_raw()  # skips httpx's decoder and re-chunker on every line


class OllamaChatModel(OllamaClients, ChatModel):
    """A model behind an Ollama server's `/api/chat`, on the official `ollama` SDK.

    Streams are Ollama's NDJSON lines; tools, thinking (`think`: true/false or a level, the
    `thinking` of earlier turns sent back), structured output (`format` with the JSON
    schema first, then a tool, then the schema in the prompt), images (base64 in `images`),
    `keep_alive` and the model `options` (see `OllamaParameters`). The card of `qwen3:8b` is
    `qwen3`'s when there is no card of its own.

    Example:
        >>> model = OllamaChatModel(OllamaCredential(), "qwen3")
        >>> response = await model([Msg.user("Hi!")])  # doctest: +SKIP
    """

    multi_agent_formatter_class = OllamaMultiAgentFormatter

    provider: ClassVar[str] = PROVIDER
    credential_class: ClassVar[type[Credential] | None] = OllamaCredential
    parameters_class: ClassVar[type[Parameters]] = OllamaParameters
    cards_location: ClassVar[str | None] = "parley.providers.ollama"
    # Ollama constrains output to a JSON schema itself (`format`), and has no tool_choice
    # (so no forced tool call).
    structured_strategies: ClassVar[tuple[str, ...]] = ("native", "auto", "text")

    # -- configuration ------------------------------------------------------------------------

    def card(self) -> ModelCard | None:
        """This model's card: its own, else its family's (`qwen3:8b` takes `qwen3`'s)."""
        own = super().card()
        if own is not None:
            return own
        cards = type(self).list_models()
        if bundled_card(self.model, cards) is None:
            return None
        return card_from_server(self.model, cards)

    def default_formatter(self) -> Formatter:
        """The formatter used when none was given."""
        return OllamaChatFormatter()

    # -- loading ------------------------------------------------------------------------------

    async def load(self) -> ChatResponse:
        """Load the model into the server's memory now (a call without messages).

        Its finish reason is `stop` and its `metadata["done_reason"]` `load`.
        """
        return await self._no_messages(self.parameters)

    async def unload(self) -> ChatResponse:
        """Unload the model from the server's memory now (`keep_alive: 0`, no messages).

        Its finish reason is `stop` and its `metadata["done_reason"]` `unload`.
        """
        return await self._no_messages(self.parameters.merged(keep_alive=0))

    async def _no_messages(self, parameters: Parameters) -> ChatResponse:
        # Retried as any call, never answered from the response cache.
        request = ChatRequest(messages=[], parameters=parameters)
        return await call_with_retries(self.retry, lambda: self._complete(request))

    def load_sync(self) -> ChatResponse:
        """`load`, from synchronous code."""
        return run_sync(self.load())

    def unload_sync(self) -> ChatResponse:
        """`unload`, from synchronous code."""
        return run_sync(self.unload())

    # -- the wire -----------------------------------------------------------------------------

    def request_body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of the request."""
        formatter = self.formatter or self.default_formatter()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": formatter.format(request.messages),
            "stream": stream,  # always said: Ollama streams unless told not to
        }
        if tools := offered_tools(request):
            body["tools"] = [spec.openai() for spec in tools]
        if request.response_format is not None:
            body["format"] = request.response_format
        parameters = request.parameters
        if isinstance(parameters, OllamaParameters):
            body.update(parameters.wire_fields())
        return body

    async def _status_error(self, response: httpx.Response, host: str) -> ModelError:
        await response.aread()
        return error_from_response(response, model=self.model, host=host)

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        host = self.endpoint()
        self.check_allowed(host)
        content = to_json(self.request_body(request, stream=True))
        reader = ChatReader(model=self.model, host=host)
        with ollama_errors(self.model, host):
            session = self._session()
            async with session.http.stream("POST", session.chat_url, content=content) as response:
                if response.status_code >= 400:
                    raise await self._status_error(response, host)
                # Read to the end, past the last line: a connection whose body was read
                # whole goes back to the pool for the next call.
                async for line in iter_lines(_body(response)):
                    if not reader.done:
                        for delta in reader.read_line(line):
                            yield delta
        if not reader.done:
            raise ModelConnectionError(
                f"the ollama stream from {host} ended before it was done",
                model=self.model,
                provider=self.provider,
            )

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        host = self.endpoint()
        self.check_allowed(host)
        content = to_json(self.request_body(request, stream=False))
        with ollama_errors(self.model, host):
            session = self._session()
            response = await session.http.post(session.chat_url, content=content)
        if response.status_code >= 400:
            raise await self._status_error(response, host)
        reader = ChatReader(model=self.model, host=host)
        accumulator = StreamAccumulator(self.model)
        for delta in reader.read(parse_object(response.content, model=self.model)):
            accumulator.add(delta)
        return accumulator.final()
