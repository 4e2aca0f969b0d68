"""Team scale for real (issue 30, "Tested for real"): shards as separate pytest processes,
each with a home and a project folder of its own, sharing nothing but a real PostgreSQL
store, against a real loopback server speaking the Chat Completions wire format that counts
every request body. A shard killed with -9 and rerun, two processes racing for the same
requests, one cap shared by three shards under lying usage, the server restarted mid-run,
and the merged run against a one-process run (docs/spec.md "Cache database", "Prices and the
budget", "Shards and merge")."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine import exitcodes
from pytest_evalmine.engine.shards import shard_of
from pytest_evalmine.options import SHARD_INDEX_ENV

from .conftest import open_test_store
from .http_server import LoopbackServer, Received, Reply
from .postgres_server import PostgresServer
from .test_endpoints_run import MODELS
from .test_shards import SHARDY_SUITE, differences, masked
from .test_usage_lies import LIES

SUITE_NAME = "team"
CASES = 15
MODEL_NAMES = ("local/a", "local/b")
# A price whose input dominates, as in tests/test_usage_lies.py: a lie about input moves the
# cost the most.
PRICES = "input=100,output=1"
TEAM_SUITE = (
    f"version: 1\nsuite: {SUITE_NAME}\nmodels: [{', '.join(MODEL_NAMES)}]\n"
    "defaults: {max_tokens: 64, temperature: 0}\n"
    "tasks:\n  - id: polite\n    kind: rewrite\n"
    '    prompt: "Rewrite politely: {{ text }}"\n    cases:\n'
) + "".join(f'      - {{id: c{i:02d}, vars: {{text: "ticket {i:02d}"}}}}\n' for i in range(CASES))
TICKET = re.compile(r"ticket (\d\d)")
REQUESTS = CASES * len(MODEL_NAMES)
# Every process of these tests: claims of a killed process are taken over after 1 s.
LEASE_S = "1"


def case_of(received: Received) -> int:
    """The case a request body asks about (its ``ticket NN``)."""
    text = " ".join(str(m.get("content")) for m in received.body["messages"])
    found = TICKET.search(text)
    assert found, text
    return int(found.group(1))


def shard_of_case(case: int, count: int) -> int:
    return shard_of((SUITE_NAME, "polite", f"c{case:02d}"), count)


@dataclass
class Seen:
    """One POST the server received: its body (canonical JSON), its case, and when it arrived
    and was answered (``time.time()``, the clock PostgreSQL's ``now()`` reads too)."""

    body: str
    case: int
    arrived: float
    answered: float | None = None


def honest(received: Received) -> dict[str, int]:
    return {"prompt_tokens": 20, "completion_tokens": 6}


@dataclass
class WireServer:
    """A Chat Completions server on loopback that answers every request after ``delay_s``
    and records it in ``seen``. ``usage_of`` says what usage a request's answer reports
    (honest by default, a lie from tests/test_usage_lies.py where a test says so);
    ``fail_first`` answers the first try of the cases it names with a fault instead (``500``
    or ``drop``: the connection closed without an answer, a try that may have been billed)."""

    delay_s: float
    usage_of: Callable[[Received], dict[str, Any]] = honest
    fail_first: dict[int, str] = field(default_factory=dict)
    # When given, every request waits for it before being served (a race made certain).
    gate: threading.Event | None = None
    seen: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: LoopbackServer = field(default_factory=LoopbackServer)

    def __post_init__(self) -> None:
        self._server.respond = self.respond
        # A killed shard resets its connections: no traceback of that on the test's output.
        self._server._httpd.handle_error = lambda request, address: None  # type: ignore[method-assign]

    @property
    def endpoint(self) -> str:
        return f"--evalmine-endpoint=local={self._server.url}/v1,{PRICES}"

    def respond(self, received: Received) -> Reply:
        if received.method == "GET":
            return Reply.json(200, MODELS)
        seen = Seen(json.dumps(received.body, sort_keys=True), case_of(received), time.time())
        with self._lock:
            tries = sum(s.body == seen.body for s in self.seen)
            self.seen.append(seen)
        if self.gate is not None:
            self.gate.wait(timeout=120)
        time.sleep(self.delay_s)
        fault = self.fail_first.get(seen.case) if tries == 0 else None
        if fault == "drop":
            return Reply(drop=True)
        if fault == "500":
            return Reply.json(500, {"error": {"message": "overloaded"}})
        seen.answered = time.time()
        return Reply.json(
            200,
            {
                "id": f"chatcmpl-{len(self.seen)}",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": f"Happy to help ({seen.case}).",
                        },
                        "finish_reason": "stop",
                    }
                ],
                "usage": self.usage_of(received),
            },
        )

    def tries(self) -> Counter[str]:
        with self._lock:
            return Counter(s.body for s in self.seen)

    def of_cases(self, cases: set[int]) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.case in cases]


@pytest.fixture
def wire() -> Iterator[Callable[..., WireServer]]:
    started: list[LoopbackServer] = []

    def start(**kwargs: Any) -> WireServer:
        server = WireServer(**kwargs)
        server._server.start()
        started.append(server._server)
        return server

    yield start
    for server in started:
        server.stop()


# processes ----------------------------------------------------------------------------------
@dataclass
class Shard:
    """One machine: a project folder and an EVALMINE_HOME of its own."""

    root: Path
    home: Path
    process: subprocess.Popen[str] | None = None
    runs: list[tuple[int, str]] = field(default_factory=list)  # (exit code, output) per run

    def start(self, *args: str) -> None:
        environment = {**os.environ, "EVALMINE_HOME": str(self.home), "EVALMINE_LEASE_S": LEASE_S}
        environment.pop(SHARD_INDEX_ENV, None)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
            environment.pop(name, None)
            environment.pop(name.lower(), None)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
        self.process = subprocess.Popen(
            command,
            cwd=self.root,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait(self) -> tuple[int, str]:
        assert self.process is not None
        try:
            output, _ = self.process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            self.process.kill()
            output, _ = self.process.communicate()
            pytest.fail(f"a shard hung:\n{output[-3000:]}")
        self.runs.append((self.process.returncode, output))
        return self.runs[-1]

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.communicate(timeout=60)

    @property
    def owner_pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def partials(self, suite: str = SUITE_NAME) -> list[Path]:
        return sorted((self.root / "reports" / suite).glob("*/report.json"))


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[Callable[..., list[Shard]]]:
    """``machines(count)``: that many shards, each with a project folder (the suite) and a
    home of its own; any still running at the end is killed."""
    made: list[Shard] = []

    def make(count: int, suite: str = TEAM_SUITE, name: str = SUITE_NAME) -> list[Shard]:
        shards = []
        for _ in range(count):
            number = len(made) + 1
            root = tmp_path / f"machine{number}"
            root.mkdir()
            (root / "pytest.ini").write_text("[pytest]\n")
            (root / f"{name}.eval.yaml").write_text(suite)
            shards.append(Shard(root, tmp_path / f"home{number}"))
            made.append(shards[-1])
        return shards

    yield make
    for shard in made:
        if shard.process is not None and shard.process.poll() is None:
            shard.process.kill()
            shard.process.communicate()


def shard_args(url: str, index: int, count: int, name: str) -> list[str]:
    return [
        f"--evalmine-store={url}",
        f"--evalmine-run-name={name}",
        f"--evalmine-shard={index}/{count}",
        "--evalmine-concurrency=fixed:2",
    ]


def merge(
    tmp_path: Path, shards: list[Shard], name: str, suite: str = SUITE_NAME
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``evalmine merge NAME`` in a folder of its own that holds every shard's partial runs,
    as a CI merge job downloads them."""
    root = tmp_path / "merge"
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    for suite_file in shards[0].root.glob("*.eval.yaml"):  # the merge job's checkout has it
        shutil.copy(suite_file, root / suite_file.name)
    for shard in shards:
        for report in shard.partials(suite):
            shutil.copytree(report.parent, root / "reports" / suite / report.parent.name)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_evalmine.commands.cli",
            "merge",
            name,
            "--rootdir",
            str(root),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, root


def merged_report(root: Path, suite: str = SUITE_NAME) -> dict[str, Any]:
    (report,) = [
        r
        for r in (
            json.loads(p.read_text()) for p in (root / "reports" / suite).glob("*/report.json")
        )
        if r["merged_from"]
    ]
    return report


def query(url: str, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
    """The store's tables read directly (schema ``evalmine``), as an operator would."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        return db.execute(sql, parameters or None).fetchall()


def owner_of(url: str, pid: int) -> str | None:
    rows = query(
        url, "SELECT DISTINCT owner FROM evalmine.claims WHERE owner LIKE %s", f"%:{pid}:%"
    )
    return rows[0][0] if rows else None


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(0.05)


def answers_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "answers.jsonl").read_text().splitlines()]


def no_traceback(output: str) -> None:
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-4000:]


# 1. kill -9 one shard mid-run, rerun it -----------------------------------------------------
def test_a_shard_killed_mid_run_and_rerun_pays_nothing_twice_and_loses_nothing(
    tmp_path: Path,
    postgres_url: str,
    wire: Callable[..., WireServer],
    machines: Callable[..., list[Shard]],
) -> None:
    open_test_store(postgres_url).close()  # the schema in place, as a run's start does
    server = wire(delay_s=0.3)
    shards = machines(3)
    for index, shard in enumerate(shards, start=1):
        shard.start(server.endpoint, *shard_args(postgres_url, index, 3, "nightly"))
    # The victim: the shard with the most cases, so its run is longest to be killed in.
    slices = {k: {c for c in range(CASES) if shard_of_case(c, 3) == k} for k in (1, 2, 3)}
    index = max(slices, key=lambda k: len(slices[k]))
    victim, victim_cases = shards[index - 1], slices[index]
    assert len(victim_cases) >= 3, "the victim has calls to be killed among"

    def victim_mid_run() -> bool:
        owner = owner_of(postgres_url, victim.owner_pid)
        if owner is None:
            return False
        (spent,) = query(
            postgres_url,
            "SELECT COUNT(*) FROM evalmine.ledger WHERE state = 'spent' AND run_token IN "
            "(SELECT run_token FROM evalmine.claims WHERE owner = %s)",
            owner,
        )[0]
        in_flight = [s for s in server.of_cases(victim_cases) if s.answered is None]
        return spent >= 2 and bool(in_flight)

    wait_for(victim_mid_run, "the victim shard to have answers recorded and calls in flight")
    owner = owner_of(postgres_url, victim.owner_pid)
    victim.kill()
    killed_at = time.time()
    assert victim.process is not None and victim.process.returncode == -signal.SIGKILL
    (victim_token,) = query(
        postgres_url, "SELECT DISTINCT run_token FROM evalmine.claims WHERE owner = %s", owner
    )[0]
    running = {
        row[0]
        for row in query(
            postgres_url,
            "SELECT key FROM evalmine.claims WHERE owner = %s AND status = 'running'",
            owner,
        )
    }
    ((lease_until,),) = query(
        postgres_url,
        "SELECT EXTRACT(EPOCH FROM lease_until)::float8 FROM evalmine.owner_leases "
        "WHERE owner = %s",
        owner,
    )
    # Nothing lost: every answer the victim's ledger settled (the server sent it and the run
    # recorded its cost) is in the cache.
    spent_keys = {
        row[0]
        for row in query(
            postgres_url,
            "SELECT key FROM evalmine.ledger WHERE run_token = %s AND state = 'spent'",
            victim_token,
        )
    }
    cached = {row[0] for row in query(postgres_url, "SELECT key FROM evalmine.answers")}
    assert spent_keys and spent_keys <= cached
    before_rerun = len(server.of_cases(victim_cases))
    assert before_rerun < 2 * len(victim_cases), "the victim was killed before its last call"

    others = [shard.wait() for shard in shards if shard is not victim]
    for code, output in others:
        assert code == 0, output[-3000:]
    victim.start(server.endpoint, *shard_args(postgres_url, index, 3, "nightly"))
    code, output = victim.wait()
    assert code == 0, output[-3000:]
    no_traceback(output)

    tries = server.tries()
    assert len(tries) == REQUESTS, "every request was made"
    again = {body for body, count in tries.items() if count > 1}
    assert all(count <= 2 for count in tries.values()), tries.most_common(3)
    # What may be sent again: the calls the victim had in flight when it was killed (its
    # claims still running), and only once its lease had lapsed.
    assert len(again) <= len(running)
    for body in again:
        first, second = [s for s in server.seen if s.body == body]
        assert first.case in victim_cases
        assert first.arrived < killed_at
        assert second.arrived > lease_until, "sent again while the killed shard's lease lived"

    done, root = merge(tmp_path, shards, "nightly")
    assert done.returncode == 0, done.stdout + done.stderr
    whole = merged_report(root)
    assert whole["items"] == REQUESTS
    assert len(whole["merged_from"]) == 3


# 2. two processes racing for the same requests ----------------------------------------------
def test_two_processes_racing_for_the_same_requests_pay_each_once(
    postgres_url: str, wire: Callable[..., WireServer], machines: Callable[..., list[Shard]]
) -> None:
    """Both run the whole suite on one store, started together; the server answers nothing
    until both have claimed (both owners hold a lease), so the race is certain."""
    open_test_store(postgres_url).close()
    gate = threading.Event()
    server = wire(delay_s=0.1, gate=gate)
    racers = machines(2)
    for racer in racers:
        racer.start(
            server.endpoint, f"--evalmine-store={postgres_url}", "--evalmine-concurrency=fixed:4"
        )
    pids = [racer.owner_pid for racer in racers]

    def both_claimed() -> bool:
        owners = query(postgres_url, "SELECT owner FROM evalmine.owner_leases")
        return all(any(f":{pid}:" in owner for (owner,) in owners) for pid in pids)

    wait_for(both_claimed, "both processes to claim")
    gate.set()
    for racer in racers:
        code, output = racer.wait()
        assert code == 0, output[-3000:]
        no_traceback(output)
    tries = server.tries()
    assert len(tries) == REQUESTS
    assert [body for body, count in tries.items() if count != 1] == [], "a request paid twice"
    reports = [json.loads(racer.partials()[-1].read_text()) for racer in racers]
    assert [r["items"] for r in reports] == [REQUESTS, REQUESTS]
    assert sum(r["calls"]["made"] for r in reports) == REQUESTS


# 3. one cap shared by three shards, lying usage among the faults ----------------------------
def lying(received: Received) -> dict[str, Any]:
    """Honest for a third of the cases; the others report twice the bounds or a negative
    prompt count (tests/test_usage_lies.py), both priced at the call's reservation."""
    case = case_of(received)
    return [honest, LIES["twice-the-bounds"], LIES["negative-prompt"]][case % 3](received)


REFUSED = exitcodes.REFUSED_BEFORE_SPENDING
# What the whole suite may cost at worst (spec "Prices and the budget", "Reservation"): each
# call's input bound, the prompt's UTF-8 bytes + 64, at the input price, and max_tokens at
# the output price, which is what a lying call is priced at.
WORST_CASE_USD = (
    sum(
        (len(f"Rewrite politely: ticket {case:02d}".encode()) + 64) * 100 + 64 * 1
        for case in range(CASES)
        for _ in MODEL_NAMES
    )
    / 1e6
)


def test_a_cap_shared_by_three_shards_is_never_exceeded_under_lying_usage(
    postgres_url: str, wire: Callable[..., WireServer], machines: Callable[..., list[Shard]]
) -> None:
    open_test_store(postgres_url).close()
    # A 500 and a dropped connection (a try that may have been billed) on first tries too.
    server = wire(delay_s=0.05, usage_of=lying, fail_first={4: "500", 7: "drop", 11: "drop"})
    cap = 0.1
    shards = machines(3)
    for index, shard in enumerate(shards, start=1):
        shard.start(
            server.endpoint,
            *shard_args(postgres_url, index, 3, "capped"),
            f"--evalmine-max-cost={cap}",
        )
    results = [shard.wait() for shard in shards]
    for code, output in results:
        assert code in (0, exitcodes.STOPPED_OVER_BUDGET, exitcodes.REFUSED_BEFORE_SPENDING), (
            output[-3000:]
        )
        no_traceback(output)
    # The three together would have spent past the cap: it had to refuse.
    assert cap < WORST_CASE_USD
    ran = [(s, r) for s, r in zip(shards, results, strict=True) if r[0] != REFUSED]
    reports = [json.loads(shard.partials()[-1].read_text()) for shard, _ in ran]
    spent = sum(r["cost"]["spent_usd"] for r in reports)
    possibly = sum(r["cost"]["possibly_billed_usd"] for r in reports)
    assert spent > 0 and spent + possibly <= cap * (1 + 1e-9)
    ((ledger_spent, ledger_possibly),) = query(
        postgres_url,
        "SELECT COALESCE(SUM(spent_usd) FILTER (WHERE state = 'spent'), 0), "
        "COALESCE(SUM(reserved_usd) FILTER (WHERE state = 'possibly_billed'), 0) "
        "FROM evalmine.ledger",
    )
    assert ledger_spent == pytest.approx(spent, rel=1e-9)
    assert ledger_spent + ledger_possibly <= cap * (1 + 1e-9)
    ((committed, budgets),) = query(
        postgres_url, "SELECT SUM(committed_usd), COUNT(*) FROM evalmine.run_totals"
    )
    assert budgets == 1 and committed <= cap * (1 + 1e-9), "one budget, within the cap"
    # The refusals are budget outcomes: an item the cap kept from being sent is
    # not_run_budget, one whose retry it refused an error saying so (spec "Dispatch", step
    # 6), and a shard that had either exits 11; no other item failed. A shard refused before
    # spending (what the others reserved left no room for its estimate) says so, exit 10.
    refused = 0
    for code, output in results:
        if code == REFUSED:
            assert f"evalmine: exit {REFUSED}: " in output and "cap" in output, output[-3000:]
            refused += 1
    for (shard, (code, output)), report in zip(ran, reports, strict=True):
        rows = answers_of(shard.partials()[-1].parent)
        budget = [
            r
            for r in rows
            if r["outcome"] == "not_run_budget"
            or (r["outcome"] == "error" and "the cost cap has no room" in r["error"])
        ]
        assert len(budget) + sum(r["outcome"] == "passed" for r in rows) == report["items"]
        refused += len(budget)
        assert code == (exitcodes.STOPPED_OVER_BUDGET if budget else 0), output[-3000:]
        assert report["partial"] == bool(budget)
    assert refused > 0
    # The lies were seen and clamped: each answer that lied is listed as an anomaly.
    assert sum(len(r["usage_anomalies"]) for r in reports) > 0


# 4. the PostgreSQL server restarted mid-run -------------------------------------------------
def test_the_store_server_restarted_mid_run_then_the_rerun_completes_paying_nothing_twice(
    tmp_path: Path,
    postgres_server: PostgresServer,
    postgres_url: str,
    wire: Callable[..., WireServer],
    machines: Callable[..., list[Shard]],
) -> None:
    open_test_store(postgres_url).close()
    server = wire(delay_s=0.3)
    shards = machines(3)
    for index, shard in enumerate(shards, start=1):
        shard.start(server.endpoint, *shard_args(postgres_url, index, 3, "restarted"))
    wait_for(lambda: len(server.seen) >= 6, "the shards to be sending")
    postgres_server.restart()
    restarted_at = time.time()
    results = [shard.wait() for shard in shards]
    for _, output in results:
        no_traceback(output)
    assert any(s.arrived > restarted_at for s in server.seen), "the restart was mid-run"
    for index, shard in enumerate(shards, start=1):
        if shard.runs[-1][0] != 0:
            shard.start(server.endpoint, *shard_args(postgres_url, index, 3, "restarted"))
            code, output = shard.wait()
            assert code == 0, output[-3000:]
    tries = server.tries()
    assert len(tries) == REQUESTS
    assert [body for body, count in tries.items() if count != 1] == [], "a request paid twice"
    done, root = merge(tmp_path, shards, "restarted")
    assert done.returncode == 0, done.stdout + done.stderr
    assert merged_report(root)["items"] == REQUESTS


# 5. the merged run on PostgreSQL equals a one-process run -----------------------------------
def test_the_merged_run_on_postgresql_equals_a_one_process_run_on_the_fake_adapter(
    tmp_path: Path, postgres_url: str, machines: Callable[..., list[Shard]]
) -> None:
    open_test_store(postgres_url).close()
    single, *shards = machines(4, suite=SHARDY_SUITE, name="shardy")
    single.start("--evalmine-fake")
    for index, shard in enumerate(shards, start=1):
        shard.start("--evalmine-fake", *shard_args(postgres_url, index, 3, "whole")[:3])
    for shard in [single, *shards]:
        code, output = shard.wait()
        assert code == 0, output[-3000:]
    done, root = merge(tmp_path, shards, "whole", "shardy")
    assert done.returncode == 0, done.stdout + done.stderr
    (alone,) = [
        json.loads(p.read_text())
        for p in (single.root / "reports" / "shardy").glob("*/report.json")
    ]
    whole = merged_report(root, "shardy")
    assert whole["items"] == alone["items"] == 24
    assert differences(without_latencies(masked(alone)), without_latencies(masked(whole))) == []


# Measured durations: two cold runs time their calls apart (tests/test_shards.py compares
# runs over one cache, whose answers keep the latency they were stored with).
LATENCIES = {"latency_p50_s", "latency_p95_s"}


def without_latencies(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_latencies(v) for k, v in value.items() if k not in LATENCIES}
    if isinstance(value, list):
        return [without_latencies(v) for v in value]
    return value
