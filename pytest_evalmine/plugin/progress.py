"""pytest glue for what the terminal shows while calls are made (spec: "Run lifecycle" step
5, "Dispatch", "Judge"): the live line of answers or verdicts arriving, the notice of a
Ctrl-C, the xdist controller's report of its workers' calls, and any one line written past
pytest's output capture. The live line is never drawn on an xdist worker, whose output
never reaches the terminal."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .stash import eval_session

if TYPE_CHECKING:
    from ..run.dispatch import Progress

WATCHER_KEY = pytest.StashKey[Any]()  # the xdist controller's CallWatcher

# Seconds between progress lines: a terminal line rewrites itself; a CI log gets a new line
# every few seconds, so a long dispatch never looks like a hang.
PROGRESS_EVERY_S = {True: 0.1, False: 5.0}


def say(config: pytest.Config, line: str | None) -> None:
    """One line to the terminal now, even from inside an item's setup (capture suspended)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if line is None or reporter is None:
        return
    if capture is None:
        reporter.write_line(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.ensure_newline()
        reporter.write_line(line)


def batch_printer(config: pytest.Config) -> tuple[Any, bool]:
    """The writer of the provider batches' progress lines (``run/batch.py`` decides how
    often: every poll on a TTY, every 30 s in a log) and whether the terminal is a TTY. A
    TTY line rewrites itself; an xdist worker's output never reaches the terminal."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or hasattr(config, "workerinput"):
        return None, False
    tty = bool(reporter.isatty())

    def show(line: str) -> None:
        with capture.global_and_fixture_disabled():
            if tty:
                reporter.rewrite(line, erase=True)
            else:
                reporter.ensure_newline()
                reporter.write_line(line)

    return show, tty


def interrupt_printer(config: pytest.Config) -> Any:
    def show(in_flight: int, grace_s: float) -> None:
        say(
            config,
            f"evalmine: interrupted: nothing new is sent; {in_flight} call(s) in flight get "
            f"up to {grace_s:.0f} s to land in the cache (Ctrl-C again to quit at once)",
        )

    return show


def progress_printer(config: pytest.Config, what: str, *, inside_item: bool = True) -> Any:
    """One live line while dispatching. Dispatch runs inside the first item's setup, where
    output is captured, so the line is written with capture suspended."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or hasattr(config, "workerinput"):
        return None
    last = [time.monotonic()]
    announced = [False]
    path_prefix: list[Any] = []

    def show(progress: Progress) -> None:
        finished = progress.done == progress.total
        now = time.monotonic()
        every = PROGRESS_EVERY_S[reporter.isatty()]
        # The moment every call left is in a provider batch: the run waits on batches from
        # here (for minutes, maybe), so the line says so at once, in a log too.
        waiting = progress.in_batch - progress.left_in_batch
        only_batches = waiting > 0 and progress.done + waiting == progress.total
        announce = only_batches and not announced[0]
        announced[0] = only_batches
        if not (finished or announce) and now - last[0] < every:
            return
        last[0] = now
        if not path_prefix:
            path_prefix.append(reporter.currentfspath)
            if not inside_item:
                # After the last item pytest may have left its progress line unfinished.
                with capture.global_and_fixture_disabled():
                    reporter.write_line("")
        line = progress_line(progress, what)
        with capture.global_and_fixture_disabled():
            if reporter.isatty():
                reporter.rewrite(line, erase=True)
                if finished:
                    reporter.ensure_newline()
            else:
                reporter.write_line(line)
            if finished and inside_item:
                _restore_path_prefix(reporter, path_prefix[0])

    return show


def progress_line(progress: Progress, what: str) -> str:
    """``evalmine: 3/6 answers, 1 cached, $0.0012 spent``; while calls sit in a provider
    batch they are named first and are not among the answers: ``evalmine: 6 in batch, 0/6
    answers, ...`` (spec: "Batch", "Waiting is visible")."""
    waiting = f"{progress.in_batch} in batch, " if progress.in_batch else ""
    # Answered only for answers (issue 28: "30/30 answers" when 23 were never run).
    ended = "".join(
        f"{count} {how}, "
        for count, how in ((progress.failed, "failed"), (progress.not_run, "not run"))
        if count
    )
    return (
        f"evalmine: {waiting}{progress.answered}/{progress.total} {what}, {ended}"
        f"{progress.cached} cached, ${progress.spent_usd:.4f} spent"
    )


def _restore_path_prefix(reporter: Any, path: Any) -> None:
    """In the default layout pytest writes a file's path only when its first item starts;
    our line ended that line, so write the path again for the result letters to follow."""
    if isinstance(path, Path) and reporter.currentfspath is None:
        reporter.write(os.path.relpath(path, reporter.startpath) + " ")
        reporter.currentfspath = path


def watch_workers(config: pytest.Config) -> None:
    """Workers' output never reaches the terminal: the controller reports their calls from
    the cache database, every few seconds, until session finish."""
    from ..run.watch import CallWatcher

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    evalsession = eval_session(config)
    watcher = CallWatcher(
        evalsession.store,
        evalsession.run_token,
        write=reporter.write_line,
        every_s=PROGRESS_EVERY_S[False],
    )
    config.stash[WATCHER_KEY] = watcher
    watcher.start()


def stop_watching(config: pytest.Config) -> None:
    """The watcher's final line, on a line of its own after the items' progress."""
    watcher = config.stash.get(WATCHER_KEY, None)
    if watcher is None:
        return
    del config.stash[WATCHER_KEY]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
    watcher.stop()
