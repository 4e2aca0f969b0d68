"""HTML fragments for pytest-html (spec: "pytest-html"): the summary block and each item's
answer and checks, every user string escaped. Pure: the hooks that place them live in the
plugin's ``htmlhooks``."""

from __future__ import annotations

import html
import json
from typing import Any

from ..run.records import AnswerRecord
from .sections import report_sections


def summary_html(finished: list[Any]) -> list[str]:
    """One block per suite: the same first sections as the terminal, escaped."""
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
