"""Concurrent dispatch: the one place that spends money (spec: "Dispatch").

For every planned request: read the cache, claim the call for this process, reserve its
worst-case cost, call the adapter with retries, store the paid answer and settle the ledger.
Requests run concurrently on one asyncio loop, bounded per provider (``concurrency.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import random
import signal
import threading
import warnings
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..adapters.base import SCHEMA_PROMPTED, Adapter, AdapterError, Request, Response, cache_key
from ..adapters.registry import AdapterRegistry
from ..errors import EvalmineError, EvalmineWarning
from ..redaction import redact
from .batch import Batcher, BatchSession, batched_call
from .concurrency import Attempt, ConcurrencyLimiter, Gate, is_overload
from .loop import SessionLoop
from .outcome import BUDGET, ERROR, INTERRUPTED, OK, REPLAY_MISS, Outcome, Progress
from .planned import Estimate, Planned
from .prices import PriceRow, PriceTable, declared_row
from .replay import ReplayMisses
from .same_turn import SameTurn
from .store import (
    ANSWERED,
    CLAIMED,
    Claim,
    Hit,
    PaidAnswer,
    Store,
    owner_alive,
    process_owner,
)
from .streaming import Streaming

# What callers import from here: the statuses, the outcome and the plan (their own modules).
__all__ = [
    "BUDGET",
    "ERROR",
    "INTERRUPTED",
    "OK",
    "REPLAY_MISS",
    "Dispatcher",
    "Estimate",
    "Outcome",
    "Planned",
    "Progress",
    "Streaming",
]

T = TypeVar("T")
RECORD_MODES = ("new", "all", "none")
# After the first Ctrl-C, how long calls already sent may take to land in the cache.
INTERRUPT_GRACE_S = 10.0
# Slack over the model's own limit so the adapter's timeout fires first with its own message.
TIMEOUT_SLACK_S = 5.0
CLAIM_POLL_S = 0.05
# How often a dispatch looks whether another process of its run (the xdist controller, on its
# Ctrl-C) asked the run to stop sending: one read of a one-row table.
STOP_POLL_S = 0.05
# A provider asking for a longer pause (a daily quota, say) will not recover within a run.
MAX_RETRY_AFTER_S = 120.0


@dataclass
class Dispatcher:
    registry: AdapterRegistry
    store: Store
    prices: PriceTable
    run_token: str
    cap_usd: float
    record: str = "new"
    concurrency: int = 8
    retries: int = 2
    backoff_s: float = 0.5
    rpm: dict[str, int] = field(default_factory=dict)
    # Per-provider concurrency where it differs from ``concurrency`` (e.g. a one-slot server).
    provider_concurrency: dict[str, int] = field(default_factory=dict)
    # Adapt each provider's width to its server below that ceiling (``run/concurrency.py``);
    # off, every provider gets its ceiling at once (a dispatcher built directly, as tests that
    # stress a width need). The session turns it on.
    adaptive: bool = False
    # Providers whose width stays at their ceiling even when adapting (``concurrency=fixed:N``).
    fixed_providers: frozenset[str] = frozenset()
    on_progress: Callable[[Progress], None] | None = None
    # The session's loop, shared with its other dispatchers; None: a loop per batch.
    loop: SessionLoop | None = None
    # Told, on the first Ctrl-C, how many calls are in flight and the grace they get.
    on_interrupt: Callable[[int, float], None] | None = None
    owner: str = field(default_factory=process_owner)
    # Provider batches (``run/batch.py``): the batched providers' uncached calls wait for a
    # batch instead of being sent online, priced at the batch rate; None: all online.
    batch: BatchSession | None = None
    budget_exhausted: bool = False
    # Set by the first Ctrl-C while dispatching: nothing new is sent after it.
    interrupted: bool = False
    # Other runs on the same cache whose calls this run waited for: run token -> what that
    # run had committed (spent or reserved) when ours finished dispatching.
    other_runs: dict[str, float] = field(default_factory=dict)
    _in_flight: int = field(default=0, init=False, repr=False)
    _batch_running: bool = field(default=False, init=False, repr=False)
    _previous_sigint: Any = field(default=None, init=False, repr=False)
    _waiting: dict[str, asyncio.Future[Claim | None]] = field(
        default_factory=dict, init=False, repr=False
    )
    _poller: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _calls: set[asyncio.Future[Response]] = field(default_factory=set, init=False, repr=False)
    _grace_over: bool = field(default=False, init=False, repr=False)
    _reservations: SameTurn[tuple[Planned, bool], int | None] | None = field(
        default=None, init=False, repr=False
    )
    _answers: SameTurn[PaidAnswer, None] | None = field(default=None, init=False, repr=False)
    _settled: asyncio.Event | None = field(default=None, init=False, repr=False)
    _pacers: dict[str, _Pacer] = field(default_factory=dict, init=False, repr=False)
    # One per provider for the dispatcher's life: what a batch learnt, the next one keeps.
    _limiters: dict[str, ConcurrencyLimiter] = field(default_factory=dict, init=False, repr=False)
    _gates: dict[str, Gate] = field(default_factory=dict, init=False, repr=False)
    _replay_misses: ReplayMisses | None = field(default=None, init=False, repr=False)
    _batcher: Batcher | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.record not in RECORD_MODES:
            raise EvalmineError(f"record mode {self.record!r}: choose from {RECORD_MODES}")
        if not (math.isfinite(self.cap_usd) and self.cap_usd >= 0):
            # A NaN cap compares false with everything: it would never stop a run.
            raise EvalmineError(f"cost cap {self.cap_usd!r}: a finite number of dollars >= 0")

    def plan(self, requests: Iterable[Request]) -> list[Planned]:
        """Resolve adapters, keys and prices. Raises before any call for an unknown model."""
        requests = list(requests)
        resolved = []
        adapters: dict[int, tuple[Adapter, set[str]]] = {}
        for request in requests:
            adapter = self._adapter(request.model)
            price = self._price(adapter, request.model)
            if self.batch is not None and self.batch.takes(adapter):
                price = self.prices.batch_row(price, adapter.name)
            if request.asks_prompted and adapter.schema_mode(request) != SCHEMA_PROMPTED:
                # Sent natively, the answer would be filed as prompted: refused, not mislabelled.
                raise EvalmineError(
                    f"adapter {adapter.name!r} (model {request.model!r}) does not put the schema "
                    "in the prompt when a request asks for schema_mode 'prompted' (a variant's "
                    "schema_mode): its schema_mode(request) must return 'prompted' for it"
                )
            resolved.append((request, adapter, price))
            adapters.setdefault(id(adapter), (adapter, set()))[1].add(request.model)
        for adapter, _models in adapters.values():
            warn_without_fingerprint(adapter)
        if self.record == "none":
            self._restore_prepared(adapter for adapter, _models in adapters.values())
        else:
            self._prepare(adapters.values())
        return [
            Planned(request, cache_key(adapter, request), adapter, price)
            for request, adapter, price in resolved
        ]

    def price_for(self, model: str) -> PriceRow:
        """The price row ``model`` is charged at, as planning resolves it (its adapter's
        declared cost, else the price table); ``EvalmineError`` when it resolves nowhere."""
        return self._price(self._adapter(model), model)

    def _adapter(self, model: str) -> Adapter:
        try:
            return self.registry.adapter_for(model)
        except EvalmineError:
            self.prices.lookup(model)  # a model known nowhere: the price error lists the known
            raise

    def _price(self, adapter: Adapter, model: str) -> PriceRow:
        """An adapter's declared ``cost`` (e.g. your own application's: ``"free"``) wins over
        the price table, as an endpoint's does."""
        cost = getattr(adapter, "cost", None)
        if cost is None:
            return self.prices.lookup(model)
        return declared_row(model, cost, f"adapter {adapter.name!r}")

    def _limiter(self, adapter: Adapter) -> ConcurrencyLimiter:
        limiter = self._limiters.get(adapter.name)
        if limiter is None:
            ceiling = self.provider_concurrency.get(adapter.name, self.concurrency)
            # A server that says how many requests it serves at once (llama.cpp's slots).
            declared = getattr(adapter, "server_slots", None)
            limiter = self._limiters[adapter.name] = ConcurrencyLimiter(
                ceiling,
                fixed=not self.adaptive or adapter.name in self.fixed_providers,
                declared=declared if isinstance(declared, int) else None,
            )
        return limiter

    def concurrency_used(self) -> dict[str, dict[str, Any]]:
        """Per provider that was called: its widths (min, max, final) and back-offs."""
        return {
            name: limiter.summary()
            for name, limiter in sorted(self._limiters.items())
            if limiter.sent
        }

    def unready(self, models: Iterable[str]) -> list[str]:
        """Why the adapters serving ``models`` cannot be called (a missing key), one line per
        adapter, so a run can name every missing variable at once. A replay needs no key."""
        if self.record == "none":
            return []
        adapters = {id(a): a for a in map(self._adapter, models)}
        return [p for adapter in adapters.values() if (p := _unready(adapter)) is not None]

    def _prepare(self, adapters: Iterable[tuple[Adapter, set[str]]]) -> None:
        """Check keys and let adapters look up their servers (model listings, digests), then
        remember what they learnt, so a replay can build the same cache keys offline."""
        adapters = list(adapters)
        problems = [p for adapter, _models in adapters if (p := _unready(adapter)) is not None]
        if problems:
            raise EvalmineError("; ".join(problems))
        preparing = [
            (adapter, sorted(models))
            for adapter, models in adapters
            if getattr(adapter, "prepare", None) is not None
        ]
        if not preparing:
            return
        self._run_coroutine(_prepare_all(preparing))
        for adapter, _models in preparing:
            state = getattr(adapter, "prepared_state", lambda: None)()
            if state is None:
                continue
            # A server may echo the key in its listing. What is kept is redacted, and the
            # adapter keys its cache by that same kept state, so a replay builds equal keys.
            kept = json.loads(redact(json.dumps(state)))
            restore = getattr(adapter, "restore_state", None)
            if kept != state and restore is not None:
                restore(kept)
            self.store.remember_adapter_state(adapter.name, kept)

    def _restore_prepared(self, adapters: Iterable[Adapter]) -> None:
        """Replay (record mode ``none``) touches no network and needs no key: each adapter gets
        back what it learnt the last time it prepared, from the cache database."""
        for adapter in adapters:
            restore = getattr(adapter, "restore_state", None)
            state = self.store.adapter_state(adapter.name) if restore else None
            if restore is not None and state is not None:
                restore(state)

    def estimate(self, planned: Iterable[Planned]) -> Estimate:
        """What this run would send (cache hits are free) and what this run has already
        committed in the ledger (spent or reserved by earlier calls of the same run)."""
        return self._estimate([list(planned)])

    def estimate_requests(self, requests: Iterable[Request], part: int) -> Estimate:
        """``estimate(plan(requests))``, planned and looked up ``part`` requests at a time, so
        that the requests (a warm rerun builds every judge call to find it cached) are never
        all in memory at once; the same figures, summed over the calls in the same order."""
        return self._estimate(self.plan(chunk) for chunk in _parts(requests, part))

    def _estimate(self, parts: Iterable[list[Planned]]) -> Estimate:
        """``estimate`` over planned calls that come in parts, each looked up in one read."""
        reads = self.record != "all"
        seen: set[str] = set()
        cached = 0
        costs: list[float] = []
        worst: list[float] = []
        for planned in parts:
            unique = {p.key: p for p in planned if p.key not in seen}
            seen.update(unique)
            found = self.store.cached_keys(list(unique)) if reads else set()
            sent = [p for key, p in unique.items() if key not in found]
            cached += len(unique) - len(sent)
            if self.record != "none":
                costs += (p.estimated_cost_usd for p in sent)
                worst += (p.max_cost_usd for p in sent)
        return Estimate(
            calls=len(seen),
            cached=cached,
            uncached=len(costs),
            cost_usd=sum(costs),
            already_committed_usd=self.store.committed(self.run_token),
            worst_case_usd=sum(worst),
        )

    def estimate_by_size(self, like: Planned, text_chars: list[int]) -> Estimate:
        """Calls that cannot be built yet (the judge of answers still to come), known by the
        length of their system and prompt: each is new, so uncached, priced like ``like``."""
        sent = [] if self.record == "none" else text_chars
        return Estimate(
            calls=len(text_chars),
            cached=0,
            uncached=len(sent),
            cost_usd=sum(like.estimated_cost_for(chars) for chars in sent),
            already_committed_usd=self.store.committed(self.run_token),
            worst_case_usd=sum(like.max_cost_for(chars) for chars in sent),
        )

    def run(self, planned: list[Planned], progress: Progress | None = None) -> dict[str, Outcome]:
        """Send everything concurrently; returns an outcome for every key. ``progress``
        carries the count over batches that are parts of one phase (its ``total`` set by the
        caller); without it the batch counts alone."""
        return self._run_coroutine(self._run_all(planned, progress))

    def run_each(self, planned: list[Planned], progress: Progress | None = None) -> list[Outcome]:
        """One outcome per planned request, in order. A request that appears twice in the
        batch is sent and paid once: its later copies report the answer as cached, at no
        cost, so the report never counts one bill twice."""
        outcomes = self.run(planned, progress)
        seen: set[str] = set()
        result = []
        for plan in planned:
            outcome = outcomes[plan.key]
            if plan.key in seen and outcome.status == OK:
                outcome = dataclasses.replace(outcome, cached=True, cost_usd=0.0)
            seen.add(plan.key)
            result.append(outcome)
        return result

    def _run_coroutine(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self.loop is not None:
            self.loop.attach(self.registry)
            return self.loop.run(coroutine)
        # A dispatcher outside a session: a loop for this batch, its connections closed after.
        loop = SessionLoop()
        loop.attach(self.registry)
        try:
            return loop.run(coroutine)
        finally:
            loop.close()

    def stream(self, planned: list[Planned], progress: Progress) -> Streaming:
        """Start dispatching ``planned`` on the session's loop and return at once; the
        caller turns the loop while it waits for each outcome (``Streaming``)."""
        assert self.loop is not None, "streaming needs the session's loop"
        self.loop.attach(self.registry)
        return Streaming(self.loop, self, planned, progress)

    async def _run_all(
        self,
        planned: list[Planned],
        progress: Progress | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
    ) -> dict[str, Outcome]:
        # A batch's accounting (calls in flight, reservations, the Ctrl-C handler) lives on
        # the dispatcher: a second batch beside a streaming one would reset it.
        if self._batch_running:
            raise RuntimeError("a dispatcher runs one batch at a time")
        self._batch_running = True
        try:
            return await self._run_batch(planned, progress, on_outcome)
        finally:
            self._batch_running = False

    async def _run_batch(
        self,
        planned: list[Planned],
        progress: Progress | None,
        on_outcome: Callable[[Outcome], None] | None,
    ) -> dict[str, Outcome]:
        self._in_flight = 0
        self._settled = asyncio.Event()
        self._reservations = SameTurn(self._reserve_each, self._unclaimed_reservation)
        self._answers = SameTurn(self._record_paid_answers)
        self._waiting, self._poller = {}, None
        if self.batch is not None:
            self._batcher = Batcher(
                self.batch, self.store, self.run_token, self.owner, lambda: self.interrupted
            )
        overlapping: set[str] = set()
        unique = {p.key: p for p in planned}
        progress = progress or Progress(total=len(unique))
        self._pacers = {name: _Pacer(60.0 / per_minute) for name, per_minute in self.rpm.items()}
        self._gates = {}
        for item in unique.values():
            name = item.adapter.name
            if name not in self._gates:
                self._gates[name] = Gate(self._limiter(item.adapter))

        # The wave's cached answers are read in a few queries and settled here, without a
        # task each (a warm 10,000-case run has 40,000 of them); the rest are claimed in a
        # few transactions instead of one per request.
        hits = self.store.hits(list(unique)) if self.record != "all" else {}
        claimed = (
            self.store.claim_many(
                self.run_token,
                [key for key in unique if key not in hits],
                self.owner,
                reads_cache=self.record != "all",
            )
            if self.record != "none"
            else {}
        )

        async def one(item: Planned) -> Outcome:
            return counted(
                await self._one(
                    item, self._gates[item.adapter.name], overlapping, claimed.get(item.key)
                )
            )

        def counted(outcome: Outcome) -> Outcome:
            progress.done += 1
            progress.cached += outcome.cached
            progress.spent_usd += outcome.cost_usd
            if on_outcome is not None:
                on_outcome(outcome)
            if self.on_progress is not None:
                self.on_progress(progress)
            return outcome

        catching = self._catch_interrupts()
        watching = asyncio.ensure_future(self._watch_stop())
        try:
            settled = {
                key: counted(
                    _interrupted_outcome(key)
                    if self.interrupted
                    else self._from_cache(item, hits[key])
                )
                for key, item in unique.items()
                if key in hits
            }
            sent = [item for key, item in unique.items() if key not in settled]
            outcomes = await asyncio.gather(*(one(item) for item in sent))
        finally:
            watching.cancel()
            if catching:
                self._restore_sigint()
        for token in overlapping:
            self.other_runs[token] = self.store.committed(token)
        settled.update((outcome.key, outcome) for outcome in outcomes)
        return {key: settled[key] for key in unique}

    async def _one(
        self,
        item: Planned,
        limit: Gate,
        overlapping: set[str],
        state: str | None,
    ) -> Outcome:
        """``state``: what the wave's claim found for this request (``Store.claim``), or
        None to look at the cache and claim here."""
        reads = self.record != "all"
        # In record mode all, an answer another process fetched while we waited is fresh.
        fresh_answer_waiting = False
        while True:
            if self.interrupted:
                return _interrupted_outcome(item.key)
            if state in (None, ANSWERED) and (reads or fresh_answer_waiting):
                hit = self.store.hit(item.key)
                if hit is not None:
                    return self._from_cache(item, hit)
                state = None
            if self.record == "none":
                self._replay_misses = self._replay_misses or ReplayMisses(self.store)
                error = self._replay_misses.error(item.request.model, item.adapter.name)
                return Outcome(item.key, REPLAY_MISS, error=error, error_kind=REPLAY_MISS)
            if state is None:
                state = self.store.claim(
                    self.run_token, item.key, self.owner, reads_cache=reads or fresh_answer_waiting
                )
            if state == CLAIMED:
                break
            if state == ANSWERED:
                continue
            # Another process holds the call: wait for its result, never pay twice.
            claim = await self._await_claim(item.key)
            state = None
            if claim is None:  # gone, or interrupted while waiting
                continue
            if claim.run_token != self.run_token:
                overlapping.add(claim.run_token)
            elif not claim.running:
                return self._from_claim(item, claim)
            fresh_answer_waiting = claim.status == OK
        if self._batcher is not None and self._batcher.takes(item):
            # Not under the width: a batch is one request however many calls it holds.
            batcher = self._batcher
            outcome = await self._call_within_budget(
                item, lambda i, r: batched_call(self, batcher, i, r)
            )
        else:
            if self.batch is not None:
                self.batch.count(item.adapter.name, "online")
            async with limit:
                outcome = await self._call_within_budget(item)
        if outcome.status != OK:  # a paid answer finished its claim as it was stored
            self.store.finish_claim(
                item.key,
                status=outcome.status,
                error=outcome.error,
                error_kind=outcome.error_kind,
                cost_usd=outcome.cost_usd,
                possibly_billed_usd=outcome.possibly_billed_usd,
                attempts=outcome.attempts,
            )
        return outcome

    async def _watch_stop(self) -> None:
        """While the batch runs: when another process of the run asked it to stop
        (``Store.request_stop``: the xdist controller's Ctrl-C reaches no worker when only
        the controller was signalled), this dispatch stops as at its own first Ctrl-C."""
        while not self.interrupted:
            if self.store.stop_requested(self.run_token):
                self._on_interrupt()
                return
            await asyncio.sleep(STOP_POLL_S)

    def settled(self, planned: list[Planned]) -> dict[str, Outcome]:
        """What the run's other processes made of ``planned``, read from the cache, the
        claims and the ledger, sending nothing: for the xdist controller, whose workers'
        records of a stopped run never arrive. Paid in this run: as paid, with its cost; a
        failure of this run: that failure; still in flight (reserved in the ledger): cut
        off by the Ctrl-C, possibly billed at its worst case; else cached, or not sent."""
        unique = {p.key: p for p in planned}
        claims = self.store.claims_of(list(unique))
        in_flight = self.store.reserved_keys(self.run_token)
        outcomes = {}
        for key, item in unique.items():
            claim = claims.get(key)
            ours = claim is not None and claim.run_token == self.run_token
            if key in in_flight:
                outcomes[key] = Outcome(
                    key,
                    INTERRUPTED,
                    error="interrupted (Ctrl-C) while the call was in flight; it may be billed",
                    error_kind=INTERRUPTED,
                    attempts=1,
                    possibly_billed_usd=item.max_cost_usd,
                )
            elif ours and claim is not None and not claim.running:
                outcomes[key] = self._from_claim(item, claim)
            elif self.record != "all" and (hit := self.store.hit(key)) is not None:
                outcomes[key] = self._from_cache(item, hit)
            else:
                outcomes[key] = _interrupted_outcome(key)
        return outcomes

    def _from_cache(self, item: Planned, hit: Hit) -> Outcome:
        # A cache written before redaction existed may still hold a key.
        response = redacted_response(hit.answer.response)
        claim = hit.claim
        if claim is not None and claim.run_token == self.run_token and claim.owner != self.owner:
            # Paid in this very run by another worker: report it as paid, exactly as a
            # single process would.
            return Outcome(
                item.key,
                OK,
                response,
                cost_usd=claim.cost_usd,
                cost_if_uncached_usd=hit.answer.cost_usd,
                attempts=claim.attempts,
                possibly_billed_usd=claim.possibly_billed_usd,
            )
        return Outcome(
            item.key,
            OK,
            response,
            cached=True,
            cost_if_uncached_usd=hit.answer.cost_usd,
        )

    def _from_claim(self, item: Planned, claim: Claim) -> Outcome:
        """Another worker of this run finished the call: its outcome is ours."""
        if claim.status == OK:
            hit = self.store.hit(item.key)
            if hit is not None:
                return self._from_cache(item, hit)
            return Outcome(
                item.key,
                ERROR,
                error="answered in another process but not cached (an injected fault), so "
                "not shared",
                error_kind="not_shared",
                attempts=claim.attempts,
            )
        return Outcome(
            item.key,
            claim.status,
            error=claim.error,
            error_kind=claim.error_kind,
            attempts=claim.attempts,
            possibly_billed_usd=claim.possibly_billed_usd,
        )

    async def _await_claim(self, key: str) -> Claim | None:
        """The claim of ``key`` once it is no longer in flight (finished, or its owner died).
        One poller reads every awaited claim in one query per interval."""
        future = self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = asyncio.get_running_loop().create_future()
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_claims())
        return await future

    async def _poll_claims(self) -> None:
        while self._waiting:
            await asyncio.sleep(CLAIM_POLL_S)
            if self.interrupted:
                for future in self._waiting.values():
                    future.set_result(None)
                self._waiting.clear()
                return
            claims = self.store.claims_of(list(self._waiting))
            alive: dict[str, bool] = {}
            for key in list(self._waiting):
                claim = claims.get(key)
                if claim is not None and claim.running:
                    if claim.owner not in alive:
                        alive[claim.owner] = owner_alive(claim.owner)
                    if alive[claim.owner]:
                        continue
                self._waiting.pop(key).set_result(claim)

    async def _call_within_budget(
        self,
        item: Planned,
        send: Callable[[Planned, int], Coroutine[Any, Any, Outcome]] | None = None,
    ) -> Outcome:
        """Reserve the call's worst case, then make it: online (``_call``), or through
        ``send`` (a provider batch) with the same reservation."""
        reservation = await self._reserve(item, holding=False)
        if reservation is None:
            return _interrupted_outcome(item.key) if self.interrupted else _budget_outcome(item.key)
        try:
            return await (send or self._call)(item, reservation)
        finally:
            self._in_flight -= 1
            assert self._settled is not None
            self._settled.set()

    async def _reserve(self, item: Planned, *, holding: bool) -> int | None:
        """Reserve the call's worst case. While calls of ours are in flight their settled
        cost will usually be below what they reserved, so wait for them before giving up.
        ``holding``: this call is in flight already (a retry after a possibly billed try).
        A call that is not ``holding`` counts as in flight from its reservation on."""
        assert self._reservations is not None
        while not (self.budget_exhausted or self.interrupted):
            reservation = await self._reservations.submit((item, holding))
            if reservation is not None:
                if not self.interrupted:
                    return reservation
                # Ctrl-C came while this turn's reservations were being made.
                self._unclaimed_reservation((item, holding), reservation)
                break
            if self._in_flight == int(holding):
                self.budget_exhausted = True
                break
            assert self._settled is not None
            self._settled.clear()
            await self._settled.wait()
        return None

    def _reserve_each(self, wanted: list[tuple[Planned, bool]]) -> list[int | None]:
        """The reservations asked for in one turn of the loop, in one transaction. A granted
        one is counted in flight at once, so a request of the same turn that did not fit
        waits for it to settle instead of giving up."""
        reservations = self.store.reserve_each(
            self.run_token, [(item.key, item.max_cost_usd) for item, _ in wanted], self.cap_usd
        )
        for (_, holding), reservation in zip(wanted, reservations, strict=True):
            if reservation is not None and not holding:
                self._in_flight += 1
        return reservations

    def _unclaimed_reservation(self, wanted: tuple[Planned, bool], reservation: int | None) -> None:
        """A reservation nobody will use (its task was cancelled or interrupted): released,
        and no longer counted in flight."""
        if reservation is None:
            return
        self.store.release(reservation)
        if not wanted[1]:
            self._in_flight -= 1
            assert self._settled is not None
            self._settled.set()

    async def _send_counted(
        self, item: Planned, limiter: ConcurrencyLimiter, sent: Attempt
    ) -> Response:
        try:
            return await self._send(item)
        finally:
            limiter.returned(sent)

    async def _call(self, item: Planned, reservation: int) -> Outcome:
        attempts = 0
        possibly_billed = 0.0
        while True:
            attempts += 1
            pacer = self._pacers.get(item.adapter.name)
            if pacer is not None:
                await pacer.wait()
            limiter = self._limiters[item.adapter.name]
            sent = limiter.attempt()
            started = asyncio.get_running_loop().time()
            try:
                response = await self._send_counted(item, limiter, sent)
            except asyncio.CancelledError:
                if not self._grace_over:
                    raise
                # Sent before the Ctrl-C and still out when the grace ended: it may be billed.
                self.store.keep_as_possibly_billed(reservation)
                return Outcome(
                    item.key,
                    INTERRUPTED,
                    error="interrupted (Ctrl-C) while the call was in flight; it may be billed",
                    error_kind=INTERRUPTED,
                    attempts=attempts,
                    possibly_billed_usd=possibly_billed + item.max_cost_usd,
                )
            except (AdapterError, asyncio.TimeoutError) as exc:
                error = exc if isinstance(exc, AdapterError) else _timeout_error(item.request)
                if is_overload(error.kind, error.status):
                    limiter.overloaded(sent)
                if error.retryable and (error.retry_after_s or 0) > MAX_RETRY_AFTER_S:
                    error = AdapterError(
                        error.kind,
                        f"{error} (the provider asked to wait {error.retry_after_s:.0f} s, more "
                        f"than the {MAX_RETRY_AFTER_S:.0f} s a run waits)",
                        retryable=False,
                        status=error.status,
                        possibly_billed=error.possibly_billed,
                    )
                retry = error.retryable and attempts <= self.retries
                note = ""
                if retry and self.interrupted:
                    retry, note = False, "; not retried: interrupted (Ctrl-C)"
                if error.may_have_been_billed:
                    # Sent, then lost: the provider may bill it, so its worst case stays
                    # committed; a retry needs a reservation of its own.
                    self.store.keep_as_possibly_billed(reservation)
                    possibly_billed += item.max_cost_usd
                    if retry:
                        again = await self._reserve(item, holding=True)
                        if again is None and self.interrupted:
                            retry, note = False, "; not retried: interrupted (Ctrl-C)"
                        elif again is None:
                            retry = False
                            note = "; not retried: the cost cap has no room for another try"
                        else:
                            reservation = again
                if retry:
                    await asyncio.sleep(self._backoff(attempts, error.retry_after_s))
                    continue
                if not error.may_have_been_billed:
                    self.store.release(reservation)
                return Outcome(
                    item.key,
                    ERROR,
                    error=f"{error.kind}: {error} (after {attempts} attempt(s)){note}",
                    error_kind=error.kind,
                    attempts=attempts,
                    possibly_billed_usd=possibly_billed,
                )
            except Exception as exc:  # an adapter bug must not lose the run
                self.store.release(reservation)
                return Outcome(
                    item.key,
                    ERROR,
                    # Not an AdapterError, so nothing has redacted its text yet.
                    error=redact(f"adapter_crash: {type(exc).__name__}: {exc}"),
                    error_kind="adapter_crash",
                    attempts=attempts,
                    possibly_billed_usd=possibly_billed,
                )
            # From the send to the answer, the server's own queue included: the signal of
            # a width the server cannot serve at once.
            limiter.answered(sent, asyncio.get_running_loop().time() - started)
            self._gates[item.adapter.name].wake()
            return await self._paid(item, response, reservation, attempts, possibly_billed)

    async def _paid(
        self,
        item: Planned,
        response: Response,
        reservation: int,
        attempts: int,
        possibly_billed: float,
    ) -> Outcome:
        """An answer that arrived (online or in a batch): checked, costed and stored."""
        # Redacted before anything keeps it: the cache, and every report built from it.
        response = redacted_response(response)
        usage = item.checked_usage(response.usage, response.text)
        if usage is not response.usage:
            response = dataclasses.replace(response, usage=usage)
        cost = item.price.cost(usage)
        await self._keep(
            PaidAnswer(
                key=item.key,
                provider=item.adapter.name,
                model=item.request.model,
                response=response,
                cost_usd=cost,
                reservation=reservation,
                attempts=attempts,
                possibly_billed_usd=possibly_billed,
            )
        )
        return Outcome(
            item.key,
            OK,
            response,
            cost_usd=cost,
            cost_if_uncached_usd=cost,
            attempts=attempts,
            possibly_billed_usd=possibly_billed,
        )

    async def _keep(self, answer: PaidAnswer) -> None:
        """Store ``answer`` durably; returns once it is committed. Answers that arrive in the
        same turn of the event loop share one transaction."""
        assert self._answers is not None
        await self._answers.submit(answer)

    def _record_paid_answers(self, answers: list[PaidAnswer]) -> list[None]:
        self.store.record_paid_answers(answers)
        return [None] * len(answers)

    async def _send(self, item: Planned) -> Response:
        """The adapter call, tracked so that the end of the Ctrl-C grace can cancel it."""
        call = asyncio.ensure_future(
            asyncio.wait_for(
                item.adapter.complete(item.request),
                timeout=item.request.timeout_s + TIMEOUT_SLACK_S,
            )
        )
        self._calls.add(call)
        try:
            return await call
        finally:
            self._calls.discard(call)

    def _catch_interrupts(self) -> bool:
        """On the main thread, the first Ctrl-C stops dispatching (``_on_interrupt``).

        A handler of Python's own rather than the loop's: while a streamed dispatch waits
        for pytest to run an item, the loop is not running, and a Ctrl-C then stops that
        item's code at once, as Python's default would (a slow or hanging check of the
        user's stays interruptible); the dispatch takes the Ctrl-C on its next turn."""
        if threading.current_thread() is not threading.main_thread():
            return False
        loop = asyncio.get_running_loop()

        def on_sigint(signum: int, frame: object) -> None:
            loop.call_soon_threadsafe(self._on_interrupt)
            if not loop.is_running():
                raise KeyboardInterrupt

        try:
            self._previous_sigint = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # not the main interpreter
            return False
        return True

    def _restore_sigint(self) -> None:
        if self._previous_sigint is not None:
            signal.signal(signal.SIGINT, self._previous_sigint)
            self._previous_sigint = None

    def _on_interrupt(self) -> None:
        """First Ctrl-C: send nothing new, give the calls in flight ``INTERRUPT_GRACE_S`` to
        land in the cache, then cancel them. Restoring the earlier handler (Python's own), so
        a second Ctrl-C raises KeyboardInterrupt at once."""
        self._restore_sigint()
        if self.interrupted:
            return
        loop = asyncio.get_running_loop()
        self.interrupted = True
        if self.on_interrupt is not None:
            self.on_interrupt(len(self._calls), INTERRUPT_GRACE_S)
        assert self._settled is not None
        self._settled.set()  # wakes calls waiting for room under the cap
        loop.call_later(INTERRUPT_GRACE_S, self._end_grace)

    def _end_grace(self) -> None:
        self._grace_over = True
        for call in list(self._calls):
            call.cancel()

    def _backoff(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return retry_after_s
        return min(20.0, self.backoff_s * 2 ** (attempt - 1)) * (1 + random.random() / 4)


class _Pacer:
    """Spaces the starts of one provider's calls (retries included) by ``interval_s``."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.next_start = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self.lock:
            loop = asyncio.get_running_loop()
            delay = self.next_start - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.next_start = loop.time() + self.interval_s


# Adapters already warned about, by id (an adapter need not be hashable).
_WARNED: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def warn_without_fingerprint(adapter: Adapter) -> None:
    """Once per adapter instance (one per run): an adapter that is not built in (your own
    application) and has no ``key_extra`` keys its cache by name and version only, so a
    change to the application's code would be served the old cached answers."""
    name = adapter.name
    if type(adapter).__module__.startswith("pytest_evalmine."):
        return
    if getattr(adapter, "key_extra", None) is None and _WARNED.get(id(adapter)) is not adapter:
        with contextlib.suppress(TypeError):  # an object without weak references
            _WARNED[id(adapter)] = adapter
        warnings.warn(
            EvalmineWarning(
                f"adapter {name!r} has no key_extra(request): its cached answers are keyed by "
                f"name and version ({adapter.version!r}) only, so after a change to your "
                "application's code the cache serves the old answers. Return a fingerprint "
                "of the code from key_extra (pytest_evalmine.code_fingerprint) or bump version."
            ),
            stacklevel=2,
        )


def _unready(adapter: Adapter) -> str | None:
    check_ready = getattr(adapter, "check_ready", None)
    if check_ready is None:
        return None
    try:
        check_ready()
    except AdapterError as exc:
        message = str(exc)
        # Adapters usually name themselves already; never "openai: openai: ...".
        return message if message.startswith(f"{adapter.name}:") else f"{adapter.name}: {message}"
    return None


async def _prepare_all(preparing: list[tuple[Adapter, list[str]]]) -> None:
    for adapter, models in preparing:
        try:
            await adapter.prepare(models)  # type: ignore[attr-defined]
        except AdapterError as exc:
            raise EvalmineError(f"{adapter.name}: {exc}") from None


def _parts(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), drawn as they are needed."""
    part: list[T] = []
    for item in items:
        part.append(item)
        if len(part) == size:
            yield part
            part = []
    if part:
        yield part


def redacted_response(response: Response) -> Response:
    """``response`` with every loaded key and key-shaped string redacted from the texts a
    provider chose (answer, request id, finish reason)."""
    request_id = response.provider_request_id
    return dataclasses.replace(
        response,
        text=redact(response.text),
        provider_request_id=None if request_id is None else redact(request_id),
        finish_reason=redact(response.finish_reason),
    )


def _interrupted_outcome(key: str) -> Outcome:
    return Outcome(
        key,
        INTERRUPTED,
        error="not run: the run was interrupted (Ctrl-C) before this call was sent",
        error_kind=INTERRUPTED,
    )


def _budget_outcome(key: str) -> Outcome:
    return Outcome(
        key,
        BUDGET,
        error="not run: the cost cap was reached before this call could be reserved",
        error_kind=BUDGET,
    )


def _timeout_error(request: Request) -> AdapterError:
    return AdapterError(
        "timeout",
        f"no answer within {math.ceil(request.timeout_s + TIMEOUT_SLACK_S)} s",
        retryable=True,
    )
