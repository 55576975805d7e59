"""Build benchmarks/data/pydocs/corpus.jsonl from the Python 3.11 library reference.

The corpus is one passage per documented API entry (function, class, method, exception,
attribute, data) of the modules in `PAGES`, read from the HTML documentation that Debian's
`python3.11-doc` package installs. The queries and their labels (queries.jsonl, qrels.tsv)
are written by hand; this script checks that every labelled passage exists.

    apt-get install python3.11-doc
    python benchmarks/data/build_pydocs.py
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

from bs4 import BeautifulSoup, Tag

HTML = Path("/usr/share/doc/python3.11/html/library")
OUT = Path(__file__).parent / "pydocs"
MAX_CHARS = 1500
"""A passage's text is cut at the last sentence end before this many characters."""

PAGES = [
    "argparse",
    "asyncio-eventloop",
    "asyncio-queue",
    "asyncio-stream",
    "asyncio-subprocess",
    "asyncio-sync",
    "asyncio-task",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "concurrent.futures",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "difflib",
    "enum",
    "fnmatch",
    "functools",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "io",
    "itertools",
    "json",
    "logging",
    "math",
    "operator",
    "os",
    "os.path",
    "pathlib",
    "pickle",
    "queue",
    "random",
    "re",
    "secrets",
    "shlex",
    "shutil",
    "signal",
    "socket",
    "sqlite3",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "sys",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "unicodedata",
    "urllib.parse",
    "uuid",
    "weakref",
    "zipfile",
    "zlib",
]

KINDS = (
    "function",
    "class",
    "method",
    "classmethod",
    "staticmethod",
    "exception",
    "attribute",
    "data",
    "property",
)


def passages(page: str) -> list[dict[str, str]]:
    soup = BeautifulSoup((HTML / f"{page}.html").read_text(encoding="utf-8"), "lxml")
    found = []
    for entry in soup.select("dl.py"):
        kind = next((c for c in entry.get("class", []) if c in KINDS), None)
        term = entry.find("dt", recursive=False)
        body = entry.find("dd", recursive=False)
        if kind is None or not isinstance(term, Tag) or not isinstance(body, Tag):
            continue
        ident = term.get("id")
        if not ident:
            continue
        found.append({"_id": str(ident), "title": page, "text": _text(term, body)})
    return found


def _text(term: Tag, body: Tag) -> str:
    for link in term.select("a.headerlink"):
        link.decompose()
    signature = " ".join(term.get_text("").split())
    parts = []
    for child in body.children:
        if isinstance(child, Tag) and child.name == "dl" and "py" in child.get("class", []):
            continue  # a class's members are passages of their own
        if (
            isinstance(child, Tag)
            and child.name in ("div", "pre")
            and "highlight" in str(child.get("class", []))
        ):
            continue  # code examples: prose is what queries describe
        text = child.get_text(" ") if isinstance(child, Tag) else str(child)
        parts.append(" ".join(text.split()))
    prose = re.sub(r"\s+([.,;:)])", r"\1", " ".join(p for p in parts if p))
    return _cut(f"{signature}: {prose}".replace("¶", "").strip())


def _cut(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    head = text[:MAX_CHARS]
    end = head.rfind(". ")
    return head[: end + 1] if end > MAX_CHARS // 2 else head


def main() -> None:
    corpus: dict[str, dict[str, str]] = {}
    for page in PAGES:
        for passage in passages(page):
            corpus.setdefault(passage["_id"], passage)
    OUT.mkdir(exist_ok=True)
    with (OUT / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for passage in sorted(corpus.values(), key=lambda p: p["_id"]):
            out.write(json.dumps(passage, ensure_ascii=False) + "\n")
    with (OUT / "qrels.tsv").open(encoding="utf-8") as qrels:
        rows = list(csv.DictReader(qrels, delimiter="\t"))
    missing = sorted({row["corpus-id"] for row in rows} - corpus.keys())
    print(f"{len(corpus)} passages, {len(rows)} labels")
    if missing:
        sys.exit(f"labelled passages not in the corpus: {missing}")


if __name__ == "__main__":
    main()
