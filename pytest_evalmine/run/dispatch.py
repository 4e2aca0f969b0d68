"""Concurrent dispatch: the one place that spends money (spec: "Dispatch").

For every planned request: read the cache, claim the call for this process, reserve its
worst-case cost, call the adapter with retries, store the paid answer and settle the ledger.
Requests run concurrently on one asyncio loop, bounded per provider (``concurrency.py``).

Here: planning, and the scheduling of a batch. Its pieces have modules of their own: the
outcomes settled from the cache or another process's claim (``settle.py``), reservations
against the cap (``reservations.py``), the paid call and its retries (``paid_call.py``) or
a provider batch (``batch.py``), Ctrl-C (``interrupts.py``), the estimates a run is refused
on (``estimates.py``), and the adapters made ready before the first call (``preparing.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..adapters.base import SCHEMA_PROMPTED, Adapter, Request, cache_key
from ..adapters.registry import AdapterRegistry
from ..errors import EvalmineError
from . import estimates, preparing, settle, widths
from .batch import IN_BATCH, Batcher, BatchSession, batched_call
from .concurrency import ConcurrencyLimiter, Gate
from .interrupts import INTERRUPT_GRACE_S, STOP_POLL_S, InFlightCalls, Sigint, watch_stop
from .loop import SessionLoop
from .outcome import (
    BUDGET,
    ERROR,
    INTERRUPTED,
    OK,
    REPLAY_MISS,
    Outcome,
    Progress,
    interrupted_outcome,
)
from .paid_call import Pacer, PaidCalls
from .planned import Estimate, Planned
from .prices import PriceRow, PriceTable, declared_row
from .replay import ReplayMisses
from .reservations import Reservations
from .run_state import RunState
from .settle import ClaimWaiter
from .store import ANSWERED, CLAIMED, Claim, Hit, StoreBackend, process_owner
from .streaming import Streaming

# What callers import from here: the statuses, the outcome and the plan (their own modules),
# and the Ctrl-C grace (``interrupts.py``).
__all__ = [
    "BUDGET",
    "ERROR",
    "INTERRUPTED",
    "INTERRUPT_GRACE_S",
    "OK",
    "REPLAY_MISS",
    "STOP_POLL_S",
    "Dispatcher",
    "Estimate",
    "Outcome",
    "Planned",
    "Progress",
    "Streaming",
]

T = TypeVar("T")
RECORD_MODES = ("new", "all", "none")


@dataclass
class Dispatcher:
    registry: AdapterRegistry
    store: StoreBackend
    prices: PriceTable
    run_token: str
    cap_usd: float
    record: str = "new"
    # What the cap holds for (spec "Prices and the budget", budget scope): every process
    # reserving under the same budget shares one cap. Empty: the run token.
    budget_token: str = ""
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
    # Where a provider's width starts when its server declares no capacity: the width an
    # earlier dispatcher of the run ended at for it (the judge's after the answers'), None
    # for none. A fresh dispatcher would otherwise slow-start again from 1.
    start_width: Callable[[str], int | None] | None = None
    # What the calls wait on (reservations, the cap found exhausted, a Ctrl-C, the batch
    # queue), for the dispatcher's life: a cap found exhausted stays so.
    state: RunState = field(default_factory=RunState, init=False, repr=False)
    # Other runs on the same cache whose calls this run waited for: run token -> what that
    # run had committed (spent or reserved) when ours finished dispatching.
    other_runs: dict[str, float] = field(default_factory=dict)
    _batch_running: bool = field(default=False, init=False, repr=False)
    # Set for each batch (``_run_batch``): its claims awaited, its reservations, its calls.
    _claims: ClaimWaiter | None = field(default=None, init=False, repr=False)
    _reservations: Reservations | None = field(default=None, init=False, repr=False)
    _online: PaidCalls | None = field(default=None, init=False, repr=False)
    _sigint: Sigint = field(default_factory=Sigint, init=False, repr=False)
    _in_flight_calls: InFlightCalls = field(default_factory=InFlightCalls, init=False, repr=False)
    # One per provider for the dispatcher's life: what a batch learnt, the next one keeps.
    _limiters: dict[str, ConcurrencyLimiter] = field(default_factory=dict, init=False, repr=False)
    _gates: dict[str, Gate] = field(default_factory=dict, init=False, repr=False)
    # Provider -> the server whose width is learnt and kept for the next run (``widths``).
    _learning: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _replay_misses: ReplayMisses | None = field(default=None, init=False, repr=False)
    _batcher: Batcher | None = field(default=None, init=False, repr=False)
    # The batch's calls that sat in an open provider batch when it started (a candidate is
    # checked again once claimed): collected on the submitting run's reservation.
    _in_open_batch: set[str] = field(default_factory=set, init=False, repr=False)
    _progress: Progress = field(default_factory=Progress, init=False, repr=False)

    def __post_init__(self) -> None:
        self.budget_token = self.budget_token or self.run_token
        if self.record not in RECORD_MODES:
            raise EvalmineError(f"record mode {self.record!r}: choose from {RECORD_MODES}")
        if not (math.isfinite(self.cap_usd) and self.cap_usd >= 0):
            # A NaN cap compares false with everything: it would never stop a run.
            raise EvalmineError(f"cost cap {self.cap_usd!r}: a finite number of dollars >= 0")

    @property
    def interrupted(self) -> bool:
        """Set by the first Ctrl-C while dispatching: nothing new is sent after it."""
        return self.state.interrupted

    @interrupted.setter
    def interrupted(self, value: bool) -> None:
        # Set from outside the loop (a test's thread, as a stop asked by another process
        # would): the waits that poll it see it; ``_on_interrupt`` is the loop's own way.
        self.state.interrupted = value

    @property
    def budget_exhausted(self) -> bool:
        """A call found no room under the cap while no reserved call could settle."""
        return self.state.budget_exhausted

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
            preparing.warn_without_fingerprint(adapter)
        if self.record == "none":
            preparing.restore_prepared(self.store, (a for a, _models in adapters.values()))
        else:
            preparing.prepare(self.store, adapters.values(), self._run_coroutine)
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
            if not isinstance(declared, int) or isinstance(declared, bool):
                declared = None
            known = None
            if declared is None and getattr(adapter, "declares_limits", False):
                known = ceiling  # a hosted API: its headers and 429s say when to narrow
            elif declared is None:
                # What this run's earlier dispatcher, else an earlier run, learnt of the server.
                server = self._learning[adapter.name] = widths.server_of(adapter)
                if self.start_width is not None:
                    known = self.start_width(adapter.name)
                if known is None:
                    known = widths.remembered(self.store, server)
            limiter = self._limiters[adapter.name] = ConcurrencyLimiter(
                ceiling,
                fixed=not self.adaptive or adapter.name in self.fixed_providers,
                declared=declared,
                known=known,
            )
        return limiter

    def _remember_widths(self) -> None:
        """Keep the width each server nothing was declared about adapted to, for the next
        run on this cache (``run/widths.py``); a slow start still under way learnt none."""
        learnt = {
            server: limiter.capacity
            for name, server in self._learning.items()
            if (limiter := self._limiters[name]).sent and not limiter.fixed and limiter.learnt
        }
        if learnt and self.record != "none":
            widths.remember(self.store, learnt)

    def learned_width(self, provider: str) -> int | None:
        """The width a provider's adaptive limit has now, once it sent calls; else None."""
        limiter = self._limiters.get(provider)
        if limiter is None or limiter.fixed or not limiter.sent:
            return None
        return limiter.limit

    def latency_widths(self) -> dict[str, int]:
        """Per provider whose width is known (it sent calls, or started from what was known
        of it): the capacity its answers' latency is taken within (the scorecard's)."""
        return {
            name: limiter.capacity
            for name, limiter in self._limiters.items()
            if limiter.sent or limiter.learnt
        }

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
        return [p for adapter in adapters.values() if (p := preparing.unready(adapter)) is not None]

    def estimate(self, planned: Iterable[Planned]) -> Estimate:
        """What this run would send (cache hits are free) and what this run has already
        committed in the ledger (spent or reserved by earlier calls of the same run)."""
        return estimates.of_parts(
            self.store, self.budget_token, self.record, [list(planned)], self._batched
        )

    def estimate_requests(self, requests: Iterable[Request], part: int) -> Estimate:
        """``estimate(plan(requests))``, planned and looked up ``part`` requests at a time, so
        that the requests (a warm rerun builds every judge call to find it cached) are never
        all in memory at once; the same figures, summed over the calls in the same order."""
        planned = (self.plan(chunk) for chunk in estimates.parts(requests, part))
        return estimates.of_parts(
            self.store, self.budget_token, self.record, planned, self._batched
        )

    def _batched(self, item: Planned) -> bool:
        """Whether ``item`` goes by provider batch (so may be collected from an open one)."""
        return self.batch is not None and self.batch.takes(item.adapter)

    def estimate_by_size(self, like: Planned, text_chars: list[int]) -> Estimate:
        """Calls that cannot be built yet (the judge of answers still to come), known by the
        length of their system and prompt: each is new, so uncached, priced like ``like``."""
        return estimates.by_size(self.store, self.budget_token, self.record, like, text_chars)

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
            outcomes = await self._run_batch(planned, progress, on_outcome)
            self._remember_widths()
            return outcomes
        finally:
            self._batch_running = False

    async def _run_batch(
        self,
        planned: list[Planned],
        progress: Progress | None,
        on_outcome: Callable[[Outcome], None] | None,
    ) -> dict[str, Outcome]:
        self._reservations = Reservations(
            self.store, self.run_token, self.cap_usd, self.state, self.budget_token
        )
        self._claims = ClaimWaiter(self.store, lambda: self.interrupted)
        if self.batch is not None:
            self._batcher = Batcher(self.batch, self.store, self.run_token, self.owner, self.state)
        overlapping: set[str] = set()
        unique = {p.key: p for p in planned}
        progress = progress or Progress(total=len(unique))
        self._gates = {}
        for item in unique.values():
            name = item.adapter.name
            if name not in self._gates:
                self._gates[name] = Gate(self._limiter(item.adapter))
        self._online = PaidCalls(
            self.store,
            self.retries,
            self.backoff_s,
            pacers={name: Pacer(60.0 / per_minute) for name, per_minute in self.rpm.items()},
            limiters=self._limiters,
            gates=self._gates,
            in_flight=self._in_flight_calls,
            interrupted=lambda: self.interrupted,
            reserve=self._reservations.reserve,
        )

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
        self._in_open_batch = (
            set(self.store.submitted_reservations(list(claimed)))
            if self._batcher is not None and claimed
            else set()
        )

        async def one(item: Planned) -> Outcome:
            return counted(
                await self._one(
                    item, self._gates[item.adapter.name], overlapping, claimed.get(item.key)
                )
            )

        self._progress = progress

        def counted(outcome: Outcome) -> Outcome:
            progress.count(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
            if self.on_progress is not None:
                self.on_progress(progress)
            return outcome

        catching = self._sigint.catch(self._on_interrupt)
        watching = asyncio.ensure_future(
            watch_stop(self.store, self.run_token, lambda: self.interrupted, self._on_interrupt)
        )
        try:
            settled = {
                key: counted(
                    interrupted_outcome(key)
                    if self.interrupted
                    else self._from_cache(item, hits[key])
                )
                for key, item in unique.items()
                if key in hits
            }
            sent = [item for key, item in unique.items() if key not in settled]
            outcomes = await asyncio.gather(*(one(item) for item in sent))
            if self._batcher is not None:
                await self._batcher.finish()
        finally:
            watching.cancel()
            if catching:
                self._sigint.restore()
        for token in overlapping:
            self.other_runs[token] = self.store.committed_by_run(token)
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
                return interrupted_outcome(item.key)
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
            assert self._claims is not None
            claim = await self._claims.wait(item.key)
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
            submitted = self._submitted_reservation(item)
            if submitted is not None:
                # Sent by an earlier run, whose reservation stays its own: collecting it
                # commits nothing new here, so the cap does not count it a second time.
                outcome = await self._in_batch(batcher, item, submitted, collecting=True)
            else:
                outcome = await self._call_within_budget(
                    item, lambda i, r: self._in_batch(batcher, i, r)
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

    async def _in_batch(
        self, batcher: Batcher, item: Planned, reservation: int, *, collecting: bool = False
    ) -> Outcome:
        """``batched_call``, counted in the progress as in a batch until it is answered (one
        left in the batch stays counted: it was not answered)."""
        progress = self._progress
        progress.in_batch += 1
        self._report_progress()
        outcome = await batched_call(self, batcher, item, reservation, collecting=collecting)
        if outcome.error_kind != IN_BATCH:
            progress.in_batch -= 1
        return outcome

    def _report_progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self._progress)

    def _submitted_reservation(self, item: Planned) -> int | None:
        """The ledger row of the earlier run that submitted ``item`` in a batch still open,
        read again now that this process holds the call's claim; None otherwise."""
        if item.key not in self._in_open_batch:
            return None
        return self.store.submitted_reservations([item.key]).get(item.key)

    def settled(self, planned: list[Planned]) -> dict[str, Outcome]:
        """What the run's other processes made of ``planned``, sending nothing: for the xdist
        controller, whose workers' records of a stopped run never arrive (``settle.py``)."""
        return settle.settled(self.store, planned, self.run_token, self.owner, self.record)

    def _from_cache(self, item: Planned, hit: Hit) -> Outcome:
        return settle.from_cache(item, hit, self.run_token, self.owner)

    def _from_claim(self, item: Planned, claim: Claim) -> Outcome:
        return settle.from_claim(self.store, item, claim, self.run_token, self.owner)

    async def _call_within_budget(
        self,
        item: Planned,
        send: Callable[[Planned, int], Coroutine[Any, Any, Outcome]] | None = None,
    ) -> Outcome:
        """Reserve the call's worst case, then make it: online (``_call``), or through
        ``send`` (a provider batch) with the same reservation."""
        assert self._reservations is not None
        return await self._reservations.within_budget(item, send or self._call)

    # The batch's reservations and online calls, as a provider batch (``batched_call``) asks.
    async def _reserve(self, item: Planned, *, holding: bool) -> int | None:
        assert self._reservations is not None
        return await self._reservations.reserve(item, holding=holding)

    async def _call(self, item: Planned, reservation: int) -> Outcome:
        assert self._online is not None
        return await self._online.call(item, reservation)

    def _on_interrupt(self) -> None:
        """First Ctrl-C: send nothing new, give the calls in flight ``INTERRUPT_GRACE_S`` to
        land in the cache, then cancel them. Restoring the earlier handler (Python's own), so
        a second Ctrl-C raises KeyboardInterrupt at once."""
        self._sigint.restore()
        if self.interrupted:
            return
        loop = asyncio.get_running_loop()
        self.state.interrupt()  # every wait looks again, and ends
        if self.on_interrupt is not None:
            self.on_interrupt(len(self._in_flight_calls), INTERRUPT_GRACE_S)
        loop.call_later(INTERRUPT_GRACE_S, self._in_flight_calls.end_grace)
