"""Concurrent dispatch: the one place that spends money (spec: "Dispatch").

For every planned request: read the cache, claim the call for this process, reserve its
worst-case cost, call the adapter with retries, store the paid answer and settle the ledger.
Requests run concurrently on one asyncio loop, bounded per provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import random
import warnings
import weakref
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..adapters.base import (
    SCHEMA_PROMPTED,
    Adapter,
    AdapterError,
    Request,
    Response,
    Usage,
    cache_key,
    tokens_for_chars,
)
from ..adapters.registry import AdapterRegistry
from ..errors import EvalmineError, EvalmineWarning
from ..redaction import count_redacted, redact
from .loop import SessionLoop
from .prices import PriceRow, PriceTable, declared_row
from .store import Store, process_owner

T = TypeVar("T")
RECORD_MODES = ("new", "all", "none")
OK, ERROR, BUDGET, REPLAY_MISS = "ok", "error", "budget", "replay_miss"
# Slack over the model's own limit so the adapter's timeout fires first with its own message.
TIMEOUT_SLACK_S = 5.0
CLAIM_POLL_S = 0.05
RESERVE_OVERHEAD_TOKENS = 64
# A provider asking for a longer pause (a daily quota, say) will not recover within a run.
MAX_RETRY_AFTER_S = 120.0
ESTIMATE_OVERHEAD_TOKENS = 8


@dataclass(frozen=True)
class Planned:
    """A request resolved to its adapter, cache key and price row."""

    request: Request
    key: str
    adapter: Adapter
    price: PriceRow

    def _input_text(self) -> str:
        return (self.request.system or "") + self.request.prompt + self._schema_text()

    def _schema_text(self) -> str:
        """The schema as it is counted into the input when the adapter puts it in the prompt."""
        if self.request.schema is not None and self.adapter.schema_mode(self.request) == (
            SCHEMA_PROMPTED
        ):
            return str(self.request.schema)
        return ""

    @property
    def max_cost_usd(self) -> float:
        """Strict upper bound, reserved before the call: every input byte a token (true of
        byte-level BPE tokenizers) plus chat-template overhead, and all of max_tokens."""
        input_tokens = len(self._input_text().encode("utf-8")) + RESERVE_OVERHEAD_TOKENS
        return self.price.cost(
            Usage(input_tokens=input_tokens, output_tokens=self.request.max_tokens)
        )

    @property
    def estimated_cost_usd(self) -> float:
        """Pre-run estimate: input at about four characters a token, output at max_tokens."""
        request = self.request
        return self.estimated_cost_for(len(request.system or "") + len(request.prompt))

    def estimated_cost_for(self, text_chars: int) -> float:
        """The estimate of a request like this one whose system and prompt are
        ``text_chars`` characters long (the schema, when prompted, is added)."""
        input_chars = text_chars + len(self._schema_text())
        input_tokens = tokens_for_chars(input_chars) + ESTIMATE_OVERHEAD_TOKENS
        return self.price.cost(
            Usage(input_tokens=input_tokens, output_tokens=self.request.max_tokens)
        )


@dataclass
class Outcome:
    """What happened to one request in this run."""

    key: str
    status: str
    response: Response | None = None
    cached: bool = False
    cost_usd: float = 0.0
    cost_if_uncached_usd: float = 0.0
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 0

    @property
    def redactions(self) -> int:
        """Keys redacted from this outcome's answer or error (spec: "Secrets in texts")."""
        return count_redacted(self.error, self.response.text if self.response else None)


@dataclass(frozen=True)
class Estimate:
    calls: int
    cached: int
    uncached: int
    cost_usd: float
    already_committed_usd: float

    def __add__(self, other: Estimate) -> Estimate:
        """Both batches' calls; the ledger's committed amount is the run's, counted once."""
        return Estimate(
            calls=self.calls + other.calls,
            cached=self.cached + other.cached,
            uncached=self.uncached + other.uncached,
            cost_usd=self.cost_usd + other.cost_usd,
            already_committed_usd=max(self.already_committed_usd, other.already_committed_usd),
        )


@dataclass
class Progress:
    total: int = 0
    done: int = 0
    cached: int = 0
    spent_usd: float = 0.0


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
    on_progress: Callable[[Progress], None] | None = None
    # The session's loop, shared with its other dispatchers; None: a loop per batch.
    loop: SessionLoop | None = None
    owner: str = field(default_factory=process_owner)
    budget_exhausted: bool = False
    _in_flight: int = field(default=0, init=False, repr=False)
    _settled: asyncio.Event | None = field(default=None, init=False, repr=False)
    _pacers: dict[str, _Pacer] = field(default_factory=dict, init=False, repr=False)

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
            if state is not None:
                self.store.remember_adapter_state(adapter.name, state)

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
        unique = {p.key: p for p in planned}
        reads = self.record != "all"
        sent = [p for p in unique.values() if not (reads and self.store.has(p.key))]
        cached = len(unique) - len(sent)
        if self.record == "none":
            sent = []
        return Estimate(
            calls=len(unique),
            cached=cached,
            uncached=len(sent),
            cost_usd=sum(p.estimated_cost_usd for p in sent),
            already_committed_usd=self.store.committed(self.run_token),
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
        )

    def run(self, planned: list[Planned]) -> dict[str, Outcome]:
        """Send everything concurrently; returns an outcome for every key."""
        return self._run_coroutine(self._run_all(planned))

    def run_each(self, planned: list[Planned]) -> list[Outcome]:
        """One outcome per planned request, in order. A request that appears twice in the
        batch is sent and paid once: its later copies report the answer as cached, at no
        cost, so the report never counts one bill twice."""
        outcomes = self.run(planned)
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

    async def _run_all(self, planned: list[Planned]) -> dict[str, Outcome]:
        self._in_flight = 0
        self._settled = asyncio.Event()
        unique = {p.key: p for p in planned}
        progress = Progress(total=len(unique))
        limits: dict[str, asyncio.Semaphore] = {}
        self._pacers = {name: _Pacer(60.0 / per_minute) for name, per_minute in self.rpm.items()}
        for item in unique.values():
            width = self.provider_concurrency.get(item.adapter.name, self.concurrency)
            limits.setdefault(item.adapter.name, asyncio.Semaphore(max(1, width)))

        async def one(item: Planned) -> Outcome:
            outcome = await self._one(item, limits[item.adapter.name])
            progress.done += 1
            progress.cached += outcome.cached
            progress.spent_usd += outcome.cost_usd
            if self.on_progress is not None:
                self.on_progress(progress)
            return outcome

        outcomes = await asyncio.gather(*(one(item) for item in unique.values()))
        return {outcome.key: outcome for outcome in outcomes}

    async def _one(self, item: Planned, limit: asyncio.Semaphore) -> Outcome:
        if self.record != "all":
            hit = self.store.get(item.key)
            if hit is not None:
                claim = self.store.claim_of(self.run_token, item.key)
                if claim is not None and claim.owner != self.owner:
                    # Paid in this very run by another worker: report it as paid, exactly
                    # as a single process would.
                    return await self._wait_for_other_process(item)
                # A cache written before redaction existed may still hold a key.
                return Outcome(
                    item.key,
                    OK,
                    redacted_response(hit.response),
                    cached=True,
                    cost_if_uncached_usd=hit.cost_usd,
                )
        if self.record == "none":
            return Outcome(
                item.key,
                REPLAY_MISS,
                error="no cached answer and --evalmine-record=none forbids calling the model",
                error_kind=REPLAY_MISS,
            )
        if not self.store.claim(self.run_token, item.key, self.owner):
            return await self._wait_for_other_process(item)
        async with limit:
            outcome = await self._call_within_budget(item)
        self.store.finish_claim(
            self.run_token,
            item.key,
            status=outcome.status,
            error=outcome.error,
            error_kind=outcome.error_kind,
            cost_usd=outcome.cost_usd,
            attempts=outcome.attempts,
        )
        return outcome

    async def _call_within_budget(self, item: Planned) -> Outcome:
        reservation = await self._reserve(item)
        if reservation is None:
            return _budget_outcome(item.key)
        try:
            return await self._call(item, reservation)
        finally:
            self._in_flight -= 1
            assert self._settled is not None
            self._settled.set()

    async def _reserve(self, item: Planned) -> int | None:
        """Reserve the call's worst case. While calls of ours are in flight their settled
        cost will usually be below what they reserved, so wait for them before giving up."""
        while not self.budget_exhausted:
            reservation = self.store.reserve(
                self.run_token, item.key, item.max_cost_usd, self.cap_usd
            )
            if reservation is not None:
                self._in_flight += 1
                return reservation
            if self._in_flight == 0:
                self.budget_exhausted = True
                break
            assert self._settled is not None
            self._settled.clear()
            await self._settled.wait()
        return None

    async def _call(self, item: Planned, reservation: int) -> Outcome:
        attempts = 0
        while True:
            attempts += 1
            pacer = self._pacers.get(item.adapter.name)
            if pacer is not None:
                await pacer.wait()
            try:
                response = await asyncio.wait_for(
                    item.adapter.complete(item.request),
                    timeout=item.request.timeout_s + TIMEOUT_SLACK_S,
                )
            except (AdapterError, asyncio.TimeoutError) as exc:
                error = exc if isinstance(exc, AdapterError) else _timeout_error(item.request)
                if error.retryable and (error.retry_after_s or 0) > MAX_RETRY_AFTER_S:
                    error = AdapterError(
                        error.kind,
                        f"{error} (the provider asked to wait {error.retry_after_s:.0f} s, more "
                        f"than the {MAX_RETRY_AFTER_S:.0f} s a run waits)",
                        retryable=False,
                        status=error.status,
                    )
                if error.retryable and attempts <= self.retries:
                    await asyncio.sleep(self._backoff(attempts, error.retry_after_s))
                    continue
                self.store.release(reservation)
                return Outcome(
                    item.key,
                    ERROR,
                    error=f"{error.kind}: {error} (after {attempts} attempt(s))",
                    error_kind=error.kind,
                    attempts=attempts,
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
                )
            # Redacted before anything keeps it: the cache, and every report built from it.
            response = redacted_response(response)
            cost = item.price.cost(response.usage)
            self.store.record_paid_answer(
                key=item.key,
                provider=item.adapter.name,
                model=item.request.model,
                response=response,
                cost_usd=cost,
                reservation=reservation,
            )
            return Outcome(
                item.key,
                OK,
                response,
                cost_usd=cost,
                cost_if_uncached_usd=cost,
                attempts=attempts,
            )

    async def _wait_for_other_process(self, item: Planned) -> Outcome:
        """Another worker of this run holds the call: wait for its result, never pay twice."""
        while True:
            claim = self.store.claim_of(self.run_token, item.key)
            if claim is None or (
                claim.status == "running" and self.store.claim(self.run_token, item.key, self.owner)
            ):
                # The holder died mid-call: we now hold the claim and make the call ourselves.
                return await self._one(item, asyncio.Semaphore(1))
            if claim.status != "running":
                break
            await asyncio.sleep(CLAIM_POLL_S)
        if claim.status == OK:
            hit = self.store.get(item.key)
            if hit is not None:
                return Outcome(
                    item.key,
                    OK,
                    hit.response,
                    cost_usd=claim.cost_usd,
                    cost_if_uncached_usd=hit.cost_usd,
                    attempts=claim.attempts,
                )
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
        )

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
