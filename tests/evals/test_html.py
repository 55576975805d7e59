"""The HTML report: self-contained, hostile output shown as text in a real browser, the filter.

The browser tests drive Debian's Chromium through Playwright (`tests/_external.py`), opening
the page from a file as a user would.
"""

from __future__ import annotations

import http.server
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from parley.evals import CaseResult, EvaluatorResult, ToolCallRecord
from parley.evals.html import CONTENT_SECURITY_POLICY
from tests._http import serving
from tests.evals._reports import HOSTILE, detailed, errored, failing, passing, report


def _hostile_case() -> CaseResult:
    """A case whose every text from the dataset or the model tries to run a script."""
    return CaseResult(
        name="hostile <b>case</b>",
        inputs=HOSTILE,
        expected={"html": HOSTILE},
        output=HOSTILE,
        metadata={"note": HOSTILE},
        results=[EvaluatorResult(name="contains", passed=False, score=0.0, reason=HOSTILE)],
        tool_calls=[ToolCallRecord(name="search", arguments={"q": HOSTILE}, result=HOSTILE)],
        retrieved=[HOSTILE],
        error=None,
        trace_id='"><script>window.pwned=3</script>',
    )


def test_the_page_loads_nothing_from_elsewhere() -> None:
    page = report(passing("a"), detailed()).to_html()
    assert (
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">' in page
    )
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert not re.search(r"""(src|href)\s*=""", page)  # no resource the page would fetch
    assert "@import" not in page
    assert "url(" not in page


def test_every_text_from_the_model_or_the_dataset_is_escaped() -> None:
    page = report(_hostile_case()).to_html()
    assert "<script>window.pwned" not in page
    assert "<img src=x" not in page
    assert page.count("<script>") == 1  # the page's own
    assert "&lt;/script&gt;&lt;script&gt;window.pwned=1;alert(1)&lt;/script&gt;" in page


def test_the_page_has_the_run_and_each_cases_details(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    page = report(passing("a"), failing("b"), errored("c"), detailed()).to_html(path)
    assert path.read_text() == page
    for text in (
        "agent &#x27;maths&#x27; (scripted)",  # the target
        "concurrency=4",
        "code_interpreter",
        "&quot;code&quot;: &quot;print(12*7)&quot;",  # a tool call's arguments
        "doc-7: multiplication tables",  # a retrieved passage
        "4bf92f3577b34da6a3ce929d0e0e4736",  # the trace id
        "ProviderError: 503 Service Unavailable",
        "expected &#x27;84&#x27; in the output, got &#x27;It is 85.&#x27;",
        "3 attempts",
        "300 tokens in, 40 out",
        "<dt>judge usage</dt><dd>50 tokens in, 5 out · cost 0.000020</dd>",
        "&quot;topic&quot;: &quot;arithmetic&quot;",
    ):
        assert text in page, text


def test_the_comparison_is_in_the_page() -> None:
    before = report(failing("fixed"), passing("broke"), passing("gone"))
    after = report(passing("fixed"), failing("broke"), passing("new"))
    page = after.to_html(baseline=before)
    assert '<section id="comparison">' in page
    assert '<tr><td class="pass">improved</td><td>fixed</td>' in page
    assert '<tr><td class="fail">regressed</td><td>broke</td>' in page
    assert '<tr><td class="muted">removed</td><td>gone</td>' in page
    assert '<span class="badge muted">new</span>' in page
    assert after.compare(before).to_html() == page
    assert '<section id="comparison">' not in after.to_html()


# --- in a browser ---------------------------------------------------------------------------------


def _open(page: Page, path: Path) -> list[str]:
    """Open the report at `path`; what the page said on its console and in dialogs, collected."""
    said: list[str] = []
    # The shared browser's loop is lifted between tests (tests/_external.py) and `.on(...)`
    # needs it: a call through Playwright's dispatcher first puts it back.
    page.evaluate("0")
    page.on("console", lambda message: said.append(f"console: {message.text}"))
    page.on("pageerror", lambda error: said.append(f"error: {error}"))
    page.on("dialog", lambda dialog: (said.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.goto(path.as_uri())
    return said


def test_hostile_output_shows_as_text_and_runs_nothing(chromium_page: Page, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    report(_hostile_case(), passing("fine")).to_html(path)
    said = _open(chromium_page, path)

    chromium_page.get_by_role("button", name="hostile <b>case</b>").click()
    detail = chromium_page.locator("tbody.case.open tr.detail")
    # The output's markup is there to read, as text, where the case's details are.
    output = detail.locator("dd pre", has_text=HOSTILE).first
    assert output.is_visible()
    assert output.inner_text() == HOSTILE
    assert detail.get_by_text('"><script>window.pwned=3</script>').is_visible()
    # No injected script ran, no image error handler fired, nothing opened a dialog.
    assert chromium_page.evaluate("typeof window.pwned") == "undefined"
    assert chromium_page.locator("body img").count() == 0
    assert said == []


def test_expanding_and_the_failed_only_filter(chromium_page: Page, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    report(passing("good one"), failing("bad one"), errored("broken one")).to_html(path)
    said = _open(chromium_page, path)
    good = chromium_page.locator(
        "tbody.case", has=chromium_page.get_by_role("button", name="good one")
    )
    bad = chromium_page.locator(
        "tbody.case", has=chromium_page.get_by_role("button", name="bad one")
    )

    # The page's own script runs (its hash is in the policy): details start closed.
    assert not bad.locator("tr.detail").is_visible()
    chromium_page.get_by_role("button", name="bad one").click()
    assert bad.locator("tr.detail").get_by_text("expected '84' in the output").is_visible()
    assert (
        chromium_page.get_by_role("button", name="bad one").get_attribute("aria-expanded") == "true"
    )

    chromium_page.get_by_label("Failed only").check()
    assert not good.is_visible()
    assert bad.is_visible()
    assert chromium_page.get_by_role("button", name="broken one").is_visible()
    chromium_page.get_by_label("Failed only").uncheck()
    assert good.is_visible()

    chromium_page.get_by_role("button", name="Expand all").click()
    assert good.locator("tr.detail").is_visible()
    assert said == []


class _Counter(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        _Counter.hits.append(self.path)
        self.send_response(200)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def counting_server() -> Iterator[str]:
    """A server on 127.0.0.1 that counts the requests it gets; its URL."""
    _Counter.hits = []
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counter)) as url:
        yield url


_CALL_OUT = """async (base) => {
  const image = new Promise((resolve) => {
    const img = document.createElement("img");
    img.onload = () => resolve("image loaded");
    img.onerror = () => resolve("image refused");
    img.src = base + "/image";
    document.body.append(img);
  });
  const fetched = fetch(base + "/fetch").then(() => "fetch loaded", () => "fetch refused");
  return [await image, await fetched];
}"""


def test_the_policy_refuses_remote_loads(
    chromium_page: Page, tmp_path: Path, counting_server: str
) -> None:
    # The same calls from a page without the policy reach the server: the check can fail.
    plain = tmp_path / "plain.html"
    plain.write_text("<!DOCTYPE html><title>plain</title><body></body>")
    chromium_page.goto(plain.as_uri())
    assert chromium_page.evaluate(_CALL_OUT, counting_server)[1] == "fetch loaded"
    assert sorted(_Counter.hits) == ["/fetch", "/image"]

    _Counter.hits.clear()
    path = tmp_path / "report.html"
    report(passing("a")).to_html(path)
    chromium_page.goto(path.as_uri())
    assert chromium_page.evaluate(_CALL_OUT, counting_server) == ["image refused", "fetch refused"]
    assert _Counter.hits == []
