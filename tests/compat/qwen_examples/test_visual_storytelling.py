"""Qwen-Agent's `examples/visual_storytelling.py`, with only its imports changed.

A custom `Agent` nests a vision-language `Assistant` that describes a picture and a writing
`Assistant` that writes a story from that description, with writing tips retrieved from a
web page (its `files`). The example's nested agents name their models by DashScope names
only (`qwen-vl-max`, `qwen-max`): here their llm configs also take the stand-in's
`model_server`, and the tips' URL (a jianshu.com page) and the picture's (an OSS image) are
the stand-in site's. Otherwise the class is the example's.
"""

# ruff: noqa: RUF001  (the example's Chinese text, as Qwen-Agent's example writes it)

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from pathlib import Path

from parley.compat.qwen import Agent
from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.schema import ContentItem, Message
from parley.testing.openai_server import OpenAIServer, Reply
from tests.compat.qwen_examples._doc_support import (
    local_web,
    message_text,
    request_text,
    serve_files,
)

__all__ = ["local_web"]

TIPS = (
    "<html><head><title>记叙文写作技巧</title></head><body><h1>记叙文写作技巧</h1>"
    "<p>写记叙文要交代清楚时间、地点、人物、事情的起因、经过和结果。</p>"
    "<p>Writing tip: describe what the characters see, hear and feel.</p></body></html>"
)
DESCRIPTION = "图片里一个小女孩在海边和一只金毛狗击掌。"
STORY = "那天傍晚，我和我的狗在海边……"

SITE = ""
MODEL_SERVER = ""


class VisualStorytelling(Agent):
    """Customize an agent for writing story from pictures (the example's class)."""

    def __init__(self, function_list=None, llm=None):  # type: ignore[no-untyped-def]
        super().__init__(llm=llm)
        # Nest one vl assistant for image understanding
        self.image_agent = Assistant(
            llm={"model": "qwen-vl-max", "model_server": MODEL_SERVER, "api_key": "EMPTY"}
        )
        # Nest one assistant for article writing
        self.writing_agent = Assistant(
            llm=self.llm,
            function_list=function_list,
            system_message="你扮演一个想象力丰富的学生，你需要先理解图片内容，根据描述图片信息以后，"
            + "参考知识库中教你的写作技巧，发挥你的想象力，写一篇800字的记叙文",
            files=[f"{SITE}/p/cdf82ff33ef8"],
        )

    def _run(self, messages, lang="zh", **kwargs):  # type: ignore[no-untyped-def]
        """Define the workflow"""
        assert isinstance(messages[-1]["content"], list)
        assert any([item.image for item in messages[-1]["content"]]), (  # noqa: C419
            "This agent requires input of images"
        )
        # Image understanding
        new_messages = copy.deepcopy(messages)
        new_messages[-1]["content"].append(ContentItem(text="请详细描述这张图片的所有细节内容"))
        response = []
        for rsp in self.image_agent.run(new_messages):
            yield response + rsp
        response.extend(rsp)
        new_messages.extend(rsp)
        # Writing article
        new_messages.append(Message("user", "开始根据以上图片内容编写你的记叙文吧！"))
        for rsp in self.writing_agent.run(new_messages, lang=lang, **kwargs):
            yield response + rsp


# A 1x1 PNG: the stand-in for the example's photo.
PICTURE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
)


def run_example(query: str, image: str) -> Iterator[list[Message]]:
    # The example's test(), its `qwen-max` pointed at the stand-in.
    bot = VisualStorytelling(
        llm={"model": "qwen-max", "model_server": MODEL_SERVER, "api_key": "EMPTY"}
    )
    messages = [Message("user", [ContentItem(image=image)])]
    if query:
        messages[-1]["content"].append(ContentItem(text=query))
    yield from bot.run(messages)
    bot.image_agent.close_sync()
    bot.writing_agent.close_sync()
    bot.close_sync()


def test_visual_storytelling_describes_the_picture_then_writes_with_the_tips(
    tmp_path: Path, local_web: None
) -> None:
    global SITE, MODEL_SERVER  # noqa: PLW0603  (the example's class reads them)
    pages = {
        "/p/cdf82ff33ef8": (TIPS.encode(), "text/html; charset=utf-8"),
        "/images/dog_and_girl.png": (PICTURE, "image/png"),
    }
    with (
        serve_files(pages) as SITE,
        OpenAIServer([Reply(text=DESCRIPTION), Reply(text=STORY)]) as server,
    ):
        MODEL_SERVER = server.url
        responses = list(run_example("看图说话", f"{SITE}/images/dog_and_girl.png"))
        describe, write = server.requests
    final = responses[-1]
    assert [m.content for m in final] == [DESCRIPTION, STORY]
    # The VL model got the picture, the question and the example's instruction.
    user = describe.json["messages"][-1]
    assert describe.json["model"] == "qwen-vl-max"
    assert any(part.get("type") == "image_url" for part in user["content"])
    assert message_text(user) == "看图说话请详细描述这张图片的所有细节内容"
    # The writer got the description and the tips page's text as knowledge.
    assert write.json["model"] == "qwen-max"
    sent = write.json["messages"]
    assert message_text(sent[0]).startswith("你扮演一个想象力丰富的学生")
    assert "交代清楚时间、地点、人物" in message_text(sent[0])
    assert DESCRIPTION in request_text(write)
    assert message_text(sent[-1]) == "开始根据以上图片内容编写你的记叙文吧！"
