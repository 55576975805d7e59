"""What OpenAI's two chat models share: the credential, the client, the error mapping."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, ClassVar

from parley.models._wire import EventReader, iter_events, read_json
from parley.models.accumulator import Delta, StreamAccumulator
from parley.models.base import ChatModel
from parley.models.credentials import Credential
from parley.models.formatter import Formatter
from parley.models.response import ChatResponse
from parley.providers.openai._errors import openai_errors
from parley.providers.openai._sdk import OpenAIClients
from parley.providers.openai.credentials import OpenAICredential
from parley.providers.openai.formatter import OpenAIMultiAgentFormatter

__all__ = ["OpenAIModelBase"]


class OpenAIModelBase(OpenAIClients, ChatModel):
    """The base of parley's models on the openai SDK (not for direct use).

    Calls go through the SDK's `with_streaming_response`: the SDK supplies the client, auth,
    base URL and error statuses, parley reads the body itself (see `parley.models._wire`).
    The SDK's own retries are off, as parley's base retries.
    """

    provider: ClassVar[str] = "openai"
    credential_class: ClassVar[type[Credential] | None] = OpenAICredential
    cards_location: ClassVar[str | None] = "parley.providers.openai"

    multi_agent_formatter_class = OpenAIMultiAgentFormatter

    def default_formatter(self) -> Formatter:
        """The formatter used when none was given (each API's own)."""
        raise NotImplementedError

    def multi_agent_formatter(self, self_name: str) -> Formatter | None:
        """The model's formatter (Chat Completions' or Responses') folding other agents' turns."""
        if self.formatter is None:
            return OpenAIMultiAgentFormatter(self_name, self.default_formatter())
        return super().multi_agent_formatter(self_name)

    def errors(self) -> AbstractContextManager[None]:
        """Map SDK and transport errors raised inside the block to parley's."""
        return openai_errors(self.model, self.provider)

    def _open(self, body: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        """Send `body` through the SDK; the raw response, unparsed (each API's own)."""
        raise NotImplementedError

    async def stream_events(
        self, body: dict[str, Any], reader: EventReader
    ) -> AsyncIterator[Delta]:
        """Send a streaming request and turn its server-sent events into deltas."""
        self.check_allowed(self.endpoint())
        with self.errors():
            async with self._open(body) as response:
                # Read to the end, past the last event: a connection whose body was read whole
                # goes back to the pool for the next call.
                async for name, data in iter_events(response.iter_bytes()):
                    if not reader.stopped:
                        for delta in reader.feed(name, data):
                            yield delta
        if not reader.complete:
            raise reader.incomplete()

    async def fetch_json(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send a request for a whole answer and parse its JSON body."""
        self.check_allowed(self.endpoint())
        with self.errors():
            async with self._open(body) as response:
                data = await response.read()
        return read_json(data, model=self.model, provider=self.provider)

    def accumulate(self, deltas: Iterable[Delta]) -> ChatResponse:
        """The response that `deltas` (from a whole, non-streamed answer) make."""
        accumulator = StreamAccumulator(self.model)
        for delta in deltas:
            accumulator.add(delta)
        return accumulator.final()
