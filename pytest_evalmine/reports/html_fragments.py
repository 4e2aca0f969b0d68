"""HTML fragments for pytest-html (spec: "pytest-html"): the summary block and each item's
answer and checks, every user string escaped. Pure: the hooks that place them live in the
plugin's ``htmlhooks``."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from ..run.records import AnswerRecord
from .html_banner import verdict_banner
from .html_markup import verdict_css
from .sections import report_sections

# pytest-html removes a row's log element when the log is empty (our items: the hook drops the
# placeholder) but keeps its grey frame; hide the frame when nothing is left in it.
HIDE_EMPTY_LOG = ".logwrapper:not(:has(.log)) { display: none; }"
# pytest-html shows a pre as it is: prose answers must wrap instead of running off the page.
WRAPPED = 'style="white-space: pre-wrap; overflow-wrap: anywhere"'


def summary_html(finished: list[Any], page_dir: Path | None = None) -> list[str]:
    """One block per suite: the verdict banner of report.html, a link to the run's
    report.html (relative to ``page_dir``, the folder of the pytest-html page, so it opens
    from ``file://``), then the same first sections as the terminal, escaped."""
    blocks = [f"<style>{verdict_css()}{HIDE_EMPTY_LOG}</style>"] if finished else []
    for item in finished:
        summary = item.summary
        parts = [
            verdict_banner(summary.to_json(), element_id=None),
            f"<h3>evalmine: {html.escape(summary.suite_name)} ({html.escape(summary.run_id)})</h3>",
        ]
        page = None if item.run_dir is None else item.run_dir / "report.html"
        if page is not None and page_dir is not None and page.is_file():
            href = Path(os.path.relpath(page, page_dir)).as_posix()
            parts.append(
                f'<p><a class="evalmine-report" href="{html.escape(href)}">report.html of '
                f"run {html.escape(summary.run_id)}</a> (the cases, the labelling)</p>"
            )
        for section in report_sections(summary)[:2]:
            parts.append(f"<h4>{html.escape(section.title)}</h4>")
            parts += [f"<p>{html.escape(line)}</p>" for line in section.lines]
        blocks.append('<div class="evalmine-summary">' + "".join(parts) + "</div>")
    return blocks


def item_extra_html(record: AnswerRecord, prompt: str) -> str:
    checks = "".join(
        f"<li>{html.escape(c['name'])}: {'passed' if c['passed'] else 'FAILED'}"
        f"{(' - ' + html.escape(c['message'])) if c.get('message') else ''}</li>"
        for c in record.checks
    )
    error = f"<p>error: {html.escape(record.error)}</p>" if record.error else ""
    parsed = (
        f"<p>parsed JSON:</p><pre {WRAPPED}>"
        f"{html.escape(json.dumps(record.parsed, indent=2, ensure_ascii=False))}</pre>"
        if record.parsed is not None
        else ""
    )
    return (
        '<div class="evalmine-answer">'
        f"<p>{html.escape(record.model)}: {html.escape(record.outcome)}"
        f"{', cached' if record.cached else ''}</p>{error}<ul>{checks}</ul>"
        f"<p>prompt:</p><pre {WRAPPED}>{html.escape(prompt)}</pre>"
        f"<p>answer:</p><pre {WRAPPED}>{html.escape(record.text or '')}</pre>{parsed}</div>"
    )
