"""The PostgreSQL store on a real server (spec: "Cache database"): the SQLite store's
semantics on both backends, claims as leases, one cap across processes, the schema's
version, a server restart, and the password kept out of every message."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_evalmine.adapters.base import Response, Usage
from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.run.store import ANSWERED, CLAIMED, HELD, PaidAnswer
from pytest_evalmine.run.store.location import open_store
from pytest_evalmine.run.store.urls import masked
from tests.conftest import open_test_store
from tests.postgres_server import PASSWORD, PostgresServer

ROOT = Path(__file__).resolve().parents[1]


def answer(key: str, cost: float, reservation: int | None) -> PaidAnswer:
    response = Response(text=f"answer {key}", usage=Usage(1, 1), latency_s=0.0)
    return PaidAnswer(key, "fake", "m", response, cost, reservation)


def test_the_same_semantics_on_both_backends(store_location: str) -> None:
    store = open_test_store(store_location)
    try:
        assert store.claim_many("run", ["a", "b"], "me:1:1") == {"a": CLAIMED, "b": CLAIMED}
        assert store.claim("other-run", "a", "you:2:2") == HELD
        first, second, third = store.reserve_each("run", [("a", 0.6), ("b", 0.6), ("c", 0.4)], 1.0)
        assert first is not None and second is None and third is not None
        assert store.committed("run") == pytest.approx(1.0)
        store.record_paid_answers([answer("a", 0.25, first)])
        store.release(third)
        assert store.committed("run") == pytest.approx(0.25)
        assert store.spent("run") == pytest.approx(0.25)
        assert store.claim("other-run", "a", "you:2:2") == ANSWERED
        assert store.hit("a").answer.response.text == "answer a"
        assert store.claims_of(["a"])["a"].status == "ok"
        assert store.finished_calls("run") == 1
        assert store.reserved_keys("run") == set()
        store.remember_adapter_state("ollama", {"digests": {"m": "x"}})
        assert store.adapter_state("ollama") == {"digests": {"m": "x"}}
        store.remember_widths({"http://s": 5})
        assert store.learned_width("http://s") == 5
        assert not store.stop_requested("run")
        store.request_stop("run")
        assert store.stop_requested("run")
        store.begin_batch("em-1", "openai", "run", "me:1:1", [("c1", "b"), ("c0", "a")])
        assert store.batch_order("em-1") == ["c1", "c0"]
        store.batch_submitted("em-1", "batch_1")
        assert store.open_batch_items(["b"])["b"].batch_id == "batch_1"
        assert [b["state"] for b in store.batches()] == ["submitted"]
    finally:
        store.close()


def test_a_budget_scope_is_shared_by_runs_and_kept_apart_from_their_spend(
    store_location: str,
) -> None:
    store = open_test_store(store_location)
    try:
        (one,) = store.reserve_each("shard-1", [("a", 0.7)], 1.0, budget="nightly")
        assert store.reserve_each("shard-2", [("b", 0.7)], 1.0, budget="nightly") == [None]
        assert store.reserve_each("shard-2", [("b", 0.3)], 1.0, budget="nightly") != [None]
        store.record_paid_answers([answer("a", 0.5, one)])
        assert store.committed("nightly") == pytest.approx(0.8)
        assert (store.spent("shard-1"), store.spent("shard-2")) == (pytest.approx(0.5), 0.0)
        assert store.committed("shard-1") == 0.0  # its rows count in the named budget only
    finally:
        store.close()


def test_a_claim_is_held_while_its_lease_lives_and_taken_over_after(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALMINE_LEASE_S", "1")
    holder = open_test_store(postgres_url)
    taker = open_test_store(postgres_url)
    try:
        assert holder.claim("run-a", "k", "machine-a:1:1") == CLAIMED
        time.sleep(1.5)  # past one lease: the holder's store renewed it meanwhile
        assert taker.owner_alive("machine-a:1:1")
        assert taker.claim("run-b", "k", "machine-b:1:1") == HELD
        holder.close()  # no more renewals, as a machine that died
        deadline = time.monotonic() + 30
        while taker.owner_alive("machine-a:1:1") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert taker.claim("run-b", "k", "machine-b:1:1") == CLAIMED
        assert taker.claims_of(["k"])["k"].owner == "machine-b:1:1"
    finally:
        taker.close()


CLAIMER = """
import json, os, sys, time
from pathlib import Path
from pytest_evalmine.run.store.location import open_store
store = open_store(sys.argv[1], Path("unused"))
mode = sys.argv[2]
if mode == "claim":
    start = float(sys.argv[3])
    while time.time() < start:
        time.sleep(0.001)
    states = store.claim_many("run-" + str(os.getpid()), [f"k{i}" for i in range(50)],
                              f"proc:{os.getpid()}:1")
    print(json.dumps(states), flush=True)
elif mode == "hold":
    store.claim("run-held", "held", "victim:1:1")
    print("claimed", flush=True)
    time.sleep(600)
elif mode == "reserve":
    start = float(sys.argv[3])
    while time.time() < start:
        time.sleep(0.001)
    granted = []
    for i in range(40):
        r = store.reserve_each("shard-" + str(os.getpid()), [(f"k{i}", 0.03)] * 2, 1.0,
                               budget="one-cap")
        granted += [0.03 for x in r if x is not None]
    print(json.dumps(sum(granted)), flush=True)
store.close()
"""


def spawn(url: str, *arguments: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "EVALMINE_LEASE_S": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", CLAIMER, url, *arguments],
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
    )


def test_two_processes_racing_for_the_same_claims_take_each_once(postgres_url: str) -> None:
    open_test_store(postgres_url).close()  # the schema in place first, as a run's start does
    start = str(time.time() + 2.0)
    racers = [spawn(postgres_url, "claim", start) for _ in range(2)]
    results = [json.loads(racer.communicate(timeout=120)[0].splitlines()[-1]) for racer in racers]
    for key in (f"k{i}" for i in range(50)):
        assert sorted(result[key] for result in results) == [CLAIMED, HELD]


def test_a_killed_owner_is_taken_over_after_its_lease(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALMINE_LEASE_S", "1")
    victim = spawn(postgres_url, "hold")
    assert victim.stdout is not None and victim.stdout.readline().strip() == "claimed"
    store = open_test_store(postgres_url)
    try:
        assert store.claim("run-b", "held", "survivor:1:1") == HELD
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        deadline = time.monotonic() + 30
        while store.owner_alive("victim:1:1") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert store.claim("run-b", "held", "survivor:1:1") == CLAIMED
    finally:
        store.close()


def test_three_processes_never_reserve_past_one_shared_cap(postgres_url: str) -> None:
    open_test_store(postgres_url).close()
    start = str(time.time() + 2.0)
    shards = [spawn(postgres_url, "reserve", start) for _ in range(3)]
    granted = [json.loads(shard.communicate(timeout=120)[0].splitlines()[-1]) for shard in shards]
    store = open_test_store(postgres_url)
    try:
        assert sum(granted) <= 1.0 + 1e-9
        assert sum(granted) >= 1.0 - 0.03 - 1e-9  # the cap was filled, not refused early
        assert store.committed("one-cap") == pytest.approx(sum(granted), abs=1e-9)
        assert store.ledger_total("one-cap") == pytest.approx(sum(granted), abs=1e-9)
    finally:
        store.close()


def test_a_newer_schema_is_refused_naming_both_versions(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    open_test_store(postgres_url).close()
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("UPDATE evalmine.schema_version SET version = 99")
    with pytest.raises(EvalmineError, match=r"schema version 99, newer .* knows \(1\)"):
        open_test_store(postgres_url)


def test_the_store_survives_a_server_restart(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    store = open_test_store(postgres_url)
    try:
        assert store.claim("run", "before", "me:1:1") == CLAIMED
        postgres_server.restart()
        assert store.claim("run", "after", "me:1:1") == CLAIMED
        assert set(store.claims_of(["before", "after"])) == {"before", "after"}
    finally:
        store.close()


def test_the_password_never_appears_in_errors(postgres_server: PostgresServer) -> None:
    database = postgres_server.fresh_database()
    wrong = postgres_server.url(database, password=True).replace(PASSWORD, "Wrong-" + PASSWORD)
    with pytest.raises(EvalmineError) as refused:
        open_store(wrong, Path("unused"))
    assert "Wrong-" not in str(refused.value) and PASSWORD not in str(refused.value)
    assert "***" in str(refused.value)
    down = f"postgresql://evalmine:{PASSWORD}@127.0.0.1:1/{database}?connect_timeout=2"
    with pytest.raises(EvalmineError) as unreachable:
        open_store(down, Path("unused"))
    assert PASSWORD not in str(unreachable.value) and "cannot be used" in str(unreachable.value)
    assert (
        masked(down) == "postgresql://evalmine:***@127.0.0.1:1/" + database + "?connect_timeout=2"
    )


def test_a_run_on_the_postgresql_store_then_a_warm_rerun_pays_nothing(
    postgres_server: PostgresServer, pytester: pytest.Pytester, small_suite: Path
) -> None:
    url = postgres_server.url(postgres_server.fresh_database(), password=True)
    runs = [
        pytester.runpytest_subprocess("--evalmine-fake", f"--evalmine-store={url}", "-v")
        for _ in range(2)
    ]
    assert [run.ret for run in runs] == [0, 0], runs[0].outlines
    assert not (pytester.path / ".evalmine" / "cache.sqlite").exists()
    reports = sorted(
        (json.loads(path.read_text()) for path in (pytester.path / "reports").rglob("report.json")),
        key=lambda report: report["calls"]["made"],
    )
    assert [r["calls"]["made"] > 0 for r in reports] == [False, True]
    assert reports[0]["cost"]["spent_usd"] == 0
    # The password reaches neither the terminal nor any file the runs wrote.
    written = [p.read_text(errors="replace") for p in pytester.path.rglob("*") if p.is_file()]
    for text in ["\n".join(run.outlines + run.errlines) for run in runs] + written:
        assert PASSWORD not in text


def test_without_psycopg_the_store_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [m for m in sys.modules if m.startswith("pytest_evalmine.run.store.postgresql")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(EvalmineError, match=r"pip install 'pytest-evalmine\[postgresql\]'"):
        open_store(f"postgresql://u:{PASSWORD}@127.0.0.1:1/db", Path("unused"))


def test_a_bad_or_unreachable_store_is_one_line_and_exit_4(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    bad = pytester.runpytest_subprocess("--evalmine-fake", "--evalmine-store=mysql://x/y")
    assert bad.ret == 4
    assert "not a postgresql:// URL" in "\n".join(bad.errlines)
    down = f"postgresql://evalmine:{PASSWORD}@127.0.0.1:1/db?connect_timeout=2"
    unreachable = pytester.runpytest_subprocess("--evalmine-fake", f"--evalmine-store={down}")
    text = "\n".join(unreachable.outlines + unreachable.errlines)
    assert unreachable.ret == 4, text
    assert "cannot be used" in text and "Traceback" not in text and PASSWORD not in text


def test_a_user_who_may_not_create_the_schema_is_told_and_one_created_for_it_is_used(
    postgres_server: PostgresServer,
) -> None:
    name = f"locked{os.getpid()}"
    with postgres_server.admin() as admin:
        admin.execute(f"CREATE DATABASE {name}")  # owned by postgres: no CREATE for evalmine
    url = postgres_server.url(name, password=True)
    with pytest.raises(EvalmineError) as refused:
        open_store(url, Path("unused"))
    assert "may not create the schema evalmine" in str(refused.value)
    assert "CREATE SCHEMA evalmine AUTHORIZATION" in str(refused.value)
    assert PASSWORD not in str(refused.value)
    import psycopg

    with psycopg.connect(postgres_server.url(name), autocommit=True) as db:
        db.execute("CREATE SCHEMA evalmine AUTHORIZATION evalmine")
    store = open_store(url, Path("unused"))
    try:
        assert store.claim("run", "k", "me:1:1") == CLAIMED
    finally:
        store.close()
