"""Issue 8 "Money": the cap cannot be disabled, two runs never pay one call twice, a call that
may have been billed counts, impossible usage is clamped, and the user hears about a tight
cap before the run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine import exitcodes
from pytest_evalmine.adapters.base import Request
from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.reports.render import money
from pytest_evalmine.run.dispatch import ERROR, Dispatcher
from pytest_evalmine.run.endpoints import parse_option
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.store import Store

from .conftest import (
    COUNTING_CONFTEST,
    SMALL_SUITE,
    RunStore,
    cached_keys,
    call_count,
    is_sqlite,
    latest_answers,
    latest_report,
    newest_run_dir,
)
from .dispatchers import endpoint_dispatcher
from .http_server import LoopbackServer, Received, Reply, refused_url, running_server
from .test_dispatch import Probe, make_dispatcher
from .test_endpoints_run import ENDPOINT_SUITE, MODELS, chat_reply


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("flag", "nan", "--evalmine-max-cost: 'nan' is not a finite number"),
        ("flag", "inf", "--evalmine-max-cost: 'inf' is not a finite number"),
        ("flag", "-1", "--evalmine-max-cost: -1 is below the minimum of 0"),
        ("flag", "abc", "--evalmine-max-cost: 'abc' is not a number"),
        ("env", "nan", "EVALMINE_MAX_COST: 'nan' is not a finite number"),
        ("env", "-5", "EVALMINE_MAX_COST: -5 is below the minimum of 0"),
        ("env", "abc", "EVALMINE_MAX_COST: 'abc' is not a number"),
        ("ini", "inf", "ini evalmine_max_cost: 'inf' is not a finite number"),
        ("flag-concurrency", "0", "--evalmine-concurrency: 0 is below the minimum of 1"),
        ("flag-concurrency", "fixed:0", "--evalmine-concurrency: 0 is below the minimum of 1"),
        ("flag-concurrency", "fixed:x", "*'fixed:x' is not N or fixed:N (a whole number)"),
        ("flag-concurrency", "adaptive", "*'adaptive' is not N or fixed:N (a whole number)"),
        ("flag-retries", "1.5", "--evalmine-retries: '1.5' is not a whole number"),
        ("flag-fake-latency", "nan", "--evalmine-fake-latency: 'nan' is not a finite number"),
        ("flag-endpoint", "x=http://127.0.0.1:9,input=nan", "*input: 'nan' is not a finite*"),
    ],
)
def test_every_number_is_checked_once_at_start_up(
    pytester: pytest.Pytester,
    small_suite: Path,
    counting: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    value: str,
    message: str,
) -> None:
    args = []
    if where == "flag":
        args.append(f"--evalmine-max-cost={value}")
    elif where == "env":
        monkeypatch.setenv("EVALMINE_MAX_COST", value)
    elif where == "ini":
        pytester.makeini(f"[pytest]\nevalmine_max_cost = {value}\n")
    else:
        args.append(f"--evalmine-{where.removeprefix('flag-')}={value}")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert call_count(counting) == 0


def test_a_suite_limit_that_is_not_finite_is_refused(tmp_path: Path) -> None:
    from pytest_evalmine.options import cap_from

    with pytest.raises(ValueError, match="is not a finite number"):
        cap_from(None, [float("nan")])


@pytest.mark.parametrize("cap", [float("nan"), float("inf"), -1.0])
def test_the_dispatcher_refuses_a_cap_that_cannot_stop_it(tmp_path: Path, cap: float) -> None:
    with pytest.raises(EvalmineError, match="cost cap"):
        make_dispatcher(tmp_path, Probe(), cap=cap)


# --- item 2: one call per request across every process on the cache ------------------------

CHAT = json.loads(chat_reply('{"category": "bug"}').body)
# Writes a mark file just before this process dispatches (it overrides the plugin's fixture
# and requests the original), so the test knows when the second run has reached its calls.
MARK_CONFTEST = """
import os
import pytest

@pytest.fixture(scope="session")
def evalmine_dispatcher(evalmine_dispatcher):
    open(os.environ["DISPATCH_MARK"], "w").close()
    return evalmine_dispatcher
"""


class HeldServer:
    """A compatible server that holds every completion until released, and counts the
    completions it sent per request body."""

    def __init__(self, server: LoopbackServer) -> None:
        self.server = server
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.bodies: Counter[bytes] = Counter()
        server.respond = self.respond

    def respond(self, received: Received) -> Reply:
        if received.method == "GET":
            return Reply.json(200, MODELS)
        with self.lock:
            self.bodies[received.raw] += 1
        self.release.wait(60)
        return Reply.json(200, CHAT)

    def posts(self) -> int:
        with self.lock:
            return sum(self.bodies.values())


def _run(pytester: pytest.Pytester, url: str, mark: str, store: RunStore) -> subprocess.Popen[str]:
    env = {**os.environ, "DISPATCH_MARK": str(pytester.path / mark)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            # All six in flight at once (the test holds them): a fixed width, not adapted.
            f"--evalmine-endpoint=local={url}/v1,input=1,output=2,concurrency=fixed:8",
            *store.options,
        ],
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_until(condition: Callable[[], bool], seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_two_runs_on_one_cache_pay_each_call_once(
    pytester: pytest.Pytester, run_store: RunStore
) -> None:
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    pytester.makeconftest(MARK_CONFTEST)
    with running_server() as server:
        held = HeldServer(server)
        first = _run(pytester, server.url, "first.mark", run_store)
        second = None
        try:
            # The first run has sent all six calls and they are in flight ...
            assert _wait_until(lambda: held.posts() == 6)
            second = _run(pytester, server.url, "second.mark", run_store)
            # ... when the second run reaches its own calls. Had it sent any, they would
            # arrive here; give it the time it would need.
            assert _wait_until(lambda: (pytester.path / "second.mark").exists())
            _wait_until(lambda: held.posts() > 6, seconds=2)
            held.release.set()
            outputs = [first.communicate(timeout=120)[0], second.communicate(timeout=120)[0]]
        finally:
            held.release.set()
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
    assert [first.returncode, second.returncode] == [0, 0], outputs
    assert len(held.bodies) == 6
    assert set(held.bodies.values()) == {1}, "every request body was paid for once"
    reports = [
        json.loads(path.read_text())
        for path in (pytester.path / "reports" / "small").glob("*/report.json")
    ]
    assert sorted(r["calls"]["made"] for r in reports) == [0, 6]
    assert len({r["run_id"] for r in reports}) == 2
    # The waiting run names the run it waited for and that run's spend.
    assert "another run on this cache" in outputs[1]


def test_runs_started_in_the_same_millisecond_get_distinct_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import datetime as dt

    from pytest_evalmine.run import runtoken

    instant = dt.datetime(2026, 12, 1, 0, 0, 0, 123000, tzinfo=dt.timezone.utc)

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> dt.datetime:  # type: ignore[override]
            return instant

    monkeypatch.setattr(runtoken.dt, "datetime", Frozen)
    tokens = {runtoken.new_run_token() for _ in range(50)}
    # 24 random bits: 50 starts in one millisecond collide with odds below 1 in 13,000.
    assert len(tokens) == 50
    assert all(t.startswith("20261201T000000.123Z_") for t in tokens)


def test_a_dead_owners_claim_is_taken_over_and_a_live_ones_is_not(tmp_path: Path) -> None:
    # SQLite alone: an owner is alive while its process is (pid and start time on this
    # machine). PostgreSQL owners hold leases: test_postgresql_store.py takes them over.
    from pytest_evalmine.run.store import CLAIMED, HELD, owner_alive, process_owner

    store = Store(tmp_path / "cache.sqlite")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = f"{socket.gethostname()}:{child.pid}:0"
        assert owner_alive(live) and owner_alive(process_owner())
        assert store.claim("other-run", "k", live) == CLAIMED
        assert store.claim("my-run", "k", process_owner()) == HELD
    finally:
        child.kill()
        child.wait()
    assert not owner_alive(live)
    assert store.claim("my-run", "k", process_owner()) == CLAIMED
    # The same pid given to a later process is not the owner: start times differ.
    me = process_owner()
    host, pid, start = me.rsplit(":", 2)
    assert not owner_alive(f"{host}:{pid}:{int(start) - 1}")


# --- item 3: a call sent and lost counts at its worst case ------------------------------------


def _endpoint_dispatcher(where: Path | str, url: str, **kwargs: Any) -> Dispatcher:
    return endpoint_dispatcher(where, f"local={url}/v1,input=1,output=2", **kwargs)


def _serve(server: LoopbackServer, reply: Reply) -> None:
    server.respond = lambda received: Reply.json(200, MODELS) if received.method == "GET" else reply


def _chat_body() -> bytes:
    return json.dumps(CHAT).encode()


@pytest.mark.parametrize(
    ("reply", "billed"),
    [
        (Reply(status=200, body=_chat_body(), content_length=len(_chat_body()) + 40), True),
        (Reply(drop=True), True),
        (Reply(status=200, body=_chat_body(), delay_s=5), True),  # the client times out
        (Reply.json(500, {"error": {"message": "overloaded"}}), False),
    ],
    ids=["truncated-200", "reset", "timeout", "http-500"],
)
def test_a_call_that_failed_after_it_was_sent_counts_at_its_worst_case(
    store_location: str, reply: Reply, billed: bool
) -> None:
    with running_server() as server:
        _serve(server, reply)
        dispatcher = _endpoint_dispatcher(store_location, server.url)
        [plan] = dispatcher.plan([Request("local/a", "hello", max_tokens=100, timeout_s=0.5)])
        [outcome] = dispatcher.run_each([plan])
    assert outcome.status == ERROR
    worst = plan.max_cost_usd if billed else 0.0
    assert outcome.possibly_billed_usd == pytest.approx(worst)
    assert dispatcher.store.committed("run") == pytest.approx(worst)
    assert dispatcher.store.possibly_billed("run") == pytest.approx(worst)
    assert dispatcher.store.spent("run") == 0


def test_a_refused_connection_was_never_sent_and_is_not_billed(store_location: str) -> None:
    with refused_url() as url:
        dispatcher = _endpoint_dispatcher(store_location, url)
        planned = dispatcher.plan([Request("local/a", "hello", max_tokens=100)])
        [outcome] = dispatcher.run_each(planned)
    assert outcome.status == ERROR and outcome.error_kind == "connection"
    assert outcome.possibly_billed_usd == 0
    assert dispatcher.store.committed("run") == 0


def test_each_lost_try_counts_and_a_retry_needs_room_under_the_cap(
    tmp_path: Path, store_location: str
) -> None:
    with running_server() as server:
        _serve(server, Reply(drop=True))
        probe = _endpoint_dispatcher(tmp_path / "probe", server.url)
        worst = probe.plan([Request("local/a", "hello", max_tokens=100)])[0].max_cost_usd
        # Room for two tries but not three: the third is never sent.
        dispatcher = _endpoint_dispatcher(
            store_location, server.url, retries=5, cap_usd=2.5 * worst
        )
        planned = dispatcher.plan([Request("local/a", "hello", max_tokens=100)])
        [outcome] = dispatcher.run_each(planned)
        posts = [r for r in server.requests if r.method == "POST"]
    assert len(posts) == 2
    assert outcome.status == ERROR and outcome.attempts == 2
    assert "not retried: the cost cap has no room" in (outcome.error or "")
    assert outcome.possibly_billed_usd == pytest.approx(2 * worst)
    assert dispatcher.store.committed("run") == pytest.approx(2 * worst)


def test_possibly_billed_calls_are_in_the_report(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    with running_server() as server:
        _serve(server, Reply(drop=True))
        result = pytester.runpytest(
            f"--evalmine-endpoint=local={server.url}/v1,input=1,output=2",
            "--evalmine-retries=0",
        )
    result.assert_outcomes(errors=6)
    report = latest_report(pytester.path)
    assert report["cost"]["possibly_billed_calls"] == 6
    assert report["cost"]["possibly_billed_tries"] == 6
    assert report["cost"]["possibly_billed_usd"] > 0
    assert report["cost"]["spent_usd"] == 0
    markdown = (newest_run_dir(pytester.path) / "report.md").read_text()
    assert "over 6 tries that were sent and failed" in markdown
    assert "possibly billed" in " ".join(result.stdout.str().split())


def test_possibly_billed_counts_every_try_sent_and_each_call_that_reached_a_server(
    pytester: pytest.Pytester,
) -> None:
    # Issue 28: "possibly billed over 8 call(s)" when 10 tries were sent; "calls: 12 made"
    # when 9 never connected. Here every try is sent and dropped, and retried once.
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    with running_server() as server:
        _serve(server, Reply(drop=True))
        result = pytester.runpytest(
            f"--evalmine-endpoint=local={server.url}/v1,input=1,output=2",
            "--evalmine-retries=1",
        )
    result.assert_outcomes(errors=6)
    report = latest_report(pytester.path)
    assert report["cost"]["possibly_billed_calls"] == 6
    assert report["cost"]["possibly_billed_tries"] == 12
    assert report["calls"]["made"] == 6
    markdown = (newest_run_dir(pytester.path) / "report.md").read_text()
    assert "over 12 tries that were sent and failed" in markdown
    assert "6 call(s)" in markdown


def test_a_call_that_never_connected_was_not_made(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    with refused_url() as url:
        result = pytester.runpytest(
            f"--evalmine-endpoint=local={url}/v1,input=1,output=2",
            "--evalmine-retries=2",
        )
    result.assert_outcomes(errors=6)
    report = latest_report(pytester.path)
    assert report["calls"]["made"] == 0
    assert report["cost"]["possibly_billed_calls"] == 0
    assert report["cost"]["possibly_billed_usd"] == 0
    result.stdout.fnmatch_lines(["*calls: 0 made, 0 cached*"])
    host_port = url.removeprefix("http://")
    result.stdout.fnmatch_lines([f"*connection refused by {host_port}*"])
    assert "ssl:default" not in result.stdout.str()


# --- item 4: impossible usage is clamped, flagged and reported ---------------------------------


def _chat_with_usage(prompt_tokens: int, completion_tokens: int, cached: int = 0) -> Reply:
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return Reply.json(200, {**CHAT, "usage": usage})


# "hello" is 5 bytes: the reservation's input bound is 5 + 64 tokens.
@pytest.mark.parametrize(
    ("usage", "expected", "anomaly"),
    [
        # A negative count says nothing: the call is priced at its reservation.
        ((20, -7, 0), (69, 100, 0), "output_tokens -7 < 0; priced at the reservation"),
        ((20, 10_000_000, 0), (20, 100, 0), "output_tokens 10000000 > max_tokens 100"),
        ((20, 6, -500_000), (69, 100, 0), "cached_input_tokens -500000 < 0; priced at the"),
        ((20, 101, 0), (20, 100, 0), "output_tokens 101 > max_tokens 100"),
        ((200, 6, 0), (69, 6, 0), "200 input tokens > the bound of 69"),
        ((20, 100, 0), (20, 100, 0), None),  # all of max_tokens is believed
    ],
)
def test_impossible_usage_is_clamped_and_flagged(
    tmp_path: Path,
    usage: tuple[int, int, int],
    expected: tuple[int, int, int],
    anomaly: str | None,
) -> None:
    with running_server() as server:
        _serve(server, _chat_with_usage(*usage))
        dispatcher = _endpoint_dispatcher(tmp_path, server.url)
        [plan] = dispatcher.plan([Request("local/a", "hello", max_tokens=100)])
        [outcome] = dispatcher.run_each([plan])
    assert outcome.response is not None
    counted = outcome.response.usage
    assert (counted.input_tokens, counted.output_tokens, counted.cached_input_tokens) == expected
    if anomaly is None:
        assert counted.anomaly is None
    else:
        assert counted.anomaly is not None and counted.anomaly.startswith(f"clamped: {anomaly}")
        assert 0 <= outcome.cost_usd <= plan.max_cost_usd
    assert dispatcher.store.spent("run") == pytest.approx(outcome.cost_usd)
    # The cached answer keeps the clamped counts and the flag.
    cached = dispatcher.store.hit(plan.key)
    assert cached is not None and cached.answer.response.usage == counted


def test_impossible_usage_is_reported(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    with running_server() as server:
        _serve(server, _chat_with_usage(20, -5))
        result = pytester.runpytest(f"--evalmine-endpoint=local={server.url}/v1,input=1,output=2")
    result.assert_outcomes(passed=6)
    report = latest_report(pytester.path)
    assert len(report["usage_anomalies"]) == 6
    assert report["usage_anomalies"][0]["anomaly"] == (
        "clamped: output_tokens -5 < 0; priced at the reservation (the worst case)"
    )
    assert report["cost"]["spent_usd"] == pytest.approx(report["cost"]["worst_case_usd"])
    markdown = (newest_run_dir(pytester.path) / "report.md").read_text()
    assert "impossible usage from the provider, clamped and costed at the clamp: 6" in markdown


# --- item 5: a cap that may not cover the worst case is announced before the run ---------------


def test_a_cap_below_the_worst_case_is_announced_before_the_run(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    pytester.runpytest("--evalmine-fake").assert_outcomes(passed=6)
    first = latest_report(pytester.path)["cost"]
    assert (
        "warning: the cap may not cover" not in pytester.runpytest("--evalmine-fake").stdout.str()
    )
    estimate, worst = first["estimate_usd"], first["worst_case_usd"]
    assert 0 < estimate < worst
    cap = (estimate + worst) / 2
    result = pytester.runpytest(
        "--evalmine-fake", "--evalmine-no-cache", f"--evalmine-max-cost={cap}"
    )
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        [
            "evalmine: warning: the cap may not cover the worst case: 6 uncached call(s) are "
            f"estimated at {money(estimate)} but may cost up to {money(worst)} *",
            "evalmine: 6/6 answers*",
        ]
    )
    text = result.stdout.str()
    assert f"A cap of {money(worst)} covers the worst case." in text.replace("\n", " ")
    result = pytester.runpytest(
        "--evalmine-fake", "--evalmine-no-cache", f"--evalmine-max-cost={worst}"
    )
    assert "warning: the cap may not cover" not in result.stdout.str()


# --- item 10: Ctrl-C -------------------------------------------------------------------------


def _interruptible(pytester: pytest.Pytester, latency: float, *options: str) -> Any:
    log = open(pytester.path / "run.log", "w")  # noqa: SIM115 (closed by the caller)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--evalmine-fake",
            "--evalmine-concurrency=2",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            *options,
        ],
        cwd=pytester.path,
        env={**os.environ, "TEST_FAKE_LATENCY": str(latency)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return process, log


@contextmanager
def _interruptible_run(pytester: pytest.Pytester, latency: float) -> Iterator[Any]:
    """A run whose fake calls take ``latency`` s, two at a time, output to run.log; killed
    if it outlives the test."""
    process, log = _interruptible(pytester, latency)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()


def test_first_ctrl_c_lets_calls_in_flight_land_and_writes_a_partial_report(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    with _interruptible_run(pytester, 1.0) as process:
        assert _wait_until(lambda: call_count(counting) >= 2)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == pytest.ExitCode.INTERRUPTED
    output = (pytester.path / "run.log").read_text()
    assert "evalmine: interrupted: nothing new is sent; 2 call(s) in flight" in output
    assert call_count(counting) == 2, "nothing is sent after the Ctrl-C"
    # The two calls in flight landed in the cache within the grace period ...
    assert len(cached_keys(pytester.path)) == 2
    report = latest_report(pytester.path)
    assert report["partial"] is True
    assert report["partial_reason"] == "interrupted (Ctrl-C), not judged"
    assert report["calls"]["made"] == 2 and report["cost"]["spent_usd"] > 0
    assert report["outcomes"]["not_run_interrupted"] == 4
    assert not (pytester.path / "reports" / "small" / "latest.json").exists()
    # ... so the rerun pays only for the four never sent.
    rerun = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    rerun.assert_outcomes(passed=6)
    assert call_count(counting) == 6
    assert latest_report(pytester.path)["calls"]["cached"] == 2


def test_a_second_ctrl_c_exits_at_once(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    # Calls that would take an hour: only the second Ctrl-C can end this run soon.
    with _interruptible_run(pytester, 3600.0) as process:
        assert _wait_until(lambda: call_count(counting) >= 2)
        process.send_signal(signal.SIGINT)
        assert _wait_until(
            lambda: "evalmine: interrupted" in (pytester.path / "run.log").read_text()
        )
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == pytest.ExitCode.INTERRUPTED
    assert call_count(counting) == 2


HANGING_CHECK_SUITE = """\
version: 1
suite: hanging
models: [fake/alpha]
tasks:
  - id: reply
    kind: rewrite
    prompt: "Reply to {{ n }}"
    judge: false
    checks: [hangs]
    cases: [{id: c1, vars: {n: 1}}, {id: c2, vars: {n: 2}}, {id: c3, vars: {n: 3}},
            {id: c4, vars: {n: 4}}, {id: c5, vars: {n: 5}}]
"""

HANGING_CHECK = """

import time
from pathlib import Path


def hangs(answer):
    # Hangs the first time only: session finish checks the answers of items never run.
    if Path("check-started").exists():
        return True
    Path("check-started").touch()
    time.sleep(3600)
    return True


def pytest_evalmine_checks():
    return [hangs]
"""


def test_ctrl_c_stops_a_hanging_check_while_later_answers_still_stream(
    pytester: pytest.Pytester, counting: Path
) -> None:
    # The first item's check hangs while later answers are on their way (2 s each, one at a
    # time): Python's own Ctrl-C behaviour must reach it although a dispatch is running. The
    # item ran once its answer and one more were in, and the third call was sent.
    pytester.makeconftest(COUNTING_CONFTEST + HANGING_CHECK)
    pytester.makefile(".eval.yaml", hanging=HANGING_CHECK_SUITE)
    log = open(pytester.path / "run.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--evalmine-concurrency=1", "-p", "no:cacheprovider",
         "-p", "no:benchmark"],
        cwd=pytester.path, env={**os.environ, "TEST_FAKE_LATENCY": "2"}, stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert _wait_until(lambda: (pytester.path / "check-started").exists())
        assert call_count(counting) == 3
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == pytest.ExitCode.INTERRUPTED
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    assert call_count(counting) == 3, "nothing is sent after the Ctrl-C"
    assert len(cached_keys(pytester.path)) == 3, "the call in flight landed in the cache"
    assert latest_report(pytester.path, "hanging")["partial"] is True


# --- item 11: -x counts every call the run made ------------------------------------------------


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_run_stopped_by_x_reports_every_call_it_made(
    pytester: pytest.Pytester, counting: Path, workers: list[str]
) -> None:
    # The fake honours no pattern: every triage answer fails its schema, -x stops at the first.
    never = SMALL_SUITE.replace(
        "category: {enum: [billing, bug, other]}", 'category: {type: string, pattern: "^x$"}'
    )
    pytester.makefile(".eval.yaml", small=never)
    result = pytester.runpytest_subprocess(
        "--evalmine-fake", "-x", "-p", "no:cacheprovider", *workers
    )
    # xdist ends a -x run as "interrupted" (exit 2), pytest itself with exit 1.
    assert result.ret == (pytest.ExitCode.INTERRUPTED if workers else pytest.ExitCode.TESTS_FAILED)
    assert call_count(counting) == 6
    report = latest_report(pytester.path)
    assert report["calls"]["made"] == 6
    answers = latest_answers(pytester.path)
    assert len(answers) == 6 and all(a["cost_usd"] > 0 for a in answers)
    assert report["cost"]["answers_spent_usd"] == pytest.approx(sum(a["cost_usd"] for a in answers))
    assert report["partial"] is True
    assert report["partial_reason"] == "stopped early (-x or --maxfail), not judged"
    assert report["items_not_run"] >= 1
    assert not (pytester.path / "reports" / "small" / "latest.json").exists()


# --- item 12: replay misses and fragments ------------------------------------------------------

JUDGE = "--evalmine-judge=fake/judge"


def test_a_judge_replay_miss_is_its_own_exit_code_not_the_cap(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    pytester.runpytest("--evalmine-fake").assert_outcomes(passed=6)  # answers only, no judge
    first = json.loads((pytester.path / "reports" / "small" / "latest.json").read_text())
    result = pytester.runpytest("--evalmine-fake", "--evalmine-record=none", JUDGE)
    assert result.ret == exitcodes.REPLAY_MISSED
    text = " ".join(result.stdout.str().split())
    assert "cost cap" not in text
    assert "REPLAY MISS: 6 answer(s) or verdict(s) were not in the cache" in text
    report = latest_report(pytester.path)
    assert report["replay_misses"] == 6 and report["partial"] is False
    assert report["headline"]["exclusions"] == {"fake/beta": {"judge_replay_miss": 3}}
    # A fragment: the next run still compares with the complete one.
    pointer = json.loads((pytester.path / "reports" / "small" / "latest.json").read_text())
    assert pointer == first


def test_a_replay_that_misses_everything_exits_16_and_leaves_latest(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    result = pytester.runpytest("--evalmine-fake", "--evalmine-record=none")
    assert result.ret == exitcodes.REPLAY_MISSED
    assert latest_report(pytester.path)["outcomes"] == {"replay_miss": 6}
    assert not (pytester.path / "reports" / "small" / "latest.json").exists()


@pytest.mark.parametrize(
    "selection",
    [
        ["-k", "alpha"],
        ["-m", "evalmine(task='triage')"],
        ["--deselect", "small.eval.yaml::polite::refund-no[fake/beta]"],
        ["small.eval.yaml::triage"],
    ],
    ids=["-k", "-m", "--deselect", "node-id"],
)
def test_a_subset_run_leaves_latest_json_unless_asked(
    pytester: pytest.Pytester, small_suite: Path, selection: list[str]
) -> None:
    pytester.runpytest("--evalmine-fake").assert_outcomes(passed=6)
    latest = pytester.path / "reports" / "small" / "latest.json"
    complete = json.loads(latest.read_text())
    pytester.runpytest("--evalmine-fake", *selection)
    assert json.loads(latest.read_text()) == complete
    assert latest_report(pytester.path)["latest_note"].startswith(
        "latest.json not moved: this run selected a subset"
    )
    pytester.runpytest("--evalmine-fake", "--evalmine-update-latest", *selection)
    assert json.loads(latest.read_text())["run_id"] == latest_report(pytester.path)["run_id"]


def test_a_run_that_was_not_judged_does_not_claim_the_judge_changed() -> None:
    from pytest_evalmine.reports.compare import compare

    judged = {"suite": {"hash": "h"}, "headline": {"judge": {"model": "fake/judge"}}}
    stopped = {"suite": {"hash": "h"}, "headline": None}
    assert compare(stopped, judged)["judge_changed"] is False
    assert compare(judged, stopped)["judge_changed"] is True


# --- issue 10, items 1 and 3: a running total, and writes batched per wave ----------------------


def test_the_running_total_is_the_ledgers_sum_and_reserve_never_sums(
    store_location: str,
) -> None:
    from pytest_evalmine.adapters.base import AdapterError

    failures = [
        AdapterError("connection", "reset", retryable=False),  # sent: possibly billed
        AdapterError("bad_request", "no", retryable=False, status=400),  # released
    ]
    probe = Probe(latency_s=0.0, failures=failures)
    dispatcher = make_dispatcher(store_location, probe, cap=0.01, concurrency=4)
    dispatcher.run(dispatcher.plan(requests_for(60)))
    store = dispatcher.store
    assert store.committed("run") == pytest.approx(store.ledger_total("run"), abs=1e-12)
    assert store.committed("run") <= 0.01 + 1e-12
    assert store.possibly_billed("run") > 0 and store.spent("run") > 0
    if not is_sqlite(store_location):
        return  # the statements below are SQLite's trace (PostgreSQL: postgresql/ledger.py)
    statements: list[str] = []
    store.connection.set_trace_callback(statements.append)
    store.reserve("run", "one more", 0.0, cap=1.0)
    assert not [s for s in statements if "SUM(" in s], "a reservation reads one row"


def requests_for(count: int) -> list[Request]:
    return [Request(model="fake/a", prompt=f"question {i}", max_tokens=100) for i in range(count)]


def test_a_wave_of_answers_costs_about_one_write_transaction_per_call(tmp_path: Path) -> None:
    # SQLite alone: it counts the transactions SQLite traces.
    dispatcher = make_dispatcher(tmp_path, Probe(latency_s=0.0), concurrency=32)
    planned = dispatcher.plan(requests_for(200))
    statements: list[str] = []
    dispatcher.store.connection.set_trace_callback(statements.append)
    outcomes = dispatcher.run(planned)
    assert {o.status for o in outcomes.values()} == {"ok"}
    writes = sum(1 for s in statements if s.startswith("BEGIN"))
    # Before: claim, reserve, answer and claim status: 4 per call (800). Now the reservations
    # (200), the wave's claims (1) and the answers' commits, shared by those that arrive
    # together.
    assert writes < 1.5 * 200
    assert len(cached_keys_of(tmp_path)) == 200


def cached_keys_of(root: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(root / "cache.sqlite") as db:
        return {row[0] for row in db.execute("SELECT key FROM answers")}


def test_killing_one_xdist_worker_mid_flight_loses_no_answer_and_pays_at_most_once_more(
    pytester: pytest.Pytester, small_suite: Path, counting: Path, run_store: RunStore
) -> None:
    # A short lease: on PostgreSQL the survivor takes the dead worker's claims over once its
    # lease lapses (SQLite: at once, its pid is gone).
    env = {**os.environ, "TEST_FAKE_LATENCY": "0.5", "EVALMINE_LEASE_S": "2"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--evalmine-fake",
        "--evalmine-concurrency=2",
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
        *run_store.options,
    ]
    process = subprocess.Popen(
        command, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        assert _wait_until(lambda: call_count(counting) >= 1)
        workers = _children(process.pid)
        assert workers
        os.kill(workers[0], signal.SIGKILL)
        process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # Every answer is in the cache: the survivor took over the dead worker's claims.
    assert len(run_store.answer_keys(pytester.path)) == 6
    # At most the calls the killed worker had in flight were paid a second time.
    assert call_count(counting) <= 6 + 1
    before = call_count(counting)
    rerun = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider", *run_store.options)
    rerun.assert_outcomes(passed=6)
    assert call_count(counting) == before


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


# --- issue 20 section 3: every call in the spend and the counts; the endpoint's price; the
# cache keyed by the server -----------------------------------------------------------------

WEAK_JUDGE_USAGE = {"prompt_tokens": 50, "completion_tokens": 8}


class WeakJudge:
    """A compatible judge server whose verdicts do not parse: plain text every time, or
    only the first time a prompt is asked (its retry then answers in JSON)."""

    def __init__(self, server: LoopbackServer, *, learns: bool) -> None:
        self.learns = learns
        self.asked: Counter[str] = Counter()
        self.lock = threading.Lock()
        server.respond = self.respond

    def respond(self, received: Received) -> Reply:
        if received.method == "GET":
            return Reply.json(200, MODELS)
        prompt = received.body["messages"][-1]["content"]
        with self.lock:
            self.asked[prompt] += 1
            again = self.asked[prompt] > 1
        verdict = '{"winner": "2", "reason": "clearer"}' if self.learns and again else "2 wins"
        chat = json.loads(chat_reply(verdict).body)
        return Reply.json(200, {**chat, "usage": WEAK_JUDGE_USAGE})

    def calls(self) -> int:
        with self.lock:
            return sum(self.asked.values())


def ledger_of(root: Path, report: dict[str, Any]) -> tuple[int, float]:
    """(rows settled as spent, their sum) of the report's run, read from the cache database."""
    import sqlite3

    token = report["run_id"].rsplit("-", 2)[0]
    with sqlite3.connect(root / ".evalmine" / "cache.sqlite") as db:
        rows, spent = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(spent_usd), 0) FROM ledger WHERE run_token = ? "
            "AND state = 'spent'",
            (token,),
        ).fetchone()
    return int(rows), float(spent)


@pytest.mark.parametrize("learns", [False, True], ids=["never-parses", "retry-parses"])
def test_a_judge_asked_again_is_in_the_spend_and_the_counts(
    pytester: pytest.Pytester, learns: bool
) -> None:
    from .test_judge_run import JUDGED_SUITE

    pytester.makefile(".eval.yaml", small=JUDGED_SUITE)
    with running_server() as server:
        judge = WeakJudge(server, learns=learns)
        options = (f"--evalmine-endpoint=weak={server.url}/v1,input=1,output=2", JUDGE_WEAK)
        pytester.runpytest(*options).assert_outcomes(passed=6)
        report = latest_report(pytester.path)
        rerun = pytester.runpytest(*options)
    # Three pairs, two passes each, every pass asked twice.
    assert judge.calls() == 12
    headline = report["headline"]
    assert headline["judge_calls"] == {"made": 12, "cached": 0}
    per_call = (50 * 1 + 8 * 2) / 1e6
    assert report["cost"]["judge_spent_usd"] == pytest.approx(12 * per_call, rel=1e-9)
    rows, spent = ledger_of(pytester.path, report)
    assert rows == report["calls"]["made"] + headline["judge_calls"]["made"] == 6 + 12
    assert report["cost"]["spent_usd"] == pytest.approx(spent, rel=1e-9)
    exclusions = headline["exclusions"].get("fake/beta", {})
    assert exclusions == ({} if learns else {"judge_unparseable": 3})
    from pytest_evalmine.judging.pairs import Pair

    pairs = [json.loads(line) for line in (newest_run_dir(pytester.path) / "pairs.jsonl").open()]
    assert sum(len(pair["asked_again"]) for pair in pairs) == 6
    # A stored run rendered again (evalmine report) reads them back.
    assert [Pair.from_dict(pair).to_dict() for pair in pairs] == pairs
    # The rerun pays nothing and finds all twelve verdicts in the cache.
    rerun.assert_outcomes(passed=6)
    again = latest_report(pytester.path)
    assert again["headline"]["judge_calls"] == {"made": 0, "cached": 12}
    assert again["cost"]["spent_usd"] == 0 and judge.calls() == 12


JUDGE_WEAK = "--evalmine-judge=weak/judge"


def test_a_recording_holds_the_verdicts_asked_again(pytester: pytest.Pytester) -> None:
    """Replayed from its recording alone, a run whose judge was asked again finds both of
    each pass's verdicts: before, the unusable first ones were left out of the recording and
    every pair was a replay miss."""
    import shutil

    from .test_judge_run import JUDGED_SUITE

    pytester.makefile(".eval.yaml", small=JUDGED_SUITE)
    with running_server() as server:
        judge = WeakJudge(server, learns=True)
        options = (
            f"--evalmine-endpoint=weak={server.url}/v1,input=1,output=2",
            JUDGE_WEAK,
            "--evalmine-recording=beside",
        )
        pytester.runpytest(*options).assert_outcomes(passed=6)
        first = latest_report(pytester.path)
        shutil.rmtree(pytester.path / ".evalmine")  # a fresh checkout: the recording only
        replay = pytester.runpytest(*options, "--evalmine-record=none")
    replay.assert_outcomes(passed=6)
    assert judge.calls() == 12
    report = latest_report(pytester.path)
    assert report["replay_misses"] == 0
    assert report["headline"]["judge_calls"] == {"made": 0, "cached": 12}
    assert report["headline"]["win_rates"] == first["headline"]["win_rates"]


@pytest.mark.parametrize(
    ("cost", "expected"),
    [("free", 0.0), ("input=1,output=2", 3 * (20 * 1 + 6 * 2) / 1e6)],
)
def test_an_endpoint_named_like_a_provider_is_priced_at_its_declared_cost(
    pytester: pytest.Pytester, cost: str, expected: float
) -> None:
    """A gateway named ``anthropic``: its models have exact rows in the price table, and the
    endpoint's declared cost wins over them."""
    model = "anthropic/claude-haiku-4-5"
    assert load_prices().lookup(model).model == model  # the exact row the endpoint beats
    pytester.makefile(
        ".eval.yaml",
        small=SMALL_SUITE.replace("models: [fake/alpha, fake/beta]", f"models: [{model}]"),
    )
    with running_server() as server:
        _answering(server, '{"category": "bug"}')
        result = pytester.runpytest(f"--evalmine-endpoint=anthropic={server.url}/v1,{cost}")
    result.assert_outcomes(passed=3)
    report = latest_report(pytester.path)
    assert report["cost"]["spent_usd"] == pytest.approx(expected, abs=1e-12)


def test_a_declared_row_wins_over_every_row_it_matches() -> None:
    row = parse_option("anthropic=http://127.0.0.1:9/v1,input=3,output=4").price_row()
    assert row is not None
    table = load_prices().with_rows((row,))
    assert table.lookup("anthropic/claude-haiku-4-5") == row
    assert table.lookup("anthropic/anything-new") == row
    # Other providers keep their rows.
    assert table.lookup("openai/gpt-5-mini").model == "openai/gpt-5-mini"


def _answering(server: LoopbackServer, text: str) -> None:
    server.respond = lambda received: (
        Reply.json(200, MODELS) if received.method == "GET" else chat_reply(text)
    )


def test_two_servers_under_one_endpoint_name_never_share_answers(
    pytester: pytest.Pytester,
) -> None:
    """Repointing an endpoint from one server to another (the same model listing, other
    sampling settings) is a cache miss, not the first server's answers replayed."""
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    with running_server() as first, running_server() as second:
        _answering(first, '{"category": "bug"}')
        _answering(second, '{"category": "other"}')
        pytester.runpytest(f"--evalmine-endpoint=local={first.url}/v1,free").assert_outcomes(
            passed=6
        )
        pytester.runpytest(f"--evalmine-endpoint=local={second.url}/v1,free").assert_outcomes(
            passed=6
        )
        posts = [len([r for r in s.requests if r.method == "POST"]) for s in (first, second)]
    assert posts == [6, 6]
    report = latest_report(pytester.path)
    assert report["calls"] == {"made": 6, "cached": 0}


def test_one_server_spelled_differently_shares_its_answers(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    with running_server() as server:
        _answering(server, '{"category": "bug"}')
        port = server.url.rsplit(":", 1)[1]
        for url in (f"http://localhost:{port}/v1", f"http://LocalHost:{port}/v1/"):
            pytester.runpytest(f"--evalmine-endpoint=local={url},free").assert_outcomes(passed=6)
        posts = len([r for r in server.requests if r.method == "POST"])
    assert posts == 6
    assert latest_report(pytester.path)["calls"] == {"made": 0, "cached": 6}


@pytest.mark.parametrize(
    ("one", "other", "shared"),
    [
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/", True),
        ("http://LOCALHOST:8080/v1", "http://localhost:8080/v1", True),
        ("http://gateway.example:80/v1", "http://gateway.example/v1", True),
        ("https://gateway.example:443/v1", "https://gateway.example/v1", True),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8081/v1", False),
        ("http://127.0.0.1:8080/v1", "https://127.0.0.1:8080/v1", False),
        ("http://gateway.example/v1", "http://gateway.example/V1", False),  # paths keep case
        ("http://gateway.example/a/v1", "http://gateway.example/b/v1", False),
    ],
)
def test_the_cache_key_holds_the_normalised_base_url(one: str, other: str, shared: bool) -> None:
    from pytest_evalmine.adapters.base import cache_key
    from pytest_evalmine.adapters.openai import OpenAIAdapter

    request = Request("cand2/served-model", "hello")
    keys = []
    for url in (one, other):
        adapter = OpenAIAdapter(name="cand2", base_url=url, api_key_env=None)
        adapter.restore_state({"served": [{"id": "served-model", "meta": None}]})
        keys.append(cache_key(adapter, request))
    assert (keys[0] == keys[1]) is shared


def test_openai_itself_keeps_its_cache_keys() -> None:
    """OpenAI's own keys do not change (no base URL in them): only endpoints' do."""
    from pytest_evalmine.adapters.openai import OpenAIAdapter

    assert OpenAIAdapter().key_extra(Request("openai/gpt-5-mini", "hello")) == {}
