"""Local media uploaded to DashScope's temporary storage, as the SDK does it (opt-in).

`MultiModalConversation.call` uploads every `file://` image, audio or video before it sends
the request: it asks the API for an upload policy (`GET {base}/uploads?action=getPolicy&
model=...`), posts each file to the storage host the policy names (OSS), puts the file's
`oss://` location in the message, and marks the request `X-DashScope-OssResourceResolve:
enable` so the service reads those locations. Files stay there for 48 hours.

parley inlines local files as `data:` URIs by default (nothing is stored elsewhere, and no
extra round trips); `DashScopeChatModel(upload_files=True)` uses these uploads instead, for
files past the inline size limit (a data URI of at most 10 MB). The SDK's uploader
(`dashscope.utils.oss_utils.OssUtils`) is synchronous: it runs on a worker thread. The
storage host is checked against `ALLOW_MODEL_REQUESTS` before anything is sent to it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from parley.errors import MessageError, ModelConnectionError, ParleyError
from parley.providers.dashscope._errors import error_from_code
from parley.providers.dashscope._media import FILE_SCHEME

__all__ = ["OSS_RESOLVE_HEADER", "Uploader", "local_parts"]

OSS_RESOLVE_HEADER = {"X-DashScope-OssResourceResolve": "enable"}
"""The header without which the service does not read `oss://` locations."""

_MEDIA_KEYS = ("image", "audio", "video")


def local_parts(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """`(part, key)` of every content part whose media is a `file://` URL."""
    found = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            for key in _MEDIA_KEYS:
                value = part.get(key)
                if isinstance(value, str) and value[: len(FILE_SCHEME)].lower() == FILE_SCHEME:
                    found.append((part, key))
    return found


def _path(url: str) -> str:
    path = url2pathname(unquote(urlsplit(url).path))
    if not os.path.isfile(path):
        raise MessageError(f"cannot upload {url}: no such file")
    return path


@dataclass(frozen=True)
class Uploader:
    """Uploads a call's local media through the SDK, under the call's key and endpoint.

    Args:
        model: The model the files are for (the policy is per model).
        api_key: The key.
        base_url: The native API's root, where the policy is asked for.
        workspace: The workspace, if any.
        timeout: Seconds to wait for the policy.
        check_host: Refuses a storage host requests may not go to (raises `UserError`).
        provider: The provider's name, for errors.
    """

    model: str
    api_key: str
    base_url: str
    workspace: str | None
    timeout: float
    check_host: Callable[[str], None]
    provider: str = "dashscope"

    async def upload(self, messages: list[dict[str, Any]]) -> bool:
        """Replace each local media URL in `messages` by its uploaded `oss://` location.

        Returns:
            Whether anything was uploaded (the request then needs `OSS_RESOLVE_HEADER`).

        Raises:
            MessageError: A local file does not exist.
            ModelError: The policy was refused, or an upload failed.
        """
        parts = local_parts(messages)
        if not parts:
            return False
        urls = sorted({part[key] for part, key in parts})
        uploaded = await asyncio.to_thread(self._upload_all, urls)
        for part, key in parts:
            part[key] = uploaded[part[key]]
        return True

    def _upload_all(self, urls: list[str]) -> dict[str, str]:
        from dashscope.utils.oss_utils import OssUtils  # noqa: PLC0415

        paths = {url: _path(url) for url in urls}
        certificate = self._certificate(OssUtils)
        self.check_host(str(certificate.get("upload_host") or ""))
        done = {}
        for url, path in paths.items():
            try:
                location, _ = OssUtils.upload(
                    model=self.model,
                    file_path=path,
                    api_key=self.api_key,
                    upload_certificate=certificate,
                )
            except ParleyError:
                raise
            except Exception as exc:  # requests' errors, the SDK's UploadFileException
                raise ModelConnectionError(
                    f"uploading {url} to DashScope's storage failed: {exc}",
                    model=self.model,
                    provider=self.provider,
                ) from exc
            done[url] = str(location)
        return done

    def _certificate(self, oss: Any) -> dict[str, Any]:
        try:
            answer = oss.get_upload_certificate(
                model=self.model,
                api_key=self.api_key,
                base_address=self.base_url,
                workspace=self.workspace,
                request_timeout=self.timeout,
            )
        except Exception as exc:
            raise ModelConnectionError(
                f"cannot reach {self.provider} for an upload policy: {exc}",
                model=self.model,
                provider=self.provider,
            ) from exc
        if answer.status_code != 200 or not isinstance(answer.output, dict):
            raise error_from_code(
                answer.status_code,
                answer.code,
                answer.message,
                {"code": answer.code, "message": answer.message},
                model=self.model,
                provider=self.provider,
            )
        certificate: dict[str, Any] = answer.output
        return certificate
