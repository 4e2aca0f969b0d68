"""Adaptive widths that start where knowledge says and never distort latency (issue 28,
section 3): the limiter driven by scripted latencies (no clock), then real loopback servers
with K slots (tests/slot_server.py): a hosted provider's start, the width a run learnt read by
the next, rate-limit headers, declared slots, probing that stops, and the scorecard's latency
from answers sent within the capacity found. Counts and widths only; wall times belong to
benchmarks/bench_adaptive.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_evalmine.adapters.anthropic import AnthropicAdapter
from pytest_evalmine.adapters.base import Request
from pytest_evalmine.adapters.registry import AdapterRegistry
from pytest_evalmine.reports.render import scorecard_rows
from pytest_evalmine.reports.scorecard import score_models
from pytest_evalmine.run.concurrency import ConcurrencyLimiter
from pytest_evalmine.run.dispatch import OK, Dispatcher
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.run.store import Store

from .conftest import latest_answers, latest_report, open_test_store
from .dispatchers import endpoint_dispatcher
from .slot_server import SlotServer, running_slot_server
from .test_concurrency import ask, simulate
from .test_endpoints_run import ENDPOINT_SUITE


def rounds(limiter: ConcurrencyLimiter, *latencies: list[float]) -> None:
    """Each list: one round's answers, its calls all out at once at the limiter's width."""
    for answers in latencies:
        sent = [limiter.attempt() for _ in answers]
        for attempt, latency in zip(sent, answers, strict=True):
            limiter.answered(attempt, latency)
        for attempt in sent:
            limiter.returned(attempt)


# the limiter, scripted ------------------------------------------------------------------
def test_a_provider_known_to_declare_its_limits_starts_at_the_ceiling() -> None:
    limiter = ConcurrencyLimiter(ceiling=8, known=8)
    assert (limiter.limit, limiter.capacity) == (8, 8)
    rounds(limiter, [1.0], [1.0] * 8)  # the warm-up, then a flat round: nothing to probe
    assert (limiter.limit, limiter.lowest, limiter.backoffs) == (8, 8, 0)


def test_a_learnt_width_starts_there_and_probes_one_at_a_time() -> None:
    limiter = ConcurrencyLimiter(ceiling=8, known=3)
    assert limiter.limit == 3 and limiter.learnt
    rounds(limiter, [1.0], [1.0] * 3)
    assert limiter.limit == 4  # additive from what was learnt, no slow start


def test_probing_stops_once_latency_rises_with_the_width() -> None:
    """A one-slot server: the rounds at 2 took twice as long. The width goes back to 1 and
    stays there however flat the rounds at 1 are (the old AIMD probed 2 again after every
    round at 1: a back-off each time, and a round of answers that measured the queue)."""
    limiter = ConcurrencyLimiter(ceiling=8)
    rounds(limiter, [0.5], [0.2])  # the warm-up; flat at 1: slow start doubles
    assert limiter.limit == 2
    rounds(limiter, [0.2, 0.4])
    assert (limiter.limit, limiter.backoffs) == (2, 0)  # once may be chance
    rounds(limiter, [0.2, 0.4])
    assert (limiter.limit, limiter.cap, limiter.backoffs) == (1, 1, 1)
    rounds(limiter, *[[0.2]] * 10)
    assert (limiter.limit, limiter.highest, limiter.backoffs, limiter.capacity) == (1, 2, 1, 1)


def test_one_slot_too_many_is_confirmed_by_a_second_round_then_probing_stops() -> None:
    # Five calls on four slots: one of each round waits, the mean rises a fifth; the upper
    # median does not move.
    limiter = ConcurrencyLimiter(ceiling=16, known=4)
    rounds(limiter, [1.0], [1.0] * 4)
    assert limiter.limit == 5
    rounds(limiter, [1.0, 1.0, 1.0, 1.0, 2.0])
    assert (limiter.limit, limiter.backoffs) == (5, 0)  # once may be one long answer
    rounds(limiter, [1.0, 1.0, 1.0, 1.0, 2.0])
    assert (limiter.limit, limiter.cap, limiter.capacity, limiter.backoffs) == (4, 4, 4, 1)
    rounds(limiter, *[[1.0] * 4] * 5)
    assert (limiter.limit, limiter.highest) == (4, 5)


def test_one_long_answer_once_does_not_stop_the_probing() -> None:
    limiter = ConcurrencyLimiter(ceiling=16, known=4)
    rounds(limiter, [1.0], [1.0] * 4, [1.0, 1.0, 1.0, 1.0, 2.0], [1.0] * 5)
    assert (limiter.limit, limiter.cap, limiter.backoffs) == (6, 16, 0)


def test_a_one_slot_server_costs_one_back_off_not_one_per_probe() -> None:
    limiter = ConcurrencyLimiter(ceiling=8)
    seen = simulate(limiter, slots=1, service_s=0.2, calls=40)
    assert (limiter.backoffs, limiter.capacity, limiter.limit) == (1, 1, 1)
    # The answer that widened it, the two rounds at 2 and the answer between them.
    assert sum(width > 1 for width in seen.widths) <= 6


def test_a_four_slot_server_settles_at_four() -> None:
    limiter = ConcurrencyLimiter(ceiling=16)
    seen = simulate(limiter, slots=4, service_s=0.2, calls=200)
    assert (limiter.capacity, limiter.limit) == (4, 4)
    assert seen.widths[-100:] == [4] * 100


def test_declared_slots_are_never_exceeded() -> None:
    limiter = ConcurrencyLimiter(ceiling=8, declared=4)
    seen = simulate(limiter, slots=8, service_s=0.2, calls=100)  # flat: room to spare
    assert max(seen.widths) == 4 and seen.max_in_flight == 4 and limiter.highest == 4


def test_rate_limit_headroom_bounds_the_width() -> None:
    limiter = ConcurrencyLimiter(ceiling=8)
    assert limiter.limit == 1
    limiter.sized(remaining_requests=3, remaining_tokens=None, tokens=100)
    assert (limiter.limit, limiter.learnt) == (3, True)  # the provider said: no slow start
    limiter.sized(remaining_requests=50, remaining_tokens=250, tokens=100)
    assert limiter.limit == 2  # 250 tokens left: two calls of 100
    limiter.sized(remaining_requests=0, remaining_tokens=None, tokens=100)
    assert limiter.limit == 1  # never below 1
    limiter.sized(remaining_requests=100, remaining_tokens=None, tokens=100)
    rounds(limiter, [1.0], [1.0])
    assert limiter.limit == 2  # the window refilled: grows again, one at a time


# loopback servers -------------------------------------------------------------------------
def dispatcher_for(where: Path | str, spec: str, **kwargs: object) -> Dispatcher:
    return endpoint_dispatcher(where, spec, adaptive=True, **kwargs)


def anthropic_dispatcher(tmp_path: Path, url: str, concurrency: int) -> Dispatcher:
    registry = AdapterRegistry()
    registry.register(
        "anthropic", lambda: AnthropicAdapter(base_url=url, api_key_env="WIDTHS_TEST_KEY")
    )
    return Dispatcher(
        registry=registry,
        store=Store(tmp_path / "cache.sqlite"),
        prices=load_prices(),
        run_token="run",
        cap_usd=10.0,
        retries=0,
        concurrency=concurrency,
        adaptive=True,
    )


def ask_anthropic(count: int) -> list[Request]:
    return [
        Request(model="anthropic/claude-haiku-4-5", prompt=f"question {i}", max_tokens=16)
        for i in range(count)
    ]


def test_a_hosted_provider_starts_at_the_configured_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WIDTHS_TEST_KEY", "test-key")
    server = SlotServer(slots=8, service_s=0.05, shape="anthropic")
    with running_slot_server(server) as (loopback, _):
        dispatcher = anthropic_dispatcher(tmp_path, loopback.url, concurrency=4)
        outcomes = dispatcher.run_each(dispatcher.plan(ask_anthropic(12)))
    assert [o.status for o in outcomes] == [OK] * 12
    used = dispatcher.concurrency_used()["anthropic"]
    assert (used["min"], used["max"], used["capacity"]) == (4, 4, 4)


def test_anthropic_rate_limit_headers_narrow_the_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WIDTHS_TEST_KEY", "test-key")
    headers = {"anthropic-ratelimit-requests-remaining": "2"}
    server = SlotServer(slots=8, service_s=0.05, shape="anthropic", headers=headers)
    with running_slot_server(server) as (loopback, _):
        dispatcher = anthropic_dispatcher(tmp_path, loopback.url, concurrency=4)
        outcomes = dispatcher.run_each(dispatcher.plan(ask_anthropic(16)))
    assert [o.status for o in outcomes] == [OK] * 16
    used = dispatcher.concurrency_used()["anthropic"]
    assert (used["max"], used["min"], used["final"]) == (4, 2, 2)


def test_openai_rate_limit_headers_size_an_undeclared_servers_width(tmp_path: Path) -> None:
    """Nothing is declared, so the width starts at 1; the first answer's headers say three
    more requests are taken: the width goes there at once and never past it (a slow start
    on a server with room would have gone to 8)."""
    headers = {"x-ratelimit-remaining-requests": "3", "x-ratelimit-remaining-tokens": "90000"}
    with running_slot_server(SlotServer(slots=16, service_s=0.05, headers=headers)) as (
        loopback,
        server,
    ):
        dispatcher = dispatcher_for(tmp_path, f"local={loopback.url}/v1,free", concurrency=8)
        outcomes = dispatcher.run_each(dispatcher.plan(ask(30, timeout_s=5.0)))
    assert [o.status for o in outcomes] == [OK] * 30
    used = dispatcher.concurrency_used()["local"]
    assert (used["min"], used["max"]) == (1, 3)
    assert server.max_held <= 3


def test_declared_slots_are_never_exceeded_on_a_server(tmp_path: Path) -> None:
    declaring = SlotServer(slots=2, service_s=0.05, declare_slots=True)
    with running_slot_server(declaring) as (loopback, server):
        dispatcher = dispatcher_for(tmp_path, f"local={loopback.url}/v1,free", concurrency=8)
        outcomes = dispatcher.run_each(dispatcher.plan(ask(24, timeout_s=5.0)))
    assert [o.status for o in outcomes] == [OK] * 24
    used = dispatcher.concurrency_used()["local"]
    assert (used["min"], used["max"]) == (2, 2)
    assert server.max_waiting == 0


def test_probing_stops_once_latency_rises_on_a_one_slot_server(tmp_path: Path) -> None:
    # 0.5 s answers: at width 2 a one-slot server's round is only 1.5x as slow on the mean
    # (one of its two calls waits), so a loaded machine's few tens of ms of jitter on a
    # shorter answer hid that rise (seen at load 10 with 0.2 s: capacity 2, no back-off).
    with running_slot_server(SlotServer(slots=1, service_s=0.5)) as (loopback, _):
        dispatcher = dispatcher_for(tmp_path, f"local={loopback.url}/v1,free", concurrency=8)
        outcomes = dispatcher.run_each(dispatcher.plan(ask(16, timeout_s=10.0)))
    assert [o.status for o in outcomes] == [OK] * 16
    used = dispatcher.concurrency_used()["local"]
    # One back-off (two if jitter hid the queue at 2 for a round); AIMD took one for every
    # three answers.
    assert used["backoffs"] <= 2 and used["capacity"] == 1 and used["final"] == 1
    assert [o.response.width for o in outcomes if o.response is not None][-4:] == [1] * 4


def test_the_width_a_run_learnt_is_where_the_next_run_starts(store_location: str) -> None:
    from pytest_evalmine.run import widths  # here: the module is new (checked on the old code)

    # 0.2 s answers: the in-process server's jitter is far from the rise of a queue.
    with running_slot_server(SlotServer(slots=8, service_s=0.2)) as (loopback, _):
        spec = f"local={loopback.url}/v1,free"
        first = dispatcher_for(store_location, spec, concurrency=8)
        first.run_each(first.plan(ask(40, timeout_s=5.0)))
        learnt = first.concurrency_used()["local"]["capacity"]
        assert learnt > 1  # eight slots: grown past the slow start
        store = open_test_store(store_location)  # the same store, opened anew
        assert widths.remembered(store, f"{loopback.url}/v1") == learnt
        second = dispatcher_for(store_location, spec, concurrency=8)  # the next run
        fresh = [Request(model="local/m", prompt=f"new {i}", timeout_s=5.0) for i in range(3)]
        outcomes = second.run_each(second.plan(fresh))
    assert [o.status for o in outcomes] == [OK] * 3 and not any(o.cached for o in outcomes)
    assert second.concurrency_used()["local"]["min"] == learnt


def record(model: str, latency_s: float, width: int | None) -> AnswerRecord:
    return AnswerRecord(
        suite="s", suite_file="s.eval.yaml", task="t", kind="k", case="c", model=model,
        outcome="passed", latency_s=latency_s, width=width,
    )  # fmt: skip


def test_the_scorecard_latency_is_over_answers_sent_within_the_capacity() -> None:
    records = [record("local/a", 0.2, 1)] * 6 + [record("local/a", 0.4, 2)] * 2
    records += [record("local/a", 0.2, None)]  # an answer cached before widths were kept
    [score] = score_models(records, ["local/a"], {"local/a": 1})
    assert score.latency_n == 7 and score.latency_width == 1
    assert score.latency_p50_s == pytest.approx(0.2) and score.latency_p95_s == pytest.approx(0.2)
    assert "(n=7, within width 1)" in scorecard_rows([score])[0][5]
    [unknown] = score_models(records, ["local/a"])
    assert unknown.latency_n == 9 and unknown.latency_width is None


def test_a_runs_scorecard_names_the_width_its_latency_was_taken_at(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    with running_slot_server(SlotServer(slots=1, service_s=0.1)) as (loopback, _):
        result = pytester.runpytest(f"--evalmine-endpoint=local={loopback.url}/v1,free")
    result.assert_outcomes(passed=6)
    report = latest_report(pytester.path)
    capacity = report["concurrency"]["local"]["capacity"]
    answers = latest_answers(pytester.path)
    # The slow start sent some answers wider than the one slot serves: they measured the
    # server's queue and are not in the latency.
    assert any(a["width"] > capacity for a in answers)
    for score in report["scorecard"]:
        within = [a for a in answers if a["model"] == score["model"] and a["width"] <= capacity]
        assert score["latency_width"] == capacity
        assert score["latency_n"] == len(within)
        # The terminal names the width where answers were left out.
        mine = sum(a["model"] == score["model"] for a in answers)
        named = f", within width {capacity}" if len(within) < mine else ""
        p50 = f"(n={score['latency_n']}{named})"
        assert p50 in " ".join(line.strip() for line in result.outlines)  # lines wrap


def test_a_version_3_cache_gains_the_learned_widths_table(tmp_path: Path) -> None:
    # SQLite alone: the upgrade of an older SQLite file (PostgreSQL stores began at a
    # version with every table).
    from pytest_evalmine.run import widths  # here: the module is new (checked on the old code)

    path = tmp_path / "cache.sqlite"
    old = Store(path)
    old.connection.execute("DROP TABLE learned_widths")
    old.connection.execute("PRAGMA user_version = 3")
    old.close()
    store = Store(path)
    from pytest_evalmine.run.store.schema import SCHEMA_VERSION

    # Upgraded to the current version (4 added the table; later versions upgrade past it).
    assert store.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    widths.remember(store, {"http://127.0.0.1:1/v1": 3})
    assert widths.remembered(store, "http://127.0.0.1:1/v1") == 3
