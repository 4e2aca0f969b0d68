"""reports/<suite>/index.html (spec: "report.html", "Report files"): one page listing a
suite's runs, newest first, each linked to its report.html. Rebuilt by every run from the
report.json files of the suite's run folders, so it never holds a run that is gone and needs
no state of its own."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from .html_markup import CSP, page_css, verdict_css
from .render import money


def suite_index_html(suite_dir: Path) -> str:
    """The page: one row per run folder with a readable report.json (an unreadable one gets
    a row saying so, never an error: the run's own reports come first)."""
    latest = _latest_run_id(suite_dir)
    rows = []
    for run_dir in sorted((p for p in suite_dir.iterdir() if p.is_dir()), reverse=True):
        report_file = run_dir / "report.json"
        if not report_file.is_file():
            continue
        try:
            report = json.loads(report_file.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            rows.append(f"<tr><td colspan=7>{_e(run_dir.name)}: unreadable ({_e(exc)})</td></tr>")
            continue
        rows.append(_row(run_dir.name, report, run_dir.name == latest))
    name = suite_dir.name
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>evalmine: {_e(name)} runs</title>"
        f"<style>{verdict_css()}{page_css()}</style></head><body>\n"
        f"<h1>evalmine: runs of suite {_e(name)}</h1>"
        f'<p class="meta">{len(rows)} run(s), newest first; <strong>latest</strong> marks the '
        "run latest.json points at (the one the next run compares with). Rewritten by every "
        "run.</p>\n"
        '<div class="table-wrap"><table id="runs"><thead><tr><th>date (UTC)</th><th>run</th>'
        "<th>models</th><th>verdict</th><th>passed</th><th>cost</th><th>flags</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>\n</body></html>\n"
    )


def _row(run_id: str, report: dict[str, Any], latest: bool) -> str:
    headline = report.get("headline")
    if not headline:
        verdict = "NO HEADLINE"
    elif headline.get("headline_eligible"):
        verdict = "ELIGIBLE"
    else:
        verdict = "UNCALIBRATED"
    gate = (report.get("gate") or {}).get("verdict")
    if gate:
        verdict += f"; gate {gate}"
    passed = ", ".join(
        f"{row.get('model')} {row.get('passed', 0)}/{row.get('items', 0)}"
        for row in report.get("scorecard") or []
    )
    flags = []
    if latest:
        flags.append("latest")
    if report.get("partial"):
        flags.append(f"PARTIAL ({report.get('partial_reason') or 'stopped'})")
    if (report.get("regressions") or {}).get("failed"):
        flags.append("REGRESSIONS FAILED")
    if report.get("latest_note"):
        flags.append("not latest: subset, partial or replay miss")
    if report.get("redactions"):
        flags.append(f"{report['redactions']} key(s) redacted")
    spent = (report.get("cost") or {}).get("spent_usd")
    cost = money(spent) if isinstance(spent, (int, float)) else "-"
    return (
        f"<tr><td>{_e(report.get('created_utc', ''))}</td>"
        f'<td><a href="{_e(run_id)}/report.html">{_e(run_id)}</a></td>'
        f"<td>{_e(', '.join(report.get('models') or []))}</td><td>{_e(verdict)}</td>"
        f"<td>{_e(passed)}</td><td>{_e(cost)}</td><td>{_e('; '.join(flags))}</td></tr>"
    )


def _latest_run_id(suite_dir: Path) -> str | None:
    try:
        return json.loads((suite_dir / "latest.json").read_text("utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)
