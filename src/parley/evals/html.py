"""An evaluation's report as one self-contained HTML page (`EvalReport.to_html`).

The page holds everything it shows: its style and its small script are inline, it fetches
nothing, and it works opened from a file (`file://`) or an attachment. It shows the run's
figures, each evaluator's pass rate, and a table of cases; a case's row opens to its inputs,
expected and actual output, tool calls with their arguments and results, retrieved passages,
usage, the evaluators' reasons, its error and its trace id. "Failed only" hides the rest.
Given a baseline, it also shows the two runs compared (`Comparison`).

Every text that came from the dataset or the model is escaped (`html.escape`), so an output
holding `</script><script>...` or `<img onerror=...>` shows as text. The page says so a
second time in its Content-Security-Policy: nothing may load from anywhere (`default-src
'none'`), and the only style and script allowed are the page's own, named by their SHA-256, so
markup that slipped through escaping still could not run a script or call out.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from parley.evals.render import (
    evaluator_names,
    figure_rows,
    format_cost,
    format_seconds,
)

if TYPE_CHECKING:
    from parley.evals.report import CaseResult, Comparison, EvalReport, ReportSummary

__all__ = ["render_html"]

_STYLE = """
:root{color-scheme:light dark;--fg:#1d2128;--muted:#5d6470;--line:#d9dde3;--pass:#137333;
--fail:#b3261e;--error:#8e24aa;--bg2:#f4f6f8;font:14px/1.45 system-ui,sans-serif}
@media (prefers-color-scheme:dark){:root{--fg:#e4e6ea;--muted:#9aa1ab;--line:#3a3f47;
--pass:#6dd58c;--fail:#ff8a80;--error:#e1a6ee;--bg2:#23272e}}
body{margin:1.5rem auto;max-width:80rem;padding:0 1rem;color:var(--fg)}
h1{font-size:1.4rem;margin:0 0 .2rem}h2{font-size:1.1rem;margin:1.6rem 0 .5rem}
.muted{color:var(--muted)}.pass{color:var(--pass)}.fail{color:var(--fail)}
.error{color:var(--error)}
.figures{display:flex;flex-wrap:wrap;gap:.6rem 1.6rem;margin:1rem 0}
.figures div{display:flex;flex-direction:column}.figures b{font-size:1.3rem}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted)}td.num,th.num{text-align:right;white-space:nowrap}
meter{width:12rem}
button.toggle{all:unset;cursor:pointer;font-weight:600}
button.toggle::before{content:"\\25B8  ";color:var(--muted)}
tbody.open button.toggle::before{content:"\\25BE  "}
button.toggle:focus-visible{outline:2px solid var(--muted)}
.controls{display:none;gap:1rem;align-items:center;margin:.5rem 0}
.js .controls{display:flex}
.js tbody.case tr.detail{display:none}.js tbody.case.open tr.detail{display:table-row}
.failed-only tbody.case.passed{display:none}
tr.detail>td{background:var(--bg2);padding:.6rem 1rem}
dl{display:grid;grid-template-columns:9rem 1fr;gap:.3rem 1rem;margin:0}dt{color:var(--muted)}
dd{margin:0;min-width:0}
pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font:12.5px/1.4 ui-monospace,monospace}
ol,ul{margin:0;padding-left:1.2rem}
.badge{font-size:.8rem;border:1px solid currentColor;border-radius:.6rem;padding:0 .4rem}
"""

_SCRIPT = """
document.documentElement.classList.add("js");
const toggle = (body, open) => {
  body.classList.toggle("open", open);
  body.querySelector("button.toggle").setAttribute("aria-expanded", String(open));
};
for (const button of document.querySelectorAll("button.toggle")) {
  button.addEventListener("click", () => {
    const body = button.closest("tbody");
    toggle(body, !body.classList.contains("open"));
  });
}
document.getElementById("failed-only").addEventListener("change", (event) => {
  document.body.classList.toggle("failed-only", event.target.checked);
});
document.getElementById("expand-all").addEventListener("click", (event) => {
  const bodies = [...document.querySelectorAll("tbody.case")];
  const open = !bodies.every((body) => body.classList.contains("open"));
  for (const body of bodies) toggle(body, open);
  event.target.textContent = open ? "Collapse all" : "Expand all";
});
"""


def _digest(text: str) -> str:
    """A CSP source naming exactly this inline element's text."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src {_digest(_STYLE)}; script-src {_digest(_SCRIPT)}; "
    "img-src 'none'; base-uri 'none'; form-action 'none'"
)
"""The page's policy: nothing loads from anywhere; only its own style and script apply."""


def render_html(report: EvalReport, *, baseline: EvalReport | None = None) -> str:
    """The report as a self-contained HTML page; with `baseline`, the two runs compared."""
    comparison = report.compare(baseline) if baseline is not None else None
    summary = report.summary()
    body = [
        _header(report),
        _figures(summary),
        _evaluators(summary),
        _comparison(comparison) if comparison is not None else "",
        _cases(report, comparison),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(report.dataset)} · evaluation</title>\n<style>{_STYLE}</style>\n</head>\n"
        "<body>\n" + "\n".join(part for part in body if part) + f"\n<script>{_SCRIPT}</script>\n"
        "</body>\n</html>\n"
    )


def _e(value: object) -> str:
    """`value` as text, escaped for HTML (quotes too: it may land in an attribute)."""
    return escape(str(value), quote=True)


def _header(report: EvalReport) -> str:
    settings = ", ".join(f"{_e(k)}={_e(_compact(v))}" for k, v in report.settings.items())
    return (
        f"<header><h1>{_e(report.dataset)}</h1>"
        f'<p class="muted">target <b>{_e(report.target)}</b> · started '
        f"{_e(report.started_at.strftime('%Y-%m-%d %H:%M:%S UTC'))} · "
        f"{_e(format_seconds(report.duration))}"
        + (f" · {settings}" if settings else "")
        + "</p></header>"
    )


def _figures(summary: ReportSummary) -> str:
    status = "pass" if summary.passed == summary.cases else "fail"
    figures = [
        ("cases", str(summary.cases), ""),
        ("passed", f"{summary.passed} ({summary.pass_rate:.0%})", status),
        ("errors", str(summary.errors), "error" if summary.errors else ""),
        ("score", f"{summary.score:.2f}", ""),
        ("cost", format_cost(summary.cost), ""),
        ("time", format_seconds(summary.duration), ""),
        (
            "latency p50 / max",
            f"{format_seconds(summary.latency_p50)} / {format_seconds(summary.latency_max)}",
            "",
        ),
        ("tokens in / out", f"{summary.input_tokens:,} / {summary.output_tokens:,}", ""),
    ]
    cells = "".join(
        f'<div><span class="muted">{label}</span><b class="{cls}">{_e(value)}</b></div>'
        for label, value, cls in figures
    )
    return f'<section class="figures" id="summary">{cells}</section>'


def _evaluators(summary: ReportSummary) -> str:
    if not summary.by_evaluator:
        return ""
    rows = "".join(
        f'<tr><td>{_e(name)}</td><td><meter min="0" max="1" low="0.5" high="0.99" '
        f'optimum="1" value="{rate:.4f}"></meter></td><td class="num">{rate:.0%}</td></tr>'
        for name, rate in summary.by_evaluator.items()
    )
    return (
        '<section id="evaluators"><h2>Evaluators</h2><table><thead><tr><th>evaluator</th>'
        '<th>pass rate</th><th class="num"></th></tr></thead>'
        f"<tbody>{rows}</tbody></table></section>"
    )


def _comparison(comparison: Comparison) -> str:
    before, after = comparison.summaries()
    figures = "".join(
        f'<tr><td>{_e(label)}</td><td class="num">{_e(old)}</td><td class="num">{_e(new)}</td>'
        f'<td class="num {_tone(sign)}">{_e(change)}</td></tr>'
        for label, old, new, change, sign in figure_rows(before, after)
    )
    return (
        '<section id="comparison"><h2>Against the baseline</h2>'
        f'<p class="muted">baseline: {_e(comparison.before.target)}, started '
        f"{_e(comparison.before.started_at.strftime('%Y-%m-%d %H:%M:%S UTC'))}</p>"
        '<table><thead><tr><th></th><th class="num">baseline</th><th class="num">this run</th>'
        f'<th class="num">change</th></tr></thead><tbody>{figures}</tbody></table>'
        f"{_changes(comparison)}</section>"
    )


def _tone(sign: int) -> str:
    return "pass" if sign > 0 else "fail" if sign < 0 else ""


def _changes(comparison: Comparison) -> str:
    rows = []
    for kind, cls, changes in (
        ("improved", "pass", comparison.improved),
        ("regressed", "fail", comparison.regressed),
    ):
        for change in changes:
            verdict = f"{_word(change.passed_before)} → {_word(change.passed_after)}"
            rows.append(
                f'<tr><td class="{cls}">{kind}</td><td>{_e(change.name)}</td>'
                f"<td>{change.before:.2f} → {change.after:.2f} ({change.delta:+.2f})</td>"
                f"<td>{verdict}</td></tr>"
            )
    for kind, names in (("added", comparison.added), ("removed", comparison.removed)):
        rows.extend(
            f'<tr><td class="muted">{kind}</td><td>{_e(n)}</td><td></td><td></td></tr>'
            for n in names
        )
    counts = (
        f"{len(comparison.improved)} improved · {len(comparison.regressed)} regressed · "
        f"{len(comparison.unchanged)} unchanged · {len(comparison.added)} added · "
        f"{len(comparison.removed)} removed"
    )
    if not rows:
        return f"<p>{counts}</p>"
    return (
        f"<h2>Cases that changed</h2><p>{counts}</p><table><thead><tr><th>change</th><th>case</th>"
        f"<th>score</th><th>verdict</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _word(passed: bool) -> str:
    return "pass" if passed else "fail"


def _cases(report: EvalReport, comparison: Comparison | None) -> str:
    names = evaluator_names(report.cases)
    header = "".join(f"<th>{_e(n)}</th>" for n in names)
    marks = _marks(comparison)
    bodies = "\n".join(_case(case, names, marks.get(case.name)) for case in report.cases)
    return (
        '<section id="cases"><h2>Cases</h2><div class="controls">'
        '<label><input type="checkbox" id="failed-only"> Failed only</label>'
        '<button type="button" id="expand-all">Expand all</button></div>'
        f'<table class="cases"><thead><tr><th>case</th><th>result</th><th class="num">score</th>'
        f'{header}<th class="num">cost</th><th class="num">time</th></tr></thead>\n{bodies}'
        "</table></section>"
    )


def _marks(comparison: Comparison | None) -> dict[str, tuple[str, str]]:
    """Each changed case's badge against the baseline: (word, class)."""
    if comparison is None:
        return {}
    marks = {c.name: ("improved", "pass") for c in comparison.improved}
    marks.update({c.name: ("regressed", "fail") for c in comparison.regressed})
    marks.update(dict.fromkeys(comparison.added, ("new", "muted")))
    return marks


def _case(case: CaseResult, names: Sequence[str], mark: tuple[str, str] | None) -> str:
    verdict, cls = (
        ("error", "error")
        if case.error is not None
        else ("pass", "pass")
        if case.passed
        else ("fail", "fail")
    )
    badge = f' <span class="badge {mark[1]}">{mark[0]}</span>' if mark else ""
    cells = "".join(_verdict_cell(case, name) for name in names)
    row = (
        f'<tr class="row"><td><button type="button" class="toggle" aria-expanded="false">'
        f'{_e(case.name)}</button>{badge}</td><td class="{cls}">{verdict}</td>'
        f'<td class="num">{case.score:.2f}</td>{cells}'
        f'<td class="num">{_e(format_cost(case.cost))}</td>'
        f'<td class="num">{_e(format_seconds(case.duration))}</td></tr>'
    )
    detail = f'<tr class="detail"><td colspan="{len(names) + 5}">{_details(case)}</td></tr>'
    state = "passed" if case.passed else "failed"
    return f'<tbody class="case {state}">{row}{detail}</tbody>'


def _verdict_cell(case: CaseResult, name: str) -> str:
    results = [r for r in case.results if r.name == name]
    if not results:
        return '<td class="muted">·</td>'
    passed = all(r.passed for r in results)
    text = " ".join(
        ("✓" if r.passed else "✗") + ("" if r.score in (0.0, 1.0) else f" {r.score:.2f}")
        for r in results
    )
    title = "; ".join(r.reason for r in results if r.reason)
    attribute = f' title="{_e(title)}"' if title else ""
    return f'<td class="{"pass" if passed else "fail"}"{attribute}>{text}</td>'


def _details(case: CaseResult) -> str:
    items: list[tuple[str, str]] = [("inputs", _pre(case.inputs))]
    if case.expected is not None:
        items.append(("expected", _pre(case.expected)))
    items.append(
        (
            "output",
            _pre(case.output) if case.output is not None else '<span class="muted">none</span>',
        )
    )
    if case.error is not None:
        items.append(("error", f'<pre class="error">{_e(case.error)}</pre>'))
    if case.results:
        items.append(("evaluators", _verdicts(case)))
    if case.tool_calls:
        items.append(("tool calls", _tool_calls(case)))
    if case.retrieved:
        items.append(("retrieved", _list(_pre(p) for p in case.retrieved)))
    items.append(("usage", _usage(case)))
    if case.judge_usage is not None:
        judged = case.judge_usage
        items.append(
            (
                "judge usage",
                f"{judged.input_tokens:,} tokens in, {judged.output_tokens:,} out · cost "
                f"{_e(format_cost(judged.cost))}",
            )
        )
    if case.metadata:
        items.append(("metadata", _pre(case.metadata)))
    if case.trace_id:
        items.append(("trace id", f"<pre>{_e(case.trace_id)}</pre>"))
    return "<dl>" + "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in items) + "</dl>"


def _verdicts(case: CaseResult) -> str:
    lines = []
    for result in case.results:
        cls = "pass" if result.passed else "fail"
        mark = "✓" if result.passed else "✗"
        why = f": {_e(result.reason)}" if result.reason else ""
        lines.append(f'<span class="{cls}">{mark} {_e(result.name)}</span> {result.score:.2f}{why}')
    return _list(lines)


def _tool_calls(case: CaseResult) -> str:
    calls = []
    for call in case.tool_calls:
        flag = ' <span class="badge error">error</span>' if call.is_error else ""
        result = (
            _pre(call.result) if call.result is not None else '<span class="muted">no result</span>'
        )
        calls.append(
            f"<b>{_e(call.name)}</b>{flag}<dl><dt>arguments</dt><dd>{_pre(call.arguments)}</dd>"
            f"<dt>result</dt><dd>{result}</dd></dl>"
        )
    return "<ol>" + "".join(f"<li>{c}</li>" for c in calls) + "</ol>"


def _usage(case: CaseResult) -> str:
    attempts = f", {case.attempts} attempts" if case.attempts > 1 else ""
    if case.usage is None:
        return f"not reported · {_e(format_seconds(case.duration))}{attempts}"
    usage = case.usage
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    return (
        f"{usage.input_tokens:,} tokens in{cached}, {usage.output_tokens:,} out · cost "
        f"{_e(format_cost(usage.cost))} · {_e(format_seconds(case.duration))}{attempts}"
    )


def _list(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def _pre(value: Any) -> str:
    """A value in a `<pre>`: a string as it is, anything else as indented JSON."""
    return f"<pre>{_e(value if isinstance(value, str) else _json(value))}</pre>"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
