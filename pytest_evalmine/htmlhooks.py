"""pytest-html integration (spec: "pytest-html"): the calibration and the flagged win rate in
the report's summary, and each item's answer and checks as an extra. Registered only when
pytest-html is active, so pytest-html stays optional."""

from __future__ import annotations

from typing import Any

import pytest

from .reports.html_fragments import item_extra_html, summary_html
from .run.records import AnswerRecord


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
