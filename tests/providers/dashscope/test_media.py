"""Multimodal generation: Qwen-VL and Qwen-Omni; media inline, or uploaded as the SDK does."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from parley import Msg
from parley.errors import MessageError, ModelHTTPError, UserError
from parley.messages import AudioBlock, ImageBlock, VideoBlock
from parley.providers.dashscope.server import (
    MULTIMODAL_PATH,
    STORAGE_PATH,
    TEXT_PATH,
    UPLOADS_PATH,
    DashScopeServer,
    HTTPError,
    Reply,
    ToolCall,
)
from tests._requires import require_module
from tests.providers._fixtures import ModelFactory
from tests.providers._samples import PNG, PNG_BYTES, png_file

require_module("dashscope", "dashscope")


def paths(server: DashScopeServer) -> list[str]:
    return [r.path.split("?", 1)[0] for r in server.requests]


async def test_a_vl_model_uses_multimodal_generation(
    server: DashScopeServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    image = png_file(tmp_path)
    server.add(Reply(text="A cat.", chunk_size=2), Reply(text="A cat, whole."))
    model = make_model("qwen-vl-max")
    question = [Msg.system("Describe."), Msg.user("What is it?", ImageBlock.from_path(image))]
    streamed = [c async for c in model.chat_stream(question)]
    assert [c.text for c in streamed[:-1]] == ["A ", "ca", "t."]
    assert streamed[-1].text == "A cat."
    whole = await model.chat([Msg.user("And now?")])
    assert whole.text == "A cat, whole."
    assert paths(server) == [MULTIMODAL_PATH, MULTIMODAL_PATH]
    first, second = server.bodies()
    assert first["input"]["messages"] == [
        {"role": "system", "content": [{"text": "Describe."}]},
        {
            "role": "user",
            "content": [{"text": "What is it?"}, {"image": f"data:image/png;base64,{PNG}"}],
        },
    ]
    # A VL model is called on the multimodal endpoint with text only too.
    assert second["input"]["messages"] == [{"role": "user", "content": [{"text": "And now?"}]}]


async def test_media_sends_a_text_model_to_multimodal_generation(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="Seen."), Reply(text="Text."))
    model = make_model("qwen3.5-plus")
    await model.chat([Msg.user("Look", ImageBlock.from_url("https://example.com/a.png"))])
    plain = make_model("qwen-plus")
    await plain.chat([Msg.user("Text only")])
    assert paths(server) == [MULTIMODAL_PATH, TEXT_PATH]


async def test_the_endpoint_can_be_forced(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    await make_model("my-finetuned-vl", multimodal=True).chat([Msg.user("Hi")])
    assert paths(server) == [MULTIMODAL_PATH]
    text_only = make_model("qwen-vl-max", multimodal=False)
    with pytest.raises(MessageError, match="multimodal endpoint"):
        await text_only.chat([Msg.user(ImageBlock.from_url("https://example.com/a.png"))])


async def test_omni_streams_audio_and_video_questions_even_for_whole_answers(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    # Qwen-Omni answers only streamed calls.
    server.add(Reply(text="A dog barks."))
    wav = base64.b64encode(b"RIFF fake").decode()
    question = Msg.user(
        "What do you hear and see?",
        AudioBlock.from_bytes(b"RIFF fake", "audio/wav"),
        VideoBlock.from_url("https://example.com/dog.mp4"),
    )
    response = await make_model("qwen-omni-turbo").chat([question])
    assert response.text == "A dog barks."
    [request] = server.requests
    assert request.headers["x-dashscope-sse"] == "enable"
    assert request.json["input"]["messages"][0]["content"] == [
        {"text": "What do you hear and see?"},
        {"audio": f"data:audio/wav;base64,{wav}"},
        {"video": "https://example.com/dog.mp4"},
    ]


async def test_a_vl_model_thinks_and_calls_tools_on_multimodal_generation(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    # Qwen3-VL: thinking and tool calls come as on text generation, the text as a list of parts.
    call = ToolCall("zoom", {"x": 10, "y": 20}, "call_z")
    server.add(Reply(reasoning="Too small; zoom in.", text="Zooming.", tool_calls=[call]))
    tools = [{"name": "zoom", "description": "Zoom in.", "parameters": {"type": "object"}}]
    question = [Msg.user("Read the sign.", ImageBlock.from_url("https://example.com/sign.png"))]
    response = await make_model("qwen3-vl-plus").chat(question, tools=tools, enable_thinking=True)
    assert (response.thinking, response.text) == ("Too small; zoom in.", "Zooming.")
    [tool_call] = response.tool_calls
    assert (tool_call.id, tool_call.name, tool_call.input) == ("call_z", "zoom", {"x": 10, "y": 20})
    assert response.finish_reason == "tool_calls"
    [request] = server.requests
    assert paths(server) == [MULTIMODAL_PATH]
    assert request.headers["x-dashscope-sse"] == "enable"  # thinking streams only
    parameters = request.json["parameters"]
    assert parameters["enable_thinking"] is True
    assert parameters["incremental_output"] is True  # the only mode thinking streams in
    assert parameters["tools"][0]["function"]["name"] == "zoom"


# -- uploads, as the SDK's MultiModalConversation does them ------------------------------------


async def test_local_files_uploaded_to_storage_as_the_sdk_does(
    server: DashScopeServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    image = png_file(tmp_path)
    server.add(Reply(text="A cat."))
    model = make_model("qwen-vl-plus", upload_files=True)
    question = [Msg.user("What is it?", ImageBlock.from_path(image), ImageBlock.from_path(image))]
    assert (await model.chat(question)).text == "A cat."
    assert paths(server) == [UPLOADS_PATH, STORAGE_PATH, MULTIMODAL_PATH]
    policy, upload, generation = server.requests
    assert "action=getPolicy" in policy.path
    assert "model=qwen-vl-plus" in policy.path
    assert policy.headers["authorization"] == "Bearer sk-test"
    key = "dashscope-instant/qwen-vl-plus/scripted/cat.png"
    assert list(server.stored) == [key]
    assert PNG_BYTES in upload.body
    # The same file twice is uploaded once; the request names its storage location.
    assert generation.json["input"]["messages"][0]["content"] == [
        {"text": "What is it?"},
        {"image": f"oss://{key}"},
        {"image": f"oss://{key}"},
    ]
    assert generation.headers["x-dashscope-ossresourceresolve"] == "enable"


async def test_without_local_files_nothing_is_uploaded(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    model = make_model("qwen-vl-plus", upload_files=True)
    await model.chat([Msg.user(ImageBlock.from_url("https://example.com/a.png"))])
    assert paths(server) == [MULTIMODAL_PATH]
    assert "x-dashscope-ossresourceresolve" not in server.requests[0].headers


async def test_a_refused_upload_policy_is_mapped(
    server: DashScopeServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    image = png_file(tmp_path)
    server.policy_error = HTTPError(401, "InvalidApiKey", "Invalid API-key provided.")
    model = make_model("qwen-vl-plus", upload_files=True)
    with pytest.raises(ModelHTTPError, match="Invalid API-key") as caught:
        await model.chat([Msg.user(ImageBlock.from_path(image))])
    assert caught.value.status_code == 401
    assert paths(server) == [UPLOADS_PATH]


async def test_an_upload_to_a_remote_host_is_blocked_in_tests(
    server: DashScopeServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    image = png_file(tmp_path)
    server.upload_host = "https://dashscope-file.oss-cn-beijing.aliyuncs.com"
    model = make_model("qwen-vl-plus", upload_files=True)
    with pytest.raises(UserError, match="aliyuncs"):
        await model.chat([Msg.user(ImageBlock.from_path(image))])
    assert paths(server) == [UPLOADS_PATH]
    assert server.stored == {}


async def test_a_missing_file_is_a_message_error_before_any_upload(
    server: DashScopeServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    model = make_model("qwen-vl-plus", upload_files=True)
    with pytest.raises(MessageError, match="no such file"):
        await model.chat([Msg.user(ImageBlock.from_path(tmp_path / "gone.png"))])
    assert server.requests == []


async def test_a_video_given_by_its_frames_goes_as_their_list(
    server: DashScopeServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    frame = png_file(tmp_path, "frame.png")
    server.add(Reply(text="A match."))
    model = make_model("qwen-vl-max")
    video = VideoBlock.from_frames(["https://example.com/f1.jpg", str(frame)])
    await model.chat([Msg.user("What happens?", video)])
    [body] = server.bodies()
    assert body["input"]["messages"][-1]["content"] == [
        {"text": "What happens?"},
        {"video": ["https://example.com/f1.jpg", f"data:image/png;base64,{PNG}"]},
    ]
