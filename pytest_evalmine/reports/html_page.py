"""report.html (spec: "report.html"): one self-contained page per run, rendered from report.json
and pairs.jsonl alone, so an old run can be re-rendered without rerunning anything.

Inline CSS and JS (``assets/``), no network (a Content-Security-Policy forbids it), charts as
SVG written here. Every user string is escaped: ``html.escape`` in markup, and the labelling
data travels as JSON in a non-executed script element with ``<``, ``>`` and ``&`` escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from ..judging.headline import DAGGER
from ..scoring.sandbox import SANDBOX_LINES
from ..suite.loader import DEFAULT_MIN_LABELS
from .cases_view import SharedRows, case_items, case_list, check_rows, criterion_items
from .labelling import (
    KIND_TAGS,
    Suggestion,
    a_side,
    audit_order,
    is_judged,
    label_fields,
    label_next,
    nothing_to_label,
    pair_id,
)
from .ranking_section import cost_quality_svg
from .render import milliseconds, money
from .sections import (
    Section,
    binary_section,
    changes_section,
    gate_section,
    number,
    paired_section,
    percent,
    power_section,
    ranking_section,
)

CATEGORIES = ("baseline", "tie", "candidate")
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
LABEL_NEXT_LISTED = 50
# The cases view (filled by cases.js from the page's data): every answer as a row, filtered,
# searched, sorted and shown a page of rows at a time, so 20,000 rows cost what 100 do.
CASES_VIEW = """<section id="cases"><h2>Cases</h2>
<p class="muted">Every answer of the run, one row each. Filter, search prompts and answers, sort
by a column's header; a row opens its case. A link such as <code>#cases?task=triage</code>
opens this view filtered.</p>
<div id="cases-filters" class="filters">
<label>task <select id="f-task"><option value="">all</option></select></label>
<label>model <select id="f-model"><option value="">all</option></select></label>
<label>outcome <select id="f-outcome"><option value="">all</option></select></label>
<label><input id="f-flagged" type="checkbox"> flagged (label next)</label>
<label><input id="f-flip" type="checkbox"> flips</label>
<label><input id="f-failed" type="checkbox"> check failures</label>
<input id="f-search" type="search" placeholder="search prompts and answers">
</div>
<p><span id="cases-count"></span> <button id="cases-prev" type="button">&larr;</button>
<span id="cases-page"></span> <button id="cases-next" type="button">&rarr;</button></p>
<div class="table-wrap"><table id="cases-table"><thead><tr>
<th data-sort="task">task</th><th data-sort="case">case</th><th data-sort="model">model</th>
<th data-sort="outcome">outcome</th><th data-sort="checks">checks</th>
<th data-sort="score">score</th><th data-sort="cost">cost</th>
<th data-sort="latency">latency</th><th data-sort="judge">judge verdict</th>
<th data-sort="flip">flip</th><th data-sort="label">label</th></tr></thead>
<tbody id="cases-body"></tbody></table></div>
<div id="case-detail" hidden><h3 id="case-title"></h3>
<p><label><input id="case-diff" type="checkbox"> show differences from the baseline's answer
</label> <button id="case-close" type="button">close</button></p>
<h4>Prompt</h4><div id="case-prompt" class="prompt"></div>
<div id="case-answers" class="answers"></div><div id="case-judge"></div></div>
</section>
"""
# Criterion labelling (binary judges): one answer and one criterion at a time, PASS or FAIL.
CRITERION_PANEL = """<h2>Label criteria (PASS/FAIL)</h2>
<p class="muted">One answer, its prompt and one criterion of its task at a time. Choose
<kbd>p</kbd> PASS or <kbd>f</kbd> FAIL (with an optional note); the judge's verdict opens once
you have chosen. "Copy criterion labels" gives YAML lines for the suite's <code>labels:</code>
list, as the suite loader reads criterion labels.</p>
<section id="criterion-labelling" hidden>
<div class="lab-bar"><button id="crit-prev" type="button">&larr; previous</button>
<button id="crit-next" type="button">next &rarr;</button>
<button id="crit-open" type="button">next unlabelled</button>
<label><input id="crit-advance" type="checkbox"> advance on choice</label>
<span id="crit-position"></span><span class="grow"></span><span id="crit-progress"></span></div>
<p><strong id="crit-where"></strong> <em id="crit-existing"></em></p>
<h3>Criterion <span id="crit-name"></span></h3><div id="crit-text" class="prompt"></div>
<h3>Prompt</h3><div id="crit-prompt" class="prompt"></div>
<h3>Answer</h3><div id="crit-answer" class="answer-text"></div>
<div class="choices"><button id="crit-PASS" type="button">PASS <kbd>p</kbd></button>
<button id="crit-FAIL" type="button">FAIL <kbd>f</kbd></button>
<input id="crit-note" type="text" placeholder="note (optional)"></div>
<details id="crit-judge" class="judge"><summary id="crit-judge-summary"></summary>
<div id="crit-judge-body"></div></details>
<p><button id="crit-copy" type="button">Copy criterion labels</button>
<span id="crit-status"></span></p>
<textarea id="crit-yaml" readonly aria-label="criterion labels as YAML"></textarea>
</section>
"""


def render_run_dir(run_dir: Path) -> str:
    """The page of a stored run: its report.json, answers.jsonl and, with judges, its
    pairs.jsonl and verdicts.jsonl."""
    report = json.loads((run_dir / "report.json").read_text("utf-8"))
    return render_html(
        report,
        _jsonl(run_dir / "pairs.jsonl"),
        _jsonl(run_dir / "answers.jsonl"),
        _jsonl(run_dir / "verdicts.jsonl"),
    )


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def render_html(
    report: dict[str, Any],
    pairs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]] = (),
    verdicts: Sequence[dict[str, Any]] = (),
) -> str:
    """The whole page. Reads report.json's records defensively (``.get``), so a report from
    an older or newer version renders what it has."""
    return "".join(html_pieces(report, pairs, records, verdicts))


def html_pieces(
    report: dict[str, Any],
    pairs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]] = (),
    verdicts: Sequence[dict[str, Any]] = (),
    suggestions: Sequence[Suggestion] | None = None,
) -> Iterator[str]:
    """The page in pieces, for writing it without holding it whole: with 10,000 judged pairs
    the page is about 11 MB and was built four times over in memory. ``records``: the
    answers (answers.jsonl's rows) for the cases view; ``verdicts``: the binary judges'
    (verdicts.jsonl's rows) for the criterion labelling; ``suggestions``: ``label_next`` of
    the pairs when the caller has it (``RunSummary.label_suggestions``)."""
    headline = report.get("headline") or {}
    suite = report.get("suite") or {}
    title = f"evalmine: {suite.get('name', '?')} run {report.get('run_id', '?')}"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{verdict_css()}{page_css()}</style>",
        "</head><body>",
        verdict_banner(report),
        links_nav(report, has_cases=bool(records)),
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">Suite {_e(suite.get("file", ""))}, sha256 '
        f"<code>{_e(suite.get('hash', ''))}</code>; models "
        f"{_e(', '.join(report.get('models') or []))} (baseline first); created "
        f"{_e(report.get('created_utc', ''))}.</p>",
    ]
    if report.get("gate"):
        parts.append(_section_html(gate_section(report["gate"]), "gate"))
    if headline:
        parts += [_calibration(headline), _win_rates(headline)]
    if report.get("binary_judges"):
        parts.append(_section_html(binary_section(report["binary_judges"]), "binary-judges"))
    elif report.get("binary_judges_note"):
        note = Section("Binary judges (PASS/FAIL per criterion)", [report["binary_judges_note"]])
        parts.append(_section_html(note, "binary-judges"))
    parts.append(_scorecard(report))
    if report.get("paired"):
        parts.append(_section_html(paired_section(report["paired"]), "paired"))
    if report.get("ranking"):
        ranking = _section_html(ranking_section(report["ranking"]), "ranking")
        parts.append(
            ranking.replace("</section>", cost_quality_svg(report["ranking"]) + "</section>")
        )
    if report.get("power"):
        parts.append(_section_html(power_section(report["power"]), "power"))
    if headline:
        parts.append(_exclusions(headline))
    if report.get("changes"):
        parts.append(_section_html(changes_section(report["changes"]), "changes"))
    judged = [p for p in pairs if is_judged(p)]
    # The suite's gate (0 allowed); a report without one gets the loader's default.
    min_labels = _float((headline.get("calibration") or {}).get("min_labels"))
    min_labels = DEFAULT_MIN_LABELS if min_labels is None else int(min_labels)
    if suggestions is None:
        suggestions = label_next(judged, min_labels)
    if headline:
        parts.append(_label_next(suggestions, nothing_to_label(pairs, min_labels)))
    for part in parts:
        yield part
        yield "\n"
    if records:
        yield CASES_VIEW
    yield from _labelling(report, judged, suggestions)
    if any(v.get("label") in ("PASS", "FAIL") for v in verdicts):
        yield CRITERION_PANEL
    cases, index = case_list(records, pairs, verdicts)
    shared = SharedRows.of(records, cases, index)
    data = labelling_data(report, judged, suggestions, lazy=True, shared=shared)
    data.update(
        suite_file=suite.get("file", ""),
        models=report.get("models") or [],
        case_list=cases,
        items=case_items(records, pairs, index, suggestions),
        criterion_items=criterion_items(verdicts, records, report.get("binary_judges") or {}),
    )
    yield '\n<script type="application/json" id="evalmine-data">'
    yield from script_json_pieces(data)
    scripts = "\n".join(_asset(name) for name in ("common.js", "page.js", "cases.js"))
    yield f"</script>\n<script>{scripts}</script>"
    yield "\n</body></html>\n"


def links_nav(report: dict[str, Any], *, has_cases: bool) -> str:
    """Links to the run's other pages: its cases view, the pytest-html page when the run
    wrote one, the run "What changed" compares with, and the suite's index of runs. Every
    link is relative (``file://`` pages), to a page of this report tree or the project."""
    links = []
    if has_cases:
        links.append('<a href="#cases">Cases</a>')
    pytest_html = report.get("pytest_html")
    if pytest_html:
        links.append(f'<a href="{_e(pytest_html)}" id="link-pytest-html">pytest-html page</a>')
    previous = (report.get("changes") or {}).get("previous_run_id")
    if previous:
        links.append(
            f'<a href="../{_e(previous)}/report.html" id="link-previous">'
            f"compared run {_e(previous)}</a>"
        )
    links.append('<a href="../index.html" id="link-index">all runs of this suite</a>')
    return f'<nav class="links">{" &middot; ".join(links)}</nav>'


def verdict_css() -> str:
    """The banner's style rules, for a page that embeds ``verdict_banner``."""
    return _asset("verdict.css")


def page_css() -> str:
    """The page's own style rules, for the suite's index page too."""
    return _asset("page.css")


def verdict_banner(report: dict[str, Any], element_id: str | None = "verdict") -> str:
    """The first thing on the page: may the win rate be quoted, and if not, why not."""
    headline = report.get("headline")
    header = f'<header id="{element_id}" class="verdict' if element_id else '<header class="verdict'
    reason = report.get("partial_reason") or "the cost cap was reached"
    partial = (
        f'<div class="verdict-partial">PARTIAL RUN: {_e(reason)}; the numbers cover '
        "only what ran.</div>"
        if report.get("partial")
        else ""
    )
    if not headline:
        note = report.get("judge_note") or "no judge verdicts in this run"
        return f'{header} verdict-none"><strong>NO HEADLINE</strong> {_e(note)}{partial}</header>'
    rates = headline.get("win_rates") or []
    lines = "".join(f"<li>{_e(_rate_line(rate))}</li>" for rate in rates)
    if headline.get("headline_eligible"):
        cal = headline.get("calibration") or {}
        return (
            f'{header} verdict-ok"><strong>ELIGIBLE</strong> '
            f"the judge agrees with your labels (kappa {_num(cal.get('kappa'))} on "
            f"{_e(cal.get('n', 0))} labels)<ul>{lines}</ul>{partial}</header>"
        )
    reasons: list[str] = []
    for rate in rates:
        for reason in rate.get("ineligible_reasons") or []:
            if reason not in reasons:
                reasons.append(reason)
    if not reasons:
        reasons.append(str((headline.get("calibration") or {}).get("reason", "")))
    return (
        f'{header} verdict-uncalibrated">'
        f"<strong>UNCALIBRATED</strong> {_e('; '.join(reasons))}<ul>{lines}</ul>{partial}</header>"
    )


def _rate_line(rate: dict[str, Any]) -> str:
    value = rate.get("win_rate")
    text = f"{rate.get('candidate', '?')}: win rate {_pct(value)}"
    interval = rate.get("interval") or {}
    if interval:
        text += f" [{_pct(interval.get('low'))}, {_pct(interval.get('high'))}]"
    text += f", n={rate.get('n', 0)}"
    if not rate.get("headline_eligible"):
        text += f" {DAGGER} UNCALIBRATED"
    return text


# sections ---------------------------------------------------------------------------------
def _calibration(headline: dict[str, Any]) -> str:
    cal = headline.get("calibration") or {}
    judge = (headline.get("judge") or {}).get("model", "?")
    interval = cal.get("kappa_interval") or {}
    interval_text = (
        f" [{_num(interval.get('low'))}, {_num(interval.get('high'))}]" if interval else ""
    )
    parts = [
        '<section id="calibration"><h2>Calibration</h2>',
        f"<p>Judge {_e(judge)} vs your labels: kappa <strong>{_num(cal.get('kappa'))}"
        f"{interval_text}</strong> ({_e(cal.get('band') or 'undefined')}), raw agreement "
        f"{_pct(cal.get('observed_agreement'))}, n={_e(cal.get('n', 0))} of "
        f"{_e(cal.get('labels_total', 0))} labels. Status <strong>"
        f"{_e(str(cal.get('status', '?')).upper())}</strong>: {_e(cal.get('reason', ''))}.</p>",
    ]
    for pair in cal.get("unmatched_model_pairs") or []:
        parts.append(
            f"<p>{_e(pair.get('labels'))} labels compare {_e(pair.get('baseline'))} with "
            f"{_e(pair.get('candidate'))}, which this run did not compare: "
            f"<code>--evalmine-models={_e(pair.get('baseline'))},{_e(pair.get('candidate'))}"
            "</code> would match them.</p>"
        )
    confusion = cal.get("confusion") or {}
    matrix = confusion.get("matrix")
    if matrix:
        parts.append(f'<div class="chart">{confusion_svg(matrix)}</div>')
    rows = [
        (
            str(row.get("task")),
            str(row.get("n")),
            _pct(row.get("agreement")),
            _num(row.get("kappa")) if row.get("kappa") is not None else "suppressed (<5)",
        )
        for row in cal.get("per_task") or []
    ]
    if rows:
        parts.append(_table(("task", "labels", "agreement", "kappa"), rows, task_links=True))
    parts.append("</section>")
    return "".join(parts)


def _win_rates(headline: dict[str, Any]) -> str:
    overall = headline.get("win_rates") or []
    per_task = headline.get("win_rates_per_task") or []
    bias = headline.get("position_bias") or {}
    parts = [
        '<section id="win-rates"><h2>Win rates (candidate vs baseline)</h2>',
        '<p class="muted">Dot: win rate over schema-passing pairs; bar: 95 % bootstrap '
        f"interval; dashed line: 50 %. {DAGGER} UNCALIBRATED: not a headline.</p>",
        f'<div class="chart">{win_rate_svg(overall, "Overall win rates", with_task=False)}</div>',
    ]
    if per_task:
        parts += [
            "<h3>Per task, worst first</h3>",
            f'<div class="chart">{win_rate_svg(per_task, "Win rates per task", with_task=True)}'
            "</div>",
        ]
    for ppi in (headline.get("ppi") or {}).values():
        flag = (
            ""
            if ppi.get("headline_eligible")
            else f" {DAGGER} not a headline: " + "; ".join(ppi.get("ineligible_reasons") or [])
        )
        parts.append(
            f"<p>{_e(ppi.get('candidate'))}: {_e(ppi.get('text'))}; audit sample: "
            f"{_e(ppi.get('audit_labels'))} of {_e(ppi.get('sample_pairs'))} pairs labelled"
            f"{_e(flag)}</p>"
        )
    parts.append(
        f"<p>Judge position bias: slot 1 won {_pct(bias.get('slot_1_share'))} of "
        f"{_e(bias.get('decisive_passes', 0))} decisive passes.</p></section>"
    )
    return "".join(parts)


def _scorecard(report: dict[str, Any]) -> str:
    rows = []
    # each model's row links to its answers in the cases view
    models = [_cases_href(model=str(row.get("model"))) for row in report.get("scorecard") or []]
    for row in report.get("scorecard") or []:
        schema = row.get("schema_all") or {}
        rows.append(
            (
                str(row.get("model")) + (" (baseline)" if row.get("baseline") else ""),
                f"{row.get('passed', 0)}/{row.get('items', 0)}",
                f"{schema.get('passed', 0)}/{schema.get('n', 0)}" if schema.get("n") else "-",
                _ms(row.get("latency_p50_s")),
                _ms(row.get("latency_p95_s")),
                _usd(row.get("cost_usd")),
                _usd(row.get("cost_if_uncached_usd")),
            )
        )
    cost = report.get("cost") or {}
    headers = ("model", "passed", "schema", "p50", "p95", "cost run", "if uncached")
    sandbox = report.get("exec_sandbox")  # which sandbox ran the execution checks, if any
    sandbox_p = f"<p>{_e(SANDBOX_LINES[sandbox])}</p>" if sandbox in SANDBOX_LINES else ""
    return (
        '<section id="scorecard"><h2>Scorecard</h2>'
        + _table(headers, rows, links=models)
        + f"<p>Cost {_usd(cost.get('spent_usd'))} this run, {_usd(cost.get('if_uncached_usd'))}"
        f" if uncached; cap {_usd(cost.get('cap_usd'))} ({_e(cost.get('cap_source', ''))}); "
        f"prices pinned {_e(cost.get('prices_pinned', ''))}.</p>{sandbox_p}</section>"
    )


def _exclusions(headline: dict[str, Any]) -> str:
    rows = [
        (str(candidate), str(reason), str(n))
        for candidate, reasons in (headline.get("exclusions") or {}).items()
        for reason, n in (reasons or {}).items()
    ]
    body = _table(("candidate", "reason", "pairs"), rows) if rows else "<p>none</p>"
    return f'<section id="exclusions"><h2>Exclusions (pairs not judged)</h2>{body}</section>'


def _section_html(section: Section, anchor: str) -> str:
    parts = [f'<section id="{anchor}"><h2>{_e(section.title)}</h2>']
    parts += [f"<p>{_e(line)}</p>" for line in section.lines + section.detail_lines]
    parts += [_table(h, r) for h, r in section.tables + section.detail_tables]
    parts += [f"<p>{_e(line)}</p>" for line in section.footer]
    return "".join(parts) + "</section>"


def _label_next(suggestions: Sequence[Any], nothing: str) -> str:
    """The suggestions, or ``nothing``: why there are none, as report.md and the terminal
    say it."""
    items = "".join(
        f'<li><a href="{_cases_href(task=s.task, case=s.case)}"><code>{_e(s.task)}/'
        f"{_e(s.case)}</code></a> "
        f'<span class="tags">{"".join(f"<span>{_e(KIND_TAGS[k])}</span>" for k in s.kinds)}'
        "</span></li>"
        for s in suggestions[:LABEL_NEXT_LISTED]
    )
    more = (
        f"<p class='muted'>and {len(suggestions) - LABEL_NEXT_LISTED} more, in this order in "
        "the labelling view below</p>"
        if len(suggestions) > LABEL_NEXT_LISTED
        else ""
    )
    body = f"<ol>{items}</ol>{more}" if items else f"<p>{_e(nothing)}</p>"
    return f'<section id="label-next"><h2>Label next</h2>{body}</section>'


# blind labelling --------------------------------------------------------------------------
def labelling_data(
    report: dict[str, Any],
    judged: Sequence[dict[str, Any]],
    suggestions: Sequence[Any],
    *,
    lazy: bool = False,
    shared: SharedRows | None = None,
) -> dict[str, Any]:
    """What the labelling script needs, with the A/B mapping already resolved: for each pair
    the side shown as A, what A and B mean as a label's ``prefer``, and the label's fields.
    ``lazy``: the pairs' entries as a generator, built one at a time as the page is written
    (10,000 entries held at once were the page's largest cost in memory). ``shared``: the
    cases view's rows, which the entries then name (``item``, ``case_row``) instead of
    copying the answers' texts, checks and the prompt."""
    index = {(p["task"], p["case"], p["candidate"]): i for i, p in enumerate(judged)}
    tags = {
        index[(s.task, s.case, s.candidate)]: [KIND_TAGS[kind] for kind in s.kinds]
        for s in suggestions
    }
    built = (_pair_entry(pair, tags.get(i, []), shared) for i, pair in enumerate(judged))
    entries: Iterator[dict[str, Any]] | list[dict[str, Any]] = built if lazy else list(built)
    already = sum(1 for p in judged if p.get("label"))
    return {
        "run_id": report.get("run_id", ""),
        "labels_key": bool((report.get("suite") or {}).get("label_counts")),
        "already_labelled": already,
        "pairs": entries,
        "next_order": [index[(s.task, s.case, s.candidate)] for s in suggestions],
        "audit_order": audit_order(judged),
    }


def _audit_progress(report: dict[str, Any], judged: Sequence[dict[str, Any]]) -> str:
    """How many of the audit sample's pairs are labelled: only their labels enter the
    prediction-powered estimate (spec: "Prediction-powered estimates")."""
    sample = [p for p in judged if p.get("audit")]
    if not sample:
        return ""
    labelled = sum(1 for p in sample if p.get("label"))
    fraction = ((report.get("headline") or {}).get("audit") or {}).get("fraction")
    return (
        f'<p id="audit-progress">Audit sample: <strong>{labelled} of {len(sample)}</strong> '
        f"pairs labelled (fraction {_num(fraction)} of the pairs, by a hash of task, case and "
        'candidate). Only their labels enter the human-preference estimate; "label the audit '
        'sample" shows them in their own random order, so stopping early keeps a random '
        "sample.</p>\n"
    )


def _pair_entry(
    pair: dict[str, Any], tags: list[str], shared: SharedRows | None = None
) -> dict[str, Any]:
    identifier = pair_id(pair)
    a = a_side(identifier)
    b = "candidate" if a == "baseline" else "baseline"
    letter = {a: "A", b: "B", "tie": "tie"}
    passes = []
    for judge_pass in pair.get("passes") or []:
        slot = judge_pass.get("winner_slot")
        first, second = (
            ("baseline", "candidate")
            if judge_pass.get("order") == "baseline_first"
            else ("candidate", "baseline")
        )
        winner = {"1": first, "2": second, "tie": "tie"}.get(slot or "")
        passes.append(
            {
                "first": letter[first],
                "winner": letter.get(winner or "", "none"),
                "reason": judge_pass.get("reason") or "",
            }
        )
    label = pair.get("label")
    return {
        "id": identifier,
        "task": pair["task"],
        "case": pair["case"],
        **_prompt_or_row(pair, shared),
        "A": _side(pair, a, shared),
        "B": _side(pair, b, shared),
        "prefer": {"A": a, "B": b},
        "fields": label_fields(pair),
        "labelled": letter.get(label) if label else None,
        "judge": {
            "choice": letter.get(pair.get("category") or "", "none"),
            "outcome": pair.get("outcome") or "",
            "passes": passes,
        },
        "tags": tags,
    }


def _prompt_or_row(pair: dict[str, Any], shared: SharedRows | None) -> dict[str, Any]:
    prompt = pair.get("prompt") or ""
    row = shared.case_row(pair["task"], pair["case"], prompt) if shared else None
    return {"prompt": prompt} if row is None else {"case_row": row}


def _side(pair: dict[str, Any], side: str, shared: SharedRows | None) -> dict[str, Any]:
    """One answer of a labelling entry: the cases view's row holding it when that row shows
    the same text and checks, else its own text and checks."""
    text, checks = pair.get(f"{side}_text") or "", check_rows(pair.get(f"{side}_checks"))
    row = (
        shared.answer_row(pair["task"], pair["case"], pair[side], text, checks) if shared else None
    )
    return {"text": text, "checks": checks} if row is None else {"item": row}


def _labelling(
    report: dict[str, Any], judged: Sequence[dict[str, Any]], suggestions: Sequence[Any]
) -> Iterator[str]:
    if not judged:
        yield (
            '<section id="labelling-empty"><h2>Label pairs blind</h2><p>No judged pairs in '
            "this run.</p></section>"
        )
        return
    yield _audit_progress(report, judged)
    yield """<h2>Label pairs blind</h2>
<p class="muted">Model names are hidden; which answer is A comes from a hash of the pair. Choose
with the buttons or <kbd>1</kbd> prefer A, <kbd>2</kbd> tie, <kbd>3</kbd> prefer B;
<kbd>&larr;</kbd> <kbd>&rarr;</kbd> move, <kbd>n</kbd> next unlabelled, <kbd>d</kbd> show where
the answers differ, <kbd>c</kbd> copy labels. The judge's verdict opens once you have chosen.
Progress stays in this browser (per run); "Copy labels" gives YAML entries for the suite's
<code>labels:</code> list or a <code>labels_path</code> file.</p>
<section id="labelling" hidden>
<div class="lab-bar"><label>Order <select id="lab-order"><option value="next">label next first
</option><option value="audit">label the audit sample</option><option value="suite">suite order
</option></select></label>
<button id="lab-prev" type="button">&larr; previous</button>
<button id="lab-next" type="button">next &rarr;</button>
<button id="lab-open" type="button">next unlabelled <kbd>n</kbd></button>
<label><input id="lab-advance" type="checkbox"> advance on choice</label>
<label><input id="lab-diff" type="checkbox"> show differences <kbd>d</kbd></label>
<span id="lab-position"></span><span class="grow"></span><span id="lab-progress"></span></div>
<p><strong id="lab-where"></strong> <span id="lab-tags" class="tags"></span>
<em id="lab-existing"></em></p>
<h3>Prompt</h3><div id="lab-prompt" class="prompt"></div>
<div class="answers"><div><h3>Answer A</h3><ul id="lab-a-checks" class="checks"></ul>
<div id="lab-a" class="answer-text"></div></div>
<div><h3>Answer B</h3><ul id="lab-b-checks" class="checks"></ul>
<div id="lab-b" class="answer-text"></div></div></div>
<div class="choices"><button id="choose-A" type="button">Prefer A <kbd>1</kbd></button>
<button id="choose-tie" type="button">Tie <kbd>2</kbd></button>
<button id="choose-B" type="button">Prefer B <kbd>3</kbd></button>
<input id="lab-note" type="text" placeholder="note (optional)"></div>
<details id="lab-judge" class="judge"><summary id="lab-judge-summary"></summary>
<div id="lab-judge-body"></div></details>
<p><button id="copy-labels" type="button">Copy labels <kbd>c</kbd></button>
<span id="copy-status"></span></p>
<textarea id="labels-yaml" readonly aria-label="labels as YAML"></textarea>
</section>"""


# charts -----------------------------------------------------------------------------------
def confusion_svg(matrix: Sequence[Sequence[Any]]) -> str:
    """The 3x3 confusion matrix (rows human, columns judge) as a heatmap; the diagonal,
    where judge and human agree, is outlined."""
    cell_w, cell_h, left, top = 96, 44, 130, 40
    counts = [[_int(v) for v in row] for row in matrix]
    peak = max((v for row in counts for v in row), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {left + 3 * cell_w + 10} '
        f'{top + 3 * cell_h + 10}" role="img" id="confusion-heatmap" class="heatmap" '
        f'style="max-width:{left + 3 * cell_w + 10}px">'
        "<title>Confusion matrix: rows are your labels, columns the judge</title>"
    ]
    for j, name in enumerate(CATEGORIES):
        x = left + j * cell_w + cell_w / 2
        parts.append(f'<text x="{x}" y="{top - 22}" text-anchor="middle">judge:</text>')
        parts.append(f'<text x="{x}" y="{top - 8}" text-anchor="middle">{name}</text>')
    for i, name in enumerate(CATEGORIES):
        y = top + i * cell_h
        parts.append(
            f'<text x="{left - 8}" y="{y + cell_h / 2 + 4}" text-anchor="end">you: {name}</text>'
        )
        for j in range(3):
            value = counts[i][j] if i < len(counts) and j < len(counts[i]) else 0
            alpha = 0.08 + 0.82 * value / peak
            x = left + j * cell_w
            stroke = ' stroke="#166534" stroke-width="3"' if i == j else ' stroke="#fff"'
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell_w}" height="{cell_h}" '
                f'fill="rgba(29,78,216,{alpha:.2f})"{stroke}/>'
            )
            ink = "#fff" if alpha > 0.5 else "#111827"
            parts.append(
                f'<text x="{x + cell_w / 2}" y="{y + cell_h / 2 + 5}" text-anchor="middle" '
                f'style="fill:{ink};font-size:15px">{value}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def win_rate_svg(rates: Sequence[dict[str, Any]], title: str, *, with_task: bool) -> str:
    """One row per win rate: its interval as a bar, the rate as a dot, 50 % dashed. Each row
    is a grid of three cells, the name (a link to the cases view filtered to its task and
    candidate), the plot (an SVG whose ``viewBox`` stretches to the cell's width) and the
    figures; the names and figures are text, so they stay readable at any width, and on a
    narrow screen the cells stack."""
    ticks = "".join(
        f'<span style="left:{int(tick * 100)}%">{int(tick * 100)}%</span>'
        for tick in (0, 0.25, 0.5, 0.75, 1)
    )
    parts = [
        f'<div class="win-rates" role="img" aria-label="{_e(title)}">'
        f'<div class="wr-row wr-axis"><span></span><div class="wr-ticks">{ticks}</div>'
        "<span></span></div>"
    ]
    if not rates:
        parts.append('<p class="muted">no win rates</p>')
    for rate in rates:
        name = str(rate.get("candidate", "?"))
        task = rate.get("task") if with_task else None
        if with_task:
            name = f"{rate.get('task') or '?'} ({name})"
        eligible = bool(rate.get("headline_eligible"))
        colour = "#166534" if eligible else "#b45309"
        interval = rate.get("interval") or {}
        low, high = _float(interval.get("low")), _float(interval.get("high"))
        value = _float(rate.get("win_rate"))
        plot = [
            f'<line x1="{tick * PLOT_W:.1f}" y1="0" x2="{tick * PLOT_W:.1f}" y2="{PLOT_H}" '
            'stroke="#9ca3af" vector-effect="non-scaling-stroke"'
            + (' stroke-dasharray="4 3"/>' if tick == 0.5 else "/>")
            for tick in (0, 0.25, 0.5, 0.75, 1)
        ]
        if low is not None and high is not None:
            plot.append(
                f'<line x1="{_x(low)}" y1="{PLOT_H / 2}" x2="{_x(high)}" y2="{PLOT_H / 2}" '
                f'stroke="{colour}" stroke-width="4" stroke-linecap="round" '
                'vector-effect="non-scaling-stroke"/>'
            )
        if value is not None:
            # A zero-length line with a round cap: a dot that stays round when the plot
            # stretches (its stroke does not scale).
            plot.append(
                f'<line class="wr-dot" x1="{_x(value)}" y1="{PLOT_H / 2}" x2="{_x(value)}" '
                f'y2="{PLOT_H / 2}" stroke="{colour}" stroke-width="12" stroke-linecap="round" '
                'vector-effect="non-scaling-stroke"/>'
            )
        text = f"{_pct(value)} n={_int(rate.get('n'))}"
        if low is not None and high is not None:
            text = f"{_pct(value)} [{_pct(low)}, {_pct(high)}] n={_int(rate.get('n'))}"
        if not eligible:
            text += f" {DAGGER} UNCALIBRATED"
        href = _cases_href(task=task, model=str(rate.get("candidate") or ""))
        parts.append(
            f'<div class="wr-row"><a class="wr-name" href="{href}">{_e(name)}</a>'
            f'<svg xmlns="http://www.w3.org/2000/svg" class="wr-plot" viewBox="0 0 {PLOT_W} '
            f'{PLOT_H}" preserveAspectRatio="none" role="presentation">{"".join(plot)}</svg>'
            f'<span class="wr-value">{_e(text)}</span></div>'
        )
    parts.append("</div>")
    return "".join(parts)


PLOT_W, PLOT_H = 320, 26


def _x(value: float) -> str:
    return f"{PLOT_W * min(1.0, max(0.0, value)):.1f}"


# helpers ----------------------------------------------------------------------------------
def script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no "</script>", no "<!--", no entity."""
    return "".join(script_json_pieces(value))


def script_json_pieces(value: Any) -> Iterator[str]:
    """``script_json`` in pieces: the outer mapping and its lists (or iterators) piece by
    piece, each item whole (json's C encoder), so the data of a large run is never one
    string. The escapes replace single characters, so escaping piece by piece equals
    escaping the whole."""
    for piece in _json_pieces(value, depth=2):
        for raw, escaped in _SCRIPT_ESCAPES:
            piece = piece.replace(raw, escaped)
        yield piece


_SCRIPT_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def _json_pieces(value: Any, depth: int) -> Iterator[str]:
    if depth and isinstance(value, dict) and all(isinstance(key, str) for key in value):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield ("," if index else "") + _json(key) + ":"
            yield from _json_pieces(item, depth - 1)
        yield "}"
    elif depth == 1 and isinstance(value, (list, Iterator)):
        # Items whole, each with its comma: one piece an item (the 15,000 of a 3,000-case
        # run's page), not two.
        yield "["
        for index, item in enumerate(value):
            yield ("," if index else "") + _json(item)
        yield "]"
    elif depth and isinstance(value, (list, Iterator)):
        yield "["
        for index, item in enumerate(value):
            if index:
                yield ","
            yield from _json_pieces(item, depth - 1)
        yield "]"
    else:
        yield _json(value)


def _json(value: Any) -> str:
    return _COMPACT.encode(value)


# Built once: json.dumps builds an encoder per call when given options (30,000 calls write a
# 3,000-case run's page).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text("utf-8")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    task_links: bool = False,
    links: Sequence[str] | None = None,
) -> str:
    """A table in its own scrolling box (a wide table never widens the page). ``task_links``:
    the first cell is a task id, linked to the cases view filtered to it; ``links``: each
    row's first cell links there instead (an escaped href per row)."""
    if task_links:
        links = [_cases_href(task=row[0]) for row in rows]
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td><a href="{links[r]}">{_e(c)}</a></td>'
            if links and i == 0
            else f"<td>{_e(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for r, row in enumerate(rows)
    )
    return (
        f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        "</table></div>"
    )


def _cases_href(**filters: str | None) -> str:
    """A link to the cases view with filters: ``#cases?task=triage&model=fake%2Fbeta``."""
    query = urlencode({key: value for key, value in filters.items() if value})
    return _e(f"#cases?{query}" if query else "#cases")


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int:
    number = _float(value)
    return int(number) if number is not None else 0


def _pct(value: Any) -> str:
    return percent(_float(value))


def _num(value: Any) -> str:
    return number(_float(value))


def _ms(value: Any) -> str:
    return milliseconds(_float(value))


def _usd(value: Any) -> str:
    amount = _float(value)
    return "-" if amount is None else money(amount)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"
