"""pytest-html integration (spec: "pytest-html"): the calibration and the flagged win rate in
the report's summary, and each item's answer and checks as an extra. Registered only when
pytest-html is active, so pytest-html stays optional."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest

from .records import AnswerRecord


def summary_html(finished: list[Any]) -> list[str]:
    """One block per suite: the same first sections as the terminal, escaped."""
    from .sections import report_sections

    blocks = []
    for item in finished:
        summary = item.summary
        parts = [
            f"<h3>evalmine: {html.escape(summary.suite_name)} ({html.escape(summary.run_id)})</h3>"
        ]
        for section in report_sections(summary)[:2]:
            parts.append(f"<h4>{html.escape(section.title)}</h4>")
            parts += [f"<p>{html.escape(line)}</p>" for line in section.lines]
        blocks.append('<div class="evalmine-summary">' + "".join(parts) + "</div>")
    return blocks


def item_extra_html(record: AnswerRecord) -> str:
    checks = "".join(
        f"<li>{html.escape(c['name'])}: {'passed' if c['passed'] else 'FAILED'}"
        f"{(' - ' + html.escape(c['message'])) if c.get('message') else ''}</li>"
        for c in record.checks
    )
    error = f"<p>error: {html.escape(record.error)}</p>" if record.error else ""
    parsed = (
        f"<pre>{html.escape(json.dumps(record.parsed, indent=2, ensure_ascii=False))}</pre>"
        if record.parsed is not None
        else ""
    )
    return (
        '<div class="evalmine-answer">'
        f"<p>{html.escape(record.model)}: {html.escape(record.outcome)}"
        f"{', cached' if record.cached else ''}</p>{error}<ul>{checks}</ul>"
        f"<pre>{html.escape(record.text or '')}</pre>{parsed}</div>"
    )


class HtmlHooks:
    def __init__(self, config: pytest.Config, finished_key: Any) -> None:
        self.config = config
        self.finished_key = finished_key

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: Any
    ) -> None:
        """Called by pytest-html's late session finish, after our reports exist."""
        prefix.extend(summary_html(self.config.stash.get(self.finished_key, [])))


def add_item_extra(report: Any, record: AnswerRecord) -> None:
    from pytest_html import extras

    report.extras = [*getattr(report, "extras", []), extras.html(item_extra_html(record))]
