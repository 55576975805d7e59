"""`GeminiChatModel`: Google's Gemini models, on the Gemini API or Vertex AI."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, ClassVar

from parley.models._aiohttp import LoopClients, PooledClients
from parley.models._wire import iter_events, read_json
from parley.models.accumulator import Delta, StreamAccumulator
from parley.models.base import ChatModel, ChatRequest
from parley.models.credentials import Credential
from parley.models.formatter import Formatter
from parley.models.parameters import Parameters
from parley.models.response import ChatResponse
from parley.providers.gemini._errors import gemini_errors
from parley.providers.gemini._sdk import Endpoint, client_pool, post
from parley.providers.gemini._wire import ResponseReader
from parley.providers.gemini.credentials import GeminiCredential
from parley.providers.gemini.formatter import (
    GeminiChatFormatter,
    GeminiMultiAgentFormatter,
    split_system,
)
from parley.providers.gemini.parameters import GeminiParameters

if TYPE_CHECKING:
    from google.genai._api_client import BaseApiClient

__all__ = ["GeminiChatModel", "tool_fields"]

_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def tool_fields(request: ChatRequest) -> dict[str, Any]:
    """`tools` and `toolConfig` (nothing when no tools are given).

    Tools are `functionDeclarations` whose parameters are JSON schema as given
    (`parametersJsonSchema`, which takes `$ref`/`$defs`, unlike the older OpenAPI-subset
    `parameters`). `tool_choice` maps to `functionCallingConfig.mode`: `auto` AUTO, `none`
    NONE, `required` ANY, a tool's name ANY with `allowedFunctionNames` set to it.
    """
    if not request.tools:
        return {}
    declarations = []
    for spec in request.tools:
        declaration: dict[str, Any] = {"name": spec.name}
        if spec.description:
            declaration["description"] = spec.description
        declaration["parametersJsonSchema"] = spec.parameters
        declarations.append(declaration)
    fields: dict[str, Any] = {"tools": [{"functionDeclarations": declarations}]}
    choice = request.tool_choice
    if choice is not None:
        config: dict[str, Any] = {"mode": _MODES.get(choice, "ANY")}
        if choice not in _MODES:
            config["allowedFunctionNames"] = [choice]
        fields["toolConfig"] = {"functionCallingConfig": config}
    return fields


_GENERATION = re.compile(r"gemini-(\d+)")


def requires_signatures(model: str) -> bool:
    """Whether the model refuses a function call without a thought signature: Gemini 3 on.

    Google's thought-signatures guide: Gemini 3 models answer 400 to a history whose model
    turns call functions without the signature they came with, as a turn another model
    wrote does; earlier models do not check.
    """
    found = _GENERATION.search(model)
    return found is not None and int(found.group(1)) >= 3


class GeminiChatModel(PooledClients["BaseApiClient"], ChatModel):
    """A Gemini model, through the official `google-genai` SDK.

    Supported: text; thinking (`thinking_budget`, `include_thoughts`, `thinking_level`) with
    thought summaries as thinking blocks and thought signatures sent back on the parts they
    came on; function calling (ids kept when the API gives them; `tool_choice` as
    `functionCallingConfig`); system instructions; media in and out (`inlineData`,
    `fileData`); native structured output (`responseMimeType: application/json` with
    `responseJsonSchema`), falling back to a forced function call (mode ANY with the tool
    allowed), then to JSON read from text; usage with thoughts and cached tokens; every
    finish reason (`parley.providers.gemini._wire.FINISH_REASONS`), Gemini's own kept in the
    response's `metadata["finish_reason"]` (and `metadata["finish_message"]` when it
    explains it); a blocked prompt (`promptFeedback.blockReason`) raises
    `ContentFilterError`.

    Streams call `:streamGenerateContent?alt=sse`, whole answers `:generateContent`. The
    Gemini API sends each function call whole, in one event, so a call's arguments arrive in
    one delta (Vertex AI's partial-argument streaming, `streamFunctionCallArguments`, is not
    asked for).

    Example:
        >>> model = GeminiChatModel(GeminiCredential(api_key="AIza..."), "gemini-2.5-flash")
        >>> response = await model([Msg.user("Hi!")])  # doctest: +SKIP
    """

    multi_agent_formatter_class = GeminiMultiAgentFormatter

    provider: ClassVar[str] = "gemini"
    credential_class: ClassVar[type[Credential] | None] = GeminiCredential
    parameters_class: ClassVar[type[Parameters]] = GeminiParameters
    cards_location: ClassVar[str | None] = "parley.providers.gemini"
    structured_strategies: ClassVar[tuple[str, ...]] = ("native", "forced", "text")
    extra_headers: ClassVar[dict[str, str]] = {}

    _pool: LoopClients[BaseApiClient] | None = None

    # -- the request ----------------------------------------------------------------------

    def default_formatter(self) -> Formatter:
        """The formatter used when none was given (signatures filled in for Gemini 3)."""
        return GeminiChatFormatter(fill_missing_signatures=requires_signatures(self.model))

    def multi_agent_formatter(self, self_name: str) -> Formatter | None:
        """The multi-agent formatter, on this model's own formatter (see `default_formatter`)."""
        if self.formatter is None:
            return GeminiMultiAgentFormatter(self_name, self.default_formatter())
        return super().multi_agent_formatter(self_name)

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body of a `generateContent` request."""
        formatter = self.formatter or self.default_formatter()
        system, contents = split_system(formatter.format(request.messages))
        body: dict[str, Any] = {"contents": contents}
        if system is not None:
            body["systemInstruction"] = system
        body.update(tool_fields(request))
        parameters = request.parameters
        config: dict[str, Any] = {}
        if isinstance(parameters, GeminiParameters):
            config = parameters.generation_config()
            body.update(parameters.request_fields())
        if request.response_format is not None:
            config["responseMimeType"] = "application/json"
            config["responseJsonSchema"] = request.response_format
        if config:
            body["generationConfig"] = config
        return body

    def _path(self, api: BaseApiClient, *, stream: bool) -> str:
        from google.genai import _transformers  # noqa: PLC0415  (loaded with the SDK)

        # `models/<name>` on the Gemini API, `publishers/google/models/<name>` on Vertex AI.
        name = _transformers.t_model(api, self.model)
        return f"{name}:streamGenerateContent?alt=sse" if stream else f"{name}:generateContent"

    # -- the client -----------------------------------------------------------------------

    def endpoint(self) -> str | None:
        """The base URL requests go to."""
        credential = self.credential
        return credential.endpoint() if isinstance(credential, GeminiCredential) else None

    def new_pool(self) -> LoopClients[BaseApiClient]:
        """One SDK API client per event loop (see `client_pool`)."""
        credential = self.credential
        assert isinstance(credential, GeminiCredential)
        return client_pool(Endpoint(credential, self.timeout, self.extra_headers))

    async def _send(self, body: dict[str, Any], *, stream: bool) -> Any:
        """Send `body`; the raw (httpx2) response, its body not read yet."""
        api = self.client()
        return await post(api, self._path(api, stream=stream), body)

    # -- calling --------------------------------------------------------------------------

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        self.check_allowed(self.endpoint())
        reader = ResponseReader(model=self.model)
        body = self.request_body(request)
        with gemini_errors(self.model):
            response = await self._send(body, stream=True)
            try:
                async for name, data in iter_events(response.aiter_bytes()):
                    for delta in reader.feed(name, data):
                        yield delta
            finally:
                await response.aclose()
        if not reader.complete:
            raise reader.incomplete("its last event (no finish reason)")

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        self.check_allowed(self.endpoint())
        body = self.request_body(request)
        with gemini_errors(self.model):
            response = await self._send(body, stream=False)
            try:
                data = await response.aread()
            finally:
                await response.aclose()
        parsed = read_json(data, model=self.model, provider=self.provider)
        accumulator = StreamAccumulator(self.model)
        for delta in ResponseReader(model=self.model).read(parsed):
            accumulator.add(delta)
        return accumulator.final()
