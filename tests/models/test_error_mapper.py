"""`parley.models._errors`: the one mapper under every provider's error table.

The providers' own tests check their tables through their SDKs and wire servers; these check
what the mapper decides for all of them: the order of its rules, the wait it keeps, the
classes it imports, the block that raises the mapped error.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from parley.errors import (
    ContentFilterError,
    ContextLengthError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    RateLimitError,
    UserError,
)
from parley.models import _errors as mapper


class _TimeoutError(Exception):
    pass


class _RefusedError(Exception):
    pass


class _CutError(Exception):
    pass


class _StatusError(Exception):
    def __init__(self, status_code: int, body: Any) -> None:
        super().__init__(f"status {status_code}")
        self.status_code = status_code
        self.body = body
        self.response = _Response({"retry-after": "3"})


class _Response:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers

    @property
    def content(self) -> bytes:
        raise RuntimeError("the body was never read")


class _Request:
    def __init__(self, url: str) -> None:
        self.url = url


class _SDKConnectionError(Exception):
    """One class for a refused connection and a dropped one, as openai's and anthropic's."""

    def __init__(self, url: str) -> None:
        super().__init__("Connection error.")
        self.request = _Request(url)


FAILURES = mapper.Failures(
    timeouts=(_TimeoutError,),
    unreachable=(_RefusedError,),
    lost=(_CutError, _SDKConnectionError),
    statuses=(_StatusError,),
)


def _mapped(exc: BaseException, url: str | None = None) -> ModelError | None:
    def from_status(status: int, body: Any, headers: Any) -> ModelError:
        text = mapper.answered("p", status, str(body))
        return mapper.status_error(status, body, text, headers, model="m", provider="p")

    return mapper.map_failure(
        exc, FAILURES, from_status, model="m", provider="p", url=url, hint="do this"
    )


def _raised(exc: BaseException, cause: BaseException) -> BaseException:
    """`exc` raised from `cause`, as an SDK raises its own error over its HTTP library's."""
    try:
        raise exc from cause
    except BaseException as raised:
        return raised


def test_each_kind_of_failure_becomes_its_error_in_the_one_wording() -> None:
    url = "http://127.0.0.1:9/v1"
    timeout = _mapped(_TimeoutError(), url)
    refused, cut = _mapped(_RefusedError("no"), url), _mapped(_CutError("eof"), url)
    assert isinstance(timeout, ModelTimeoutError)
    assert str(timeout) == (
        "p at http://127.0.0.1:9 did not answer in time (_TimeoutError): "
        "raise the timeout or try again"
    )
    assert isinstance(refused, ModelConnectionError)
    assert str(refused) == "cannot reach p at http://127.0.0.1:9 (_RefusedError: no): do this"
    assert isinstance(cut, ModelConnectionError)
    assert str(cut) == (
        "the connection to p at http://127.0.0.1:9 dropped before the answer ended "
        "(_CutError: eof): try again"
    )
    assert _mapped(ValueError("foreign")) is None


def test_without_a_url_the_provider_alone_is_named() -> None:
    assert str(_mapped(_RefusedError("no"))) == "cannot reach p (_RefusedError: no): do this"


def test_the_sdk_errors_cause_says_whether_the_server_was_out_of_reach_or_dropped() -> None:
    # The SDK's one class (a `lost` one) says neither: its HTTP library's error under it does,
    # and the server it asked is named from its request.
    refused = _mapped(_raised(_SDKConnectionError("https://h.example/v1/x"), _RefusedError()))
    cut = _mapped(_raised(_SDKConnectionError("https://h.example/v1/x"), _CutError("eof")))
    assert str(refused) == "cannot reach p at https://h.example (_RefusedError): do this"
    assert str(cut).startswith("the connection to p at https://h.example dropped")
    assert "(_CutError: eof)" in str(cut)


def test_an_unknown_host_says_so() -> None:
    unknown = socket.gaierror(-2, "Name or service not known")
    mapped = _mapped(_raised(_RefusedError("all attempts failed"), unknown), "http://nope.invalid")
    assert isinstance(mapped, ModelConnectionError)
    assert str(mapped) == (
        "cannot reach p at http://nope.invalid: its host name is unknown "
        "(_RefusedError: all attempts failed): check the base URL"
    )


def test_an_sdk_status_goes_to_the_provider_table_with_the_body_it_kept() -> None:
    mapped = _mapped(_StatusError(429, {"error": "slow down"}))
    assert isinstance(mapped, RateLimitError)
    assert mapped.retry_after == 3
    assert mapped.body == {"error": "slow down"}  # the response's body was never read


def test_the_headers_wait_comes_before_the_one_the_body_asks() -> None:
    def wait(headers: dict[str, str]) -> float | None:
        error = mapper.status_error(503, None, "busy", headers, model="m", provider="p", wait=9)
        assert isinstance(error, ModelHTTPError)
        return error.retry_after

    assert wait({"retry-after": "2"}) == 2
    assert wait({}) == 9


def test_context_and_refusal_are_their_own_errors_never_retried() -> None:
    def error(**flags: bool) -> ModelError:
        return mapper.status_error(400, None, "no", model="m", provider="p", **flags)

    assert isinstance(error(context=True), ContextLengthError)
    assert isinstance(error(refused=True), ContentFilterError)
    assert type(error()) is ModelHTTPError


def test_error_fields_read_nested_flat_and_text_bodies() -> None:
    assert mapper.error_fields({"error": {"code": "c", "message": "m"}}, "code", "message") == (
        "c",
        "m",
    )
    assert mapper.error_fields({"type": "t"}, "type", "message") == ("t", "")
    assert mapper.error_fields("plain text", "code", "message") == ("", "plain text")


def test_a_table_names_classes_and_passes_over_a_module_not_installed() -> None:
    load = mapper.classes(
        timeouts=("builtins:TimeoutError", "parley_no_such_module:Timeout"),
        lost=("builtins:ConnectionResetError",),
    )
    assert load() == mapper.Failures(timeouts=(TimeoutError,), lost=(ConnectionResetError,))
    assert load() is load()  # imported once


def test_the_block_raises_the_mapped_error_and_lets_the_rest_pass() -> None:
    def raising(exc: Exception) -> None:
        with mapper.raising_mapped(_mapped):
            raise exc

    with pytest.raises(ModelTimeoutError) as caught:
        raising(_TimeoutError())
    assert isinstance(caught.value.__cause__, _TimeoutError)
    with pytest.raises(ValueError, match="foreign"):
        raising(ValueError("foreign"))
    with pytest.raises(UserError, match="mine"):  # parley's own errors pass as they are
        raising(UserError("mine"))


def test_an_unknown_host_held_in_the_errors_arguments_says_so() -> None:
    # httpcore raises its ConnectError in the handling of the resolver's, holding it.
    held = _RefusedError(socket.gaierror(-2, "Name or service not known"))
    assert "its host name is unknown" in str(_mapped(held, "http://nope.invalid"))
