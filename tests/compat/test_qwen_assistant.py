"""Qwen-Agent's Assistant and FnCallAgent(files=...): answers from documents."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from parley.compat.qwen import Assistant, BasicAgent, ContentItem, FnCallAgent, Message
from parley.compat.qwen._rag import RagSettings, _embedder, _index_location
from parley.errors import ConfigurationError, DocumentError
from parley.models.testing import ScriptedModel
from parley.providers.dashscope.embeddings import DashScopeEmbeddingModel
from parley.providers.openai.embeddings import OpenAIEmbeddingModel
from parley.providers.openai.server import OpenAIServer, Reply
from parley.rag.tool import RetrievalTool
from tests._requires import require_module

HANDBOOK = """# Refund policy

Customers may return any item within 30 days of delivery. Refunds are paid to the original
payment method within 14 days after the returned item arrives at our warehouse in Lyon.

# Shipping

Orders ship from Lyon. Standard shipping takes 3 to 5 working days within France.
"""


@pytest.fixture
def handbook(tmp_path: Path) -> Path:
    path = tmp_path / "handbook.md"
    path.write_text(HANDBOOK)
    return path


def llm(server: OpenAIServer) -> dict[str, Any]:
    return {"model": "qwen3-8b", "model_server": server.url, "api_key": "EMPTY"}


def test_an_assistant_with_files_answers_offline_on_the_embedded_defaults(
    tmp_path: Path, handbook: Path
) -> None:
    require_module("llama_cpp", "local")
    require_module("onnxruntime", "embeddings")
    bot = Assistant(
        files=[str(handbook)],
        rag_cfg={"retrieval_type": "hybrid", "index_path": str(tmp_path / "index")},
    )
    try:
        response = bot.run_nonstream(
            [{"role": "user", "content": "In which city is the warehouse?"}]
        )
    finally:
        bot.close_sync()
    assert isinstance(response[-1], dict)
    assert "Lyon" in response[-1]["content"]  # only the document says so
    assert (tmp_path / "index" / "index.sqlite").is_file()


def test_the_knowledge_goes_in_the_system_message_as_qwen_agent_puts_it(
    tmp_path: Path, handbook: Path
) -> None:
    with OpenAIServer([Reply(text="Within 14 days."), Reply(text="14 天。")]) as server:
        bot = Assistant(
            llm=llm(server),
            system_message="You are a shop assistant.",
            files=[str(handbook)],
            rag_cfg={"index_path": str(tmp_path / "i.sqlite"), "top_k": 2},
        )
        try:
            answer = bot.run_nonstream([Message("user", "When are refunds paid?")])
            bot.run_nonstream([Message("user", "退款 refunds 什么时候?")])
        finally:
            bot.close_sync()
        english, chinese = server.bodies()
    assert answer[-1].content == "Within 14 days."
    system = english["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a shop assistant.\n\n# Knowledge Base\n\n")
    assert "## The content from [handbook.md]:\n\n```\n" in system["content"]
    assert "within 14 days" in system["content"]
    assert "tools" not in english  # the Assistant retrieves itself: no retrieval tool
    assert "# 知识库" in chinese["messages"][0]["content"]
    assert "## 来自 [handbook.md] 的内容" in chinese["messages"][0]["content"]


MANUAL = (
    "# Pump manual\n\nThis manual covers the P-20 pump from delivery to its yearly service.\n\n"
    "Unpack the pump with care and keep every bolt that came in its box.\n\n"
    "Bolt the pump to a level concrete floor, away from walls and heat.\n\n"
    "The impeller is worn by sand and grit, so it is replaced every year."
)


def knowledge(tmp_path: Path, files: list[str], rag_cfg: dict[str, Any]) -> str:
    """The system message an Assistant over `files` sends for a question on the impeller."""
    with OpenAIServer([Reply(text="Every year.")]) as server:
        bot = Assistant(llm=llm(server), files=files, rag_cfg=rag_cfg)
        try:
            bot.run_nonstream([Message("user", "When is the impeller replaced?")])
        finally:
            bot.close_sync()
        [body] = server.bodies()
    content: str = body["messages"][0]["content"]
    return content


def test_front_page_search_puts_a_lone_documents_opening_first(tmp_path: Path) -> None:
    manual = tmp_path / "manual.md"
    manual.write_text(MANUAL)
    small = {"chunk_size": 16, "chunk_overlap": 0, "top_k": 1}
    # Qwen-Agent's default searchers, keyword_search and front_page_search.
    both = knowledge(tmp_path, [str(manual)], {**small, "index_path": str(tmp_path / "a")})
    opening, answer = both.index("covers the P-20 pump"), both.index("sand and grit")
    assert opening < answer
    alone = {**small, "rag_searchers": ["keyword_search"], "index_path": str(tmp_path / "b")}
    keywords = knowledge(tmp_path, [str(manual)], alone)
    assert "sand and grit" in keywords
    assert "P-20" not in keywords


def test_a_folder_among_the_files_is_searched_for_its_documents(tmp_path: Path) -> None:
    folder = tmp_path / "manuals"
    folder.mkdir()
    (folder / "manual.md").write_text(MANUAL)
    (tmp_path / "other.md").write_text("The impeller of the other pump is never replaced.\n")
    cfg = {"index_path": str(tmp_path / "i")}
    content = knowledge(tmp_path, [str(folder)], cfg)
    assert "## The content from [manual.md]:" in content
    assert "sand and grit" in content
    assert "never replaced" not in content


def test_knowledge_given_to_run_is_used_instead_of_retrieving(handbook: Path) -> None:
    with OpenAIServer([Reply(text="ok")]) as server:
        bot = Assistant(llm=llm(server))
        try:
            bot.run_nonstream([Message("user", "Hi")], knowledge="The sky is green.")
        finally:
            bot.close_sync()
        [body] = server.bodies()
    assert body["messages"][0]["content"].endswith("# Knowledge Base\n\nThe sky is green.")


def test_a_file_attached_to_the_message_is_indexed_and_searched(
    tmp_path: Path, handbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # attached files may come from the working directory
    with OpenAIServer([Reply(text="Lyon.")]) as server:
        bot = Assistant(llm=llm(server))
        try:
            bot.run_nonstream(
                [
                    Message(
                        "user",
                        [
                            ContentItem(text="Where do orders ship from?"),
                            ContentItem(file=str(handbook)),
                        ],
                    )
                ]
            )
        finally:
            bot.close_sync()
        [body] = server.bodies()
    assert "Orders ship from Lyon" in body["messages"][0]["content"]


def test_an_attached_file_outside_the_allowed_folders_is_refused(
    tmp_path: Path, handbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the default root: the working directory
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with OpenAIServer([]) as server:
        bot = Assistant(llm=llm(server))
        try:
            for hostile in (str(handbook), "/etc/passwd", "file:///etc/passwd", "../handbook.md"):
                question = [ContentItem(text="Summarise"), ContentItem(file=hostile)]
                with pytest.raises(DocumentError, match="outside the folders"):
                    bot.run_nonstream([Message("user", question)])
        finally:
            bot.close_sync()
        assert server.bodies() == []  # nothing reached the model


def test_fn_call_agent_with_files_gets_a_retrieval_tool(tmp_path: Path, handbook: Path) -> None:
    steps = [
        # Qwen-Agent's default: the tools in the prompt, the call in the text (nous).
        Reply(text='<tool_call>\n{"name": "retrieval", "arguments": {"query": "shipping time"}}'),
        Reply(text="3 to 5 working days."),
    ]
    with OpenAIServer(steps) as server:
        bot = FnCallAgent(
            llm=llm(server),
            files=[str(handbook)],
            rag_cfg={"index_path": str(tmp_path / "i.sqlite")},
        )
        try:
            response = bot.run_nonstream([{"role": "user", "content": "How long is shipping?"}])
        finally:
            bot.close_sync()
        first, second = server.bodies()
    assert "tools" not in first
    assert (
        '{"type": "function", "function": {"name": "retrieval"' in first["messages"][0]["content"]
    )
    result = second["messages"][-1]
    assert result["role"] == "user"
    assert result["content"].startswith("<tool_response>\n[1] handbook.md")
    assert "3 to 5 working days" in result["content"]
    assert response[-1]["content"] == "3 to 5 working days."


def test_rag_cfg_reaches_the_index_and_the_retrieval_tool(tmp_path: Path, handbook: Path) -> None:
    cfg = {
        "retrieval_type": "keyword",
        "chunk_size": 120,
        "chunk_overlap": 10,
        "top_k": 3,
        "score_threshold": 0.5,
        "max_ref_token": 900,
        "index_path": str(tmp_path / "rag_index"),
    }
    bot = FnCallAgent(llm=ScriptedModel(), files=[str(handbook)], rag_cfg=cfg)
    try:
        assert bot.index is not None
        chunker = bot.index.chunker
        assert (chunker.chunk_size, chunker.chunk_overlap) == (120, 10)
        tool = bot.function_map["retrieval"]
        assert isinstance(tool, RetrievalTool)
        assert (tool.mode, tool.top_k, tool.score_threshold, tool.max_ref_token) == (
            "keyword",
            3,
            0.5,
            900,
        )
        assert (tmp_path / "rag_index" / "index.sqlite").is_file()
    finally:
        bot.close_sync()


def test_files_on_an_agent_that_does_not_read_them_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"FnCallAgent .* and Assistant"):
        BasicAgent(files=["a.md"])


def test_rag_cfg_maps_qwen_agents_keys(caplog: pytest.LogCaptureFixture) -> None:
    assert RagSettings.read(None).mode == "keyword"  # Qwen-Agent's default searchers
    assert RagSettings.read(None).embedding_model is None
    hybrid = RagSettings.read({"rag_searchers": ["keyword_search", "vector_search"]})
    assert (hybrid.mode, hybrid.embedding_model) == ("hybrid", "local")
    assert RagSettings.read({"rag_searchers": ["vector_search"]}).mode == "vector"
    assert RagSettings.read({"rag_searchers": ["front_page_search"]}).mode == "front_page"
    # front_page_search beside the others leads with a lone document's opening.
    assert RagSettings.read(None).front_page_tokens == 4000
    assert RagSettings.read({"retrieval_type": "hybrid"}).front_page_tokens == 4000
    assert RagSettings.read({"rag_searchers": ["keyword_search"]}).front_page_tokens is None
    assert RagSettings.read({"max_ref_token": 1000}).front_page_tokens == 1000
    with pytest.raises(ConfigurationError, match=r"rag_searchers \['web_search'\] unknown"):
        RagSettings.read({"retrieval_type": "keyword", "rag_searchers": ["web_search"]})
    settings = RagSettings.read(
        {
            "retrieval_type": "hybrid",
            "parser_page_size": 300,
            "chunk_overlap": 20,
            "top_k": 3,
            "score_threshold": 0.01,
            "max_ref_token": 1000,
        }
    )
    assert (settings.chunk_size, settings.chunk_overlap, settings.top_k) == (300, 20, 3)
    assert (settings.score_threshold, settings.max_ref_token) == (0.01, 1000)
    with pytest.raises(ConfigurationError, match=r"unknown keys \['chunk_sise'\]"):
        RagSettings.read({"chunk_sise": 3})
    # Qwen-Agent's documented default rag_cfg names its keyword generation: taken, not used.
    with caplog.at_level(logging.WARNING, "parley.compat.qwen"):
        RagSettings.read({"rag_keygen_strategy": "none"})
        assert not caplog.records
        qwen_default = {
            "max_ref_token": 4000,
            "parser_page_size": 500,
            "rag_keygen_strategy": "SplitQueryThenGenKeyword",
            "rag_searchers": ["keyword_search", "front_page_search"],
        }
        assert RagSettings.read(qwen_default).mode == "keyword"
    assert "rag_keygen_strategy 'SplitQueryThenGenKeyword' is not used" in caplog.text
    with pytest.raises(ConfigurationError, match="retrieval_type 'semantic'"):
        RagSettings.read({"retrieval_type": "semantic"})
    with pytest.raises(ConfigurationError, match="bad rag_cfg value"):
        RagSettings.read({"top_k": "many"})


def test_rag_cfg_embedding_model_names_and_index_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert isinstance(_embedder("text-embedding-v4"), DashScopeEmbeddingModel)  # the seed's form
    assert isinstance(_embedder("openai:text-embedding-3-small"), OpenAIEmbeddingModel)
    with pytest.raises(ConfigurationError, match="'provider:model'"):
        _embedder("mystery-embedder")
    folder = _index_location(RagSettings(index_path=str(tmp_path / "rag_index")), [])
    assert folder == tmp_path / "rag_index" / "index.sqlite"
    file = _index_location(RagSettings(index_path=str(tmp_path / "x.db")), [])
    assert file == tmp_path / "x.db"


def test_a_text_model_type_gets_media_as_notes_on_the_agents_loop_too() -> None:
    # Qwen-Agent's `oai` models read text: an image becomes a note (as `_call_llm` gives it),
    # whichever path the agent calls the model by; `qwenvl_oai` gets the image itself.
    image = "https://images.test/dog.jpeg"
    question = [{"role": "user", "content": [{"text": "What is it?"}, {"image": image}]}]
    with OpenAIServer([Reply(text="A dog."), Reply(text="A dog.")]) as server:
        text_cfg = {"model": "qwen-vl-max", "model_server": server.url, "api_key": "EMPTY"}
        for cfg in (text_cfg, {**text_cfg, "model_type": "qwenvl_oai"}):
            bot = Assistant(llm=cfg)
            assert bot.run_nonstream(question)[-1]["content"] == "A dog."
            bot.close_sync()
        text, vision = (body["messages"][-1]["content"] for body in server.bodies())
    assert text == "(Uploaded ![image](dog.jpeg)) \nWhat is it?"
    assert {"type": "image_url", "image_url": {"url": image}} in vision
