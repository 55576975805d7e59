"""Qwen-Agent's `examples/visual_storytelling.py`, with only its imports changed.

A custom `Agent` nests a vision-language `Assistant` that describes a picture and a writing
`Assistant` that writes a story from that description, with writing tips retrieved from a
web page (its `files`). The example's llm configs are kept as they are: the nested
`{'model': 'qwen-vl-max'}` (a `qwenvl_dashscope` model) and the writer's `{'model':
'qwen-max'}` (`qwen_dashscope`) both reach the DashScope stand-in through Qwen-Agent's own
environment variables (`DASHSCOPE_HTTP_URL`, `DASHSCOPE_API_KEY`). The picture's URL (the
example's OSS image) goes to the VL model as it is, as DashScope takes image URLs. The one
change to the class: the tips' URL (a jianshu.com page the writing assistant downloads) is
the stand-in site's, since a test reaches no public site.
"""

# ruff: noqa: RUF001  (the example's Chinese text, as Qwen-Agent's example writes it)

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from parley.compat.qwen import Agent
from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.schema import ContentItem, Message
from parley.providers.dashscope.server import Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._doc_support import local_web, message_text, serve_files

__all__ = ["local_web"]

TIPS = (
    "<html><head><title>记叙文写作技巧</title></head><body><h1>记叙文写作技巧</h1>"
    "<p>写记叙文要交代清楚时间、地点、人物、事情的起因、经过和结果。</p>"
    "<p>Writing tip: describe what the characters see, hear and feel.</p></body></html>"
)
DESCRIPTION = "图片里一个小女孩在海边和一只金毛狗击掌。"
STORY = "那天傍晚，我和我的狗在海边……"

SITE = ""
IMAGE = "https://dashscope.oss-cn-beijing.aliyuncs.com/images/dog_and_girl.jpeg"


class VisualStorytelling(Agent):
    """Customize an agent for writing story from pictures (the example's class)."""

    def __init__(self, function_list=None, llm=None):  # type: ignore[no-untyped-def]
        super().__init__(llm=llm)
        # Nest one vl assistant for image understanding
        self.image_agent = Assistant(llm={"model": "qwen-vl-max"})
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


def run_example(query: str, image: str) -> Iterator[list[Message]]:
    # The example's test().
    bot = VisualStorytelling(llm={"model": "qwen-max"})
    messages = [Message("user", [ContentItem(image=image)])]
    if query:
        messages[-1]["content"].append(ContentItem(text=query))
    yield from bot.run(messages)
    bot.image_agent.close_sync()
    bot.writing_agent.close_sync()
    bot.close_sync()


def test_visual_storytelling_describes_the_picture_then_writes_with_the_tips(
    tmp_path: Path, local_web: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    global SITE  # the example's class reads it
    pages = {"/p/cdf82ff33ef8": (TIPS.encode(), "text/html; charset=utf-8")}
    with (
        serve_files(pages) as SITE,
        dashscope_stand_in(monkeypatch, [Reply(text=DESCRIPTION), Reply(text=STORY)]) as server,
    ):
        responses = list(run_example("看图说话", IMAGE))
        server.assert_consumed()
        describe, write = server.generation_requests()
    final = responses[-1]
    assert [m.content for m in final] == [DESCRIPTION, STORY]
    # The VL model got the picture, the question and the example's instruction.
    assert describe.path.endswith("/multimodal-generation/generation")
    assert describe.json["model"] == "qwen-vl-max"
    user = describe.json["input"]["messages"][-1]
    assert {"image": IMAGE} in user["content"]
    assert message_text(user) == "看图说话请详细描述这张图片的所有细节内容"
    # The writer got the description and the tips page's text as knowledge.
    assert write.path.endswith("/text-generation/generation")
    assert write.json["model"] == "qwen-max"
    sent = write.json["input"]["messages"]
    assert message_text(sent[0]).startswith("你扮演一个想象力丰富的学生")
    assert "交代清楚时间、地点、人物" in message_text(sent[0])
    assert DESCRIPTION in json.dumps(sent, ensure_ascii=False)
    # A text model: the picture in the conversation reached it as a note in the text, as
    # Qwen-Agent's text models get media, not as an image.
    assert "dog_and_girl.jpeg" in json.dumps(sent, ensure_ascii=False)
    assert '"image"' not in json.dumps(sent)
    assert message_text(sent[-1]) == "开始根据以上图片内容编写你的记叙文吧！"
