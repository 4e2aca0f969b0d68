"""Issue 20 section 3: a Ctrl-C under xdist stops every worker's dispatch, and the report
counts every call any worker made.

Before: with SIGINT to the xdist controller only (``kill -INT``, a CI runner cancelling the
job), the workers kept sending until xdist's teardown killed them (9.7 s; here 56 calls
reached the server where 20 had when the signal came) while the report said ``calls: 15
made``: it counted only the records that had reached the controller. With SIGINT to the
whole group (a terminal's Ctrl-C) the workers stopped, but the report still said 15 of the
20. Now the controller asks the run to stop in the cache database every worker polls, waits
for the calls in flight, and builds a record for every item no worker's record reached from
what the database says of its request.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evalmine.adapters.base import Request, Response, Usage
from pytest_evalmine.run.dispatch import INTERRUPTED, OK
from pytest_evalmine.run.records import NOT_RUN_INTERRUPTED
from pytest_evalmine.run.stopping import wait_for_calls

from .conftest import (
    COUNTING_CONFTEST,
    call_count,
    latest_answers,
    latest_report,
    open_test_store,
)
from .test_dispatch import Probe, make_dispatcher, requests

CASES = 30  # x 2 models: 60 requests, far more than are sent before the signal
XDIST_RUN = ["--evalmine-fake", "--evalmine-concurrency=4", "-n", "2", "-p", "no:cacheprovider"]
XDIST_RUN += ["-p", "no:benchmark"]


def many_cases_suite() -> str:
    cases = "\n".join(f"      - {{id: c{i}, vars: {{m: 'message {i}'}}}}" for i in range(CASES))
    return (
        textwrap.dedent(
            """\
        version: 1
        suite: small
        models: [fake/alpha, fake/beta]
        defaults: {max_tokens: 64, temperature: 0}
        tasks:
          - id: say
            kind: echo
            prompt: "Say: {{ m }}"
            cases:
        """
        )
        + cases
        + "\n"
    )


def wait_until(condition: Callable[[], bool], timeout_s: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def cached_answers(root: Path) -> int:
    with sqlite3.connect(root / ".evalmine" / "cache.sqlite") as db:
        return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])


@pytest.mark.parametrize("whom", ["controller", "group"])
def test_a_ctrl_c_under_xdist_stops_every_worker_and_counts_every_call(
    pytester: pytest.Pytester, whom: str
) -> None:
    pytester.makefile(".eval.yaml", small=many_cases_suite())
    pytester.makeconftest(COUNTING_CONFTEST)
    calls = pytester.path / "calls.log"
    log = open(pytester.path / "run.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", *XDIST_RUN],
        cwd=pytester.path,
        env={**os.environ, "TEST_FAKE_LATENCY": "0.5"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal gives a command
    )
    try:
        assert wait_until(lambda: call_count(calls) >= 6)
        if whom == "controller":
            os.kill(process.pid, signal.SIGINT)  # the workers get nothing
        else:
            os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=120) == pytest.ExitCode.INTERRUPTED
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
    sent = call_count(calls)
    report = latest_report(pytester.path)
    # Every call that reached the server is in the cache and in the report, once.
    assert report["calls"]["made"] == sent == cached_answers(pytester.path), (
        pytester.path / "run.log"
    ).read_text()[-3000:]
    assert report["partial"] is True
    assert report["partial_reason"] == "interrupted (Ctrl-C), not judged"
    assert report["items"] == 2 * CASES  # every item has its record, run or not
    assert report["outcomes"][NOT_RUN_INTERRUPTED] == 2 * CASES - sent
    assert sent < 2 * CASES  # the workers stopped long before the end
    answers = latest_answers(pytester.path)
    paid = [a for a in answers if a["attempts"] and not a["cached"]]
    assert len(paid) == sent
    assert report["cost"]["spent_usd"] == pytest.approx(sum(a["cost_usd"] for a in paid))
    # Nothing more is sent once the run has ended: no worker outlived it.
    time.sleep(1.0)
    assert call_count(calls) == sent
    # The rerun pays only for what was never sent.
    rerun = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    rerun.assert_outcomes(passed=2 * CASES)
    assert call_count(calls) == 2 * CASES


# --- the core, one piece at a time ----------------------------------------------------------


class Stopping:
    """An adapter whose second call asks the run to stop, from another connection to the
    cache (as the xdist controller does), then takes long enough for the dispatch to see it
    while the call is still in flight."""

    name = "fake"
    version = "1"

    def __init__(self, store_location: str, run_token: str) -> None:
        self.store_location, self.run_token = store_location, run_token
        self.calls: list[str] = []

    def schema_mode(self, request: Request) -> None:
        return None

    def key_extra(self, request: Request) -> dict[str, str]:
        return {}  # nothing to fingerprint (see test_dispatch.Probe)

    async def complete(self, request: Request) -> Response:
        self.calls.append(request.prompt)
        if len(self.calls) == 2:
            open_test_store(self.store_location).request_stop(self.run_token)
            await asyncio.sleep(0.3)
        return Response(text="ok", usage=Usage(input_tokens=5, output_tokens=5), latency_s=0.0)

    async def aclose(self) -> None:
        return None


def test_a_dispatch_stops_when_another_process_of_its_run_asks(store_location: str) -> None:
    adapter = Stopping(store_location, "run")
    dispatcher = make_dispatcher(store_location, adapter, concurrency=1)
    outcomes = dispatcher.run_each(dispatcher.plan(requests(10)))
    statuses = [outcome.status for outcome in outcomes]
    # The call in flight when the stop came landed (the grace of a Ctrl-C); nothing after.
    assert statuses == [OK, OK] + [INTERRUPTED] * 8
    assert len(adapter.calls) == 2
    assert dispatcher.interrupted
    # Another run on the same cache is not stopped by it.
    other = make_dispatcher(store_location, adapter, concurrency=1, run_token="other")
    assert {o.status for o in other.run_each(other.plan(requests(10)))} == {OK}


def test_what_the_controller_reads_of_each_request(store_location: str) -> None:
    """``Dispatcher.settled``: paid by a worker of this run (its cost), a worker's failure,
    a call still in flight (possibly billed), cached by an earlier run, never sent."""
    dispatcher = make_dispatcher(store_location, Probe(), run_token="run")
    paid, failed, flying, earlier, unsent = dispatcher.plan(requests(5))
    store = dispatcher.store
    worker = "host:1:1"
    response = Response(text="answer", usage=Usage(input_tokens=5, output_tokens=5), latency_s=0)
    store.claim("earlier-run", earlier.key, worker)
    store.record_paid_answer(
        key=earlier.key, provider="fake", model="fake/a", response=response, cost_usd=0.5,
        reservation=None,
    )  # fmt: skip
    for plan in (paid, failed, flying, unsent):
        store.claim("run", plan.key, worker)
    reservation = store.reserve("run", paid.key, 1.0, cap=10.0)
    store.record_paid_answer(
        key=paid.key, provider="fake", model="fake/a", response=response, cost_usd=0.25,
        reservation=reservation, attempts=2,
    )  # fmt: skip
    store.finish_claim(failed.key, status="error", error="boom", error_kind="server", attempts=3)
    store.reserve("run", flying.key, 1.0, cap=10.0)
    settled = dispatcher.settled([paid, failed, flying, earlier, unsent])
    assert (settled[paid.key].status, settled[paid.key].cached) == (OK, False)
    assert (settled[paid.key].cost_usd, settled[paid.key].attempts) == (0.25, 2)
    assert (settled[failed.key].status, settled[failed.key].attempts) == ("error", 3)
    assert settled[flying.key].status == INTERRUPTED
    assert settled[flying.key].possibly_billed_usd == pytest.approx(flying.max_cost_usd)
    assert settled[flying.key].attempts == 1
    assert (settled[earlier.key].status, settled[earlier.key].cached) == (OK, True)
    assert settled[earlier.key].cost_usd == 0.0
    assert (settled[unsent.key].status, settled[unsent.key].attempts) == (INTERRUPTED, 0)


class Clock:
    def __init__(self, on_sleep: Callable[[int], None] = lambda n: None) -> None:
        self.now, self.sleeps, self.on_sleep = 0.0, 0, on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        self.on_sleep(self.sleeps)


def test_the_controller_waits_for_the_calls_in_flight_and_no_longer(store_location: str) -> None:
    store = open_test_store(store_location)
    reservation = store.reserve("run", "k", 1.0, cap=10.0)
    assert reservation is not None

    def settle(sleeps: int) -> None:
        if sleeps == 5:
            store.release(reservation)

    clock = Clock(settle)
    assert wait_for_calls(store, "run", 10.0, poll_s=0.05, clock=clock, sleep=clock.sleep) == set()
    assert clock.sleeps == 5  # returned once it settled
    # Nothing in flight: still two polls, for a dispatch that had not seen the stop yet.
    clock = Clock()
    assert wait_for_calls(store, "run", 10.0, poll_s=0.05, clock=clock, sleep=clock.sleep) == set()
    assert clock.sleeps == 2
    # A call that never settles is given up on at the timeout, and named.
    store.reserve("run", "stuck", 1.0, cap=10.0)
    clock = Clock()
    left = wait_for_calls(store, "run", 1.0, poll_s=0.05, clock=clock, sleep=clock.sleep)
    assert left == {"stuck"}
    assert clock.now == pytest.approx(1.0)


def test_a_stop_is_kept_per_run(store_location: str) -> None:
    store = open_test_store(store_location)
    assert not store.stop_requested("run")
    store.request_stop("run")
    store.request_stop("run")  # a second Ctrl-C changes nothing
    assert store.stop_requested("run") and not store.stop_requested("other")
    assert open_test_store(store_location).stop_requested("run")  # every process sees it
