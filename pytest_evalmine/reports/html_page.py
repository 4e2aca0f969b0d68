"""report.html (spec: "report.html"): one self-contained page per run, rendered from report.json
and pairs.jsonl alone, so an old run can be re-rendered without rerunning anything.

Inline CSS and JS (``assets/``), no network (a Content-Security-Policy forbids it), charts as
SVG written by the code. Every user string is escaped: ``html.escape`` in markup, and the
labelling data travels as JSON in a non-executed script element with ``<``, ``>`` and ``&``
escaped.

This module composes the page from its views, top to bottom: ``html_banner`` (the verdict,
the links), ``html_summary`` (the sections, with ``html_charts``), ``cases_view`` (the cases
view), ``html_labelling`` (blind pairs, criteria) and ``html_data`` (the data their scripts
read); ``html_markup`` holds what they all build with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..suite.loader import DEFAULT_MIN_LABELS
from .cases_view import CASES_VIEW, SharedRows, case_items, case_list, criterion_items
from .html_banner import links_nav, verdict_banner
from .html_data import script_json_pieces
from .html_grid import with_grid
from .html_labelling import CRITERION_PANEL, labelling_data, labelling_html
from .html_markup import CSP, as_float, asset, esc, page_css, verdict_css
from .html_panel import panel_html
from .html_summary import (
    calibration_html,
    exclusions_html,
    label_next_html,
    scorecard_html,
    section_html,
    win_rates_html,
)
from .labelling import Suggestion, is_judged, label_next, nothing_to_label
from .ranking_section import cost_quality_svg
from .sections import (
    Section,
    binary_section,
    changes_section,
    gate_section,
    paired_section,
    power_section,
    ranking_section,
)


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
        f"<title>{esc(title)}</title>",
        f"<style>{verdict_css()}{page_css()}</style>",
        "</head><body>",
        verdict_banner(report),
        links_nav(report, has_cases=bool(records)),
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">Suite {esc(suite.get("file", ""))}, sha256 '
        f"<code>{esc(suite.get('hash', ''))}</code>; models "
        f"{esc(', '.join(report.get('models') or []))} (baseline first); created "
        f"{esc(report.get('created_utc', ''))}.</p>",
    ]
    if report.get("gate"):
        parts.append(section_html(gate_section(report["gate"]), "gate"))
    if headline:
        parts += [calibration_html(headline), panel_html(headline), win_rates_html(headline)]
    if report.get("binary_judges"):
        parts.append(section_html(binary_section(report["binary_judges"]), "binary-judges"))
    elif report.get("binary_judges_note"):
        note = Section("Binary judges (PASS/FAIL per criterion)", [report["binary_judges_note"]])
        parts.append(section_html(note, "binary-judges"))
    parts.append(scorecard_html(report))
    if report.get("paired"):
        parts.append(section_html(paired_section(report["paired"]), "paired"))
    if report.get("ranking"):
        ranking = section_html(ranking_section(report["ranking"]), "ranking")
        parts.append(
            ranking.replace("</section>", cost_quality_svg(report["ranking"]) + "</section>")
        )
    if report.get("power"):
        parts.append(section_html(power_section(report["power"]), "power"))
    if headline:
        parts.append(exclusions_html(headline))
    if report.get("changes"):
        parts.append(section_html(changes_section(report["changes"]), "changes"))
    judged = [p for p in pairs if is_judged(p)]
    # The suite's gate (0 allowed); a report without one gets the loader's default.
    min_labels = as_float((headline.get("calibration") or {}).get("min_labels"))
    min_labels = DEFAULT_MIN_LABELS if min_labels is None else int(min_labels)
    if suggestions is None:
        suggestions = label_next(judged, min_labels)
    if headline:
        parts.append(label_next_html(suggestions, nothing_to_label(pairs, min_labels)))
    for part in parts:
        yield part
        yield "\n"
    if records:
        yield with_grid(CASES_VIEW)
    yield from labelling_html(report, judged, suggestions)
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
    scripts = "\n".join(
        asset(name) for name in ("common.js", "page.js", "case_detail.js", "grid.js", "cases.js")
    )
    yield f"</script>\n<script>{scripts}</script>"
    yield "\n</body></html>\n"
