"""Custom agents written as Qwen-Agent's own README, docs and agents write them run unchanged.

Each agent here has the shape of one in Qwen-Agent (its facts read from the sources; the code
is this file's own):

- the README's "Developing Your Own Agent": an `Assistant` with a custom tool that reads its
  arguments with `json5.loads(params)`, a built-in tool and a PDF, in a chat loop that
  gives each response back as history;
- the docs' "Agent Development": `DocQA` (non-nested: the knowledge into the system message,
  `_call_llm`) and `VisualStorytelling` (nested: one `Assistant` describes an image, another
  writes from a document, `run(lang=..., max_ref_token=...)` passed on);
- `ReActChat` (`qwen_agent/agents/react_chat.py`): a `FnCallAgent` with its own `_run`, stop
  words in `extra_generate_cfg`, text prompts and a `_detect_tool` reading text;
- `Router` (`qwen_agent/agents/router.py`): an `Assistant` whose loop stops at `Reply:` and
  hands the conversation to the helper it names;
- `GroupChat` (`qwen_agent/agents/group_chat.py`), round robin: a host giving its base class
  only keyword arguments, letting named agents speak in turn.
"""

from __future__ import annotations

import copy
import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import json5
import pytest

from parley.compat.qwen import (
    ASSISTANT,
    CONTENT,
    DEFAULT_SYSTEM_MESSAGE,
    MAX_LLM_CALL_PER_RUN,
    ROLE,
    SYSTEM,
    USER,
    Agent,
    Assistant,
    BaseTool,
    BasicAgent,
    ContentItem,
    FnCallAgent,
    Message,
    register_tool,
)
from parley.models.testing import ScriptedModel
from parley.providers.openai.server import OpenAIServer, Reply
from tests.tools._hostile import text_pdf


@pytest.fixture(autouse=True)
def _index_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Agents given files without an index_path keep their index in the cache folder.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def llm_cfg(server: OpenAIServer, model: str = "qwen-max-latest") -> dict[str, Any]:
    return {"model": model, "model_server": server.url, "api_key": "EMPTY"}


# -- the README: an Assistant with a custom tool and a PDF ---------------------------------------


@register_tool("readme_painter")
class Painter(BaseTool):
    """A custom tool as the README writes one: its `call` parses the model's JSON text."""

    description = "Draws a picture from a description and returns the picture's URL."
    parameters: ClassVar[list[dict[str, Any]]] = [
        {"name": "prompt", "type": "string", "description": "What to draw.", "required": True}
    ]

    def call(self, params: str, **kwargs: Any) -> str:  # type: ignore[override]
        prompt = urllib.parse.quote(json5.loads(params)["prompt"])
        return str(json5.dumps({"image_url": f"https://paint.test/{prompt}"}, ensure_ascii=False))


INSTRUCTION = "First draw the picture, then pick an operation from the document to apply."


def test_the_readmes_assistant_calls_its_custom_tool_and_reads_its_pdf(tmp_path: Path) -> None:
    pdf = text_pdf(
        tmp_path / "doc.pdf",
        [["Image operations for pictures."], ["To rotate a picture, call Image.rotate(90)."]],
    )
    steps = [
        # Qwen-Agent's default: the tools are in the prompt, the call in the text (nous).
        Reply(text='<tool_call>\n{"name": "readme_painter", "arguments": {"prompt": "a dog"}}'),
        Reply(text="Here is the dog. Rotate it with Image.rotate(90)."),
        Reply(text="You are welcome."),
    ]
    with OpenAIServer(steps) as server:
        bot = Assistant(
            llm={**llm_cfg(server), "generate_cfg": {"top_p": 0.8}},
            system_message=INSTRUCTION,
            function_list=["readme_painter", "code_interpreter"],
            files=[str(pdf)],
        )
        messages: list[Any] = []  # the chat history, as the README keeps it
        try:
            for query in ("draw a dog and rotate it 90 degrees", "thanks"):
                messages.append({"role": "user", "content": query})
                response: list[Any] = []
                for response in bot.run(messages=messages):  # noqa: B007  (streamed, then kept)
                    pass
                messages.extend(response)
        finally:
            bot.close_sync()
        server.assert_consumed()
        first, _, third = server.bodies()

    # The custom tool got the model's arguments as text, and its answer went back.
    call, result, answer = messages[1:4]
    assert call["function_call"] == {"name": "readme_painter", "arguments": '{"prompt": "a dog"}'}
    assert result["role"] == "function"
    assert json5.loads(result["content"]) == {"image_url": "https://paint.test/a%20dog"}
    assert answer["content"] == "Here is the dog. Rotate it with Image.rotate(90)."
    # The model was offered both tools in its prompt (no native `tools`, as Qwen-Agent sends
    # none), under the instruction and the PDF's passages with their pages; the llm
    # config's generate_cfg reached the wire.
    assert "tools" not in first
    system = first["messages"][0]["content"]
    tools_part = system[system.index("<tools>\n") : system.index("\n</tools>")]
    assert [json.loads(line)["function"]["name"] for line in tools_part.splitlines()[1:]] == [
        "readme_painter",
        "code_interpreter",
    ]
    assert system.startswith(f"{INSTRUCTION}\n\n# Knowledge Base\n\n## The content from [doc.pdf]:")
    assert "(page 2)\nTo rotate a picture, call Image.rotate(90)." in system
    assert first["top_p"] == 0.8
    # The history given back reads back whole: the second question's call sees all of it.
    roles = [m["role"] for m in third["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert third["messages"][3]["content"].startswith("<tool_response>")
    assert messages[-1]["content"] == "You are welcome."


# -- the docs, non-nested: DocQA -----------------------------------------------------------------

REFERENCE = {
    "en": "\nUse the reference material below to answer.\n# Reference material:\n{ref}\n",
    "zh": "\n请根据以下参考资料回答。\n# 参考资料:\n{ref}\n",
}


class DocQA(Agent):
    """The docs' non-nested agent: the knowledge into the system message, then `_call_llm`."""

    def _run(
        self, messages: list[Message], knowledge: str = "", lang: str = "en", **kwargs: Any
    ) -> Iterator[list[Message]]:
        messages = copy.deepcopy(messages)
        prompt = REFERENCE[lang].format(ref=knowledge)
        if messages and messages[0][ROLE] == SYSTEM:
            messages[0][CONTENT] += prompt
        else:
            messages.insert(0, Message(SYSTEM, prompt))
        return self._call_llm(messages=messages)


def test_the_docs_docqa_puts_its_knowledge_in_the_system_message() -> None:
    model = ScriptedModel(["In March.", "三月。"])
    bot = DocQA(llm=model, system_message="Be brief.")
    answer = bot.run_nonstream([{"role": "user", "content": "When?"}], knowledge="Launch: March.")
    chinese = bot.run_nonstream([Message(USER, "什么时候?")], knowledge="三月发布。")
    assert answer == [{"role": "assistant", "content": "In March.", "extra": answer[0]["extra"]}]
    assert chinese[0].content == "三月。"
    english_system, chinese_system = (r.messages[0].text for r in model.requests)
    assert english_system == "Be brief." + REFERENCE["en"].format(ref="Launch: March.")
    assert chinese_system == "Be brief." + REFERENCE["zh"].format(ref="三月发布。")
    model.assert_consumed()


# -- the docs, nested: VisualStorytelling --------------------------------------------------------

STORY_HANDBOOKS = {
    "openings.md": "Open a story in the middle of the action: the reader wants to know more.",
    "endings.md": "End a story with an image the reader keeps: a door closing, a light out.",
}


class Storyteller(Agent):
    """The docs' nested agent: an Assistant sees the picture, another writes from a handbook."""

    def __init__(
        self,
        function_list: list[Any] | None = None,
        llm: dict[str, Any] | None = None,
        vision_llm: dict[str, Any] | None = None,
        handbooks: list[str] | None = None,
    ) -> None:
        super().__init__(llm=llm)
        self.image_agent = Assistant(llm=vision_llm)
        self.writing_agent = Assistant(
            llm=self.llm,
            function_list=function_list,
            system_message="You are a student: understand the picture, then write a story "
            "with the techniques of the knowledge base.",
            files=handbooks,
        )

    def _run(
        self,
        messages: list[Message],
        lang: str = "zh",
        max_ref_token: int = 4000,
        **kwargs: Any,
    ) -> Iterator[list[Message]]:
        content = messages[-1]["content"]
        assert isinstance(content, list), "this agent needs an image"
        assert any(item.image for item in content), "this agent needs an image"
        new_messages = copy.deepcopy(messages)
        new_messages[-1]["content"].append(ContentItem(text="Describe every detail of it."))
        response: list[Message] = []
        rsp: list[Message] = []
        for rsp in self.image_agent.run(new_messages):
            yield response + rsp
        response.extend(rsp)
        new_messages.extend(rsp)
        new_messages.append(Message(USER, "Now write your story from that picture."))
        for rsp in self.writing_agent.run(
            new_messages, lang=lang, max_ref_token=max_ref_token, **kwargs
        ):
            yield response + rsp


DOG = "https://pictures.test/dog_and_girl.jpeg"


def test_the_docs_nested_storyteller_runs_two_assistants(tmp_path: Path) -> None:
    for name, text in STORY_HANDBOOKS.items():
        (tmp_path / name).write_text(text)
    steps = [
        Reply(text="A girl throws a ball; her dog leaps for it."),
        Reply(text="The ball was already in the air when Mia laughed."),
        Reply(text="A girl and her dog."),
        Reply(text="Mia and Rex."),
    ]
    with OpenAIServer(steps) as server:
        bot = Storyteller(
            llm=llm_cfg(server, "qwen-max"),
            # A VL model at an OpenAI-compatible URL says so: a URL alone makes it `oai`, a
            # text model that gets pictures as notes (as in Qwen-Agent).
            vision_llm={**llm_cfg(server, "qwen-vl-max"), "model_type": "qwenvl_oai"},
            handbooks=[str(tmp_path / name) for name in STORY_HANDBOOKS],
        )
        question = [Message(USER, [ContentItem(image=DOG), ContentItem(text="Tell its story")])]
        try:
            snapshots = list(bot.run(question))
            bot.run_nonstream(question, max_ref_token=1)
        finally:
            bot.close_sync()
            bot.image_agent.close_sync()
            bot.writing_agent.close_sync()
        server.assert_consumed()
        look, write, _, write_short = server.bodies()

    # The vision assistant saw the picture and both texts; the caller's messages are intact.
    assert look["model"] == "qwen-vl-max"
    parts = look["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["image_url", "text", "text"]
    assert parts[0]["image_url"]["url"] == DOG
    assert len(question[0].content) == 2
    # The writer ran on the outer agent's model, with the handbooks, in the run's language.
    assert write["model"] == "qwen-max"
    system = write["messages"][0]["content"]
    assert "# Knowledge Base" in system
    assert "middle of the action" in system
    assert "door closing" in system
    assert write["messages"][-1] == {
        "role": "user",
        "content": "Now write your story from that picture.",
    }
    # max_ref_token, passed on through run, kept the knowledge to one passage.
    short = write_short["messages"][0]["content"]
    assert ("middle of the action" in short) != ("door closing" in short)
    # Snapshots grow: the description, then the description and the story.
    final = snapshots[-1]
    assert [m.content for m in final] == [
        "A girl throws a ball; her dog leaps for it.",
        "The ball was already in the air when Mia laughed.",
    ]
    assert all(isinstance(m, Message) for m in final)


# -- ReActChat: a FnCallAgent with its own loop, in text -----------------------------------------

REACT_PROMPT = """Answer the question. Tools:

{tools}

Write:
Thought: what to do
Action: one of [{names}]
Action Input: its input
Observation: its result
... (Thought, Action, Action Input, Observation as often as needed)
Thought: I know the answer
Final Answer: the answer

Question: {query}
Thought: """


@register_tool("react_weather")
class ReactWeather(BaseTool):
    """A weather tool; records the keyword arguments it was called with."""

    description = "The weather in a city."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    keywords: ClassVar[list[str]] = []

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        type(self).keywords = sorted(kwargs)
        return f"Sunny in {self._verify_json_format_args(params)['city']}"


class ReActStyle(FnCallAgent):
    """ReActChat's shape: stop words, a text prompt, `_detect_tool` reading the text."""

    def __init__(
        self,
        function_list: list[Any] | None = None,
        llm: Any = None,
        system_message: str | None = DEFAULT_SYSTEM_MESSAGE,
        name: str | None = None,
        description: str | None = None,
        files: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            function_list=function_list,
            llm=llm,
            system_message=system_message,
            name=name,
            description=description,
            files=files,
            **kwargs,
        )
        stop = self.extra_generate_cfg.get("stop", [])
        self.extra_generate_cfg = {
            **self.extra_generate_cfg,
            "stop": [*stop, "Observation:", "Observation:\n"],
        }

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[list[Message]]:
        text_messages = self._with_react_prompt(messages)
        response = "Thought: "
        for _ in range(MAX_LLM_CALL_PER_RUN):
            output: list[Message] = []
            for output in self._call_llm(messages=text_messages):
                if output:
                    yield [Message(ASSISTANT, response + output[-1].content)]
            response += output[-1].content
            has_action, action, action_input, thought = self._detect_tool(output[-1].content)
            if not has_action:
                break
            observation = self._call_tool(action, action_input, messages=messages, **kwargs)
            step = f"\nObservation: {observation}\nThought: "
            response += step
            yield [Message(ASSISTANT, response)]
            text_messages[-1].content += f"{thought}\nAction: {action}\nAction Input: "
            text_messages[-1].content += f"{action_input}{step}"

    def _with_react_prompt(self, messages: list[Message]) -> list[Message]:
        tools = []
        for tool in self.function_map.values():
            function = tool.function
            tools.append(
                f"{function['name']}: {function['name_for_human']}. {function['description']} "
                f"Parameters: {json.dumps(function['parameters'])} {function['args_format']}"
            )
        text_messages = copy.deepcopy(messages)
        text_messages[-1].content = REACT_PROMPT.format(
            tools="\n\n".join(tools),
            names=",".join(self.function_map),
            query=text_messages[-1].content,
        )
        return text_messages

    def _detect_tool(self, text: str) -> tuple[bool, str, str, str]:  # type: ignore[override]
        action, action_input, observation = "\nAction:", "\nAction Input:", "\nObservation:"
        i, j = text.rfind(action), text.rfind(action_input)
        if not 0 <= i < j:
            return False, "", "", text
        if text.rfind(observation) < j:  # the stop word cut it off
            text = text.rstrip() + observation
        k = text.rfind(observation)
        name = text[i + len(action) : j].strip()
        arguments = text[j + len(action_input) : k].strip()
        return True, name, arguments, text[:i]


def test_a_react_style_agent_runs_its_own_text_loop_on_stop_words() -> None:
    model = ScriptedModel(
        [
            'I need the weather.\nAction: react_weather\nAction Input: {"city": "Paris"}\n',
            "I know the answer\nFinal Answer: Sunny in Paris.",
        ]
    )
    bot = ReActStyle(function_list=["react_weather"], llm=model, name="react")
    snapshots = list(bot.run([{"role": "user", "content": "Weather in Paris?"}]))

    first, second = model.requests
    for request in model.requests:
        assert request.parameters.stop == ["Observation:", "Observation:\n"]
        assert request.tools == []  # the tools are in the prompt, as text
    assert "react_weather: react_weather. The weather in a city." in first.messages[-1].text
    assert first.messages[-1].text.endswith("Question: Weather in Paris?\nThought: ")
    assert second.messages[-1].text.endswith(
        'I need the weather.\nAction: react_weather\nAction Input: {"city": "Paris"}'
        "\nObservation: Sunny in Paris\nThought: "
    )
    assert ReactWeather.keywords == ["messages"]  # `_call_tool` handed the tool its kwargs
    [final] = snapshots[-1]
    assert final == {
        "role": "assistant",
        "name": "react",
        "content": 'Thought: I need the weather.\nAction: react_weather\nAction Input: {"city": '
        '"Paris"}\n\nObservation: Sunny in Paris\nThought: I know the answer\n'
        "Final Answer: Sunny in Paris.",
    }
    model.assert_consumed()


# -- Router: an Assistant that hands over to a helper --------------------------------------------

ROUTER_PROMPT = """You have these helpers:
{descriptions}

Answer yourself when you can. Otherwise pick one helper, in this form:
Call: ... # the helper's name, one of [{names}]
Reply: ... # the helper's reply"""


class HelperRouter(Assistant):
    """Router's shape: helpers in the system message, `Reply:` a stop word, the hand-over."""

    def __init__(
        self,
        function_list: list[Any] | None = None,
        llm: Any = None,
        files: list[str] | None = None,
        name: str | None = None,
        description: str | None = None,
        agents: list[Agent] | None = None,
        rag_cfg: dict[str, Any] | None = None,
    ) -> None:
        self._agents = agents or []
        descriptions = "\n".join(f"{a.name}: {a.description}" for a in self._agents)
        super().__init__(
            function_list=function_list,
            llm=llm,
            system_message=ROUTER_PROMPT.format(
                descriptions=descriptions, names=", ".join(self.agent_names)
            ),
            name=name,
            description=description,
            files=files,
            rag_cfg=rag_cfg,
        )
        stop = self.extra_generate_cfg.get("stop", [])
        self.extra_generate_cfg = {**self.extra_generate_cfg, "stop": [*stop, "Reply:", "Reply:\n"]}

    @property
    def agent_names(self) -> list[str]:
        return [str(a.name) for a in self._agents]

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[list[Message]]:
        response: list[Message] = []
        for response in super()._run(messages=messages, lang=lang, **kwargs):
            yield response
        content = response[-1].content
        if isinstance(content, str) and "Call:" in content and self._agents:
            chosen = content.split("Call:")[-1].strip().split("\n")[0].strip()
            if chosen not in self.agent_names:
                chosen = self.agent_names[0]
            helper = self._agents[self.agent_names.index(chosen)]
            new_messages = copy.deepcopy(messages)
            if new_messages and new_messages[0][ROLE] == SYSTEM:
                new_messages.pop(0)
            for response in helper.run(messages=new_messages, lang=lang, **kwargs):
                for message in response:
                    if message.role == ASSISTANT:
                        message.name = chosen
                yield response


def test_a_router_style_assistant_stops_at_reply_and_hands_over() -> None:
    router_model = ScriptedModel(["Call: painter\n"])
    painter_model = ScriptedModel(["I painted a cat."])
    painter = BasicAgent(llm=painter_model, name="painter", description="Paints pictures.")
    bot = HelperRouter(llm=router_model, agents=[painter], name="router")

    response = bot.run_nonstream([Message(USER, "Paint me a cat")])

    [routed] = router_model.requests
    assert routed.parameters.stop == ["Reply:", "Reply:\n"]  # the loop honoured them
    assert "painter: Paints pictures." in routed.messages[0].text
    assert [(m.role, m.name, m.content) for m in response] == [
        ("assistant", "painter", "I painted a cat.")
    ]
    # The helper got the conversation without the router's instructions.
    [helped] = painter_model.requests
    assert [(m.role, m.text) for m in helped.messages] == [("user", "Paint me a cat")]


# -- GroupChat, round robin ----------------------------------------------------------------------


class RoundTable(Agent):
    """GroupChat's shape: a host that hands its base only keyword arguments and lets the
    named agents speak in turn, each seeing the others' words as a user message."""

    def __init__(self, agents: list[Agent], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._agents = agents

    def _run(
        self, messages: list[Message], lang: str = "en", max_round: int = 2, **kwargs: Any
    ) -> Iterator[list[Message]]:
        messages = copy.deepcopy(messages)
        for message in messages:
            message.name = message.name or message.role
        response: list[Message] = []
        for _ in range(max_round):
            speaker = self._next_speaker(messages)
            rsp: list[Message] = []
            for rsp in speaker.run(messages=self._seen_by(messages, str(speaker.name))):
                yield response + rsp
            response += rsp
            messages.extend(rsp)
        yield response

    def _next_speaker(self, messages: list[Message]) -> Agent:
        names = [a.name for a in self._agents]
        last = names.index(messages[-1].name) if messages[-1].name in names else -1
        return self._agents[(last + 1) % len(self._agents)]

    @staticmethod
    def _seen_by(messages: list[Message], name: str) -> list[Message]:
        said = "\n".join(f"{m.name}: {m.content}" for m in messages if m.name != name)
        return [Message(USER, f"{said}\n{name}: ")]


def test_a_group_chat_style_host_lets_its_agents_speak_in_turn() -> None:
    alice_model, bob_model = ScriptedModel(["Chess?"]), ScriptedModel(["Yes, white."])
    alice = BasicAgent(llm=alice_model, name="alice")
    bob = BasicAgent(llm=bob_model, name="bob")
    host = RoundTable([alice, bob], llm=ScriptedModel(), name="host")

    snapshots = list(host.run([{"role": "user", "content": "Play something.", "name": "tom"}]))

    assert [(m["name"], m["content"]) for m in snapshots[-1]] == [
        ("alice", "Chess?"),
        ("bob", "Yes, white."),
    ]
    assert alice_model.requests[0].messages[-1].text == "tom: Play something.\nalice: "
    assert bob_model.requests[0].messages[-1].text == ("tom: Play something.\nalice: Chess?\nbob: ")
