"""pytest-html integration (spec: "pytest-html"): the calibration and the flagged win rate in
the report's summary, and each item's answer and checks as an extra. Registered only when
pytest-html is active, so pytest-html stays optional. pytest-html writes its page itself, so
every text handed to it here is redacted here (spec: "Secrets in texts"): a rendered prompt
or a case's gold may hold a loaded key, which no answer-side redaction ever saw."""

from __future__ import annotations

from typing import Any

import pytest

from ..redaction import redact
from ..reports.html_fragments import item_extra_html, summary_html
from ..run.records import AnswerRecord
from .stash import RECORD_ATTRIBUTE

# pytest-html 4's text for a row without captured output or failure text.
NO_LOG = "No log output captured."


class HtmlHooks:
    def __init__(self, config: pytest.Config, finished_key: Any) -> None:
        self.config = config
        self.finished_key = finished_key

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: Any
    ) -> None:
        """Called by pytest-html's late session finish, after our reports exist."""
        from .sessionfinish import pytest_html_page

        page = pytest_html_page(self.config)
        finished = self.config.stash.get(self.finished_key, [])
        blocks = summary_html(finished, None if page is None else page.parent)
        prefix.extend(redact(block) for block in blocks)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_html(self, report: Any, data: list[str]) -> None:
        """Called per result row: our items show their answer as an extra, so pytest-html's
        placeholder box for an empty log says nothing; drop it (a real log stays)."""
        if hasattr(report, RECORD_ATTRIBUTE) and data == [NO_LOG]:
            data.clear()


def add_item_extra(report: Any, record: AnswerRecord, prompt: str) -> None:
    from pytest_html import extras

    # The prompt before it is escaped (a key holding "&" or "<" is escaped into another
    # text), then the whole extra: check messages quote the case's gold.
    extra = extras.html(redact(item_extra_html(record, redact(prompt))))
    report.extras = [*getattr(report, "extras", []), extra]
