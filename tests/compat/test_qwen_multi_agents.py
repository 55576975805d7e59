"""Qwen-Agent's ReAct, routing, group-chat and simulator agents, and its print helper.

Each agent is driven by scripted models; the assertions check what Qwen-Agent's agent of
the same name does: the prompts' protocol (stop words, `Call:`, `name: text` lines), who
speaks, and the shape of what `run` yields.
"""

from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from parley.compat.qwen import ASSISTANT, FUNCTION, USER, Message, MultiAgentHub
from parley.compat.qwen.agents import (
    ArticleAgent,
    BasicAgent,
    DialogueSimulator,
    GroupChat,
    GroupChatAutoRouter,
    GroupChatCreator,
    HumanSimulator,
    ReActChat,
    Router,
    TIRMathAgent,
    UserAgent,
    WriteFromScratch,
)
from parley.compat.qwen.agents.assistant import Assistant
from parley.compat.qwen.agents.doc_qa import BasicDocQA, ParallelDocQA
from parley.compat.qwen.agents.doc_qa.basic_doc_qa import DEFAULT_DESC as BASIC_DESCRIPTION
from parley.compat.qwen.agents.group_chat import mentioned_names
from parley.compat.qwen.agents.human_simulator import STOP
from parley.compat.qwen.agents.tir_agent import extract_program
from parley.compat.qwen.agents.user_agent import PENDING_USER_INPUT
from parley.compat.qwen.agents.virtual_memory_agent import VirtualMemoryAgent
from parley.compat.qwen.gui import WebUI, WebUIUnavailableError
from parley.compat.qwen.utils.output_beautify import typewriter_print
from parley.compat.qwen.utils.utils import (
    format_as_text_message,
    merge_generate_cfgs,
    save_url_to_local_work_dir,
)
from parley.errors import ConfigurationError
from parley.models.base import ChatRequest
from parley.models.testing import ScriptedModel


def system(request: ChatRequest) -> str:
    first = request.messages[0]
    return first.text if first.role == "system" else ""


def named(response: list[Any]) -> list[tuple[str | None, str]]:
    return [(m["name"], m["content"]) for m in response]


# -- ReActChat -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'Look it up.\nAction: search\nAction Input: {"q": "x"}\nObservation: stale',
            (True, "search", '{"q": "x"}', "Look it up."),
        ),
        (  # the stop word cut the reply before `Observation:`
            'Look it up.\nAction: search\nAction Input: {"q": "x"}\n',
            (True, "search", '{"q": "x"}', "Look it up."),
        ),
        (  # the last action counts
            "a\nAction: one\nAction Input: 1\nObservation: r\nb\nAction: two\nAction Input: 2",
            (True, "two", "2", "a\nAction: one\nAction Input: 1\nObservation: r\nb"),
        ),
        ("I know it.\nFinal Answer: 42", (False, "", "", "I know it.\nFinal Answer: 42")),
        ("Action Input: 1\nAction: two", (False, "", "", "Action Input: 1\nAction: two")),
    ],
)
def test_react_chat_reads_thought_action_and_input(
    text: str, expected: tuple[bool, str, str, str]
) -> None:
    bot = ReActChat(llm=ScriptedModel())
    assert bot._detect_tool(text) == expected


def test_react_chat_runs_a_tool_between_model_calls_that_stop_at_observation() -> None:
    model = ScriptedModel(
        [
            "I should run code.\nAction: code_interpreter\nAction Input: ```py\n"
            "print(sum(range(5)))\n```\n",
            "I now know the final answer\nFinal Answer: 10",
        ]
    )
    bot = ReActChat(function_list=["code_interpreter"], llm=model, name="coder")
    snapshots = list(bot.run([{"role": "user", "content": "Sum 0..4?"}]))

    for request in model.requests:
        assert request.parameters.stop == ["Observation:", "Observation:\n"]
        assert request.tools == []  # ReAct: the tools are described in the prompt
    first, second = (r.messages[-1].text for r in model.requests)
    assert "code_interpreter: the code_interpreter tool." in first
    assert "Action: one tool name from [code_interpreter]" in first
    assert first.endswith("Question: Sum 0..4?\nThought: ")
    # The second call sees the first reply and the tool's real result.
    assert second.endswith("Observation: stdout:\n\n```\n10\n```\nThought: ")
    assert "\nAction: code_interpreter\nAction Input: \n```py\nprint(sum(range(5)))" in second
    [final] = snapshots[-1]
    assert final["name"] == "coder"
    assert final["content"].startswith("Thought: I should run code.\nAction: code_interpreter")
    assert final["content"].endswith("Thought: I now know the final answer\nFinal Answer: 10")
    assert all(len(s) == 1 and s[0]["role"] == ASSISTANT for s in snapshots)  # one growing text
    model.assert_consumed()


def test_react_chat_shows_uploaded_files_by_name() -> None:
    model = ScriptedModel(["No tool needed.\nFinal Answer: ok"])
    bot = ReActChat(function_list=["code_interpreter"], llm=model)
    bot.run_nonstream(
        [{"role": "user", "content": [{"text": "Plot it"}, {"file": "/data/in/prices.csv"}]}]
    )
    assert "Question: [file](prices.csv)\nPlot it\nThought: " in model.requests[0].messages[-1].text


# -- Router --------------------------------------------------------------------------------------


def helpers() -> tuple[ScriptedModel, ScriptedModel, list[BasicAgent]]:
    painter_model, coder_model = ScriptedModel(), ScriptedModel()
    return (
        painter_model,
        coder_model,
        [
            BasicAgent(llm=painter_model, name="painter", description="Draws pictures."),
            BasicAgent(llm=coder_model, name="coder", description="Runs code."),
        ],
    )


def test_router_hands_over_to_the_agent_it_names() -> None:
    painter_model, coder_model, agents = helpers()
    router_model = ScriptedModel(["Call: coder\n"])
    coder_model.add("It prints 4.")
    bot = Router(llm=router_model, agents=agents)

    response = bot.run_nonstream([{"role": "user", "content": "What does print(2+2) print?"}])

    assert named(response) == [("coder", "It prints 4.")]
    [routed] = router_model.requests
    assert routed.parameters.stop == ["Reply:", "Reply:\n"]
    assert "painter: Draws pictures.\ncoder: Runs code." in system(routed)
    assert "one of [painter, coder]" in system(routed)
    # The helper gets the conversation without the router's instructions.
    [helped] = coder_model.requests
    assert [(m.role, m.text) for m in helped.messages] == [("user", "What does print(2+2) print?")]
    assert painter_model.requests == []


def test_router_answers_itself_and_shows_helpers_turns_as_hand_overs() -> None:
    _, _, agents = helpers()
    router_model = ScriptedModel(["Hello again!"])
    bot = Router(llm=router_model, agents=agents, name="router")
    history = [
        {"role": "user", "content": "Draw a cat"},
        {"role": "assistant", "content": "Here is a cat.", "name": "painter"},
        {"role": "user", "content": "Thanks!"},
    ]
    response = bot.run_nonstream(history)

    assert named(response) == [("router", "Hello again!")]
    said = [m.text for m in router_model.requests[0].messages if m.role == "assistant"]
    assert said == ["Call: painter\nReply:Here is a cat."]


def test_router_falls_back_to_the_first_helper_for_an_unknown_name() -> None:
    painter_model, _, agents = helpers()
    painter_model.add("A cat.")
    bot = Router(llm=ScriptedModel(["Call: sculptor\n"]), agents=agents)
    assert named(bot.run_nonstream([{"role": "user", "content": "Make art"}])) == [
        ("painter", "A cat.")
    ]


def test_multi_agent_hub_refuses_unnamed_or_twice_named_agents() -> None:
    nameless = BasicAgent(llm=ScriptedModel())
    with pytest.raises(ConfigurationError, match="every agent needs a name"):
        Router(llm=ScriptedModel(), agents=[nameless])
    twins = [BasicAgent(llm=ScriptedModel(), name="a"), BasicAgent(llm=ScriptedModel(), name="a")]
    with pytest.raises(ConfigurationError, match="names must differ"):
        GroupChat(agents=twins, agent_selection_method="round_robin")
    with pytest.raises(ConfigurationError, match="non-empty list of agents"):
        Router(llm=ScriptedModel(), agents=[])
    assert issubclass(Router, MultiAgentHub)


# -- GroupChat -----------------------------------------------------------------------------------


def members(*names: str) -> dict[str, ScriptedModel]:
    return {name: ScriptedModel() for name in names}


def test_group_chat_round_robin_turn_order_and_each_members_view() -> None:
    models = members("ann", "bob")
    models["ann"].add("Chess?", "Then I play e4.")
    models["bob"].add("Yes, I'm black.")
    agents = [BasicAgent(llm=m, name=n) for n, m in models.items()]
    bot = GroupChat(agents=agents, agent_selection_method="round_robin")

    snapshots = list(bot.run([{"role": "user", "content": "Play!", "name": "tom"}]))

    assert named(snapshots[-1]) == [
        ("ann", "Chess?"),
        ("bob", "Yes, I'm black."),
        ("ann", "Then I play e4."),
    ]
    first_ann, second_ann = (r.messages for r in models["ann"].requests)
    assert [(m.role, m.text) for m in first_ann] == [("user", "tom: Play!\nann: ")]
    assert [(m.role, m.text) for m in models["bob"].requests[0].messages] == [
        ("user", "tom: Play!\nann: Chess?\nbob: ")
    ]
    # Its own earlier turn is an assistant message, the others' words user lines.
    assert [(m.role, m.text) for m in second_ann] == [
        ("user", "tom: Play!"),
        ("assistant", "Chess?"),
        ("user", "bob: Yes, I'm black.\nann: "),
    ]


def test_group_chat_mentions_choose_the_speakers_in_order() -> None:
    models = members("ann", "bob", "cy")
    models["cy"].add("Cy here.")
    models["ann"].add("Ann here.")
    models["bob"].add("Bob here.")
    agents = [BasicAgent(llm=m, name=n) for n, m in models.items()]
    bot = GroupChat(agents=agents, agent_selection_method="round_robin")

    response = bot.run_nonstream(
        [{"role": "user", "content": "@cy and @ann, what now?", "name": "tom"}]
    )

    # The mentioned speak first, in order; then the turn passes on after the last speaker.
    assert named(response) == [("cy", "Cy here."), ("ann", "Ann here."), ("bob", "Bob here.")]
    assert mentioned_names("hi @bob and @cy, and @bob again @nobody", ["ann", "bob", "cy"]) == [
        "bob",
        "cy",
    ]


def test_group_chat_stops_at_a_persons_turn_with_pending_input() -> None:
    models = members("ann")
    models["ann"].add("Your move, @tom")
    bot = GroupChat(
        agents=[BasicAgent(llm=models["ann"], name="ann"), UserAgent(name="tom")],
        agent_selection_method="round_robin",
    )
    response = bot.run_nonstream([{"role": "user", "content": "Go", "name": "tom"}], max_round=5)

    assert named(response) == [("ann", "Your move, @tom"), ("tom", PENDING_USER_INPUT)]
    assert response[-1]["role"] == USER


def test_group_chat_auto_asks_the_host_and_ends_at_stop() -> None:
    models = members("ann", "bob")
    models["bob"].add("Bob speaks.")
    host_model = ScriptedModel(["bob", "[STOP]"])
    agents = [BasicAgent(llm=m, name=n, description=f"{n} the player") for n, m in models.items()]
    bot = GroupChat(agents=agents, llm=host_model)

    response = bot.run_nonstream([{"role": "user", "content": "Hello all", "name": "tom"}])

    assert named(response) == [("bob", "Bob speaks.")]
    first, second = host_model.requests
    assert "ann: ann the player\nbob: bob the player" in system(first)
    assert [m.text for m in first.messages if m.role == "user"] == ["tom: Hello all"]
    assert [m.text for m in second.messages if m.role == "user"] == [
        "tom: Hello all\nbob: Bob speaks."
    ]
    assert models["ann"].requests == []


def test_group_chat_from_a_config_builds_assistants_and_user_agents() -> None:
    model = ScriptedModel()
    bot = GroupChat(
        agents={
            "background": "A chess club.",
            "agents": [
                {"name": "board", "description": "Shows the board", "instructions": "Draw it."},
                {"name": "tom", "description": "Plays black", "is_human": True},
            ],
        },
        llm=model,
    )
    board, tom = bot.agents
    assert isinstance(tom, UserAgent)
    assert board.name == "board"
    assert board.system_message is not None
    assert "A chess club." in board.system_message
    assert "Draw it." in board.system_message
    assert "tom" in board.system_message
    assert bot.nonuser_agents == [board]
    with pytest.raises(ConfigurationError, match="agent_selection_method"):
        GroupChat(agents=[board], agent_selection_method="loudest")
    with pytest.raises(ConfigurationError, match="needs `llm`"):
        GroupChat(agents=[board])


def test_auto_router_joins_a_speakers_turns_and_starts_an_empty_chat() -> None:
    model = ScriptedModel(["ann", "bob"])
    ann = BasicAgent(llm=ScriptedModel(), name="ann", description="a player")
    host = GroupChatAutoRouter(llm=model, agents=[ann])
    host.run_nonstream(
        [
            Message(USER, "one", name="tom"),
            Message(USER, "two", name="tom"),
            Message(FUNCTION, "ignored", name="tool"),
        ]
    )
    assert model.requests[0].messages[-1].text == "tom: one\ntwo"
    host.run_nonstream([])
    assert "just begun" in model.requests[1].messages[-1].text


# -- GroupChatCreator ----------------------------------------------------------------------------


def test_group_chat_creator_splits_background_configs_and_answer() -> None:
    config = {"name": "Ann", "description": "A poet", "instructions": "You write poems."}
    reply = (
        "<Background>: A poetry club.\n"
        f"<Config>: {json.dumps(config)}\n"
        "<Config>: not json\n"
        "<Answer>: Who else should join?"
    )
    model = ScriptedModel([reply, "<Answer>: Done."])
    bot = GroupChatCreator(llm=model, name="creator")

    response = bot.run_nonstream([{"role": "user", "content": "A poetry club"}])

    assert named(response) == [
        ("background", "A poetry club.\n"),
        ("role_config", json.dumps(config)),
        ("creator", "Who else should join?"),
    ]
    # Given back, the design reads as the model wrote it.
    history = [{"role": "user", "content": "A poetry club"}, *response]
    bot.run_nonstream([*history, {"role": "user", "content": "Fine"}])
    said = [m.text for m in model.requests[1].messages if m.role == "assistant"]
    assert said == [
        f"<Background>: A poetry club.\n\n<Config>: {json.dumps(config)}\n"
        "<Answer>: Who else should join?"
    ]


# -- simulators ----------------------------------------------------------------------------------


def test_human_simulator_picks_one_question_by_seed_or_stops() -> None:
    questions = ["q1", "q2", "q3", "q4"]
    model = ScriptedModel([json.dumps(questions), json.dumps(questions), "not a list"])
    bot = HumanSimulator(llm=model, system_message="You are shopping for shoes.")
    first = bot.run_nonstream([], seed=7)[-1]["content"]
    again = bot.run_nonstream([], seed=7)[-1]["content"]
    assert first in questions
    assert first == again
    assert bot.run_nonstream([])[-1]["content"] == STOP
    instructions = system(model.requests[0])
    assert "JSON list of four" in instructions
    assert instructions.endswith("You are shopping for shoes.")
    assert model.requests[0].messages[1].text.startswith("Play a human user")


def test_dialogue_simulator_alternates_until_the_user_stops() -> None:
    user_model = ScriptedModel([json.dumps(["Hi?"]), json.dumps([STOP])])
    assistant_model = ScriptedModel(["Hello!"])
    bot = DialogueSimulator(
        user_agent=HumanSimulator(llm=user_model),
        assistant_agent=BasicAgent(llm=assistant_model),
        max_round=5,
        llm=ScriptedModel(),
        system_message=None,
    )
    response = bot.run_nonstream([])
    assert [(m["role"], m["content"]) for m in response] == [
        ("user", "Hi?"),
        ("assistant", "Hello!"),
    ]
    # The simulated user saw the assistant's words as the user's (roles swapped).
    assert [(m.role, m.text) for m in user_model.requests[1].messages][-2:] == [
        ("assistant", "Hi?"),
        ("user", "Hello!"),
    ]


# -- TIRMathAgent --------------------------------------------------------------------------------


def test_tir_agent_runs_the_program_and_goes_on_after_its_output() -> None:
    model = ScriptedModel(
        [
            "Let me compute.\n```python\nprint(6 * 7)\n```\n",
            "So the answer is \\boxed{42}.",
        ]
    )
    bot = TIRMathAgent(llm=model, name="math")
    snapshots = list(bot.run([{"role": "user", "content": "6*7?"}]))

    assert snapshots[-1][-1]["content"] == (
        "Let me compute.\n```python\nprint(6 * 7)\n```\n```output\n42\n```\n"
        "So the answer is \\boxed{42}."
    )
    assert model.requests[0].parameters.stop == ["```output"]
    # The model goes on from its own reply, the output written after it.
    continued = model.requests[1].messages[-1]
    assert continued.role == "assistant"
    assert continued.text.endswith("```output\n42\n```\n")
    assert extract_program("```python\nx = 1\n") == ""  # cut off: no program


# -- writing, printing, the web UI ---------------------------------------------------------------


def test_write_from_scratch_summarizes_outlines_and_expands_each_section() -> None:
    model = ScriptedModel(
        [
            "The summary.",
            "I. Rise\nsome point\nII. Fall\nIn closing",
            "Rise text.",
            "Fall text.",
        ]
    )
    bot = WriteFromScratch(llm=model)
    response = bot.run_nonstream([{"role": "user", "content": "Rome"}], knowledge="Rome facts")

    texts = [m["content"] for m in response]
    assert texts[-1] == "Fall text."
    assert "Rise text." in texts
    outline_request, rise, fall = (r.messages[-1].text for r in model.requests[1:])
    assert "The summary." in outline_request
    assert "I. Rise" in rise
    assert "Stop before you reach: II. Fall" in rise
    assert "II. Fall" in fall
    assert "Stop before" not in fall
    model.assert_consumed()  # two sections: "In closing" is no Roman numeral


def test_typewriter_print_prints_only_what_is_new(capsys: pytest.CaptureFixture[str]) -> None:
    text = typewriter_print([{"role": "assistant", "content": "Hel"}], "")
    text = typewriter_print([{"role": "assistant", "content": "Hello"}], text)
    call = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    text = typewriter_print(
        [
            {"role": "assistant", "content": "", "reasoning_content": "Think."},
            {"role": "assistant", "content": "Hello", "function_call": call},
            {"role": "function", "name": "get_weather", "content": "Sunny"},
        ],
        "",
    )
    out = capsys.readouterr().out
    assert out.startswith("[ANSWER]\nHel" + "lo")
    assert text == (
        '[THINK]\nThink.\n[ANSWER]\nHello\n[TOOL_CALL] get_weather\n{"city": "Paris"}\n'
        "[TOOL_RESPONSE] get_weather\nSunny"
    )
    with pytest.raises(TypeError, match="'user' message"):
        typewriter_print([{"role": "user", "content": "hi"}], "")


def test_web_ui_is_importable_and_run_says_to_use_parley_serve() -> None:
    ui = WebUI(BasicAgent(llm=ScriptedModel()), chatbot_config={"verbose": True})
    with pytest.raises(WebUIUnavailableError, match="parley serve"):
        ui.run()
    with pytest.raises(ImportError, match="parley serve"):
        import parley.compat.qwen.gui.gradio_dep  # noqa: F401, PLC0415


def test_utils_text_and_generate_cfg_helpers() -> None:
    message = Message(USER, [{"text": "Look"}, {"image": "https://x.test/a/cat.png?s=1"}])
    assert format_as_text_message(message, add_upload_info=True).content == (
        "[image](cat.png)\nLook"
    )
    assert format_as_text_message(message, add_upload_info=False).content == "Look"
    assert merge_generate_cfgs({"stop": ["a"], "top_p": 0.5}, {"stop": ["a", "b"], "seed": 1}) == {
        "stop": ["a", "b"],
        "top_p": 0.5,
        "seed": 1,
    }


def test_group_chat_manual_selection_asks_until_a_member_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    typed = iter(["nobody", "bob"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(typed))
    models = members("ann", "bob")
    models["bob"].add("Bob here.")
    agents = [BasicAgent(llm=m, name=n) for n, m in models.items()]
    bot = GroupChat(agents=agents, agent_selection_method="manual")
    response = bot.run_nonstream(
        [{"role": "user", "content": "Hi", "name": "tom"}], need_batch_response=False
    )
    assert named(response) == [("bob", "Bob here.")]


def test_article_agent_shows_what_it_found_then_continues_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    notes = tmp_path / "notes.md"
    notes.write_text("# Lighthouses\n\nThe Pharos of Alexandria was a lighthouse.\n")
    model = ScriptedModel(["It stood for centuries."])
    bot = ArticleAgent(llm=model, files=[str(notes)])
    try:
        response = bot.run_nonstream([{"role": "user", "content": "The Pharos of Alexandria"}])
    finally:
        bot.close_sync()

    found, heading, written = (m["content"] for m in response)
    assert found.startswith(">\n> Search for relevant information: \n")
    assert "The Pharos of Alexandria was a lighthouse." in found
    assert heading == ">\n> Writing Text: \n"
    assert written == "It stood for centuries."
    prompt = model.requests[0].messages[-1].text
    assert "continue the text" in prompt
    assert "The Pharos of Alexandria was a lighthouse." in prompt  # the material, in the prompt


def test_save_url_to_local_work_dir_copies_paths_and_downloads_urls(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "pic.jpg").write_bytes(b"JPEG")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    out = tmp_path / "out"
    out.mkdir()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/pic.jpg"
        saved = save_url_to_local_work_dir(url, str(out), save_filename="dl.jpg")
        assert Path(saved).read_bytes() == b"JPEG"
        with pytest.raises(ValueError, match="could not download"):
            save_url_to_local_work_dir(url.replace("pic", "missing"), str(out))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    copied = save_url_to_local_work_dir(f"file://{served / 'pic.jpg'}", str(out))
    assert Path(copied) == out / "pic.jpg"
    assert Path(copied).read_bytes() == b"JPEG"


# -- the document agents' defaults ---------------------------------------------------------------


def test_doc_agents_take_qwen_agents_defaults_and_put_their_retrieval_tool_first() -> None:
    model = ScriptedModel([])
    basic = BasicDocQA(llm=model)
    assert (basic.name, basic.description) == ("Basic DocQA", BASIC_DESCRIPTION)
    assert basic.agent.name == "Basic DocQA"  # parley's agent underneath has the name too
    memory = VirtualMemoryAgent(["code_interpreter"], llm=model, name="Mine", description="Ours.")
    assert (memory.name, memory.description, memory.agent.description) == ("Mine", "Ours.", "Ours.")
    assert list(memory.function_map) == ["retrieval", "code_interpreter"]
    parallel = ParallelDocQA(llm=model)
    assert parallel.name == "Simple Parallel DocQA With RAG Sum Agents"
    assert list(parallel.function_map) == ["retrieval"]
    # Assistant's rag_cfg may come by position after files, as in Qwen-Agent's signature.
    ranked = Assistant(None, model, None, None, None, None, {"top_k": 2})
    assert ranked.rag_settings.top_k == 2
    for bot in (basic, memory, parallel, ranked):
        bot.close_sync()
