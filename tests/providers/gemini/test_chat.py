"""`GeminiChatModel` through the real `google-genai` SDK against the local wire-format server."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from parley import Msg
from parley.errors import (
    ConfigurationError,
    ContentFilterError,
    UserError,
)
from parley.messages import Base64Source, ImageBlock, TextBlock, ThinkingBlock
from parley.providers.gemini import GeminiChatModel, GeminiCredential
from parley.providers.gemini.formatter import PART_SIGNATURE
from parley.providers.gemini.server import (
    FunctionCall,
    GeminiServer,
    HTTPError,
    Reply,
)
from tests.providers._chat import HI, TOOLS
from tests.providers._fixtures import ModelFactory

PATH = "/v1/models/gemini-2.5-flash"


# -- answers --------------------------------------------------------------------------------


async def test_the_request_the_version_and_the_thought_tokens(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    # The answer, its finish and its usage, as every provider's: test_chat_contract.py.
    server.add(
        Reply(
            text="Hello!",
            input_tokens=12,
            output_tokens=3,
            thoughts_tokens=5,
            cached_tokens=8,
            model_version="gemini-2.5-flash-001",
            response_id="resp-1",
        )
    )
    response = await make_model().chat([Msg.system("Be brief."), *HI])
    assert (response.id, response.model) == ("resp-1", "gemini-2.5-flash-001")
    assert response.usage is not None
    # Thoughts are billed as output: 3 answer tokens and 5 thought tokens.
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 8)
    assert response.usage.cached_tokens == 8
    request = server.requests[0]
    assert request.path == f"{PATH}:generateContent"
    assert request.headers["x-goog-api-key"] == "test-key"
    assert request.json == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
    }
    server.assert_consumed()


async def test_a_stream_goes_to_stream_generate_content(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    # The stream's chunks and usage, as every provider's: tests/providers/test_chat_contract.py.
    server.add(Reply(text="Hello, world", chunk_size=5))
    await make_model().chat_stream(HI).collect()
    assert server.requests[0].path == f"{PATH}:streamGenerateContent?alt=sse"


# -- tools ----------------------------------------------------------------------------------


async def test_parallel_function_calls_streamed(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    calls = [
        FunctionCall("weather", {"city": "Paris"}, id="fc_a"),
        FunctionCall("time", {"tz": "CET"}),
    ]
    server.add(Reply(text="Checking.", function_calls=calls), Reply(text="Done."))
    model = make_model()
    chunks = [c async for c in model.chat_stream(HI, tools=TOOLS)]
    final = chunks[-1]
    # Gemini ends a tool-calling answer with STOP; parley says why it stopped.
    assert final.finish_reason == "tool_calls"
    (first, second) = final.tool_calls
    assert (first.id, first.name, first.input) == ("fc_a", "weather", {"city": "Paris"})
    # No id from the API: parley makes one for its own messages.
    assert (second.name, second.input) == ("time", {"tz": "CET"})
    assert second.id.startswith("call_")
    streamed = [c.tool_calls[0].raw_input for c in chunks[:-1] if c.tool_calls]
    assert streamed == ['{"city": "Paris"}', '{"tz": "CET"}']
    results = [
        Msg.tool_result(first.id, "Sunny", name="weather"),
        Msg.tool_result(second.id, "9:00", name="time"),
    ]
    await model.chat([*HI, final.to_msg(), *results], tools=TOOLS)
    # The API's id goes back on the call and its response; parley's own id is not sent.
    _, turn, answers = server.bodies()[1]["contents"]
    assert [part["functionCall"] for part in turn["parts"][1:]] == [
        {"id": "fc_a", "name": "weather", "args": {"city": "Paris"}},
        {"name": "time", "args": {"tz": "CET"}},
    ]
    assert [part["functionResponse"] for part in answers["parts"]] == [
        {"id": "fc_a", "name": "weather", "response": {"output": "Sunny"}},
        {"name": "time", "response": {"output": "9:00"}},
    ]


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ("time", {"mode": "ANY", "allowedFunctionNames": ["time"]}),
    ],
)
async def test_tool_choice_on_the_wire(
    server: GeminiServer, make_model: ModelFactory, choice: str, config: dict[str, Any]
) -> None:
    server.add(Reply(text="ok"))
    await make_model().chat(HI, TOOLS, choice)
    body = server.bodies()[0]
    assert body["toolConfig"] == {"functionCallingConfig": config}
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "weather",
                    "description": "Weather.",
                    "parametersJsonSchema": {"type": "object"},
                },
                {
                    "name": "time",
                    "description": "Time.",
                    "parametersJsonSchema": {"type": "object"},
                },
            ]
        }
    ]


async def test_a_request_without_tools_is_only_its_contents(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    # No tool fields, as every provider's: the contract suite; here, nothing else either.
    server.add(Reply(text="ok"))
    await make_model(parameters={"parallel_tool_calls": True}).chat(HI, tool_choice="none")
    assert set(server.bodies()[0]) == {"contents"}


async def test_parameters_on_the_wire(server: GeminiServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    model = make_model(parameters={"temperature": 0.5, "max_tokens": 100})
    await model.chat(
        HI,
        top_k=40,
        seed=7,
        stop=["END"],
        thinking_budget=1024,
        include_thoughts=True,
        media_resolution="low",
        safety_settings=[{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
        cached_content="cachedContents/abc",
    )
    body = server.bodies()[0]
    assert body["generationConfig"] == {
        "temperature": 0.5,
        "maxOutputTokens": 100,
        "topK": 40,
        "seed": 7,
        "stopSequences": ["END"],
        "mediaResolution": "MEDIA_RESOLUTION_LOW",
        "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
    }
    assert body["safetySettings"] == [
        {"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}
    ]
    assert body["cachedContent"] == "cachedContents/abc"


async def test_thinking_level_on_the_wire(server: GeminiServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    await make_model("gemini-3.8-flash").chat(HI, thinking_level="low")
    assert server.bodies()[0]["generationConfig"] == {"thinkingConfig": {"thinkingLevel": "LOW"}}


async def test_unknown_parameter_is_a_user_error(make_model: ModelFactory) -> None:
    with pytest.raises(UserError, match="unknown parameter 'temprature'"):
        await make_model().chat(HI, temprature=1)


# -- thinking and thought signatures --------------------------------------------------------


async def test_thought_signatures_round_trip_on_their_parts(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    calls = [
        FunctionCall("weather", {"city": "Oslo"}, id="c1", signature="sig-call"),
        FunctionCall("time", {}, id="c2"),
    ]
    server.add(
        Reply(thinking="Let me think.", thought_signature="sig-thought", function_calls=calls),
        Reply(text="Sunny at noon.", text_signature="sig-text"),
        Reply(text="Bye."),
    )
    model = make_model()
    first = await model.chat_stream(HI, tools=TOOLS, include_thoughts=True).collect()
    assert first.thinking == "Let me think."
    history = [
        *HI,
        first.to_msg(),
        Msg.tool_result("c1", "Sunny", name="weather"),
        Msg.tool_result("c2", "12:00", name="time"),
    ]
    second = await model.chat(history, tools=TOOLS)
    await model.chat([*history, second.to_msg(), Msg.user("Thanks")], tools=TOOLS)
    sent = server.bodies()[1]["contents"]
    # The streamed thought pieces make one thinking block, its signature on it; the call's
    # signature is back on the call's part, and the second call (unsigned) has none.
    assert sent[1] == {
        "role": "model",
        "parts": [
            {"text": "Let me think.", "thought": True, "thoughtSignature": "sig-thought"},
            {
                "functionCall": {"id": "c1", "name": "weather", "args": {"city": "Oslo"}},
                "thoughtSignature": "sig-call",
            },
            {"functionCall": {"id": "c2", "name": "time", "args": {}}},
        ],
    }
    assert sent[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "c1", "name": "weather", "response": {"output": "Sunny"}}},
            {"functionResponse": {"id": "c2", "name": "time", "response": {"output": "12:00"}}},
        ],
    }
    third = server.bodies()[2]["contents"]
    assert third[3] == {
        "role": "model",
        "parts": [{"text": "Sunny at noon.", "thoughtSignature": "sig-text"}],
    }


async def test_thinking_streamed_with_its_signature(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(thinking="abcdef", thought_signature="sig", text="Hi!", trailing_signature="end")
    )
    chunks = [c async for c in make_model().chat_stream(HI)]
    thinking = [c.content[0] for c in chunks[:-1] if c.content[0].type == "thinking"]
    assert [(b.thinking, b.signature) for b in thinking[:2]] == [("abcd", None), ("ef", "sig")]
    final = chunks[-1]
    # The trailing empty text part's signature is kept after the text it ends.
    assert final.content == [
        ThinkingBlock(thinking="abcdef", signature="sig", provider="gemini"),
        TextBlock(text="Hi!"),
        ThinkingBlock(thinking="", extra={PART_SIGNATURE: "end"}, provider="gemini"),
    ]


async def test_media_the_model_made_is_a_block(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    png = "iVBORw0KGgo="
    server.add(Reply(text="Here:", parts=[{"inlineData": {"mimeType": "image/png", "data": png}}]))
    response = await make_model().chat(HI)
    assert response.content[1] == ImageBlock(source=Base64Source(media_type="image/png", data=png))


# -- structured output ----------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


ROME = {"name": "Rome", "population": 1}


async def test_structured_output_native(server: GeminiServer, make_model: ModelFactory) -> None:
    server.add(Reply(text='{"name": "Paris", "population": 2}'))
    result = await make_model().generate_structured_output(HI, City)
    assert result.strategy == "native"
    assert result.parsed == City(name="Paris", population=2)
    config = server.bodies()[0]["generationConfig"]
    assert config == {
        "responseMimeType": "application/json",
        "responseJsonSchema": City.model_json_schema(),
    }
    assert "tools" not in server.bodies()[0]


async def test_structured_output_falls_back_to_a_forced_call_then_text(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    server.add(
        HTTPError(400, "responseJsonSchema is not supported for this model"),
        HTTPError(400, "function calling is not supported for this model"),
        Reply(text='Sure: ```json\n{"name": "Oslo", "population": 1}\n```'),
    )
    result = await make_model().generate_structured_output(HI, City)
    assert result.strategy == "text"
    assert result.content == {"name": "Oslo", "population": 1}
    _native, forced, text = server.bodies()
    assert forced["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["generate_response"]}
    }
    assert forced["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == (
        City.model_json_schema()
    )
    assert "generationConfig" not in forced
    # The instruction joins the user's turn (consecutive user messages make one content).
    (turn,) = text["contents"]
    assert turn["parts"][0] == {"text": "Hi"}
    assert "JSON schema" in turn["parts"][1]["text"]
    server.assert_consumed()


async def test_structured_output_by_forced_call(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    server.add(
        HTTPError(400, "not supported"),
        Reply(function_calls=[FunctionCall("generate_response", ROME)]),
    )
    result = await make_model().generate_structured_output(HI, City)
    assert (result.strategy, result.parsed) == ("forced", City(name="Rome", population=1))


# -- error mapping and finish reasons --------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_blocked_prompt_is_a_content_filter_error(
    server: GeminiServer, make_model: ModelFactory, stream: bool
) -> None:
    server.add(Reply(block_reason="PROHIBITED_CONTENT"), Reply(text="unused"))
    model = make_model()
    call = model.chat_stream(HI).collect() if stream else model.chat(HI)
    with pytest.raises(ContentFilterError, match="blocked the prompt \\(PROHIBITED_CONTENT\\)"):
        await call
    assert len(server.requests) == 1  # never retried


FINISHES: dict[str, list[str]] = {
    "stop": ["STOP"],
    # CONTINUATION: paused at the per-request limit, the answer is not whole.
    "length": ["MAX_TOKENS", "CONTINUATION"],
    "content_filter": [
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
        "ESCALATION",
        "PUP_LIMITED_DISABLED",
    ],
    "error": [
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "MISSING_THOUGHT_SIGNATURE",
        "MALFORMED_RESPONSE",
        "IMAGE_OTHER",
        "NO_IMAGE",
        "OTHER",
        "FINISH_REASON_UNSPECIFIED",
    ],
}
"""What the user sees (parley's finish reason) for each of Gemini's."""
REASONS = [(reason, seen) for seen, reasons in FINISHES.items() for reason in reasons]


def test_every_finish_reason_of_the_sdk_is_mapped() -> None:
    from google.genai.types import FinishReason  # noqa: PLC0415  (the fixtures require it)

    assert {member.value for member in FinishReason} <= {reason for reason, _ in REASONS}


@pytest.mark.parametrize(("reason", "expected"), REASONS)
async def test_finish_reasons(
    server: GeminiServer, make_model: ModelFactory, reason: str, expected: str
) -> None:
    server.add(Reply(text="partial", finish_reason=reason), Reply(text="x", finish_reason=reason))
    model = make_model()
    for response in (await model.chat(HI), await model.chat_stream(HI).collect()):
        assert response.finish_reason == expected
        # Gemini's own reason tells apart what parley's groups (SAFETY or RECITATION...).
        assert response.metadata["finish_reason"] == reason


async def test_a_malformed_call_says_what_was_wrong(
    server: GeminiServer, make_model: ModelFactory
) -> None:
    message = "Malformed function call: print(weather(city=Paris"
    for _ in range(2):
        server.add(Reply(finish_reason="MALFORMED_FUNCTION_CALL", finish_message=message))
    model = make_model()
    for response in (await model.chat(HI, tools=TOOLS), await model.chat_stream(HI).collect()):
        assert (response.finish_reason, response.tool_calls) == ("error", [])
        assert response.metadata == {
            "finish_reason": "MALFORMED_FUNCTION_CALL",
            "finish_message": message,
        }


# -- Vertex AI -------------------------------------------------------------------------------


async def test_vertex_ai_with_a_project(server: GeminiServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="from Vertex"), Reply(text="streamed from Vertex"))
    credential = server.credential(
        "", vertexai=True, project="my-proj", location="europe-west4", access_token="ya29.token"
    )
    model = make_model(credential=credential)
    assert (await model.chat(HI)).text == "from Vertex"
    assert (await model.chat_stream(HI).collect()).text == "streamed from Vertex"
    base = "/v1beta1/projects/my-proj/locations/europe-west4/publishers/google/models"
    assert [r.path for r in server.requests] == [
        f"{base}/gemini-2.5-flash:generateContent",
        f"{base}/gemini-2.5-flash:streamGenerateContent?alt=sse",
    ]
    assert server.requests[0].headers["authorization"] == "Bearer ya29.token"
    assert "x-goog-api-key" not in server.requests[0].headers


async def test_vertex_ai_express_mode(server: GeminiServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="express"))
    credential = server.credential("vertex-key", vertexai=True)
    assert (await make_model(credential=credential).chat(HI)).text == "express"
    request = server.requests[0]
    assert request.path == "/v1beta1/publishers/google/models/gemini-2.5-flash:generateContent"
    assert request.headers["x-goog-api-key"] == "vertex-key"


async def test_vertex_ai_without_a_project_is_a_configuration_error(
    server: GeminiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    credential = GeminiCredential(vertexai=True, base_url=server.url)
    with pytest.raises(ConfigurationError, match="Vertex AI needs a project"):
        await GeminiChatModel(credential, "gemini-2.5-pro").chat(HI)
