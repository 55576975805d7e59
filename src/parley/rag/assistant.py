"""`Assistant`: an agent that answers from documents and cites them.

    assistant = await Assistant.from_files(["handbook.pdf", "faq/"])   # embedded defaults
    answer = await assistant.reply("How long do refunds take?")
    print(answer.text)          # "... within 14 days [1]."

Each run on a new question starts with a retrieval of its own: before the model's first turn
the assistant calls its `retrieval` tool with the question (no model call is spent on it),
so the model reads the numbered passages, each with its source, file and page, and answers
citing them. The call and its result are in memory and in the events like any tool round,
so the web page shows them as the answer's sources. The model may search again with a
better query when its policy lets it call tools (the embedded local model's does not: one
retrieval, then the answer).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from parley.agents import Agent
from parley.embeddings.base import EmbeddingModel
from parley.errors import UserError
from parley.messages import Msg, ToolCallBlock, new_call_id
from parley.models.base import ChatModel
from parley.models.tools import ToolChoicePolicy, one_tool_round
from parley.rag.index import DocumentIndex, IngestReport, Progress
from parley.rag.tool import RetrievalTool
from parley.rag.types import SearchMode
from parley.tools import ToolInput

__all__ = ["DEFAULT_ASSISTANT_PROMPT", "Assistant", "fold_retrievals"]

DEFAULT_ASSISTANT_PROMPT = (
    "You answer the user's questions from their documents. The retrieval tool returns "
    "numbered passages, each under its source. Answer from those passages and cite the "
    "numbers you use, like [1]. If the passages do not hold the answer, say that the "
    "documents do not say."
)


class Assistant(Agent):
    """An agent over a `DocumentIndex` that retrieves for each question and cites sources.

    Args:
        index: The documents' index (open). `from_files` opens one for you.
        model: The chat model; None: the embedded local model.
        name: The agent's name.
        system_prompt: Its instructions (default: answer from the passages, cite them).
        tools: More tools beside `retrieval`.
        top_k: Passages per retrieval.
        mode: `keyword`, `vector`, `hybrid` or `front_page` (default: hybrid when the index
            has an embedding model, else keyword).
        score_threshold: Drop passages scoring below it.
        max_ref_token: The most tokens of passages per retrieval; default: 4000 (Qwen-Agent's),
            or a third of the model's context when that is less.
        retrieve_first: Retrieve for each new question before the model's first turn.
        fold_passages: Show the model the passages inside the question rather than as a tool
            round (see `fold_retrievals`); default: for models allowed one tool round only
            (the embedded one), which answer a question with its passages but imitate a
            tool round instead of answering after one.
        **agent_options: What `Agent` takes besides (`memory`, `max_iters`, `tool_choice`...).
    """

    def __init__(
        self,
        index: DocumentIndex,
        model: ChatModel | None = None,
        *,
        name: str = "assistant",
        system_prompt: str | None = DEFAULT_ASSISTANT_PROMPT,
        tools: Iterable[ToolInput] = (),
        top_k: int = 5,
        mode: SearchMode | None = None,
        score_threshold: float | None = None,
        max_ref_token: int | None = None,
        retrieve_first: bool = True,
        fold_passages: bool | None = None,
        **agent_options: Any,
    ) -> None:
        chat = model if model is not None else _local_model()
        extra = list(tools)
        self.retrieval = RetrievalTool(
            index,
            top_k=top_k,
            mode=mode,
            score_threshold=score_threshold,
            max_ref_token=max_ref_token or _reference_budget(chat),
        )
        agent_options.setdefault("tool_choice", _policy(chat, extra))
        super().__init__(name, chat, system_prompt, [self.retrieval, *extra], **agent_options)
        self.index = index
        self.retrieve_first = retrieve_first
        self.fold_passages = (
            chat.default_tool_choice is one_tool_round if fold_passages is None else fold_passages
        )

    @classmethod
    async def from_files(
        cls,
        files: Sequence[str | os.PathLike[str]],
        model: ChatModel | None = None,
        *,
        index_path: str | os.PathLike[str] | None = None,
        embedding_model: EmbeddingModel[Any] | str | None = "local",
        chunk_size: int = 500,
        chunk_overlap: int = 50,
        **options: Any,
    ) -> Assistant:
        """An assistant over files, folders and URLs, indexed now (unchanged ones skipped).

        Args:
            files: Paths, folders (synced: their supported files) and http(s) URLs.
            model: The chat model; None: the embedded local model.
            index_path: The index's SQLite file or a PostgreSQL URL; default: a file in
                the workspace folder named after the files.
            embedding_model: An embedding model, a spec (`local`, `openai:<model>`), or None
                for keyword search only.
            chunk_size: Tokens per chunk.
            chunk_overlap: Tokens a chunk repeats of the one before.
            **options: What the constructor takes besides.

        Raises:
            DocumentError: A file could not be read (the others are indexed first).
        """
        if not files:
            raise UserError("Assistant.from_files needs at least one file, folder or URL")
        embedder = _embedder(embedding_model)
        index = await DocumentIndex.open(
            index_path if index_path is not None else default_index_path(files, embedder),
            embedding_model=embedder,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
        )
        try:
            await add_sources(index, files)
        except BaseException:
            await index.close()
            raise
        return cls(index, model, **options)

    @classmethod
    def from_files_sync(
        cls,
        files: Sequence[str | os.PathLike[str]],
        model: ChatModel | None = None,
        **options: Any,
    ) -> Assistant:
        """The sync twin of `from_files` (same arguments)."""
        from parley._sync import run_sync  # noqa: PLC0415

        return run_sync(cls.from_files(files, model, **options))

    def close_sync(self) -> None:
        """The sync twin of `aclose`."""
        from parley._sync import run_sync  # noqa: PLC0415

        run_sync(self.aclose())

    async def planned_calls(self, input_msgs: Sequence[Msg]) -> list[ToolCallBlock]:
        """A retrieval for the newest question, when there is one and `retrieve_first`."""
        if not self.retrieve_first:
            return []
        question = next((m.text for m in reversed(input_msgs) if m.role == "user" and m.text), "")
        if not question.strip():
            return []
        return [
            ToolCallBlock(id=new_call_id(), name=self.retrieval.name, input={"query": question})
        ]

    def prompt_messages(self, history: list[Msg]) -> list[Msg]:
        """The conversation with retrieval rounds folded into the questions, if set to."""
        return fold_retrievals(history, self.retrieval.name) if self.fold_passages else history

    async def aclose(self) -> None:
        """Close the index."""
        await self.index.close()


PASSAGES_INTRO = "Passages from my documents:"


def fold_retrievals(history: list[Msg], tool_name: str) -> list[Msg]:
    """`history` with each retrieval-only round folded into the question before it.

    A round is an assistant message holding only calls of `tool_name` and the tool message
    answering them; it becomes part of the user message before it: the passages, then
    `Question: <the question>`. Other messages are kept as they are.
    """
    out: list[Msg] = []
    position = 0
    while position < len(history):
        msg = history[position]
        answer = history[position + 1] if position + 1 < len(history) else None
        if _retrieval_round(msg, answer, tool_name):
            assert answer is not None
            passages = "\n\n".join(r.text for r in answer.tool_results)
            question = out.pop() if out and out[-1].role == "user" else None
            text = f"{PASSAGES_INTRO}\n\n{passages}"
            if question is not None and question.text:
                text += f"\n\nQuestion: {question.text}"
            out.append(Msg.user(text))
            position += 2
            continue
        out.append(msg)
        position += 1
    return out


def _retrieval_round(msg: Msg, answer: Msg | None, tool_name: str) -> bool:
    calls = msg.tool_calls
    return (
        msg.role == "assistant"
        and bool(calls)
        and not msg.text
        and all(c.name == tool_name for c in calls)
        and answer is not None
        and answer.role == "tool"
        and {r.tool_call_id for r in answer.tool_results} == {c.id for c in calls}
    )


async def add_sources(
    index: DocumentIndex,
    sources: Sequence[str | os.PathLike[str]],
    *,
    progress: Progress | None = None,
    errors: Literal["raise", "report"] = "raise",
) -> IngestReport:
    """Index files and URLs, and sync folders, trying every one before raising failures."""
    folders = [s for s in sources if "://" not in str(s) and Path(s).is_dir()]
    others = [s for s in sources if s not in folders]
    report = IngestReport()
    parts = [await index.sync(f, errors="report", progress=progress) for f in folders]
    if others:
        parts.append(await index.add(others, errors="report", progress=progress))
    for part in parts:
        report.added += part.added
        report.updated += part.updated
        report.unchanged += part.unchanged
        report.removed += part.removed
        report.failed.update(part.failed)
    if errors == "raise":
        report.raise_for_failures()
    return report


def default_index_path(
    files: Sequence[str | os.PathLike[str]],
    embedding_model: EmbeddingModel[Any] | None = None,
) -> Path:
    """The index file for a set of sources and an embedding model, in the user's cache folder.

    `$XDG_CACHE_HOME/parley/indexes/` (default `~/.cache/parley/indexes/`): one file per set
    of sources and embedding model (None: keywords only), so that asking again about the same
    files reuses their index, an index of keywords and one of vectors over the same files do
    not stand in each other's way (an index holds one model's vectors), and the documents'
    folders stay as they are.
    """
    import hashlib  # noqa: PLC0415

    names = sorted(str(f) if "://" in str(f) else str(Path(f).resolve()) for f in files)
    model = "-" if embedding_model is None else embedding_model.provider
    if embedding_model is not None:
        model += f"/{embedding_model.model}"
    digest = hashlib.sha256("\n".join([model, *names]).encode("utf-8")).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(cache) / "parley" / "indexes"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{digest}.sqlite"


def _embedder(spec: EmbeddingModel[Any] | str | None) -> EmbeddingModel[Any] | None:
    if spec is None or isinstance(spec, EmbeddingModel):
        return spec
    from parley.embeddings.spec import embedding_model_from_spec  # noqa: PLC0415

    return embedding_model_from_spec(spec)


def _local_model() -> ChatModel:
    from parley.models.spec import model_from_spec  # noqa: PLC0415

    return model_from_spec()


def _reference_budget(model: ChatModel) -> int:
    context = model.context_size
    return min(4000, context // 3) if context else 4000


def _policy(model: ChatModel, extra_tools: list[ToolInput]) -> ToolChoicePolicy:
    # The retrieval already ran: for a model allowed one tool round (the embedded one), that
    # was it, unless other tools were given to be used.
    if model.default_tool_choice is one_tool_round and not extra_tools:
        return "none"
    return None
