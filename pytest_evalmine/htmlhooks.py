"""pytest-html integration (spec: "pytest-html"): the calibration and the flagged win rate in
the report's summary, and each item's answer and checks as an extra. Registered only when
pytest-html is active, so pytest-html stays optional."""

from __future__ import annotations

from typing import Any

import pytest

from .reports.html_fragments import item_extra_html, summary_html
from .run.records import AnswerRecord
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
        prefix.extend(summary_html(self.config.stash.get(self.finished_key, [])))

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_html(self, report: Any, data: list[str]) -> None:
        """Called per result row: our items show their answer as an extra, so pytest-html's
        placeholder box for an empty log says nothing; drop it (a real log stays)."""
        if hasattr(report, RECORD_ATTRIBUTE) and data == [NO_LOG]:
            data.clear()


def add_item_extra(report: Any, record: AnswerRecord, prompt: str) -> None:
    from pytest_html import extras

    extra = extras.html(item_extra_html(record, prompt))
    report.extras = [*getattr(report, "extras", []), extra]
