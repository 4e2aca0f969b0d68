"""Outcomes a request settles to without a call of this process (spec: "Dispatch" steps 1
and 3): an answer in the cache, a call another process of the run finished (its claim), and
what the xdist controller reads of its stopped workers' calls. With them, the one poller that
waits for the claims other processes hold, so a call in flight elsewhere is never paid twice.

Apart from dispatch because none of it reserves or sends: it reads the cache and the claims.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .outcome import ERROR, OK, Outcome, cut_off_outcome, interrupted_outcome
from .paid_call import redacted_response
from .planned import Planned
from .store import Claim, Hit, StoreBackend

CLAIM_POLL_S = 0.05


def from_cache(item: Planned, hit: Hit, run_token: str, owner: str) -> Outcome:
    """The cached answer ``hit`` as the outcome of ``item`` for the process ``owner`` of the
    run ``run_token``."""
    # A cache written before redaction existed may still hold a key.
    response = redacted_response(hit.answer.response)
    claim = hit.claim
    # "If uncached" is what the call would cost now: its usage at today's price table, not
    # the cost recorded when it was paid (the table may have changed since; both are kept).
    today = item.price.cost(hit.answer.response.usage)
    if claim is not None and claim.run_token == run_token and claim.owner != owner:
        # Paid in this very run by another worker: report it as paid, exactly as a
        # single process would.
        return Outcome(
            item.key,
            OK,
            response,
            cost_usd=claim.cost_usd,
            cost_if_uncached_usd=today,
            attempts=claim.attempts,
            possibly_billed_usd=claim.possibly_billed_usd,
        )
    return Outcome(
        item.key,
        OK,
        response,
        cached=True,
        cost_if_uncached_usd=today,
        recorded_cost_usd=hit.answer.cost_usd,
    )


def from_claim(
    store: StoreBackend, item: Planned, claim: Claim, run_token: str, owner: str
) -> Outcome:
    """Another worker of this run finished the call: its outcome is ours."""
    if claim.status == OK:
        hit = store.hit(item.key)
        if hit is not None:
            return from_cache(item, hit, run_token, owner)
        return Outcome(
            item.key,
            ERROR,
            error="answered in another process but not cached (an injected fault), so not shared",
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


def settled(
    store: StoreBackend, planned: list[Planned], run_token: str, owner: str, record: str
) -> dict[str, Outcome]:
    """What the run's other processes made of ``planned``, read from the cache, the claims
    and the ledger, sending nothing: for the xdist controller, whose workers' records of a
    stopped run never arrive. Paid in this run: as paid, with its cost; a failure of this
    run: that failure; still in flight (reserved in the ledger): cut off by the Ctrl-C,
    possibly billed at its worst case; else cached, or not sent."""
    unique = {p.key: p for p in planned}
    claims = store.claims_of(list(unique))
    in_flight = store.reserved_keys(run_token)
    outcomes = {}
    for key, item in unique.items():
        claim = claims.get(key)
        ours = claim is not None and claim.run_token == run_token
        if key in in_flight:
            outcomes[key] = cut_off_outcome(key, attempts=1, possibly_billed_usd=item.max_cost_usd)
        elif ours and claim is not None and not claim.running:
            outcomes[key] = from_claim(store, item, claim, run_token, owner)
        elif record != "all" and (hit := store.hit(key)) is not None:
            outcomes[key] = from_cache(item, hit, run_token, owner)
        else:
            outcomes[key] = interrupted_outcome(key)
    return outcomes


class ClaimWaiter:
    """One batch's waits for claims that other processes hold. ``interrupted``: whether the
    run was stopped (every wait then ends with None)."""

    def __init__(self, store: StoreBackend, interrupted: Callable[[], bool]) -> None:
        self.store = store
        self.interrupted = interrupted
        self._waiting: dict[str, asyncio.Future[Claim | None]] = {}
        self._poller: asyncio.Task[None] | None = None

    async def wait(self, key: str) -> Claim | None:
        """The claim of ``key`` once it is no longer in flight (finished, or its owner died).
        One poller reads every awaited claim in one query per interval."""
        future = self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = asyncio.get_running_loop().create_future()
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll())
        return await future

    async def _poll(self) -> None:
        while self._waiting:
            await asyncio.sleep(CLAIM_POLL_S)
            if self.interrupted():
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
                        alive[claim.owner] = self.store.owner_alive(claim.owner)
                    if alive[claim.owner]:
                        continue
                self._waiting.pop(key).set_result(claim)
