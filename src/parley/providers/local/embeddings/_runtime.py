"""onnxruntime in-process: one session per model file and thread count, built once per process.

An `Encoder` is a loaded ONNX graph (an `InferenceSession`) and the tokenizer for one context
size. Sessions are shared by every `LocalEmbeddingModel` that names the same file and thread
count; each has a lock, so one batch runs at a time (two concurrent runs would only share the
same cores, each with its own threads). Tokenizing happens outside the lock.

`embed` turns a batch of texts into L2-normalized vectors as sentence-transformers does for
all-MiniLM-L6-v2 (its modules.json: transformer, mean pooling, normalize): the token vectors
of the last hidden state averaged over the attention mask (padding left out), then divided by
their norm.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from parley.errors import ConfigurationError, MissingDependencyError
from parley.providers.local.embeddings._tokenizer import build_tokenizer

if TYPE_CHECKING:
    from types import ModuleType

    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

__all__ = ["Encoder", "InputTooLongError", "SessionKey", "get_encoder", "import_onnxruntime"]


def import_onnxruntime() -> ModuleType:
    """`onnxruntime`, imported on first use.

    Raises:
        MissingDependencyError: onnxruntime is not installed (extra `embeddings`).
    """
    try:
        import onnxruntime  # noqa: PLC0415  (heavy, optional)
    except ImportError:
        raise MissingDependencyError("onnxruntime", "embeddings") from None
    module: ModuleType = onnxruntime
    return module


@dataclass(frozen=True)
class SessionKey:
    """What makes two loaded graphs the same: the file and the thread count."""

    path: str
    threads: int


@dataclass
class _Session:
    session: Any
    inputs: frozenset[str]
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Encoder:
    """A loaded graph and the tokenizer that truncates at `max_tokens`."""

    key: SessionKey
    max_tokens: int
    tokenizer: Tokenizer
    _session: _Session

    def embed(
        self, texts: list[str], *, truncate: bool = True
    ) -> tuple[npt.NDArray[np.float32], int]:
        """Normalized vectors for `texts` (one row each) and the tokens embedded.

        Raises:
            InputTooLongError: `truncate` is off and a text has more than `max_tokens`.
        """
        import numpy as np  # noqa: PLC0415  (comes with onnxruntime)

        encoded = self.tokenizer.encode_batch(texts)
        if not truncate:
            longer = [i for i, e in enumerate(encoded) if e.overflowing]
            if longer:
                raise InputTooLongError(longer, self.max_tokens)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        session = self._session
        with session.lock:
            (hidden,) = session.session.run(
                None, {name: value for name, value in feed.items() if name in session.inputs}
            )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors: npt.NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return vectors, int(mask.sum())


class InputTooLongError(Exception):
    """Texts of a batch (their positions) have more tokens than the encoder takes."""

    def __init__(self, positions: list[int], max_tokens: int) -> None:
        super().__init__(f"inputs {positions} have more than {max_tokens} tokens")
        self.positions = positions
        self.max_tokens = max_tokens


_sessions: dict[SessionKey, _Session] = {}
_tokenizers: dict[int, Tokenizer] = {}
_lock = threading.Lock()


def get_encoder(key: SessionKey, max_tokens: int) -> Encoder:
    """The encoder for `key` and `max_tokens`, loading the graph the first time (blocking).

    Raises:
        MissingDependencyError: onnxruntime or tokenizers is not installed.
        ConfigurationError: onnxruntime cannot load the file.
    """
    with _lock:
        tokenizer = _tokenizers.get(max_tokens)
        if tokenizer is None:
            tokenizer = _tokenizers[max_tokens] = build_tokenizer(max_tokens)
        session = _sessions.get(key)
        if session is None:
            session = _sessions[key] = _load(key)
        return Encoder(key, max_tokens, tokenizer, session)


def _load(key: SessionKey) -> _Session:
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    # Batches run one at a time (the lock), so parallel operators would gain nothing; the
    # intra-op pool is the only one that works.
    options.intra_op_num_threads = key.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        session = ort.InferenceSession(key.path, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own, unexported exception types
        raise ConfigurationError(f"onnxruntime cannot load {key.path}: {exc}") from None
    return _Session(session, frozenset(i.name for i in session.get_inputs()))
