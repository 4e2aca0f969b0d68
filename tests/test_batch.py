"""Provider batches (spec: "Batch") against loopback servers speaking each batch wire format:
the batch price in the cost and the cap, answers cached like online ones, the provider's
reasons for requests a batch did not answer, splitting under the limits, the wait bound,
and resuming a batch after a kill -9 or beside another process, paying nothing twice."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.adapters import batch_anthropic, batch_openai
from pytest_evalmine.adapters.base import Request
from pytest_evalmine.engine.stored import StoredRun, rerender
from pytest_evalmine.errors import EvalmineError, PriceError
from pytest_evalmine.exitcodes import BATCH_PENDING
from pytest_evalmine.run import batch as batch_module
from pytest_evalmine.run.batch import (
    IN_BATCH,
    BatchSession,
    BatchSettings,
    parse_batch,
    parse_duration,
)
from pytest_evalmine.run.dispatch import BUDGET, ERROR, OK, Dispatcher
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.store import SCHEMA_VERSION, Store
from tests.batch_run import KEY_ENV, MODELS, dispatcher, requests_for, spawn
from tests.batch_servers import INPUT_TOKENS, OUTPUT_TOKENS, BatchProvider, ProviderServer
from tests.conftest import (
    SMALL_SUITE,
    clear_proxies,
    latest_answers,
    latest_report,
    newest_run_dir,
)

PRICES = load_prices()
ONLINE = {m: PRICES.lookup(m) for m in MODELS.values()}


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv(KEY_ENV, "sk-batch-test-key")


@pytest.fixture
def provider() -> BatchProvider:
    return BatchProvider(polls_to_end=2)


@pytest.fixture
def server(provider: BatchProvider) -> Iterator[ProviderServer]:
    served = ProviderServer(provider)
    try:
        yield served
    finally:
        served.stop()


def session(**settings: Any) -> BatchSession:
    lines: list[str] = []
    batch = BatchSession(BatchSettings(poll_s=settings.pop("poll_s", 0.01), **settings))
    batch.say = lines.append
    return batch


def run(
    server: ProviderServer, cache: Path | str, requests: list[Request], **options: Any
) -> tuple[Dispatcher, list[Any]]:
    """``cache``: a SQLite file, or a ``store_location``."""
    batch = options.pop("batch", None) or session()
    run = dispatcher(server.url, str(cache), batch=batch, **options)
    return run, run.run_each(run.plan(requests))


def online_cost(model: str) -> float:
    row = ONLINE[model]
    return (INPUT_TOKENS * row.input + OUTPUT_TOKENS * row.output) / 1e6


@pytest.mark.parametrize("provider_name", ["openai", "anthropic", "google"])
def test_batched_answers_cost_half_and_a_rerun_is_cached(
    server: ProviderServer, store_location: str, provider_name: str
) -> None:
    requests = requests_for(6, provider_name)
    first, outcomes = run(server, store_location, requests)
    assert [o.status for o in outcomes] == [OK] * 6
    assert {o.response.text for o in outcomes} == {
        BatchProvider.answer_text(r.prompt) for r in requests
    }
    half = online_cost(MODELS[provider_name]) / 2
    assert all(o.cost_usd == pytest.approx(half, rel=1e-9) for o in outcomes)
    assert first.store.spent(first.run_token) == pytest.approx(6 * half, rel=1e-9)
    assert (server.provider.batches_created, server.provider.requests_batched) == (1, 6)
    assert server.provider.online_calls == 0
    report = first.batch.to_json()
    assert report["calls"] == {provider_name: {"batched": 6, "online": 0}}
    assert report["batches"][0]["requests"] == 6 and report["waiting"] == []
    assert first.store.batches() == []  # collected: nothing left in flight
    _again, cached = run(server, store_location, requests)
    assert all(o.status == OK and o.cached for o in cached)
    assert server.provider.batches_created == 1


def test_the_estimate_and_reservations_use_the_batch_price(
    server: ProviderServer, tmp_path: Path
) -> None:
    requests = requests_for(4, "openai")
    batched = dispatcher(server.url, str(tmp_path / "c.sqlite"), batch=session())
    online = dispatcher(server.url, str(tmp_path / "c.sqlite"), batch=None)
    b, o = batched.estimate(batched.plan(requests)), online.estimate(online.plan(requests))
    assert b.cost_usd == pytest.approx(o.cost_usd / 2, rel=1e-9)
    assert b.worst_case_usd == pytest.approx(o.worst_case_usd / 2, rel=1e-9)
    assert batched.plan(requests)[0].price.source.endswith(
        "batch 0.5x: https://developers.openai.com/api/docs/models/gpt-6.2-sol"
    )


def test_a_batch_is_never_submitted_beyond_the_cap(
    server: ProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_location: str
) -> None:
    requests = requests_for(6, "openai")
    probe = dispatcher(server.url, str(tmp_path / "probe.sqlite"), batch=session())
    worst = probe.plan(requests)[0].max_cost_usd
    sizes: list[int] = []
    real_submit = batch_openai.OpenAIBatch.submit

    async def counted(self: Any, entries: list[bytes], label: str, group: str = "") -> str:
        sizes.append(len(entries))
        return await real_submit(self, entries, label, group)

    monkeypatch.setattr(batch_openai.OpenAIBatch, "submit", counted)
    cap = 2.5 * worst  # room for two worst cases at a time
    first, outcomes = run(server, store_location, requests, cap=cap)
    assert max(sizes) <= 2
    assert sum(sizes) == 6 and [o.status for o in outcomes] == [OK] * 6
    assert first.store.committed(first.run_token) <= cap


def test_anthropic_results_out_of_order_with_a_malformed_line_and_failures(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    provider.malformed_line = True
    requests = requests_for(6, "anthropic")
    probe = dispatcher(server.url, str(tmp_path / "p.sqlite"), batch=None)
    keys = [p.key for p in probe.plan(requests)]
    provider.failures = {keys[0]: "errored", keys[1]: "expired"}
    first, outcomes = run(server, tmp_path / "c.sqlite", requests)
    assert [o.status for o in outcomes] == [ERROR, ERROR, OK, OK, OK, OK]
    assert outcomes[0].error_kind == "batch_errored"
    assert "invalid_request_error: max_tokens: too big" in outcomes[0].error
    assert outcomes[1].error_kind == "batch_expired"
    assert all(o.response.text == BatchProvider.answer_text(r.prompt) for o, r in
               zip(outcomes[2:], requests[2:], strict=True))  # fmt: skip
    # Requests the provider did not run are not billed: their reservations are released.
    assert first.store.possibly_billed(first.run_token) == 0
    # A rerun sends only the failed two, in a new batch.
    provider.failures = {}
    _again, second = run(server, tmp_path / "c.sqlite", requests)
    assert [o.status for o in second] == [OK] * 6 and sum(o.cached for o in second) == 4
    assert provider.requests_batched == 8


def test_openai_error_file_lines_carry_the_providers_reason(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    requests = requests_for(3, "openai")
    probe = dispatcher(server.url, str(tmp_path / "p.sqlite"), batch=None)
    keys = [p.key for p in probe.plan(requests)]
    provider.failures = {keys[0]: "errored", keys[2]: "expired"}
    _first, outcomes = run(server, tmp_path / "c.sqlite", requests)
    assert [o.status for o in outcomes] == [ERROR, OK, ERROR]
    assert "HTTP 400: Invalid 'max_completion_tokens'" in outcomes[0].error
    assert outcomes[2].error_kind == "batch_expired"
    assert "completion window expired" in outcomes[2].error


def test_fallback_online_sends_the_failed_requests_online_at_the_online_price(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    requests = requests_for(4, "openai")
    probe = dispatcher(server.url, str(tmp_path / "p.sqlite"), batch=None)
    keys = [p.key for p in probe.plan(requests)]
    provider.failures = {keys[1]: "expired"}
    first, outcomes = run(
        server, tmp_path / "c.sqlite", requests, batch=session(fallback_online=True)
    )
    assert [o.status for o in outcomes] == [OK] * 4
    assert provider.online_calls == 1
    model = MODELS["openai"]
    assert outcomes[1].cost_usd == pytest.approx(online_cost(model), rel=1e-9)
    assert outcomes[0].cost_usd == pytest.approx(online_cost(model) / 2, rel=1e-9)
    assert first.batch.to_json()["calls"] == {"openai": {"batched": 3, "online": 1}}


@pytest.mark.parametrize("provider_name", ["openai", "anthropic", "google"])
def test_a_canceled_batch_answers_what_ran_and_names_the_rest(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path, provider_name: str
) -> None:
    provider.cancel = True
    _first, outcomes = run(server, tmp_path / "c.sqlite", requests_for(4, provider_name))
    assert [o.status for o in outcomes] == [OK, OK, ERROR, ERROR]
    assert {o.error_kind for o in outcomes[2:]} == {"batch_canceled"}


def test_gemini_batches_hold_one_model_each_and_keep_the_reasons(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    requests = requests_for(3, "google") + [
        Request(model="google/gemini-2.5-pro", prompt=f"pro {i}", max_tokens=64) for i in range(2)
    ]
    probe = dispatcher(server.url, str(tmp_path / "p.sqlite"), batch=None)
    keys = [p.key for p in probe.plan(requests)]
    provider.failures = {keys[0]: "errored"}
    _first, outcomes = run(server, tmp_path / "c.sqlite", requests)
    assert [o.status for o in outcomes] == [ERROR, OK, OK, OK, OK]
    assert (
        outcomes[0].error_kind == "batch_errored" and "400: Invalid argument" in outcomes[0].error
    )
    assert sorted(len(b.requests) for b in provider.batches.values()) == [2, 3]


def test_gemini_responses_without_their_keys_are_matched_by_position(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    # Gemini's reference: inline responses come in the order of the requests; a response
    # need not echo the metadata the request carried.
    provider.gemini_echoes_keys = False
    requests = requests_for(4, "google")
    probe = dispatcher(server.url, str(tmp_path / "p.sqlite"), batch=None)
    keys = [p.key for p in probe.plan(requests)]
    provider.failures = {keys[2]: "errored"}
    _first, outcomes = run(server, tmp_path / "c.sqlite", requests)
    assert [o.status for o in outcomes] == [OK, OK, ERROR, OK]
    for request, outcome in zip(requests, outcomes, strict=True):
        if outcome.status == OK:  # each answer is its own request's, not a neighbour's
            assert outcome.response.text == BatchProvider.answer_text(request.prompt)
    assert outcomes[2].error_kind == "batch_errored"


def test_an_expired_openai_batch_keeps_its_partial_results(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    provider.expire = True
    _first, outcomes = run(server, tmp_path / "c.sqlite", requests_for(4, "openai"))
    assert [o.status for o in outcomes] == [OK, OK, ERROR, ERROR]
    assert {o.error_kind for o in outcomes[2:]} == {"batch_expired"}


def test_polling_survives_a_server_restart_and_failed_polls(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    provider.polls_to_end = 6
    provider.flaky_polls = 3
    requests = requests_for(3, "anthropic")
    import threading

    restarted = threading.Event()

    def restart_after_first_poll() -> None:
        while provider.polls < 1:
            time.sleep(0.005)
        server.restart(down_s=0.1)
        restarted.set()

    helper = threading.Thread(target=restart_after_first_poll)
    helper.start()
    _first, outcomes = run(server, tmp_path / "c.sqlite", requests)
    helper.join()
    assert restarted.is_set()
    assert [o.status for o in outcomes] == [OK] * 3
    assert provider.batches_created == 1


def test_batches_split_under_the_request_and_byte_limits(
    server: ProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch_openai.OpenAIBatch, "max_requests", 3)
    _first, outcomes = run(server, tmp_path / "a.sqlite", requests_for(7, "openai"))
    assert [o.status for o in outcomes] == [OK] * 7
    # Submitted at once, so the server may see them in any order.
    assert sorted(len(b.requests) for b in server.provider.batches.values()) == [1, 3, 3]
    monkeypatch.setattr(batch_anthropic.AnthropicBatch, "max_bytes", 700)
    _second, outcomes = run(server, tmp_path / "b.sqlite", requests_for(5, "anthropic"))
    assert [o.status for o in outcomes] == [OK] * 5
    anthropic = [b for b in server.provider.batches.values() if b.wire == "anthropic"]
    assert len(anthropic) > 1 and sum(len(b.requests) for b in anthropic) == 5


def test_the_wait_bound_leaves_calls_in_batch_and_a_rerun_collects_them_unpaid(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    provider.polls_to_end = -1
    requests = requests_for(4, "openai")
    first, outcomes = run(server, tmp_path / "c.sqlite", requests, batch=session(wait_s=0.2))
    assert {o.error_kind for o in outcomes} == {IN_BATCH}
    batch_id = next(iter(provider.batches))
    assert all(f"still in batch {batch_id}; rerun to collect it" in o.error for o in outcomes)
    report = first.batch.to_json()
    assert report["waiting"] == [{"batch_id": batch_id, "calls": 4}]
    # Submitted, so billed whether read or not: kept as possibly billed, never released.
    assert first.store.possibly_billed(first.run_token) == pytest.approx(
        4 * first.plan(requests)[0].max_cost_usd, rel=1e-9
    )
    listed = first.store.batches()
    assert [(b["batch_id"], b["state"], b["requests"]) for b in listed] == [
        (batch_id, "submitted", 4)
    ]
    provider.finish_all()
    second, collected = run(server, tmp_path / "c.sqlite", requests)
    assert [o.status for o in collected] == [OK] * 4
    assert provider.batches_created == 1 and provider.requests_batched == 4
    assert second.batch.to_json()["batches"][0]["resumed"] is True
    assert second.store.batches() == []


def test_progress_lines_every_poll_on_a_tty_and_every_30_s_in_a_log() -> None:
    now = [0.0]
    lines: list[str] = []
    log = BatchSession(BatchSettings(), say=lines.append, tty=False, clock=lambda: now[0])
    tracked = batch_module._Tracked("openai", None, "l", "b1", {}, 0.0)  # type: ignore[arg-type]
    log.batches["b1"] = {"batch_id": "b1", "provider": "openai", "requests": 2, "counts": {}}
    from pytest_evalmine.adapters.batch_wire import BatchStatus

    status = BatchStatus("in_progress", False, {"completed": 1, "total": 2})
    for second in (0, 10, 20, 31, 40, 62):
        now[0] = float(second)
        log.progress(tracked, status, final=False)
    assert len(lines) == 3  # at 0, 31 and 62
    assert lines[1] == (
        "evalmine: batch openai b1: 2 calls, in_progress (completed 1, total 2), 31s"
    )
    tty_lines: list[str] = []
    tty = BatchSession(BatchSettings(), say=tty_lines.append, tty=True, clock=lambda: now[0])
    tty.batches["b1"] = dict(log.batches["b1"])
    for second in (0, 1, 2):
        now[0] = float(second)
        tty.progress(tracked, status, final=False)
    assert len(tty_lines) == 3


def _wait_for(condition: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@contextmanager
def _polling_child(
    server: ProviderServer, provider: BatchProvider, cache: Path | str, n: int, what: str
) -> Iterator[subprocess.Popen[str]]:
    """A run of ``n`` requests in another process (tests/batch_run.py), once it has polled
    its batch twice; killed on the way out if it still runs."""
    child = spawn(server.url, cache, n, poll_s=0.05)
    try:
        _wait_for(lambda: provider.polls >= 2, what)
        yield child
    finally:
        if child.poll() is None:
            child.kill()


def test_kill_9_while_polling_then_a_rerun_resumes_and_pays_nothing_again(
    provider: BatchProvider,
    server: ProviderServer,
    store_location: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A short lease: on PostgreSQL the killed run's claims are taken over once it lapses.
    monkeypatch.setenv("EVALMINE_LEASE_S", "1")
    provider.polls_to_end = -1
    cache = store_location
    with _polling_child(server, provider, cache, 5, "the run to poll its batch") as child:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert provider.batches_created == 1 and provider.requests_batched == 5
    provider.finish_all()
    second, outcomes = run(server, cache, requests_for(5, "openai"))
    assert [o.status for o in outcomes] == [OK] * 5
    # The server's counts: still the one batch of five, nothing sent online.
    assert (provider.batches_created, provider.requests_batched) == (1, 5)
    assert provider.online_calls == 0
    assert second.batch.to_json()["batches"][0]["resumed"] is True


def test_another_process_on_the_cache_waits_for_the_batch(
    provider: BatchProvider, server: ProviderServer, store_location: str
) -> None:
    provider.polls_to_end = -1
    cache = store_location
    with _polling_child(server, provider, cache, 4, "the other process to poll its batch") as child:
        import threading

        threading.Timer(0.5, provider.finish_all).start()
        _mine, outcomes = run(server, cache, requests_for(4, "openai"))
        out, _err = child.communicate(timeout=60)
    assert [o.status for o in outcomes] == [OK] * 4
    assert json.loads(out.splitlines()[-1])["statuses"] == {"ok": 4}
    assert (provider.batches_created, provider.requests_batched) == (1, 4)


def test_the_store_upgrades_a_version_2_file_keeping_its_ledger(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        from pytest_evalmine.run.store import SCHEMA

        for statement in SCHEMA.split(";"):
            if statement.strip() and not any(
                table in statement for table in ("batch", "ledger", "run_totals")
            ):
                db.execute(statement)
        # The ledger and running totals as version 2 had them (before the budget scope).
        db.execute(
            "CREATE TABLE ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, run_token TEXT NOT "
            "NULL, key TEXT NOT NULL, reserved_usd REAL NOT NULL, spent_usd REAL NOT NULL "
            "DEFAULT 0, state TEXT NOT NULL)"
        )
        db.execute("CREATE TABLE run_totals (run_token TEXT PRIMARY KEY, committed_usd REAL)")
        db.execute("INSERT INTO run_totals VALUES ('r', 0.5)")
        db.execute(
            "INSERT INTO ledger (run_token, key, reserved_usd, spent_usd, state) "
            "VALUES ('r', 'k', 1.0, 0.5, 'spent')"
        )
        db.execute("INSERT INTO claims (key, run_token, owner) VALUES ('k', 'r', 'o')")
        db.execute("PRAGMA user_version = 2")
    store = Store(path)
    assert store.spent("r") == pytest.approx(0.5)
    assert store.claim_of("k") is not None  # version 2 claims kept
    assert store.batches() == []
    assert store.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    # Version 5: the old rows count in the budget of their run token, its total kept.
    assert store.committed("r") == pytest.approx(store.ledger_total("r")) == pytest.approx(0.5)
    assert store.reserve_each("r", [("k2", 0.6)], cap=1.0) == [None]
    assert store.reserve_each("r", [("k2", 0.5)], cap=1.0) != [None]


def test_batch_price_rows() -> None:
    row = PRICES.lookup("anthropic/claude-haiku-4-5")
    batched = PRICES.batch_row(row, "anthropic")
    assert (batched.input, batched.output) == (row.input / 2, row.output / 2)
    # The cache read stays at its online rate (the discount on it is not documented); a
    # batched write is a 1-hour one, 2x input (the 5-minute write is 1.25x).
    assert (batched.cached_input, batched.cache_write) == (row.cached_input, 2 * row.input)
    assert row.cache_write == 1.25 * row.input
    assert batched.read == "2026-11-29" and "platform.claude.com" in batched.source
    assert PRICES.batch_row(row, "ollama") is row  # no batch rate: the online price


def test_a_users_table_sets_batch_rates(tmp_path: Path) -> None:
    extra = tmp_path / "prices.yaml"
    extra.write_text(
        "models:\n  - {model: box/m, input: 1, output: 2}\nbatch:\n"
        "  - {provider: box, factor: 0.25}\n"
    )
    table = load_prices(extra)
    assert table.batch_row(table.lookup("box/m"), "box").output == 0.5
    assert table.batch_row(table.lookup("openai/gpt-6-sol"), "openai").input == 1.0
    extra.write_text("models: []\nbatch:\n  - {provider: box, factor: 2}\n")
    with pytest.raises(PriceError, match="factor: a number from 0 to 1"):
        load_prices(extra)
    extra.write_text("models: []\nbatch:\n  - {provider: box, factor: 1, cache_write_input: x}\n")
    with pytest.raises(PriceError, match=r"batch\[0\].cache_write_input: a number >= 0"):
        load_prices(extra)


def test_the_batch_option() -> None:
    assert parse_batch(None) is None
    on = parse_batch("on")
    assert on is not None and on.providers == {"openai", "anthropic", "google"}
    assert not on.fallback_online and on.wait_s is None
    spec = parse_batch("anthropic,box,fallback=online,poll=2s", "1h30m")
    assert spec == BatchSettings(frozenset({"anthropic", "box"}), True, 2.0, 5400.0)
    with pytest.raises(EvalmineError, match="cannot read 'fallback=maybe'"):
        parse_batch("on,fallback=maybe")
    with pytest.raises(EvalmineError, match="only with --evalmine-batch"):
        parse_batch(None, "10m")
    assert [parse_duration(t, "x") for t in ("90", "90s", "30m", "2h")] == [90, 90, 1800, 7200]
    with pytest.raises(EvalmineError, match="not a duration"):
        parse_duration("soon", "x")


def test_a_provider_without_a_batch_api_runs_online(tmp_path: Path) -> None:
    from pytest_evalmine.adapters.builtin import default_registry

    batch = session()
    run = Dispatcher(
        registry=default_registry(fake_everything=True),
        store=Store(tmp_path / "c.sqlite"),
        prices=PRICES,
        run_token="r",
        cap_usd=1.0,
        batch=batch,
    )
    outcomes = run.run_each(run.plan([Request(model="fake/a", prompt=f"p{i}") for i in range(3)]))
    assert [o.status for o in outcomes] == [OK] * 3
    assert batch.to_json()["calls"] == {"fake": {"batched": 0, "online": 3}}
    assert batch.to_json()["batches"] == []


def test_over_the_cap_nothing_is_submitted(server: ProviderServer, tmp_path: Path) -> None:
    requests = requests_for(3, "openai")
    _run, outcomes = run(server, tmp_path / "c.sqlite", requests, cap=0.0)
    assert [o.status for o in outcomes] == [BUDGET] * 3
    assert server.provider.batches_created == 0


BATCH_SUITE = SMALL_SUITE.replace("models: [fake/alpha, fake/beta]", "models: [box/a, box/b]")


def _flags(server: ProviderServer, *extra: str) -> list[str]:
    return [
        f"--evalmine-endpoint=box={server.url}/v1,input=1,output=2",
        "--evalmine-batch=box,poll=0.02",
        *extra,
    ]


def test_a_pytest_run_batches_its_answers_and_its_reports_say_so(
    pytester: pytest.Pytester, server: ProviderServer
) -> None:
    pytester.makefile(".eval.yaml", small=BATCH_SUITE)
    result = pytester.runpytest(*_flags(server))
    assert result.ret in (0, 1)  # the items' checks decide; the answers all arrived
    report = latest_report(pytester.path)
    assert report["batches"]["calls"] == {"box": {"batched": 6, "online": 0}}
    assert [b["requests"] for b in report["batches"]["batches"]] == [6]
    assert report["outcomes"].get("error", 0) == 0 and not report["partial"]
    assert (server.provider.batches_created, server.provider.online_calls) == (1, 0)
    report_md = (newest_run_dir(pytester.path) / "report.md").read_text()
    assert "batch: box 6 by batch (1 batch)" in report_md
    # `evalmine rerender` writes the same report.md from the stored files, batch line and all.
    run = StoredRun(newest_run_dir(pytester.path))
    (run.run_dir / "report.md").unlink()
    rerender(run, pytester.path)
    assert (run.run_dir / "report.md").read_text() == report_md
    # The answers are answers: replayed from the cache with no batch and no network.
    replay = pytester.runpytest(*_flags(server), "--evalmine-record=none")
    assert replay.ret == result.ret
    assert server.provider.batches_created == 1


def test_the_wait_bound_exits_17_with_a_partial_report_and_a_rerun_collects(
    pytester: pytest.Pytester, provider: BatchProvider, server: ProviderServer
) -> None:
    provider.polls_to_end = -1
    pytester.makefile(".eval.yaml", small=BATCH_SUITE)
    result = pytester.runpytest(*_flags(server, "--evalmine-batch-wait=0.3s"))
    assert result.ret == BATCH_PENDING == 17
    report = latest_report(pytester.path)
    batch_id = next(iter(provider.batches))
    assert report["partial"] is True
    assert report["partial_reason"] == (
        f"6 call(s) still in batch {batch_id}; rerun to collect them"
    )
    result.stdout.fnmatch_lines([f"*PARTIAL RUN: 6 call(s) still in batch {batch_id}*"])
    # Calls sitting in a batch are neither answered nor failed: the progress line and the
    # report say where they are.
    result.stdout.fnmatch_lines(["evalmine: 6 in batch, 0/6 answers, 0 cached, $0.0000 spent"])
    assert "6/6 answers" not in result.stdout.str()
    report_md = (newest_run_dir(pytester.path) / "report.md").read_text()
    assert "still in a provider batch: 6 call(s), up to $" in report_md
    assert "(billed when the batch completes; rerun to collect)" in report_md
    assert "sent and failed" not in report_md
    listing = subprocess.run(
        [sys.executable, "-m", "pytest_evalmine.commands.cli", "batches"],
        cwd=pytester.path,
        env={**os.environ, "EVALMINE_HOME": str(pytester.path / ".evalmine")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert batch_id in listing.stdout and "box" in listing.stdout
    provider.finish_all()
    again = pytester.runpytest(*_flags(server))
    assert again.ret in (0, 1)
    assert latest_report(pytester.path)["batches"]["batches"][0]["resumed"] is True
    assert (provider.batches_created, provider.requests_batched) == (1, 6)


def test_a_suites_batch_key_batches_the_answers_and_the_judge(
    pytester: pytest.Pytester, server: ProviderServer
) -> None:
    suite = BATCH_SUITE.replace("suite: small\n", 'suite: small\nbatch: "box,poll=0.02"\n')
    pytester.makefile(".eval.yaml", small=suite)
    result = pytester.runpytest(
        f"--evalmine-endpoint=box={server.url}/v1,input=1,output=2", "--evalmine-judge=box/judge"
    )
    assert result.ret in (0, 1)
    batches = latest_report(pytester.path)["batches"]
    # The six answers in one batch, then the judge's calls (the pairs it judges, in both
    # orders) in batches of their own at session finish.
    assert batches["batches"][0]["requests"] == 6 and len(batches["batches"]) >= 2
    judged = sum(b["requests"] for b in batches["batches"][1:])
    assert judged >= 2 and batches["calls"]["box"] == {"batched": 6 + judged, "online": 0}
    assert server.provider.online_calls == 0


@pytest.mark.parametrize(("provider_name", "found"), [("openai", True), ("google", True),
                                                      ("anthropic", False)])  # fmt: skip
def test_a_run_killed_before_it_stored_the_batch_id_finds_the_batch_by_its_label(
    provider: BatchProvider,
    server: ProviderServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider_name: str,
    found: bool,
) -> None:
    """The window between the provider accepting a batch and the store holding its id: a
    wire that labels its batches (OpenAI's metadata, Gemini's display name) finds it again;
    Anthropic's carry no label, so its calls are sent anew (the window the spec names)."""
    requests = requests_for(3, provider_name)
    cache = tmp_path / "c.sqlite"

    def lost(self: Store, local_id: str, batch_id: str) -> None:
        raise RuntimeError("killed before the batch id was stored")

    monkeypatch.setattr(Store, "batch_submitted", lost)
    _first, outcomes = run(server, cache, requests)
    assert {o.status for o in outcomes} == {ERROR} and provider.batches_created == 1
    assert [b["state"] for b in Store(cache).batches()] == ["submitting"]
    monkeypatch.undo()
    monkeypatch.setenv(KEY_ENV, "sk-batch-test-key")
    _second, again = run(server, cache, requests)
    assert [o.status for o in again] == [OK] * 3
    assert provider.batches_created == (1 if found else 2)
    assert Store(cache).batches() == []


def test_a_batched_run_writes_a_recording_that_a_fresh_checkout_replays(
    pytester: pytest.Pytester, server: ProviderServer
) -> None:
    pytester.makefile(".eval.yaml", small=BATCH_SUITE)
    first = pytester.runpytest(*_flags(server, "--evalmine-recording=beside"))
    answers = {(r["task"], r["case"], r["model"]): r["text"] for r in latest_answers(pytester.path)}
    recording = pytester.path / "small.eval.recording.jsonl"
    rows = [json.loads(line) for line in recording.read_text().splitlines()]
    assert len([row for row in rows if "key" in row]) == 6  # six answers (and the adapter)
    shutil.rmtree(pytester.path / ".evalmine")  # a fresh checkout: the recording alone
    replay = pytester.runpytest(
        *_flags(server, "--evalmine-recording=beside"), "--evalmine-record=none"
    )
    assert replay.ret == first.ret
    report = latest_report(pytester.path)
    assert report["calls"] == {"made": 0, "cached": 6} and report["cost"]["spent_usd"] == 0
    replayed = {
        (r["task"], r["case"], r["model"]): r["text"] for r in latest_answers(pytester.path)
    }
    assert replayed == answers
    assert server.provider.batches_created == 1


def test_a_ctrl_c_while_waiting_leaves_the_calls_in_their_batch(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    import threading

    provider.polls_to_end = -1
    batch = session()
    run = dispatcher(server.url, str(tmp_path / "c.sqlite"), batch=batch)
    planned = run.plan(requests_for(3, "openai"))
    # What the first Ctrl-C sets (Dispatcher._on_interrupt), once the batch is polled: the
    # run state's flag (``Dispatcher.interrupted`` reads it), which the poll's sleep watches.
    threading.Thread(
        target=lambda: (
            _wait_for(lambda: provider.polls >= 2, "polls"),
            setattr(run.state, "interrupted", True),
        )
    ).start()
    outcomes = run.run_each(planned)
    assert {o.error_kind for o in outcomes} == {IN_BATCH}
    assert all("interrupted (Ctrl-C): still in batch" in o.error for o in outcomes)
    assert [b["state"] for b in run.store.batches()] == ["submitted"]
    assert batch.to_json()["waiting"][0]["calls"] == 3


def test_an_endpoint_without_a_batch_api_runs_online_at_the_online_price(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    provider.no_batch_api = True
    batch = session()
    run = dispatcher(server.url, str(tmp_path / "c.sqlite"), batch=batch)
    requests = requests_for(3, "openai")
    first = run.run_each(run.plan(requests))
    assert [o.status for o in first] == [OK] * 3 and provider.online_calls == 3
    model = MODELS["openai"]
    assert all(o.cost_usd == pytest.approx(online_cost(model), rel=1e-9) for o in first)
    assert all(o.attempts == 1 for o in first)
    assert batch.to_json()["calls"] == {"openai": {"batched": 0, "online": 3}}
    # Planned online from then on: the next requests are priced and sent as online calls.
    more = [Request(model=model, prompt=f"later {i}", max_tokens=64) for i in range(2)]
    planned = run.plan(more)
    assert planned[0].price.input == ONLINE[model].input
    assert [o.status for o in run.run_each(planned)] == [OK] * 2
    assert provider.online_calls == 5 and provider.batches_created == 0


def test_a_bug_reading_a_batch_leaves_its_calls_in_batch_instead_of_hanging(
    server: ProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: Any, batch_id: str) -> Any:
        raise KeyError("a shape nobody expected")

    monkeypatch.setattr(batch_openai.OpenAIBatch, "poll", broken)
    _run, outcomes = run(server, tmp_path / "c.sqlite", requests_for(2, "openai"))
    assert {o.error_kind for o in outcomes} == {IN_BATCH}
    assert all("could not be read (KeyError" in o.error for o in outcomes)


def test_anthropic_results_on_another_origin_are_never_fetched() -> None:
    """The poll's results_url decides where the key goes: only to the configured server.
    Refused before any exchange (the other host does not exist), and named by its origin
    only, never its path or query."""
    from pytest_evalmine.adapters.anthropic import AnthropicAdapter
    from pytest_evalmine.adapters.base import AdapterError
    from pytest_evalmine.adapters.batch_anthropic import AnthropicBatch
    from pytest_evalmine.adapters.batch_wire import BatchStatus

    wire = AnthropicBatch(AnthropicAdapter(base_url="http://127.0.0.1:9"))
    elsewhere_urls = (
        "http://127.0.0.2:9/results?key=sk-ant-leak",
        "https://127.0.0.1:9/r",
        "http://a:b/results?key=sk-ant-leak",  # not a URL httpx reads: named "the server"
    )
    for elsewhere in elsewhere_urls:
        status = BatchStatus("ended", True, results={"results_url": elsewhere})
        with pytest.raises(AdapterError) as raised:
            asyncio.run(wire.results("msgbatch_1", status, {}, 0.0))
        assert raised.value.kind == "bad_request" and "not the configured server" in str(
            raised.value
        )
        assert "leak" not in str(raised.value) and "/r" not in str(raised.value)


def test_a_rerun_that_only_collects_submitted_batches_is_not_refused_and_pays_nothing_new(
    pytester: pytest.Pytester, provider: BatchProvider, server: ProviderServer
) -> None:
    provider.polls_to_end = -1
    pytester.makefile(".eval.yaml", small=BATCH_SUITE)
    first = pytester.runpytest(
        *_flags(server, "--evalmine-max-cost=0.002", "--evalmine-batch-wait=0.3s")
    )
    assert first.ret == BATCH_PENDING
    provider.finish_all()
    # A cap below the estimate of the six calls: they sit in a batch already submitted, so
    # collecting them commits nothing new and the cap has nothing to refuse.
    again = pytester.runpytest(*_flags(server, "--evalmine-max-cost=0.0001"))
    assert again.ret in (0, 1)
    report = latest_report(pytester.path)
    assert report["outcomes"].get("error", 0) == 0 and not report["partial"]
    assert report["batches"]["batches"][0]["resumed"] is True
    assert (provider.batches_created, provider.requests_batched) == (1, 6)
    with sqlite3.connect(pytester.path / ".evalmine" / "cache.sqlite") as db:
        rows = db.execute(
            "SELECT run_token, state, COUNT(*), SUM(spent_usd) FROM ledger GROUP BY 1, 2"
        ).fetchall()
    # Counted once, in the run that submitted them: settled there at their cost.
    assert [(state, count) for _run, state, count, _spent in rows] == [("spent", 6)]
    assert rows[0][3] > 0
    assert report["cost"]["spent_usd"] == 0.0
