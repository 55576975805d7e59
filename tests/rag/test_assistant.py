"""The retrieval tool and the Assistant: answers from documents, with their sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from parley.agents import (
    Agent,
    MessageCompleted,
    RunEnded,
    ToolCallEnded,
    ToolCallStarted,
    ToolResult,
)
from parley.errors import DocumentError, UserError
from parley.messages import Msg, ToolCallBlock
from parley.models.testing import ScriptedModel
from parley.providers.openai import OpenAICompatibleChatModel
from parley.providers.openai.embeddings import OpenAIEmbeddingModel
from parley.providers.openai.server import OpenAIServer, Reply, ToolCall
from parley.rag import DocumentIndex
from parley.rag.assistant import PASSAGES_INTRO, Assistant, default_index_path, fold_retrievals
from parley.rag.tool import NO_RESULTS, RetrievalTool, format_hits
from tests._requires import require_module
from tests.tools._hostile import text_pdf

HANDBOOK = """# Refund policy

Customers may return any item within 30 days of delivery. Refunds are paid to the original
payment method within 14 days after the returned item arrives at our warehouse in Lyon.

# Shipping

Orders ship from Lyon. Standard shipping takes 3 to 5 working days within France.
"""


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "handbook.md").write_text(HANDBOOK)
    text_pdf(
        folder / "manual.pdf",
        [["The kettle holds 1.7 litres."], ["Descale the kettle with citric acid every month."]],
    )
    return folder


async def keyword_index(path: Path, docs: Path) -> DocumentIndex:
    index = await DocumentIndex.open(path, embedding_model=None)
    await index.sync(docs)
    return index


async def test_the_tool_numbers_passages_under_their_sources(tmp_path: Path, docs: Path) -> None:
    async with await keyword_index(tmp_path / "i.sqlite", docs) as index:
        tool = RetrievalTool(index, top_k=3)
        text = await tool.acall({"query": "descale kettle citric acid"})
        assert text.startswith("[1] manual.pdf, page 2\n")
        assert "citric acid every month" in text
        assert await tool.acall({"query": "zeppelin"}) == NO_RESULTS
        hits = await tool.search("refund warehouse")
        assert hits[0].source.endswith("handbook.md")
        assert format_hits(hits, 4000).startswith("[1] handbook.md: Refund policy\n")


async def test_the_tool_keeps_within_its_token_budget(tmp_path: Path, docs: Path) -> None:
    async with await keyword_index(tmp_path / "i.sqlite", docs) as index:
        hits = await index.search("Lyon refund shipping days", top_k=5)
        assert len(hits) >= 1
        whole = format_hits(hits, 4000)
        short = format_hits(hits, 25)
        assert len(short) < len(whole)
        assert short.startswith("[1] ")
        assert short.endswith(" …")  # the passage that passed the budget, cut at a word


async def test_any_agent_can_search_with_the_retrieval_tool(tmp_path: Path, docs: Path) -> None:
    """A plain `Agent` given the tool: the model asks, and reads passages under their sources."""
    model = ScriptedModel(
        [ScriptedModel.tool_call("retrieval", {"query": "descale kettle"}, "c1"), "Monthly [1]."]
    )
    async with await keyword_index(tmp_path / "i.sqlite", docs) as index:
        agent = Agent("librarian", model, tools=[RetrievalTool(index, top_k=2)])
        answer = await agent.reply("How often do I descale the kettle?")
    assert answer.text == "Monthly [1]."
    assert [t.name for t in model.requests[0].tools] == ["retrieval"]
    [result] = model.requests[1].messages[-1].tool_results
    assert result.output.startswith("[1] manual.pdf, page 2\nDescale the kettle")
    model.assert_consumed()


def test_fold_retrievals_puts_the_passages_before_the_question() -> None:
    call = ToolCallBlock(id="c1", name="retrieval", input={"query": "q"})
    history = [
        Msg.user("Where is the warehouse?"),
        Msg.assistant(call),
        Msg.tool_result("c1", "[1] handbook.md\nIt is in Lyon.", name="retrieval"),
        Msg.assistant("In Lyon [1]."),
        Msg.user("Thanks"),
    ]
    folded = fold_retrievals(history, "retrieval")
    assert [m.role for m in folded] == ["user", "assistant", "user"]
    assert folded[0].text == (
        f"{PASSAGES_INTRO}\n\n[1] handbook.md\nIt is in Lyon.\n\nQuestion: Where is the warehouse?"
    )
    assert folded[1:] == history[3:]
    # A round with other tools, or with text beside the calls, is the model's: kept.
    other = [Msg.user("x"), Msg.assistant(ToolCallBlock(id="c2", name="calc")), history[2]]
    assert fold_retrievals(other, "retrieval") == other


def test_default_index_path_is_one_file_per_set_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = default_index_path(["a.md", "b.md"])
    assert first == default_index_path(["b.md", "a.md"])
    assert first != default_index_path(["a.md"])
    assert first.parent == tmp_path / "cache" / "parley" / "indexes"
    # An index holds one model's vectors: keywords only, and each model, get their own.
    with OpenAIServer() as server:
        small = OpenAIEmbeddingModel(server.credential(), "text-embedding-3-small")
        large = OpenAIEmbeddingModel(server.credential(), "text-embedding-3-large")
        paths = {default_index_path(["a.md", "b.md"], m) for m in (None, small, large)}
        assert len(paths) == 3
        assert default_index_path(["b.md", "a.md"], small) in paths


async def test_an_assistant_on_a_capable_model_retrieves_then_answers_citing(
    tmp_path: Path, docs: Path
) -> None:
    steps = [Reply(text="Refunds are paid within 14 days [1].")]
    with OpenAIServer(steps) as server:
        model = OpenAICompatibleChatModel(server.compatible_credential(), "qwen3")
        index = await keyword_index(tmp_path / "i.sqlite", docs)
        assistant = Assistant(index, model)
        try:
            events: list[Any] = [e async for e in assistant.stream("When are refunds paid?")]
        finally:
            await assistant.aclose()
            await model.aclose()
        server.assert_consumed()
        [body] = server.bodies()

    # The retrieval ran first, as the agent's own turn, reported like a model's.
    [started] = [e for e in events if isinstance(e, ToolCallStarted)]
    [ended] = [e for e in events if isinstance(e, ToolCallEnded)]
    assert (started.name, ended.call.input) == ("retrieval", {"query": "When are refunds paid?"})
    [result] = [e.result for e in events if isinstance(e, ToolResult)]
    assert result.output.startswith("[1] handbook.md: Refund policy")
    completed = [e.msg for e in events if isinstance(e, MessageCompleted)]
    assert [m.role for m in completed] == ["assistant", "tool", "assistant"]
    assert events[-1].final.text == "Refunds are paid within 14 days [1]."
    # One model call, which saw the tool round (not folded) and the retrieval tool.
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert "14 days" in body["messages"][3]["content"]
    assert [t["function"]["name"] for t in body["tools"]] == ["retrieval"]


async def test_the_model_may_search_again_with_a_query_of_its_own(
    tmp_path: Path, docs: Path
) -> None:
    steps = [
        Reply(tool_calls=[ToolCall("retrieval", {"query": "descale kettle"}, id="c9")]),
        Reply(text="Use citric acid [1]."),
    ]
    with OpenAIServer(steps) as server:
        model = OpenAICompatibleChatModel(server.compatible_credential(), "qwen3")
        assistant = Assistant(await keyword_index(tmp_path / "i.sqlite", docs), model)
        try:
            final = await assistant.reply("How do I clean it?")
        finally:
            await assistant.aclose()
            await model.aclose()
        second = server.bodies()[1]
    assert final.text == "Use citric acid [1]."
    assert "[1] manual.pdf, page 2" in second["messages"][-1]["content"]


async def test_without_retrieve_first_the_model_decides(tmp_path: Path, docs: Path) -> None:
    with OpenAIServer([Reply(text="Hello!")]) as server:
        model = OpenAICompatibleChatModel(server.compatible_credential(), "qwen3")
        index = await keyword_index(tmp_path / "i.sqlite", docs)
        assistant = Assistant(index, model, retrieve_first=False)
        try:
            events: list[Any] = [e async for e in assistant.stream("Hi")]
        finally:
            await assistant.aclose()
            await model.aclose()
    assert not [e for e in events if isinstance(e, ToolResult)]
    assert isinstance(events[-1], RunEnded)


async def test_planned_calls_and_prompt_messages_are_agent_hooks() -> None:
    # The base agent plans nothing and shows its memory as it is.
    agent = Agent.__new__(Agent)
    assert await Agent.planned_calls(agent, [Msg.user("x")]) == []
    history = [Msg.user("x")]
    assert Agent.prompt_messages(agent, history) is history


async def test_from_files_refuses_nothing_and_reports_a_bad_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="at least one"):
        await Assistant.from_files([])
    with pytest.raises(DocumentError, match=r"missing\.md"):
        await Assistant.from_files(
            [tmp_path / "missing.md"], index_path=tmp_path / "i.sqlite", embedding_model=None
        )


async def test_the_embedded_assistant_answers_from_the_document(tmp_path: Path, docs: Path) -> None:
    require_module("llama_cpp", "local")
    require_module("onnxruntime", "embeddings")
    assistant = await Assistant.from_files([docs], index_path=tmp_path / "i.sqlite")
    try:
        events: list[Any] = [e async for e in assistant.stream("In which city is the warehouse?")]
    finally:
        await assistant.aclose()
    [result] = [e.result for e in events if isinstance(e, ToolResult)]
    assert result.output.startswith("[1] handbook.md")
    end = events[-1]
    assert end.status == "completed"
    # Lyon is in the document only: the small model read it there.
    assert "Lyon" in end.final.text
    # What the model was shown: the passages inside the question, not a tool round.
    assert assistant.fold_passages
