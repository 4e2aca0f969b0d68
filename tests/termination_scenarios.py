"""Generated dispatch scenarios that hunt for runs that never end (issue 28, spec "Dispatch",
**Termination**), shared by tests/test_termination.py (a CI profile) and
benchmarks/soak_termination.py (a long soak).

A scenario is 1-3 providers (OpenAI, Anthropic and Gemini wire formats, all served by one
loopback ``BatchProvider``), online, batched or mixed, a cap from zero to above the worst
case (in units of one call's reservation, so the search lands on "fits the first tries but
not a retry"), a fault script per request and attempt (timeout, 429 with Retry-After, 5xx,
connection reset, lying usage), fixed or adaptive widths, 0-2 retries, optionally a second
dispatcher on the same cache (a second process of the same run: its own connection to the
SQLite file and its own owner) and a Ctrl-C after the N-th request the server receives.

``run`` dispatches it under a hard guard (3x the bound computed from its timeouts, retries,
backoffs, polls and the Ctrl-C grace, plus slack: a hang detector, never a performance
threshold) and returns what the invariants are checked on; ``violations`` lists every
invariant the run broke: it ended, every request has an outcome, the ledger is within the
cap, every answer reported OK is in the cache, no reservation, claim or batch submission is
left open.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from pytest_evalmine.adapters.base import Request
from pytest_evalmine.run.batch import MAX_POLL_FAILURES, BatchSession, BatchSettings
from pytest_evalmine.run.dispatch import INTERRUPT_GRACE_S, Dispatcher, Outcome, Planned
from pytest_evalmine.run.loop import SessionLoop
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.store import Store
from tests.batch_run import KEY_ENV, MODELS
from tests.batch_servers import BatchProvider, ProviderServer
from tests.dispatchers import loopback_registry
from tests.http_server import Received, Reply

PROVIDERS = ("openai", "anthropic", "google")
FAULTS = ("ok", "timeout", "429", "500", "reset")
# Drawn per try: the faults a provider may bill (timeout, reset) twice as often as the others.
DRAWN_FAULTS = ("ok", "timeout", "timeout", "429", "500", "reset", "reset")
LIES = ("none", "huge", "zero", "negative")
# Short enough that a scenario full of timeouts stays quick; the server holds a timed-out
# reply twice as long, so the client's own timeout is what ends the try.
TIMEOUT_S = 0.25
RETRY_AFTER_MS = 50
BACKOFF_S = 0.02
POLL_S = 0.05
MAX_TOKENS = 64
# Per try over its timeout, and per poll over its interval: time to be handled on a loaded
# machine.
TRY_SLACK_S = 0.5
POLL_SLACK_S = 0.1
GUARD_FACTOR = 3.0
GUARD_SLACK_S = 10.0
STATUSES = frozenset({"ok", "error", "budget", "interrupted"})


@dataclass(frozen=True)
class Call:
    provider: str
    case: int
    # One fault per try (the tries after the script answer normally).
    faults: tuple[str, ...]
    lie: str = "none"
    # In a batch: the provider reports the request errored.
    batch_errored: bool = False

    @property
    def prompt(self) -> str:
        return f"{self.provider} case {self.case}: what is {self.case} + {self.case}?"


@dataclass(frozen=True)
class Scenario:
    calls: tuple[Call, ...]
    # Providers sent by batch (a subset of the scenario's; empty: all online).
    batched: frozenset[str]
    retries: int
    concurrency: int
    adaptive: bool
    # The cap in units of the largest reservation of one call.
    cap_units: float
    # Else (not None) the cap is this far from the run's estimate to its worst case.
    cap_fraction: float | None = None
    # Polls before each provider's batch ends (batches end at different times).
    polls_to_end: dict[str, int] = field(default_factory=dict)
    # A provider's batch create answered this late (a slow create holds a wave).
    create_delay_s: float = 0.0
    flaky_polls: int = 0
    # Cases the second dispatcher also runs (indexes into calls); None: one process.
    second: tuple[int, ...] | None = None
    # A Ctrl-C after the server received this many requests; None: none.
    interrupt_after: int | None = None

    @property
    def providers(self) -> list[str]:
        return sorted({call.provider for call in self.calls})

    def bound_s(self) -> float:
        """How long the run may take at most, computed from what it is made of, as if every
        call ran one after another: each try its timeout, each retry its longest backoff, each
        batch wave its create and its polls (a failed poll is retried up to
        MAX_POLL_FAILURES times), the Ctrl-C's grace; a second process may wait for all of the
        first's calls."""
        tries = self.retries + 1
        backoff = max(BACKOFF_S * 2**self.retries * 1.25, RETRY_AFTER_MS / 1000)
        online = sum(tries * (TIMEOUT_S + TRY_SLACK_S + backoff) for _ in self.calls)
        waves = len(self.calls) if self.batched else 0
        polls = max(self.polls_to_end.values(), default=0) + 2
        if self.flaky_polls:
            polls += MAX_POLL_FAILURES
        batch = waves * (self.create_delay_s + TRY_SLACK_S + polls * (POLL_S + POLL_SLACK_S))
        one = online + batch
        processes = 2 if self.second is not None else 1
        grace = INTERRUPT_GRACE_S if self.interrupt_after is not None else 0.0
        return processes * one + grace

    def guard_s(self) -> float:
        return GUARD_FACTOR * self.bound_s() + GUARD_SLACK_S


def _calls(draw: Any, providers: list[str], cases: int, retries: int) -> tuple[Call, ...]:
    # Faults come together (a provider's bad minute): most calls get the scenario's storm on
    # their first tries, the others a script of their own.
    storm = draw(st.sampled_from(DRAWN_FAULTS))
    storm_tries = draw(st.integers(0, retries + 1))
    calls = []
    for provider in providers:
        for case in range(cases):
            faults = draw(
                st.just((storm,) * storm_tries)
                | st.just((storm,) * storm_tries)
                | st.lists(st.sampled_from(DRAWN_FAULTS), max_size=retries + 1).map(tuple)
            )
            lie = draw(st.sampled_from(LIES))
            calls.append(Call(provider, case, faults, lie, draw(st.booleans())))
    return tuple(calls)


@st.composite
def scenarios(
    draw: Any, max_cases: int = 3, ways: tuple[str, ...] = ("online", "batch", "mixed")
) -> Scenario:
    """A scenario; ``ways``: online (no batch), batch (every provider batched), mixed (some
    providers batched, the others online)."""
    providers = draw(
        st.lists(st.sampled_from(PROVIDERS), min_size=1, max_size=3, unique=True).map(sorted)
    )
    # At least two calls: a single one can wait for nobody.
    cases = draw(st.integers(2 if len(providers) == 1 else 1, max_cases))
    retries = draw(st.integers(0, 2))
    calls = _calls(draw, providers, cases, retries)
    way = draw(st.sampled_from(ways))
    if way == "online":
        batched: frozenset[str] = frozenset()
    elif way == "batch" or len(providers) == 1:
        batched = frozenset(providers)
    else:
        batched = frozenset(draw(st.lists(st.sampled_from(providers), min_size=1, unique=True)))
    # Mostly caps of a few calls' reservations (where a retry finds no room), also caps up
    # to above the worst case of every try.
    worst_units = len(calls) * (retries + 1) + 1
    whole = draw(st.integers(0, len(calls) + 1) | st.integers(0, worst_units))
    cap_units = whole + draw(st.sampled_from((0.0, 0.5)))
    # Or a cap between the run's estimate and its worst case (what a CLI run accepts).
    cap_fraction = draw(st.sampled_from((None, None, None, 0.0, 0.25, 0.5, 0.75)))
    second = None
    if draw(st.booleans()):
        second = tuple(
            draw(st.lists(st.integers(0, len(calls) - 1), min_size=1, unique=True).map(sorted))
        )
    interrupt_after = draw(st.none() | st.none() | st.integers(1, 3 * len(calls)))
    return Scenario(
        calls=calls,
        batched=batched,
        retries=retries,
        concurrency=draw(st.integers(1, 4)),
        adaptive=draw(st.booleans()),
        cap_units=cap_units,
        cap_fraction=cap_fraction,
        polls_to_end={p: draw(st.integers(0, 3)) for p in sorted(batched)},
        create_delay_s=draw(st.sampled_from((0.0, 0.0, 0.3))) if batched else 0.0,
        flaky_polls=draw(st.sampled_from((0, 0, 3))) if batched else 0,
        second=second,
        interrupt_after=interrupt_after,
    )


class ScriptedProvider(BatchProvider):
    """The loopback batch provider, with each online try answered as the scenario's script
    says, usage that lies where it says so, batch requests that error, and a slow create."""

    def __init__(self, scenario: Scenario, on_request: Any) -> None:
        polls = scenario.polls_to_end
        super().__init__(
            polls_to_end=0,
            flaky_polls=scenario.flaky_polls,
            fail_when=self._batch_failure,
        )
        self.scenario = scenario
        self.by_prompt = {call.prompt: call for call in scenario.calls}
        self.tries: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.requests = 0
        self.on_request = on_request
        self.polls_by_wire = {{"google": "gemini"}.get(p, p): n for p, n in polls.items()}
        self._count_lock = threading.Lock()
        # cache key (a batch request's custom id) -> its call; set once the run is planned
        self.key_calls: dict[str, Call] = {}

    def _ended(self, batch: Any) -> bool:
        if batch.canceled or self.ended_all:
            return True
        return batch.polls > self.polls_by_wire.get(batch.wire, 0)

    def _batch_failure(self, custom_id: str) -> str | None:
        call = self.key_calls.get(custom_id)
        return "errored" if call is not None and call.batch_errored else None

    def respond(self, received: Received) -> Reply:
        with self._count_lock:
            self.requests += 1
            count = self.requests
        try:
            return self._respond(received)
        finally:
            self.on_request(count)

    def _respond(self, received: Received) -> Reply:
        prompt = _online_prompt(received)
        if prompt is None:
            reply = super().respond(received)
            creates = received.method == "POST" and (
                received.path.endswith(("/batches", ":batchGenerateContent"))
            )
            if creates and self.scenario.create_delay_s:
                reply.delay_s = self.scenario.create_delay_s
            return reply
        call = self.by_prompt[prompt]
        with self._count_lock:
            attempt = self.tries[prompt]
            self.tries[prompt] += 1
        fault = call.faults[attempt] if attempt < len(call.faults) else "ok"
        if fault == "timeout":
            return _held(received, self, 2 * TIMEOUT_S)
        if fault == "429":
            return Reply.json(
                429,
                {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                {"retry-after-ms": str(RETRY_AFTER_MS)},
            )
        if fault == "500":
            return Reply.json(500, {"error": {"message": "internal error"}})
        if fault == "reset":
            return Reply(drop=True)
        with self._count_lock:
            self.answered[prompt] += 1
        return super().respond(received)

    def _lied(self, prompt: str, usage: dict[str, int]) -> dict[str, int]:
        call = self.by_prompt.get(prompt)
        lie = call.lie if call is not None else "none"
        if lie == "huge":
            return {name: 10**7 for name in usage}
        if lie == "zero":
            return {
                name: (0 if "out" in name or "candidates" in name else v)
                for name, v in usage.items()
            }
        if lie == "negative":
            return {name: -5 for name in usage}
        return usage

    def _chat(self, body: Any) -> dict[str, Any]:
        answer = super()._chat(body)
        answer["usage"] = self._lied(body["messages"][-1]["content"], answer["usage"])
        return answer

    def _message(self, params: Any) -> dict[str, Any]:
        answer = super()._message(params)
        answer["usage"] = self._lied(params["messages"][-1]["content"], answer["usage"])
        return answer

    def _gemini_answer(self, prompt: str) -> dict[str, Any]:
        answer = super()._gemini_answer(prompt)
        answer["usageMetadata"] = self._lied(prompt, answer["usageMetadata"])
        return answer


def _held(received: Received, provider: ScriptedProvider, seconds: float) -> Reply:
    """The answer, held past the client's timeout (the server still answers, late)."""
    reply = BatchProvider.respond(provider, received)
    reply.delay_s = seconds
    return reply


def _online_prompt(received: Received) -> str | None:
    if received.method != "POST" or not isinstance(received.body, dict):
        return None
    path = received.path.split("?", 1)[0]
    body = received.body
    if path.endswith(("/chat/completions", "/v1/messages")):
        return str(body["messages"][-1]["content"])
    if path.endswith(":generateContent"):
        return str(body["contents"][-1]["parts"][0]["text"])
    return None


@dataclass
class RunResult:
    scenario: Scenario
    ended: bool
    wall_s: float
    cap_usd: float
    run_token: str
    cache: Path
    expected: list[set[str]]
    outcomes: list[dict[str, Outcome]]
    interrupted: bool
    server_requests: int
    error: str | None = None
    # Per dispatcher: whether its RunState ended with nothing outstanding (no reservation,
    # no waiter, no call queued for a batch).
    idle: list[bool] = field(default_factory=list)


def _dispatcher(
    url: str, cache: Path, scenario: Scenario, cap: float, owner: str | None, loop: SessionLoop
) -> Dispatcher:
    batch = (
        BatchSession(BatchSettings(providers=scenario.batched, poll_s=POLL_S))
        if scenario.batched
        else None
    )
    extra: dict[str, Any] = {} if owner is None else {"owner": owner}
    return Dispatcher(
        registry=loopback_registry(url, KEY_ENV),
        store=Store(cache),
        prices=load_prices(),
        run_token="termination-run",
        cap_usd=cap,
        retries=scenario.retries,
        backoff_s=BACKOFF_S,
        concurrency=scenario.concurrency,
        adaptive=scenario.adaptive,
        batch=batch,
        loop=loop,
        **extra,
    )


def _requests(scenario: Scenario, indexes: list[int]) -> list[Request]:
    return [
        Request(
            model=MODELS[scenario.calls[i].provider],
            prompt=scenario.calls[i].prompt,
            max_tokens=MAX_TOKENS,
            timeout_s=TIMEOUT_S,
        )
        for i in indexes
    ]


def run(scenario: Scenario, directory: Path) -> RunResult:
    """Dispatch ``scenario`` against a fresh loopback server and cache in ``directory``,
    under its guard."""
    import os
    import time

    os.environ.setdefault(KEY_ENV, "sk-termination-test")
    cache = directory / "cache.sqlite"
    loop = SessionLoop()
    dispatchers: list[Dispatcher] = []
    interrupted = threading.Event()

    def on_request(count: int) -> None:
        after = scenario.interrupt_after
        if after is None or count < after or interrupted.is_set():
            return
        interrupted.set()
        aio = loop._loop
        if aio is not None:
            for dispatcher in dispatchers:
                aio.call_soon_threadsafe(_interrupt, dispatcher)

    provider = ScriptedProvider(scenario, on_request)
    server = ProviderServer(provider)
    try:
        first_indexes = list(range(len(scenario.calls)))
        # Units of the largest reservation, at the price the call is planned at.
        probe = _dispatcher(server.url, cache, scenario, 0.0, None, loop)
        planned_all = probe.plan(_requests(scenario, first_indexes))
        unit = max(p.max_cost_usd for p in planned_all)
        cap = scenario.cap_units * unit
        if scenario.cap_fraction is not None:
            estimate = probe.estimate(planned_all)
            spread = estimate.worst_case_usd - estimate.cost_usd
            cap = estimate.cost_usd + scenario.cap_fraction * spread
        provider.key_calls = {p.key: c for p, c in zip(planned_all, scenario.calls, strict=True)}
        dispatchers.append(_dispatcher(server.url, cache, scenario, cap, None, loop))
        plans = [dispatchers[0].plan(_requests(scenario, first_indexes))]
        if scenario.second is not None:
            second = _dispatcher(server.url, cache, scenario, cap, "second-host:1:0", loop)
            dispatchers.append(second)
            plans.append(second.plan(_requests(scenario, list(scenario.second))))
        expected = [{p.key for p in plan} for plan in plans]
        guard = scenario.guard_s()
        started = time.perf_counter()
        ended, error = True, None
        results: list[Any] = []
        try:
            results = loop.run(_guarded(dispatchers, plans, guard))
        except (TimeoutError, asyncio.TimeoutError):
            ended = False
        except Exception as exc:  # reported as a violation, with the scenario
            error = f"{type(exc).__name__}: {exc}"
        wall = time.perf_counter() - started
        return RunResult(
            scenario=scenario,
            ended=ended,
            wall_s=wall,
            cap_usd=cap,
            run_token="termination-run",
            cache=cache,
            expected=expected,
            outcomes=list(results),
            interrupted=interrupted.is_set(),
            server_requests=provider.requests,
            error=error,
            idle=[dispatcher.state.idle() for dispatcher in dispatchers] if ended else [],
        )
    finally:
        loop.close()
        for dispatcher in dispatchers:
            dispatcher.store.close()
        server.stop()


async def _guarded(
    dispatchers: list[Dispatcher], plans: list[list[Planned]], guard_s: float
) -> list[dict[str, Outcome]]:
    """Every dispatcher's batch at once on one loop, cancelled when the guard passes."""
    runs = (d._run_all(plan) for d, plan in zip(dispatchers, plans, strict=True))
    return await asyncio.wait_for(asyncio.gather(*runs), guard_s)


def _interrupt(dispatcher: Dispatcher) -> None:
    """The dispatcher's first Ctrl-C, as its SIGINT handler calls it; only while it runs a
    batch (before its first batch, or after its last, a Ctrl-C reaches pytest instead)."""
    if dispatcher._batch_running and dispatcher._reservations is not None:
        dispatcher._on_interrupt()


def violations(result: RunResult) -> list[str]:
    """Every invariant ``result`` broke, each said in a line."""
    found: list[str] = []
    if result.error is not None:
        found.append(f"the dispatch raised {result.error}")
    if not result.ended:
        found.append(
            f"the run did not end within its guard of {result.scenario.guard_s():.1f} s "
            f"(bound {result.scenario.bound_s():.1f} s)"
        )
    for n, idle in enumerate(result.idle):
        if not idle:
            found.append(f"process {n}: its run state was left with work outstanding")
    for n, (keys, outcomes) in enumerate(zip(result.expected, result.outcomes, strict=False)):
        if set(outcomes) != keys:
            found.append(f"process {n}: {len(keys - set(outcomes))} request(s) without outcome")
        odd = {o.status for o in outcomes.values()} - STATUSES
        if odd:
            found.append(f"process {n}: unknown statuses {sorted(odd)}")
    db = sqlite3.connect(result.cache)
    try:
        committed = db.execute(
            "SELECT COALESCE(SUM(CASE WHEN state = 'spent' THEN spent_usd ELSE reserved_usd END),"
            " 0) FROM ledger WHERE run_token = ? AND state != 'released'",
            (result.run_token,),
        ).fetchone()[0]
        if committed > result.cap_usd + 1e-9:
            found.append(f"spent and possibly billed {committed!r} > cap {result.cap_usd!r}")
        if result.ended:
            reserved = db.execute(
                "SELECT COUNT(*) FROM ledger WHERE state = 'reserved'"
            ).fetchone()[0]
            if reserved:
                found.append(f"{reserved} reservation(s) left 'reserved' after the run")
        running = db.execute("SELECT key, owner FROM claims WHERE status = 'running'").fetchall()
        if running:
            found.append(f"{len(running)} claim(s) left running: {running}")
        submitting = db.execute(
            "SELECT local_id FROM batches WHERE state = 'submitting'"
        ).fetchall()
        if submitting:
            found.append(f"{len(submitting)} batch(es) left submitting")
        cached = {row[0] for row in db.execute("SELECT key FROM answers")}
    finally:
        db.close()
    for outcomes in result.outcomes:
        lost = [key for key, o in outcomes.items() if o.status == "ok" and key not in cached]
        if lost:
            found.append(f"{len(lost)} answer(s) reported OK but not in the cache")
    return found


def describe(result: RunResult) -> dict[str, Any]:
    """A scenario's counts, for the soak's figures."""
    kinds: Counter[str] = Counter()
    for outcomes in result.outcomes:
        for outcome in outcomes.values():
            kinds[outcome.error_kind or outcome.status] += 1
    return {
        "calls": len(result.scenario.calls),
        "outcomes": dict(kinds),
        "wall_s": result.wall_s,
        "bound_s": result.scenario.bound_s(),
        "ended": result.ended,
    }


def dumps(scenario: Scenario) -> str:
    return json.dumps(repr(scenario))
