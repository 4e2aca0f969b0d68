"""pytest glue at session finish (spec: "Run lifecycle" step 7, "Terminal summary", "Exit
codes"): judge and write every suite's reports once, keep the summary the terminal prints,
and set the run's exit code. Whatever fails while the reports are written, the summary is
still printed and the run does not pass; a run that ran nothing says so."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .stash import FINISHED_KEY, SUMMARY_KEY, VERDICT_NOTE_KEY, eval_session

if TYPE_CHECKING:
    from ..engine.finish import FinishedSuite
    from ..engine.session import EvalSession
    from ..reports.terminal import Line
    from ..run.dispatch import Progress

# pytest's outcomes our exit codes may replace; interrupts and errors keep their own.
TESTS_RAN = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)


def finish_session(
    config: pytest.Config,
    session: pytest.Session,
    *,
    on_progress: Callable[[Progress], None] | None,
    on_interrupt: Callable[[int, float], None] | None,
) -> None:
    """On the xdist controller or the only process, once the answers' dispatch has ended:
    judges and writes the reports (nothing under ``--collect-only``), keeps the summary's
    lines for the terminal and sets the exit code."""
    evalsession = eval_session(config)
    if config.option.collectonly:
        evalsession.close()
        _say_nothing_ran(config, session)
        return
    from ..engine.finish import REPORTS_NOT_WRITTEN, exit_code, finish_run, report_root_of
    from .gc_freeze import freeze_survivors

    command = "pytest " + " ".join(shlex.quote(a) for a in config.invocation_params.args)
    failure = None
    finished: list[FinishedSuite] = []
    try:
        # What is alive now stays out of the full collections judging and writing set off.
        freeze_survivors(generation=0)
        finished = finish_run(
            evalsession,
            command=command,
            report_root=report_root_of(evalsession),
            judge_registry=evalsession.judge_registry,
            on_progress=on_progress,
            on_interrupt=on_interrupt,
            # Ctrl-C, -x or an internal error: never spend on a judge the user stopped.
            stopped=_why_stopped(session),
            pytest_html=pytest_html_page(config),
        )
    except Exception as exc:  # a report failure must not hide the run's own outcome
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        evalsession.close()
    config.stash[SUMMARY_KEY] = _summary_lines(config, evalsession, finished, failure)
    config.stash[FINISHED_KEY] = finished
    _record_suite_properties(config, finished)
    if evalsession.interrupted:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    not_written = [f"{f.summary.suite_name}: {f.not_written}" for f in finished if f.not_written]
    if failure is not None:
        not_written.append(failure)
    code = REPORTS_NOT_WRITTEN if failure is not None else exit_code(finished)
    if code is not None and session.exitstatus in TESTS_RAN:
        session.exitstatus = code
    if not_written:
        config.stash[VERDICT_NOTE_KEY] = (
            REPORTS_NOT_WRITTEN,
            f"reports not written: {'; '.join(not_written)}",
        )


def pytest_html_page(config: pytest.Config) -> Path | None:
    """The page pytest-html writes for this run (``--html``, resolved against the working
    folder as pytest-html resolves it), or None."""
    path = config.getoption("htmlpath", None)
    if not path or not config.pluginmanager.hasplugin("html"):
        return None
    return Path.cwd() / Path(os.path.expandvars(path)).expanduser()


# xdist: the controller's end of a run (spec: "Dispatch", xdist and Ctrl-C): its Ctrl-C
# stops every worker's dispatch, and the report counts every call any worker made, read from
# the cache database whichever records reached the controller.


def ask_workers_to_stop(config: pytest.Config) -> None:
    """The controller's own Ctrl-C, as soon as pytest has it: every worker's dispatch sends
    nothing new (``settle_workers`` then waits for their calls in flight)."""
    evalsession = eval_session(config)
    if evalsession.workers_plan is not None:
        evalsession.store.request_stop(evalsession.run_token)


def settle_workers(config: pytest.Config, session: pytest.Session) -> None:
    """Before the controller judges and writes the reports. A Ctrl-C (the controller's own,
    or a worker's that xdist turned into the run's): the workers are told to stop sending
    and their calls in flight are waited for; then every selected item no worker's record
    reached gets one from the cache database."""
    evalsession = eval_session(config)
    if evalsession.workers_plan is None:
        return
    if session.exitstatus == pytest.ExitCode.INTERRUPTED and not session.shouldfail:
        _stop_workers(config)
    evalsession.records_from_workers()


def _stop_workers(config: pytest.Config) -> None:
    from ..run.dispatch import INTERRUPT_GRACE_S
    from ..run.stopping import stop_run, wait_for_calls

    evalsession = eval_session(config)
    store, token = evalsession.store, evalsession.run_token
    in_flight = stop_run(store, token)
    if in_flight:
        _write_line(
            config,
            f"evalmine: interrupted: the workers send nothing new; {len(in_flight)} call(s) "
            f"in flight get up to {INTERRUPT_GRACE_S:.0f} s to land in the cache (Ctrl-C "
            "again to stop waiting)",
        )
    try:
        # Also with nothing in flight: a worker about to send sees the stop meanwhile.
        left = wait_for_calls(store, token)
    except KeyboardInterrupt:
        left = store.reserved_keys(token)
    if left:
        _write_line(config, f"evalmine: {len(left)} call(s) still in flight: may be billed")


def _write_line(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(line)


def _say_nothing_ran(config: pytest.Config, session: pytest.Session) -> None:
    """``--collect-only``: no answer, no judge, no report; the last line says so rather
    than "all items passed"."""
    if session.exitstatus == pytest.ExitCode.OK:
        config.stash[VERDICT_NOTE_KEY] = (
            pytest.ExitCode.OK,
            f"collected {len(session.items)} items, nothing run (--collect-only)",
        )


def _summary_lines(
    config: pytest.Config,
    evalsession: EvalSession,
    finished: list[FinishedSuite],
    failure: str | None,
) -> list[Line]:
    from ..engine.plan import from_here
    from ..reports.terminal import FLAG, Line, other_runs_lines, terminal_lines

    here = config.invocation_params.dir
    lines: list[Line] = []
    for item in finished:
        run_dir = None if item.run_dir is None else from_here(item.run_dir, here)
        # Written after report.md: a failure in between leaves no page to name.
        page = item.run_dir is not None and (item.run_dir / "report.html").is_file()
        index_file = None if item.run_dir is None else item.run_dir.parent / "index.html"
        index = from_here(index_file, here) if index_file and index_file.is_file() else None
        lines += terminal_lines(
            item.summary, run_dir, _terminal_width(), item.not_written, page, index
        )
    lines += [Line(text) for text in other_runs_lines(evalsession.other_runs)]
    if failure is not None:
        lines.append(Line(f"evalmine: could not write reports: {failure}", FLAG))
    return lines


def _terminal_width() -> int:
    """The width pytest's own writer uses (80 when not on a terminal, as in CI)."""
    width = shutil.get_terminal_size(fallback=(80, 24)).columns
    return width if width >= 40 else 80


def _record_suite_properties(config: pytest.Config, finished: list[Any]) -> None:
    """Calibration and win rates as properties of --junitxml's test suite. pytest offers this
    only as a fixture (``record_testsuite_property``), which session finish cannot request:
    its object is reached through the same stash key the fixture reads."""
    if not config.getoption("xmlpath", None):
        return
    from _pytest.junitxml import xml_key

    from ..reports.junit import suite_properties

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for item in finished:
        for name, value in suite_properties(item.summary):
            xml.add_global_property(name, value)


def _why_stopped(session: pytest.Session) -> str | None:
    """Why not every selected item ran (Ctrl-C, -x or --maxfail, an internal error), or None
    when they all did: only then is judging worth paying for."""
    if session.shouldfail:  # xdist reports a -x stop as an interruption: ask this first
        return "stopped early (-x or --maxfail)"
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted (Ctrl-C)"
    if session.exitstatus not in TESTS_RAN:
        return f"stopped ({session.exitstatus!s})"
    if session.shouldstop:
        return "stopped early"
    return None
