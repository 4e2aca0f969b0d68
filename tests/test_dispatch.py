"""The dispatcher and its store, driven directly (no pytest plugin in the way): the tests
of what the store guarantees run on both backends (``store_location``), those of SQLite's
file (WAL, opening at once, its statements) on SQLite alone."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import multiprocessing
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_evalmine.adapters.base import AdapterError, Request, Response, Usage, cache_key
from pytest_evalmine.adapters.fake import FakeAdapter
from pytest_evalmine.adapters.registry import AdapterRegistry
from pytest_evalmine.run.dispatch import BUDGET, ERROR, OK, Dispatcher
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.store import Store
from pytest_evalmine.run.store.budget import amounts_that_fit
from tests.conftest import open_test_store
from tests.dispatchers import store_at


@dataclass
class Probe:
    """An adapter that records concurrency and can fail on demand."""

    name: str = "fake"
    version: str = "1"
    latency_s: float = 0.01
    failures: list[AdapterError] = field(default_factory=list)
    crash: bool = False
    calls: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def schema_mode(self, request: Request) -> str | None:
        return None

    def key_extra(self, request: Request) -> dict[str, str]:
        # A stand-in for the fake adapter with no code of its own to fingerprint: an empty
        # extra keeps the fake's cache key, and says so (no EvalmineWarning in the test run).
        return {}

    async def complete(self, request: Request) -> Response:
        with self.lock:
            self.calls.append(request.prompt)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency_s)
            if self.crash:
                raise ZeroDivisionError("adapter bug")
            if self.failures:
                raise self.failures.pop(0)
            tokens = len(request.prompt.encode()) // 2
            return Response(
                text=f"answer to {request.prompt}",
                usage=Usage(input_tokens=tokens, output_tokens=request.max_tokens // 2),
                latency_s=self.latency_s,
            )
        finally:
            with self.lock:
                self.in_flight -= 1

    async def aclose(self) -> None:
        return None


def make_dispatcher(
    where: Path | str,
    adapter: object,
    *,
    cap: float = 10.0,
    run_token: str = "run",
    **kwargs: object,
) -> Dispatcher:
    """``where``: as ``store_at`` takes it."""
    registry = AdapterRegistry()
    for provider in ("fake", "other"):
        registry.register(provider, lambda: adapter)
    return Dispatcher(
        registry=registry,
        store=store_at(where),
        prices=load_prices(),
        run_token=run_token,
        cap_usd=cap,
        backoff_s=0.0,
        **kwargs,  # type: ignore[arg-type]
    )


def requests(count: int, model: str = "fake/a", max_tokens: int = 100) -> list[Request]:
    return [
        Request(model=model, prompt=f"question {i}", max_tokens=max_tokens) for i in range(count)
    ]


def test_concurrency_is_bounded_per_provider(tmp_path: Path) -> None:
    probe = Probe(latency_s=0.02)
    dispatcher = make_dispatcher(tmp_path, probe, concurrency=3)
    outcomes = dispatcher.run(dispatcher.plan(requests(20)))
    assert {o.status for o in outcomes.values()} == {OK}
    assert probe.max_in_flight == 3
    assert len(probe.calls) == 20


def test_duplicate_requests_are_sent_once(tmp_path: Path) -> None:
    probe = Probe()
    dispatcher = make_dispatcher(tmp_path, probe)
    planned = dispatcher.plan(requests(3) + requests(3))
    assert len(dispatcher.run(planned)) == 3
    assert len(probe.calls) == 3


def test_cap_is_never_overshot_under_concurrency(store_location: str) -> None:
    probe = Probe(latency_s=0.005)
    cap = 0.002
    dispatcher = make_dispatcher(store_location, probe, cap=cap, concurrency=32)
    outcomes = dispatcher.run(dispatcher.plan(requests(200, max_tokens=400)))
    statuses = [o.status for o in outcomes.values()]
    assert statuses.count(BUDGET) > 0 and statuses.count(OK) > 0
    spent = sum(o.cost_usd for o in outcomes.values())
    assert spent <= cap
    assert dispatcher.store.spent("run") == pytest.approx(spent)
    assert len(probe.calls) == statuses.count(OK)
    assert dispatcher.store.reserved_keys("run") == set()  # no reservation left open
    assert dispatcher.store.committed("run") == pytest.approx(spent)


def test_the_reservations_of_one_turn_share_a_transaction(store_location: str) -> None:
    probe = Probe(latency_s=0.01)
    dispatcher = make_dispatcher(store_location, probe, concurrency=8)
    sizes: list[int] = []
    reserve_each = dispatcher.store.reserve_each

    def counted(
        run_token: str, wanted: list[tuple[str, float]], cap: float, budget: str | None = None
    ) -> list[int | None]:
        sizes.append(len(wanted))
        return reserve_each(run_token, wanted, cap, budget)

    dispatcher.store.reserve_each = counted  # type: ignore[method-assign]
    outcomes = dispatcher.run(dispatcher.plan(requests(40)))
    assert {o.status for o in outcomes.values()} == {OK}
    assert sum(sizes) == 40  # each call reserved once
    assert sizes[0] == 8  # the first turn: every slot at once
    assert max(sizes) <= 8 and len(sizes) < 40


def test_reserving_in_one_transaction_grants_what_one_at_a_time_grants(
    store_location: str,
) -> None:
    store = open_test_store(store_location)
    store.reserve("earlier run", "x", 5.0, cap=5.0)  # another run's money is not ours
    wanted = [("a", 0.4), ("b", 0.5), ("c", 0.2), ("d", 0.3), ("e", 0.1)]
    together = store.reserve_each("run", wanted, cap=1.0)
    assert [reservation is not None for reservation in together] == [
        True, True, False, False, True,
    ]  # fmt: skip
    assert store.committed("run") == pytest.approx(1.0)
    one_by_one = [store.reserve("run 2", key, amount, cap=1.0) for key, amount in wanted]
    assert [r is not None for r in one_by_one] == [r is not None for r in together]


def test_the_cap_check_both_ledgers_share_counts_only_what_fitted() -> None:
    fits, added = amounts_that_fit(0.3, [0.4, 0.5, 0.2, 0.1], cap=1.0)
    assert fits == [True, False, True, True]  # 0.5 did not fit, the smaller ones after it did
    assert added == pytest.approx(0.7)
    # 0.1 + 0.2 is 0.30000000000000004: a rounding error does not make it miss a cap of 0.3.
    assert amounts_that_fit(0.0, [0.1, 0.2], cap=0.3)[0] == [True, True]
    assert amounts_that_fit(1.0, [], cap=1.0) == ([], 0.0)


def test_retryable_errors_are_retried_and_others_are_not(store_location: str) -> None:
    probe = Probe(
        failures=[AdapterError("rate_limit", "slow down", retryable=True, retry_after_s=0)]
    )
    dispatcher = make_dispatcher(store_location, probe)
    outcome = next(iter(dispatcher.run(dispatcher.plan(requests(1))).values()))
    assert outcome.status == OK and outcome.attempts == 2

    probe = Probe(failures=[AdapterError("auth", "bad key", retryable=False, status=401)])
    dispatcher = make_dispatcher(store_location, probe, run_token="run-b")
    outcome = next(iter(dispatcher.run(dispatcher.plan(requests(2)[1:])).values()))
    assert outcome.status == ERROR and outcome.attempts == 1
    assert outcome.error is not None and outcome.error.startswith("auth: bad key")
    assert not dispatcher.store.has(outcome.key)
    assert dispatcher.store.committed("run-b") == 0, "a failed call's reservation is released"


def test_an_adapter_bug_becomes_an_error_outcome(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, Probe(crash=True))
    outcome = next(iter(dispatcher.run(dispatcher.plan(requests(1))).values()))
    assert outcome.status == ERROR
    assert outcome.error_kind == "adapter_crash" and "ZeroDivisionError" in (outcome.error or "")


def test_two_processes_of_one_run_never_pay_twice(store_location: str) -> None:
    probe = Probe(latency_s=0.01)
    first = make_dispatcher(store_location, probe, owner="host:1")
    second = make_dispatcher(store_location, probe, owner="host:2")
    batch = requests(40)
    results: dict[str, dict] = {}

    def run(name: str, dispatcher: Dispatcher) -> None:
        results[name] = dispatcher.run(dispatcher.plan(batch))

    threads = [threading.Thread(target=run, args=(n, d)) for n, d in (("a", first), ("b", second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(probe.calls) == sorted(r.prompt for r in batch)
    for name in ("a", "b"):
        assert {o.status for o in results[name].values()} == {OK}
    paid = {k for k, o in results["a"].items() if o.cost_usd} | {
        k for k, o in results["b"].items() if o.cost_usd
    }
    assert len(paid) == 40
    total = sum(o.cost_usd for o in results["a"].values())
    assert total == pytest.approx(sum(o.cost_usd for o in results["b"].values()))


def test_a_run_waited_for_is_named_with_what_it_committed_whatever_its_budget(
    store_location: str,
) -> None:
    """``Dispatcher.other_runs``: the run whose calls ours waited for, and what that run
    committed. Its rows count under its budget (here a shared one, not its token), so the
    amount is read by run (``committed_by_run``), not by budget (``committed``: 0 here)."""
    probe = Probe(latency_s=0.3)
    first = make_dispatcher(store_location, probe, run_token="first", budget_token="nightly")
    second = make_dispatcher(store_location, probe, run_token="second", owner="host:2")
    batch = requests(5)
    results: dict[str, dict] = {}
    paying = threading.Thread(target=lambda: results.update(first=first.run(first.plan(batch))))
    paying.start()
    try:
        # Its wave is claimed in one transaction before the first call goes out.
        deadline = time.monotonic() + 60
        while not probe.calls and time.monotonic() < deadline:
            time.sleep(0.005)
        results["second"] = second.run(second.plan(batch))
    finally:
        paying.join()
    assert len(probe.calls) == 5  # the second run waited and paid nothing
    assert {o.status for o in results["second"].values()} == {OK}
    assert all(o.cost_usd == 0 for o in results["second"].values())
    paid = sum(o.cost_usd for o in results["first"].values())
    assert paid > 0
    assert second.other_runs == {"first": pytest.approx(paid)}
    assert first.store.committed("nightly") == pytest.approx(paid)
    assert first.store.committed("first") == 0.0  # by budget: the token names none
    assert first.store.committed_by_run("first") == pytest.approx(paid)
    assert first.store.committed_by_run("second") == 0.0


def _open_and_count(path: str, barrier: threading.Barrier) -> str | None:
    barrier.wait()
    try:
        Store(path).connection.execute("SELECT count(*) FROM answers").fetchone()
    except sqlite3.Error as error:
        return repr(error)
    return None


def test_processes_opening_a_fresh_cache_at_once_all_get_it(tmp_path: Path) -> None:
    # SQLite alone: its file's switch to WAL (a PostgreSQL store is created in one
    # transaction, and two processes creating it are in test_postgresql_store.py).
    # Switching a fresh file to WAL while others do the same returns "database is locked" at
    # once, past SQLite's busy handler (xdist workers starting together hit it in CI).
    context = multiprocessing.get_context("spawn")
    errors: list[str] = []
    with context.Manager() as manager, context.Pool(8) as pool:
        for attempt in range(12):
            barrier = manager.Barrier(8)
            path = str(tmp_path / f"cache{attempt}.sqlite")
            errors += [e for e in pool.starmap(_open_and_count, [(path, barrier)] * 8) if e]
    assert errors == []


def test_cache_key_is_the_documented_hash(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    request = Request(model="fake/a", prompt="hi", system="be brief", max_tokens=10, stop=("x",))
    documented = {
        "provider": "fake",
        "adapter_version": "1",
        "model": "fake/a",
        "system": "be brief",
        "prompt": "hi",
        "params": {"max_tokens": 10, "temperature": None, "top_p": None, "stop": ["x"]},
        "schema": None,
        "schema_mode": None,
        "repeat": 0,
    }
    canonical = json.dumps(documented, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert cache_key(adapter, request) == hashlib.sha256(canonical.encode()).hexdigest()


@pytest.mark.parametrize(
    "change",
    [
        {"model": "fake/b"},
        {"prompt": "hi!"},
        {"system": "be long"},
        {"max_tokens": 11},
        {"temperature": 0.0},
        {"top_p": 0.5},
        {"stop": ("y",)},
        {"schema": {"type": "object"}},
        {"repeat": 1},
    ],
)
def test_cache_key_changes_with_everything_that_changes_an_answer(change: dict) -> None:
    base = dict(model="fake/a", prompt="hi", system="be brief", max_tokens=10)
    adapter = FakeAdapter()
    assert cache_key(adapter, Request(**base)) != cache_key(adapter, Request(**{**base, **change}))


def test_cache_key_ignores_the_timeout() -> None:
    adapter = FakeAdapter()
    assert cache_key(adapter, Request("fake/a", "hi", timeout_s=5)) == cache_key(
        adapter, Request("fake/a", "hi", timeout_s=500)
    )


def _write_many(path: str, worker: int) -> None:
    store = Store(path)
    response = Response(text="x", usage=Usage(1, 1), latency_s=0.0)
    for i in range(150):
        store.record_paid_answer(
            key=f"{worker}-{i}",
            provider="fake",
            model="fake/a",
            response=response,
            cost_usd=0.0,
            reservation=None,
        )
    store.close()


def test_store_is_wal_and_safe_with_two_writing_processes(tmp_path: Path) -> None:
    # SQLite alone: its journal mode.
    path = str(tmp_path / "cache.sqlite")
    Store(path).connection.close()
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write_many, args=(path, w)) for w in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [p.exitcode for p in processes] == [0, 0]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 300


def test_a_retry_after_beyond_two_minutes_is_not_waited_for(tmp_path: Path) -> None:
    slow = AdapterError("rate_limit", "daily quota", retryable=True, retry_after_s=3600)
    probe = Probe(failures=[slow])
    dispatcher = make_dispatcher(tmp_path, probe)
    outcome = next(iter(dispatcher.run(dispatcher.plan(requests(1))).values()))
    assert outcome.status == ERROR and outcome.attempts == 1
    assert "3600 s" in (outcome.error or "")


def test_requests_per_minute_spaces_call_starts(tmp_path: Path) -> None:
    starts: list[float] = []

    @dataclass
    class Clocked(Probe):
        async def complete(self, request: Request) -> Response:
            starts.append(asyncio.get_running_loop().time())
            return await super().complete(request)

    dispatcher = make_dispatcher(tmp_path, Clocked(latency_s=0.0), rpm={"fake": 1200})
    dispatcher.run(dispatcher.plan(requests(5)))
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    # 1200 per minute = one start every 50 ms at the soonest (a lower bound only).
    assert len(gaps) == 4 and min(gaps) >= 0.05 - 1e-3


def test_a_request_repeated_in_a_batch_is_billed_once(store_location: str) -> None:
    probe = Probe()
    dispatcher = make_dispatcher(store_location, probe)
    first, second = dispatcher.run_each(dispatcher.plan(requests(1) + requests(1)))
    assert len(probe.calls) == 1
    assert first.cost_usd > 0 and not first.cached
    assert second.cost_usd == 0 and second.cached
    assert first.response == second.response
    assert dispatcher.store.spent("run") == pytest.approx(first.cost_usd)


def test_a_warm_batch_reads_its_cached_answers_in_a_query_per_500(tmp_path: Path) -> None:
    """A warm rerun's batch reads what it needs in bulk (issue 21 section 3): one query of
    the answers per 500 keys, and no claim, instead of a read per request; its outcomes are
    those the one-by-one reads gave.
    SQLite alone: it counts the statements SQLite traces (the PostgreSQL store reads a wave's
    keys in one ``= ANY`` query, with no bound on parameters to split at)."""
    probe = Probe(latency_s=0.0)
    cold = make_dispatcher(tmp_path, probe)
    planned = cold.plan(requests(1200))
    paid = cold.run_each(planned)
    assert len(probe.calls) == 1200
    warm = make_dispatcher(tmp_path, probe, run_token="rerun")
    statements: list[str] = []
    warm.store.connection.set_trace_callback(statements.append)
    outcomes = warm.run_each(warm.plan(requests(1200)))
    warm.store.connection.set_trace_callback(None)
    assert len(probe.calls) == 1200  # nothing sent
    answer_reads = [s for s in statements if "FROM answers" in s]
    assert len(answer_reads) == 3  # 500 + 500 + 200 keys
    assert not [s for s in statements if "claims" in s and "LEFT JOIN" not in s]
    assert all(o.status == OK and o.cached and o.cost_usd == 0 for o in outcomes)
    assert [o.response for o in outcomes] == [o.response for o in paid]
    assert [o.cost_if_uncached_usd for o in outcomes] == [o.cost_usd for o in paid]
    one_by_one = [warm._from_cache(p, warm.store.hit(p.key)) for p in planned]  # type: ignore[arg-type]
    assert outcomes == one_by_one


def test_the_estimate_in_parts_equals_the_estimate_at_once(store_location: str) -> None:
    """``estimate_requests`` plans and looks up a few requests at a time (a warm rerun's
    judge calls are never all in memory) and gives what ``estimate(plan(...))`` gives:
    repeats across parts counted once, cached ones free, the sums in the same order."""
    probe = Probe(latency_s=0.0)
    dispatcher = make_dispatcher(store_location, probe)
    dispatcher.run(dispatcher.plan(requests(7)))  # seven of them cached
    wanted = requests(20) + requests(5) + requests(30, max_tokens=77)
    at_once = dispatcher.estimate(dispatcher.plan(wanted))
    assert (at_once.calls, at_once.cached, at_once.uncached) == (50, 7, 43)
    for part in (1, 3, 4000):
        assert dispatcher.estimate_requests(iter(wanted), part) == at_once
