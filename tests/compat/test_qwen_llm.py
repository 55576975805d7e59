"""`parley.compat.qwen.llm`: Qwen-Agent's model interface on parley's chat models.

Each behaviour is Qwen-Agent 0.0.34's (`qwen_agent/llm/base.py`, `function_calling.py`, the
`fncall_prompts`), checked against the stand-in servers' recorded requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from parley.compat.qwen import Agent
from parley.compat.qwen.llm import (
    LLM_REGISTRY,
    BaseChatModel,
    BaseFnCallModel,
    ModelServiceError,
    QwenChatAtDS,
    QwenVLChatAtOAI,
    TextChatAtAzure,
    TextChatAtOAI,
    get_chat_model,
    register_llm,
)
from parley.compat.qwen.llm.schema import ASSISTANT, USER, Message
from parley.errors import ConfigurationError
from parley.providers.openai.server import HTTPError, OpenAIServer, Reply, ToolCall
from tests.compat.qwen_examples._llm_support import nous_call

FUNCTIONS = [
    {
        "name": "get_time",
        "description": "The time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
USER_MSG = [{"role": "user", "content": "What time is it in Paris?"}]


def oai(server: OpenAIServer, **generate_cfg: Any) -> dict[str, Any]:
    return {"model": "qwen3", "model_server": server.url, "generate_cfg": generate_cfg}


def chat_once(cfg: dict[str, Any], messages: Any = USER_MSG, **kwargs: Any) -> Any:
    llm = get_chat_model(cfg)
    try:
        return llm.chat(messages, stream=False, **kwargs)
    finally:
        llm.close_sync()


# -- get_chat_model ------------------------------------------------------------------------------


def test_model_types_are_chosen_as_qwen_agent_chooses_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    assert type(get_chat_model({"model": "m", "model_server": "http://x/v1"})) is TextChatAtOAI
    assert type(get_chat_model("qwen-max")) is QwenChatAtDS  # a name alone
    assert get_chat_model("qwen-vl-max").model_type == "qwenvl_dashscope"
    assert get_chat_model("qwen-audio-turbo").model_type == "qwenaudio_dashscope"
    vl = get_chat_model({"model": "m", "model_type": "qwenvl_oai", "model_server": "http://x/v1"})
    assert type(vl) is QwenVLChatAtOAI
    assert vl.support_multimodal_input
    omni = get_chat_model({"model": "qwen-omni-turbo", "model_type": "qwenomni_oai"})
    assert omni.support_audio_input
    assert set(LLM_REGISTRY) >= {
        "oai",
        "qwen_dashscope",
        "qwenvl_oai",
        "qwenvl_dashscope",
        "qwenomni_oai",
        "qwenaudio_dashscope",
        "azure",
    }
    # `qwen_dashscope` sends functions natively by default (Qwen-Agent's `use_raw_api`).
    assert get_chat_model("qwen-max").use_raw_api
    assert not get_chat_model({"model": "m", "model_server": "http://x/v1"}).use_raw_api
    azure = get_chat_model({"model": "gpt-4o", "azure_endpoint": "https://x.openai.azure.com"})
    assert type(azure) is TextChatAtAzure
    assert not azure.use_raw_api  # a text type: functions in the prompt, as `oai`
    with pytest.raises(ValueError, match="cannot tell the model type"):
        get_chat_model({"model": "gpt-4o"})


class EchoLLM(BaseChatModel):
    """A model class of the user's own, as Qwen-Agent's docs write one."""

    def _chat_stream(
        self, messages: list[Message], delta_stream: bool, generate_cfg: dict[str, Any]
    ) -> Iterator[list[Message]]:
        text = f"echo: {messages[-1].content}"
        for end in range(4, len(text) + 1, 4):
            yield [Message(ASSISTANT, text[:end])]
        yield [Message(ASSISTANT, text)]

    def _chat_no_stream(
        self, messages: list[Message], generate_cfg: dict[str, Any]
    ) -> list[Message]:
        return [Message(ASSISTANT, f"echo: {messages[-1].content} ({generate_cfg.get('top_p')})")]

    def _chat_with_functions(self, *args: Any, **kwargs: Any) -> list[Message]:
        raise NotImplementedError


def test_a_registered_model_class_works_with_get_chat_model_and_agents() -> None:
    register_llm("test_echo")(EchoLLM)
    try:
        llm = get_chat_model(
            {"model": "e", "model_type": "test_echo", "generate_cfg": {"top_p": 0.5}}
        )
        assert type(llm) is EchoLLM
        *_, last = llm.chat([{"role": "user", "content": "hi"}])
        assert last == [{**last[0], "role": "assistant", "content": "echo: hi"}]
        assert llm.chat([Message(USER, "hi")], stream=False) == [
            Message(ASSISTANT, "echo: hi (0.5)")
        ]
        assert llm.quick_chat("yo") == "echo: yo"

        class Once(Agent):
            def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Any:
                return self._call_llm(messages)

        bot = Once(llm={"model": "e", "model_type": "test_echo"})
        assert bot.llm.__class__ is EchoLLM
        assert bot.run_nonstream([{"role": "user", "content": "hey"}])[-1]["content"] == "echo: hey"
    finally:
        LLM_REGISTRY.pop("test_echo")


class TextOnlyLLM(BaseFnCallModel):
    """A model class that writes text only: functions go through its prompt."""

    seen: list[list[Message]] = []

    def _chat_stream(
        self, messages: list[Message], delta_stream: bool, generate_cfg: dict[str, Any]
    ) -> Iterator[list[Message]]:
        yield self._chat_no_stream(messages, generate_cfg)

    def _chat_no_stream(
        self, messages: list[Message], generate_cfg: dict[str, Any]
    ) -> list[Message]:
        self.seen.append(messages)
        return [Message(ASSISTANT, "Let me look. " + nous_call("get_time", {"city": "Paris"}))]

    def _chat_with_functions(self, *args: Any, **kwargs: Any) -> Any:
        return super()._chat_with_functions(*args, **kwargs)


def test_a_registered_fncall_model_gets_the_functions_in_its_prompt() -> None:
    llm = TextOnlyLLM({"model": "t"})
    TextOnlyLLM.seen.clear()
    response = llm.chat(USER_MSG, functions=FUNCTIONS, stream=False)
    assert [m.get("content") for m in response] == ["Let me look.", ""]
    assert response[1]["function_call"] == {"name": "get_time", "arguments": '{"city": "Paris"}'}
    [prompt] = TextOnlyLLM.seen
    assert '"name": "get_time"' in str(prompt[0].content)


# -- azure ---------------------------------------------------------------------------------------


def azure(server: OpenAIServer, **extra: Any) -> dict[str, Any]:
    """Qwen-Agent's `azure` config for the stand-in: `model` is the deployment."""
    return {"model_type": "azure", "model": "gpt4o-dep", "api_base": server.azure_endpoint} | extra


def test_azure_chats_through_the_sdk_at_the_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-azure")  # Qwen-Agent's fallback for the key
    with OpenAIServer([Reply(text="Hello!"), Reply(text="Hi again!", chunk_size=3)]) as server:
        llm = get_chat_model(azure(server))
        try:
            whole = llm.chat(USER_MSG, stream=False)
            steps = list(llm.chat(USER_MSG))
        finally:
            llm.close_sync()
        requests = server.requests
    assert type(llm) is TextChatAtAzure
    assert [(m["role"], m["content"]) for m in whole] == [(ASSISTANT, "Hello!")]
    assert len(steps) > 1  # whole lists per step, as the stream came
    assert [m["content"] for m in steps[-1]] == ["Hi again!"]
    for request in requests:
        # Qwen-Agent's default API version; the key in Azure's header, no bearer token.
        assert (
            request.path == "/openai/deployments/gpt4o-dep/chat/completions?api-version=2024-06-01"
        )
        assert request.headers["api-key"] == "sk-azure"
        assert "authorization" not in request.headers
    assert len(requests) == 2


def test_azure_calls_functions_through_the_prompt() -> None:
    call = "Checking. " + nous_call("get_time", {"city": "Paris"})
    with OpenAIServer([Reply(text=call)]) as server:
        cfg = azure(server, api_base=None, azure_endpoint=server.azure_endpoint)
        del cfg["model_type"]  # `azure_endpoint` alone says `azure`, as in Qwen-Agent
        response = chat_once(
            cfg | {"api_key": "k", "api_version": "2024-10-21"}, functions=FUNCTIONS
        )
        [request] = server.requests
    assert request.path.endswith("/deployments/gpt4o-dep/chat/completions?api-version=2024-10-21")
    assert request.headers["api-key"] == "k"
    assert "tools" not in request.json
    assert "get_time" in request.json["messages"][0]["content"]
    assert response[-1]["function_call"] == {"name": "get_time", "arguments": '{"city": "Paris"}'}


def test_azure_without_an_endpoint_says_where_to_put_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_ENDPOINT"):
        get_chat_model({"model": "dep", "model_type": "azure"})


# -- chat ----------------------------------------------------------------------------------------


def test_functions_go_in_the_prompt_and_calls_come_back_parsed() -> None:
    with OpenAIServer(
        [Reply(text="Checking. " + nous_call("get_time", {"city": "Paris"}))]
    ) as server:
        llm = get_chat_model(oai(server))
        try:
            steps = list(
                llm.chat([Message(USER, "What time is it in Paris?")], functions=FUNCTIONS)
            )
        finally:
            llm.close_sync()
        [body] = server.bodies()
    assert "tools" not in body
    assert json.dumps(FUNCTIONS[0] | {}, ensure_ascii=False)[:30] in body["messages"][0]["content"]
    # Whole lists per step, `Message`s in, `Message`s out; the text streamed before the call.
    assert all(isinstance(m, Message) for step in steps for m in step)
    assert len(steps) > 2
    assert "Checking.".startswith(steps[0][0].content)
    final = steps[-1]
    assert [m.content for m in final] == ["Checking.", ""]
    assert final[1].function_call.name == "get_time"  # type: ignore[union-attr]
    assert json.loads(final[1].function_call.arguments) == {"city": "Paris"}  # type: ignore[union-attr]


def test_use_raw_api_sends_native_tools() -> None:
    reply = Reply(tool_calls=[ToolCall("get_time", {"city": "Paris"}, id="call_7")])
    with OpenAIServer([reply]) as server:
        response = chat_once(oai(server, use_raw_api=True), functions=FUNCTIONS)
        [body] = server.bodies()
    assert [t["function"]["name"] for t in body["tools"]] == ["get_time"]
    assert "<tools>" not in body["messages"][0]["content"]
    assert response[-1]["function_call"] == {"name": "get_time", "arguments": '{"city": "Paris"}'}
    assert response[-1]["extra"]["function_id"] == "call_7"


def test_thought_in_content_becomes_reasoning_and_no_call_is_read_in_it() -> None:
    text = (
        "The user wants Paris; I might write <tool_call> here but not mean it.</think>"
        "Let me check. " + nous_call("get_time", {"city": "Paris"})
    )
    with OpenAIServer([Reply(text=text)]) as server:
        response = chat_once(oai(server, thought_in_content=True), functions=FUNCTIONS)
    assert response[0]["reasoning_content"] == (
        "The user wants Paris; I might write <tool_call> here but not mean it."
    )
    assert response[1]["content"] == "Let me check."
    assert [m["function_call"]["name"] for m in response[2:]] == ["get_time"]
    # An opening tag makes it reasoning even without the setting, as in Qwen-Agent.
    with OpenAIServer([Reply(text="<think>hmm</think>Noon.")]) as server:
        response = chat_once(oai(server), functions=FUNCTIONS)
    assert [(m.get("reasoning_content"), m["content"]) for m in response] == [
        ("hmm", ""),
        (None, "Noon."),
    ]


def test_function_choice_none_leaves_the_functions_out_and_a_name_asks_for_it() -> None:
    with OpenAIServer([Reply(text="It is noon."), Reply(text=nous_call("get_time", {}))]) as server:
        none = chat_once(
            oai(server), functions=FUNCTIONS, extra_generate_cfg={"function_choice": "none"}
        )
        named = chat_once(
            oai(server), functions=FUNCTIONS, extra_generate_cfg={"function_choice": "get_time"}
        )
        first, second = server.bodies()
    assert none[-1]["content"] == "It is noon."
    assert "<tools>" not in json.dumps(first["messages"])
    assert "<tools>" in second["messages"][0]["content"]
    assert second["messages"][0]["content"].endswith("Call the function get_time now.")
    assert named[-1]["function_call"]["name"] == "get_time"
    with pytest.raises(ValueError, match="nope"):
        chat_once(
            {"model": "q", "model_server": "http://127.0.0.1:9/v1"},
            functions=FUNCTIONS,
            extra_generate_cfg={"function_choice": "nope"},
        )


def test_generate_cfg_reaches_the_wire_and_seed_per_call() -> None:
    with OpenAIServer([Reply(text="a")]) as server:
        chat_once(oai(server, top_p=0.8, max_input_tokens=6500), extra_generate_cfg={"seed": 42})
        [body] = server.bodies()
    assert (body["top_p"], body["seed"]) == (0.8, 42)
    assert "max_input_tokens" not in body


def test_a_model_failure_raises_model_service_error_with_its_code() -> None:
    with OpenAIServer([HTTPError(400, message="bad input")]) as server:
        with pytest.raises(ModelServiceError) as raised:
            chat_once(oai(server))
        # max_retries defaults to 0, as in Qwen-Agent: one request.
        assert len(server.bodies()) == 1
    assert raised.value.code == "400"
    assert "bad input" in str(raised.value.message)
    with OpenAIServer([HTTPError(500), HTTPError(500), Reply(text="ok")]) as server:
        llm = get_chat_model(oai(server, max_retries=2))
        try:
            assert llm.chat(USER_MSG, stream=False)[-1]["content"] == "ok"
            assert llm.max_retries == 2
        finally:
            llm.close_sync()


def test_a_streamed_failure_raises_while_iterating() -> None:
    with OpenAIServer([HTTPError(503)]) as server:
        llm = get_chat_model(oai(server))
        try:
            steps = llm.chat(USER_MSG)
            with pytest.raises(ModelServiceError) as raised:
                list(steps)
        finally:
            llm.close_sync()
    assert raised.value.code == "503"


def test_delta_stream_yields_only_the_new_text() -> None:
    with OpenAIServer([Reply(text="Hello there, Paris.", chunk_size=5)]) as server:
        llm = get_chat_model(oai(server))
        try:
            pieces = list(llm.chat(USER_MSG, delta_stream=True))
            with pytest.raises(NotImplementedError):
                llm.chat(USER_MSG, functions=FUNCTIONS, delta_stream=True)
        finally:
            llm.close_sync()
    assert len(pieces) > 1
    assert "".join(p[0]["content"] for p in pieces) == "Hello there, Paris."


def test_quick_chat_and_empty_messages() -> None:
    with OpenAIServer([Reply(text="Paris.")]) as server:
        llm = get_chat_model(oai(server))
        try:
            assert llm.quick_chat("Capital of France?") == "Paris."
            with pytest.raises(ValueError, match="empty"):
                llm.chat([])
        finally:
            llm.close_sync()


def test_self_llm_in_a_custom_agent_is_a_base_chat_model() -> None:
    class Direct(Agent):
        def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Any:
            return self.llm.chat(messages=messages, stream=True)

    with OpenAIServer([Reply(text="Hi!")]) as server:
        bot = Direct(llm=oai(server))
        try:
            assert isinstance(bot.llm, BaseChatModel)
            assert bot.run_nonstream([{"role": "user", "content": "hi"}])[-1]["content"] == "Hi!"
        finally:
            bot.close_sync()


def test_the_qwen_format_forces_a_named_function_by_starting_its_call() -> None:
    reply = Reply(text=': \n✿ARGS✿: {"city": "Paris"}', chunk_size=3)
    with OpenAIServer([reply]) as server:
        response = chat_once(
            oai(server, fncall_prompt_type="qwen"),
            functions=FUNCTIONS,
            extra_generate_cfg={"function_choice": "get_time"},
        )
        [body] = server.bodies()
    # The prompt ends with the call's start; the model wrote the arguments only.
    assert body["messages"][-1]["content"].endswith("\n\n✿FUNCTION✿: get_time")
    assert response[-1]["function_call"] == {"name": "get_time", "arguments": '{"city": "Paris"}'}
