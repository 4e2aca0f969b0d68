"""The top of report.html: the verdict banner (may the win rate be quoted; the pytest-html
page shows it too) and the links to the run's other pages.
"""

from __future__ import annotations

from typing import Any

from ..judging.headline import DAGGER
from .html_markup import esc, num, pct


def links_nav(report: dict[str, Any], *, has_cases: bool) -> str:
    """Links to the run's other pages: its cases view, the pytest-html page when the run
    wrote one, the run "What changed" compares with, and the suite's index of runs. Every
    link is relative (``file://`` pages), to a page of this report tree or the project."""
    links = []
    if has_cases:
        links.append('<a href="#cases">Cases</a>')
    pytest_html = report.get("pytest_html")
    if pytest_html:
        link = f'<a href="{esc(pytest_html)}" id="link-pytest-html">pytest-html page</a>'
        if str(pytest_html).startswith(".."):  # not in an archive of the run folder alone
            link += (
                ' <span class="muted" id="pytest-html-note">(outside this run folder, at '
                f"{esc(pytest_html)} from it: an archive of the run folder alone lacks it)</span>"
            )
        links.append(link)
    previous = (report.get("changes") or {}).get("previous_run_id")
    if previous:
        links.append(
            f'<a href="../{esc(previous)}/report.html" id="link-previous">'
            f"compared run {esc(previous)}</a>"
        )
    links.append('<a href="../index.html" id="link-index">all runs of this suite</a>')
    return f'<nav class="links">{" &middot; ".join(links)}</nav>'


def verdict_banner(report: dict[str, Any], element_id: str | None = "verdict") -> str:
    """The first thing on the page: may the win rate be quoted, and if not, why not."""
    headline = report.get("headline")
    header = f'<header id="{element_id}" class="verdict' if element_id else '<header class="verdict'
    reason = report.get("partial_reason") or "the cost cap was reached"
    partial = (
        f'<div class="verdict-partial">PARTIAL RUN: {esc(reason)}; the numbers cover '
        "only what ran.</div>"
        if report.get("partial")
        else ""
    )
    if not headline:
        note = report.get("judge_note") or "no judge verdicts in this run"
        return f'{header} verdict-none"><strong>NO HEADLINE</strong> {esc(note)}{partial}</header>'
    rates = headline.get("win_rates") or []
    lines = "".join(f"<li>{esc(_rate_line(rate))}</li>" for rate in rates)
    if headline.get("headline_eligible"):
        cal = headline.get("calibration") or {}
        return (
            f'{header} verdict-ok"><strong>ELIGIBLE</strong> '
            f"the judge agrees with your labels (kappa {num(cal.get('kappa'))} on "
            f"{esc(cal.get('n', 0))} labels)<ul>{lines}</ul>{partial}</header>"
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
        f"<strong>UNCALIBRATED</strong> {esc('; '.join(reasons))}<ul>{lines}</ul>{partial}</header>"
    )


def _rate_line(rate: dict[str, Any]) -> str:
    value = rate.get("win_rate")
    text = f"{rate.get('candidate', '?')}: win rate {pct(value)}"
    interval = rate.get("interval") or {}
    if interval:
        text += f" [{pct(interval.get('low'))}, {pct(interval.get('high'))}]"
    text += f", n={rate.get('n', 0)}"
    if not rate.get("headline_eligible"):
        text += f" {DAGGER} UNCALIBRATED"
    return text
