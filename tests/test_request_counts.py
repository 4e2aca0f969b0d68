"""Regression guard for the cost of a request (spec: "Connections"): on a small workload over
loopback HTTP, count the TCP connections the server accepts and the SQLite write
transactions the run makes. Counts, never times: benchmarks/ holds the timings."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from .http_server import LoopbackServer, Reply, running_server
from .test_endpoints_run import chat_reply

CASES = 12
CONCURRENCY = 8
# Answers of two models, then the judge in both orders.
POSTS = CASES * 2 + CASES * 2
# Per request paid for, at most: its reservation and the commit of its answer (answer,
# settlement and claim in one), each shared with the other requests of the same turn of the
# event loop (tests/test_dispatch.py shows the sharing). Claims are taken per wave (below).
# It was 4 before batching (issue 10, item 3); it must never grow.
WRITES_PER_CALL = 2
# Per run, whatever its size: the schema when the cache file is opened, and what the adapters
# learnt from their servers, remembered after each of the three plannings (answers, the
# judge's estimate, the judge). A cold run adds one claim transaction per wave of uncached
# requests (answers, judge, a judge retry).
WRITES_PER_RUN = 4
CLAIM_WAVES = 3


def verdict_reply(number: int) -> Reply:
    """A reply that reads as a verdict and, every one distinct, as an answer too (two equal
    answers would make both judge orders one request)."""
    content = json.dumps({"winner": "tie", "reason": f"reply {number}"})
    # Held back so that calls overlap and the client needs several connections at once.
    return dataclasses.replace(chat_reply(content), delay_s=0.05)


def suite_text() -> str:
    lines = [
        "version: 1",
        "suite: counted",
        "models: [local/a, local/b]",
        "judge: {model: local/judge}",
        "defaults: {max_tokens: 64}",
        "tasks:",
        "  - id: answer",
        "    kind: answer",
        '    prompt: "Question {{ n }}"',
        "    cases:",
    ]
    lines += [f"      - {{id: case-{i}, vars: {{n: {i}}}}}" for i in range(CASES)]
    return "\n".join(lines) + "\n"


class StatementLog:
    """Every SQL statement the run's connections execute, via sqlite3's trace callback."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def connect(self, real: Any) -> Any:
        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = real(*args, **kwargs)
            connection.set_trace_callback(self.statements.append)
            return connection

        return connect

    @property
    def kinds(self) -> Counter[str]:
        return Counter(statement.split(None, 1)[0].upper() for statement in self.statements)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with running_server() as server:
        server.add(Reply.json(200, {"object": "list", "data": []}))  # GET /models
        server.add(*(verdict_reply(number) for number in range(POSTS)))
        yield server


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> StatementLog:
    log = StatementLog()
    monkeypatch.setattr(sqlite3, "connect", log.connect(sqlite3.connect))
    return log


def run(pytester: pytest.Pytester, server: LoopbackServer) -> pytest.RunResult:
    return pytester.runpytest(
        f"--evalmine-endpoint=local={server.url}/v1,free",
        f"--evalmine-concurrency={CONCURRENCY}",
        "-p",
        "no:cacheprovider",
    )


def test_one_connection_pool_serves_answers_and_judge_and_writes_stay_bounded(
    pytester: pytest.Pytester, server: LoopbackServer, statements: StatementLog
) -> None:
    pytester.makefile(".eval.yaml", counted=suite_text())
    run(pytester, server).assert_outcomes(passed=CASES * 2)
    methods = Counter(r.method for r in server.requests)
    assert methods == {"GET": 1, "POST": POSTS}, "one model listing for answers and judge"
    # One client for the session: never more connections than calls in flight at once,
    # whichever phase (listing, answers, judge) opened them.
    assert 1 <= server.connections <= CONCURRENCY
    kinds = statements.kinds
    assert kinds["BEGIN"] == kinds["COMMIT"] + kinds["ROLLBACK"]
    assert kinds["BEGIN"] <= WRITES_PER_RUN + CLAIM_WAVES + WRITES_PER_CALL * POSTS


def test_a_warm_rerun_sends_only_the_model_listing_and_writes_nothing_per_call(
    pytester: pytest.Pytester, server: LoopbackServer, statements: StatementLog
) -> None:
    pytester.makefile(".eval.yaml", counted=suite_text())
    run(pytester, server).assert_outcomes(passed=CASES * 2)
    connections, requests = server.connections, len(server.requests)
    writes = statements.kinds["BEGIN"]
    run(pytester, server).assert_outcomes(passed=CASES * 2)
    # The listing decides cache keys, so it is read again; every answer and verdict is cached.
    assert [r.method for r in server.requests[requests:]] == ["GET"]
    assert server.connections == connections + 1
    assert statements.kinds["BEGIN"] - writes <= WRITES_PER_RUN
