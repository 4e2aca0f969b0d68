"""pytest glue for the end of a run on the terminal (spec: "Item outcomes and checks",
"Terminal summary"): the suite items' failures as short blocks, and the evalmine summary
last, after pytest's failures and its short test summary, just before pytest's final line.

By default a suite item that failed is one short block: pytest's header line, the failed
check with what was expected and what the answer gave, and the answer's last characters.
pytest's own form (every failed check, 400 characters of the answer, captured output) is
kept for ``-v`` and ``--tb=long``/``--tb=native``, and is what junit.xml and the pytest-html
page get either way: the item's report itself is not changed, only what the terminal
prints of it.

Why not through pytest's FAILURES section: it looks up each failure's teardown report among
every report of the run, so 4,000 failures of a 2,000-case x 2-model run cost 16 million
comparisons (10 of a 20-second run's CPU seconds). The suite items' failed reports are held
out of the terminal's statistics while pytest prints its failures and given back before its
short test summary and its final line count them.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any

import pytest

from .stash import RECORD_ATTRIBUTE, SUMMARY_KEY

# The --tb styles that ask for pytest's full failure form.
LONG_STYLES = ("long", "native")
# The --tb styles the short block replaces: pytest's default, and "short" (short tracebacks;
# a suite item has none); "line" gets the block's first line after the item's name.
COMPACT_STYLES = ("auto", "short", "line")
# Of the answer, whitespace runs shown as one space: the line fits 80 columns.
TAIL_CHARACTERS = 60
# How a summary line's style is written; pytest's writer drops it under --color=no or NO_COLOR.
MARKUP = {"flag": {"red": True, "bold": True}, "ok": {"green": True}, "title": {"bold": True}}


def compact_wanted(config: pytest.Config) -> bool:
    """Short blocks unless -v or a --tb style asks for more (or for nothing: no)."""
    style = config.getoption("tbstyle", "auto")
    return style in COMPACT_STYLES and config.get_verbosity() <= 0


def compact_failure(record: Any) -> list[str]:
    """The short block of a failed item, after its header: the first failed check with its
    expected and got values (and the names of any other failed checks), then the answer's
    tail on one line. An item that failed without checks (not sent: the cap, a replay miss)
    is its outcome and why."""
    from ..redaction import redact  # only when a failure is shown: off the plugin's import

    if record.error:
        return [redact(f"{record.outcome}: {record.error}")]
    failed = [check for check in record.checks if not check["passed"]]
    lines = []
    if failed:
        first = failed[0]
        line = f"check {first['name']!r} failed: {first['message']}"
        # A value the check's message already quotes is not said twice.
        values = [
            f"{which}: {first[which]}"
            for which in ("expected", "got")
            if first.get(which) is not None and not _quotes(first["message"], str(first[which]))
        ]
        if values:
            line += " (" + ", ".join(values) + ")"
        if len(failed) > 1:
            line += "; also failed: " + ", ".join(repr(c["name"]) for c in failed[1:])
        lines.append(line)
    text = " ".join((record.text or "").split())
    tail = text[-TAIL_CHARACTERS:]
    lines.append(f'answer ends: "{tail}"' if tail == text else f'answer ends: "...{tail}"')
    return [redact(line) for line in lines]


def _quotes(message: str, value: str) -> bool:
    """``value`` stands in ``message`` as a word of its own ("18" in "17 is not 18", not in
    "expected 180")."""
    return re.search(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)", message) is not None


class SummaryLast:
    """Wraps the terminal reporter's own ``pytest_terminal_summary`` wrapper, whose part
    before its yield prints the FAILURES section and whose part after it the short test
    summary: the suite items' failed reports are held out of the terminal's statistics and
    printed as short blocks before it, and the evalmine summary is printed after it.
    ``GiveBack`` returns the held reports before anything else reads the statistics."""

    def __init__(self) -> None:
        self.held: list[Any] = []  # the suite items' failed reports, while pytest prints
        self.order: list[Any] = []  # every failed report, in pytest's order
        # (crash location, its full message) of each held report, trimmed to its first line
        # while pytest's short test summary prints it.
        self.trimmed: list[tuple[Any, str]] = []

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, None, None]:
        config = terminalreporter.config
        if compact_wanted(config) and not config.option.no_summary:
            self.hold(terminalreporter, one_line=config.option.tbstyle == "line")
        try:
            result = yield
        finally:
            self.give_back(terminalreporter)  # should GiveBack not have run
            self.untrim()
        write_summary(terminalreporter, config.stash.get(SUMMARY_KEY, None))
        return result

    def hold(self, terminalreporter: Any, one_line: bool) -> None:
        failed = terminalreporter.stats.get("failed", [])
        self.held = [report for report in failed if _suite_item_failure(report)]
        if not self.held:
            return
        held_ids = {id(report) for report in self.held}
        terminalreporter.stats["failed"] = [r for r in failed if id(r) not in held_ids]
        self.order = list(failed)
        write_blocks(terminalreporter, self.held, one_line)

    def give_back(self, terminalreporter: Any) -> None:
        if self.held:
            terminalreporter.stats["failed"] = self.order
            self.trim(self.held)
            self.held, self.order = [], []

    def trim(self, reports: list[Any]) -> None:
        """The short test summary shows a failure's whole message where ``CI`` is set (pytest
        trims it to one line elsewhere): a suite item's message is its full failure form,
        so 4,000 failed items printed 30,000 lines there. Each is its first line while the
        summary prints; ``untrim`` puts the message back."""
        for report in reports:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = getattr(crash, "message", None)
            if isinstance(message, str) and "\n" in message:
                self.trimmed.append((crash, message))
                crash.message = message.split("\n", 1)[0]

    def untrim(self) -> None:
        for crash, message in self.trimmed:
            crash.message = message
        self.trimmed = []


class GiveBack:
    """An ordinary ``pytest_terminal_summary``, so it runs after every wrapper's first part
    (pytest's FAILURES section among them) and before any other plugin's summary and
    pytest's short test summary, which read the statistics."""

    def __init__(self, holder: SummaryLast) -> None:
        self.holder = holder

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.holder.give_back(terminalreporter)


def write_summary(terminalreporter: Any, lines: list[Any] | None) -> None:
    """The evalmine section: every suite's summary (kept at session finish)."""
    if not lines:
        return
    terminalreporter.section("evalmine")
    for line in lines:
        terminalreporter.write_line(line.text, **MARKUP.get(line.style, {}))


def write_blocks(terminalreporter: Any, reports: list[Any], one_line: bool) -> None:
    """A short block per report under pytest's header line; with ``--tb=line``, one line:
    the item and its block's first line."""
    terminalreporter.write_sep(
        "=", "FAILURES (suite items; -v or --tb=long for pytest's full form)"
    )
    for report in reports:
        # An xdist worker's dict became the record at its logreport (plugin.Reporter).
        block = compact_failure(getattr(report, RECORD_ATTRIBUTE))
        head = report.head_line or report.nodeid
        if one_line:
            terminalreporter.write_line(f"{head}: {block[0]}")
            continue
        terminalreporter.write_sep("_", head, red=True, bold=True)
        for line in block:
            terminalreporter.write_line(line)


def _suite_item_failure(report: Any) -> bool:
    """A suite item's failure in its call (its checks, or an answer never sent); failures
    at setup (a provider error, a user's check that raised) keep pytest's form, which shows
    the user's traceback."""
    if report.when != "call":
        return False
    record = getattr(report, RECORD_ATTRIBUTE, None)
    # A passed record whose item failed all the same (another plugin's timeout, say): not ours.
    return record is not None and record.outcome != "passed"


def register(config: pytest.Config) -> None:
    holder = SummaryLast()
    config.pluginmanager.register(holder, "evalmine-summary")
    config.pluginmanager.register(GiveBack(holder), "evalmine-summary-give-back")
