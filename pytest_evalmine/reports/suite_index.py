"""reports/<suite>/index.html (spec: "The suite's index", "Report files"): one page listing a
suite's runs, newest first, each with its figures (pass rate, kappa and its status, win rate
flagged when not headline-eligible, spend, verdict) and linked to its report.html; a trend
chart per figure over the runs; and, for the newest runs, the comparison with the run before
it, the same figures and change list as ``evalmine compare`` prints, opened inside the page.
Rebuilt by every run from the run folders' files, so it never holds a run that is gone and
needs no state of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..judging.headline import DAGGER
from .html_markup import CSP, as_float, esc, page_css, verdict_css
from .html_trends import Series, trend_chart
from .render import money, number, percent

# The runs compared with the run before them on every rewrite: each comparison reads both
# runs' answers, so a suite with hundreds of runs would be read whole after every run.
COMPARED_RUNS = 10
INDEX_CSS = """
.trends { display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr));
  gap: 12px; margin: 8px 0 16px; }
figure.trend { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; }
figure.trend figcaption { font-weight: 600; font-size: 14px; }
.trend-svg { width: 100%; height: auto; display: block; }
.trend-svg text { font-size: 10px; }
ul.legend { list-style: none; padding: 0; margin: 2px 0 0; font-size: 12px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
#runs td { white-space: nowrap; }
section.comparison { border: 1px solid var(--line); border-radius: 8px; padding: 4px 14px;
  margin: 12px 0; }
section.comparison:not(:target) { display: none; }
"""


# What ``evalmine compare BEFORE AFTER`` computes for two run folders: given by the engine,
# which reads stored runs (this layer only renders).
Comparer = Callable[[Path, Path], dict[str, Any]]


def suite_index_html(suite_dir: Path, compare: Comparer | None = None) -> str:
    """The page: one row per run folder with a readable report.json (an unreadable one gets
    a row saying so, never an error: the run's own reports come first). ``compare`` makes the
    newest runs' comparisons with the run before them; without it every row shows the
    ``evalmine compare`` command."""
    latest = _latest_run_id(suite_dir)
    runs: list[tuple[Path, dict[str, Any]]] = []  # oldest first
    rows = []
    for run_dir in sorted(p for p in suite_dir.iterdir() if p.is_dir()):
        report_file = run_dir / "report.json"
        if not report_file.is_file():
            continue
        try:
            runs.append((run_dir, json.loads(report_file.read_text("utf-8"))))
        except (OSError, ValueError) as exc:
            rows.append(
                (run_dir.name, f"<tr><td colspan=11>{esc(run_dir.name)}: unreadable ({esc(exc)})"
                 "</td></tr>")
            )  # fmt: skip
    comparisons = []
    for position, (run_dir, report) in enumerate(runs):
        previous = runs[position - 1][0] if position else None
        compared = (
            compare is not None and previous is not None and position >= len(runs) - COMPARED_RUNS
        )
        if compared:
            comparisons.append(_kept_comparison_html(previous, run_dir, compare))  # type: ignore[arg-type]
        row = _row(run_dir.name, report, run_dir.name == latest, previous, compared)
        rows.append((run_dir.name, row))
    rows.sort(key=lambda row: row[0], reverse=True)
    name = suite_dir.name
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>evalmine: {esc(name)} runs</title>"
        f"<style>{verdict_css()}{page_css()}{INDEX_CSS}</style></head><body>\n"
        f"<h1>evalmine: runs of suite {esc(name)}</h1>"
        f'<p class="meta">{len(rows)} run(s), newest first; <strong>latest</strong> marks the '
        "run latest.json points at (the one the next run compares with). Rewritten by every "
        f"run; the {COMPARED_RUNS} newest runs link to their comparison with the run before "
        "(older ones: the <code>evalmine compare</code> command shown).</p>\n"
        f"{_trends(runs)}\n"
        '<div class="table-wrap"><table id="runs"><thead><tr><th>date (UTC)</th><th>name</th>'
        "<th>run</th><th>models</th><th>pass rate</th><th>kappa</th><th>win rate</th>"
        "<th>spend</th><th>verdict</th><th>flags</th><th>compare</th></tr>"
        f"</thead><tbody>{''.join(row for _, row in rows)}</tbody></table></div>\n"
        + "".join(reversed(comparisons))
        + "\n</body></html>\n"
    )


def _verdict(report: dict[str, Any]) -> str:
    headline = report.get("headline")
    if not headline:
        verdict = "NO HEADLINE"
    elif headline.get("headline_eligible"):
        verdict = "ELIGIBLE"
    else:
        verdict = "UNCALIBRATED"
    gate = (report.get("gate") or {}).get("verdict")
    return verdict + (f"; gate {gate}" if gate else "")


def _pass_rates(report: dict[str, Any]) -> list[tuple[str, float | None, str]]:
    """Per model: its pass rate and the text shown, ``M 83.3% (5/6)``."""
    rates = []
    for row in report.get("scorecard") or []:
        passed, items = as_float(row.get("passed")) or 0, as_float(row.get("items")) or 0
        rate = passed / items if items else None
        rates.append(
            (str(row.get("model")), rate, f"{row.get('model')} {percent(rate)} "
             f"({int(passed)}/{int(items)})")
        )  # fmt: skip
    return rates


def _kappa(report: dict[str, Any]) -> str:
    calibration = (report.get("headline") or {}).get("calibration") or {}
    if not calibration:
        return "-"
    return f"{number(as_float(calibration.get('kappa')))} ({calibration.get('status', '?')})"


def _win_rates(report: dict[str, Any]) -> list[tuple[str, float | None, bool, str]]:
    """Per candidate: its overall win rate, whether it is flagged, and the text shown (the
    dagger and UNCALIBRATED when not headline-eligible, as everywhere it is printed)."""
    rates = []
    for rate in (report.get("headline") or {}).get("win_rates") or []:
        value = as_float(rate.get("win_rate"))
        flagged = not rate.get("headline_eligible")
        text = f"{rate.get('candidate')} {percent(value)}" + (
            f"{DAGGER} UNCALIBRATED" if flagged else ""
        )
        rates.append((str(rate.get("candidate")), value, flagged, text))
    return rates


def _spend(report: dict[str, Any]) -> float | None:
    return as_float((report.get("cost") or {}).get("spent_usd"))


def _row(
    run_id: str, report: dict[str, Any], latest: bool, previous: Path | None, compared: bool
) -> str:
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
    spent = _spend(report)
    if previous is None:
        compare = ""
    elif compared:
        compare = (
            f'<a class="compare" href="#compare-{esc(run_id)}">compare with the previous run</a>'
        )
    else:
        compare = f"<code>evalmine compare {esc(previous.name)} {esc(run_id)}</code>"
    win_rates = "; ".join(
        f'<span class="flag">{esc(text)}</span>' if flagged else esc(text)
        for _, _, flagged, text in _win_rates(report)
    )
    return (
        f"<tr data-run={esc(json.dumps(run_id))}><td>{esc(report.get('created_utc', ''))}</td>"
        f"<td>{esc(report.get('run_name') or '')}</td>"
        f'<td><a href="{esc(run_id)}/report.html">{esc(run_id)}</a></td>'
        f"<td>{esc(', '.join(report.get('models') or []))}</td>"
        f"<td>{esc('; '.join(text for _, _, text in _pass_rates(report)))}</td>"
        f"<td>{esc(_kappa(report))}</td><td>{win_rates or '-'}</td>"
        f"<td>{esc(money(spent) if spent is not None else '-')}</td>"
        f"<td>{esc(_verdict(report))}</td><td>{esc('; '.join(flags))}</td><td>{compare}</td></tr>"
    )


def _trends(runs: list[tuple[Path, dict[str, Any]]]) -> str:
    """A chart per figure over the runs, oldest first: pass rate per model, kappa, win rate
    per candidate (flagged points hollow), spend."""
    run_ids = [run_dir.name for run_dir, _ in runs]

    def per_name(values: list[list[tuple[str, float | None, bool]]]) -> list[Series]:
        series: dict[str, Series] = {}
        for index, entries in enumerate(values):
            for name, value, flagged in entries:
                line = series.setdefault(
                    name, Series(name, [None] * len(runs), [False] * len(runs))
                )
                line.values[index], line.flagged[index] = value, flagged
        return list(series.values())

    reports = [report for _, report in runs]
    passes = per_name([[(n, v, False) for n, v, _ in _pass_rates(r)] for r in reports])
    wins = per_name([[(n, v, f) for n, v, f, _ in _win_rates(r)] for r in reports])
    kappas = [
        as_float(((r.get("headline") or {}).get("calibration") or {}).get("kappa")) for r in reports
    ]
    charts = [
        trend_chart("pass rate", passes, run_ids, percent, (0.0, 1.0)),
        trend_chart("kappa", [Series("kappa", kappas)], run_ids, number, (0.0, 1.0)),
        trend_chart("win rate", wins, run_ids, percent, (0.0, 1.0)),
        trend_chart("spend", [Series("spend", [_spend(r) for r in reports])], run_ids, money),
    ]
    return f'<div class="trends" id="trends">{"".join(charts)}</div>'


def _comparison_html(before: Path, after: Path, compare: Comparer) -> str:
    """``evalmine compare BEFORE AFTER``'s section, or why it cannot be made."""
    from .html_summary import section_html
    from .sections import changes_section

    anchor = f"compare-{after.name}"
    head = (
        f"<p class='meta'>{esc(before.name)} -&gt; {esc(after.name)}: what "
        f"<code>evalmine compare {esc(before.name)} {esc(after.name)}</code> prints. "
        f'<a href="#runs">back to the runs</a></p>'
    )
    try:
        section = changes_section(compare(before, after))
    except Exception as exc:  # a stored run of any age: the page comes first, never an error
        return (
            f'<section id="{esc(anchor)}" class="comparison"><h2>{esc(after.name)} against '
            f"{esc(before.name)}</h2>{head}<p>cannot compare: {esc(exc)}</p></section>"
        )
    html = section_html(section, esc(anchor))
    return html.replace('">', '" class="comparison">', 1).replace("</h2>", "</h2>" + head, 1)


def _kept_comparison_html(before: Path, after: Path, compare: Comparer) -> str:
    """``_comparison_html``, kept in ``<suite>/.comparisons/`` once made: every run rewrites
    the index, and comparing two stored runs reads both runs' answers (about 1 s per pair of
    2,000-case runs), while two written run folders never change. Kept per tool version (the
    section's wording may change); a comparison that could not be made is made again."""
    from .. import __version__

    kept = after.parent / ".comparisons" / f"{before.name}--{after.name}.html"
    stamp = f"<!-- pytest-evalmine {__version__} -->\n"
    try:
        text = kept.read_text("utf-8")
        if text.startswith(stamp):
            return text[len(stamp) :]
    except OSError:
        pass
    html = _comparison_html(before, after, compare)
    if "<p>cannot compare: " not in html:
        try:
            kept.parent.mkdir(exist_ok=True)
            partial = kept.with_name(kept.name + ".part")
            partial.write_text(stamp + html, "utf-8")
            partial.replace(kept)
        except OSError:  # a cache: the index is written all the same
            pass
    return html


def _latest_run_id(suite_dir: Path) -> str | None:
    try:
        return json.loads((suite_dir / "latest.json").read_text("utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
