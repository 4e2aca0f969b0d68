"""Reservations against the cost cap (spec: "Dispatch" step 4, "Cost cap").

Before a call is sent its worst-case cost is reserved in the ledger the run's processes
share, so that no number of concurrent calls, in any number of processes, can together pass
the cap. The reservations asked for in one turn of the loop are made in one transaction
(``SameTurn``); a call that does not fit waits while calls of ours are in flight (their
settled cost is usually below what they reserved) and gives up only when none is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from .outcome import Outcome, budget_outcome, interrupted_outcome
from .planned import Planned
from .same_turn import SameTurn
from .store import Store


class Stops(Protocol):
    """What the reservations read and set on their dispatcher: a cap found exhausted stays
    so for the dispatcher's life; a Ctrl-C ends every wait."""

    budget_exhausted: bool
    interrupted: bool


class Reservations:
    """One batch's reservations for the run ``run_token`` under ``cap_usd``, and the count
    of its calls in flight (reserved, not yet settled)."""

    def __init__(self, store: Store, run_token: str, cap_usd: float, stops: Stops) -> None:
        self.store = store
        self.run_token = run_token
        self.cap_usd = cap_usd
        self.stops = stops
        self.in_flight = 0
        self._settled = asyncio.Event()
        self._turn: SameTurn[tuple[Planned, bool], int | None] = SameTurn(
            self._reserve_each, self._unclaimed
        )

    def wake(self) -> None:
        """Wake the calls waiting for room under the cap (a call settled, or a Ctrl-C)."""
        self._settled.set()

    async def within_budget(
        self, item: Planned, send: Callable[[Planned, int], Coroutine[Any, Any, Outcome]]
    ) -> Outcome:
        """Reserve the call's worst case, then make it through ``send`` (online, or a
        provider batch) with that reservation."""
        reservation = await self.reserve(item, holding=False)
        if reservation is None:
            stopped = self.stops.interrupted
            return interrupted_outcome(item.key) if stopped else budget_outcome(item.key)
        try:
            return await send(item, reservation)
        finally:
            self.in_flight -= 1
            self.wake()

    async def reserve(self, item: Planned, *, holding: bool) -> int | None:
        """Reserve the call's worst case. While calls of ours are in flight their settled
        cost will usually be below what they reserved, so wait for them before giving up.
        ``holding``: this call is in flight already (a retry after a possibly billed try).
        A call that is not ``holding`` counts as in flight from its reservation on."""
        while not (self.stops.budget_exhausted or self.stops.interrupted):
            reservation = await self._turn.submit((item, holding))
            if reservation is not None:
                if not self.stops.interrupted:
                    return reservation
                # Ctrl-C came while this turn's reservations were being made.
                self._unclaimed((item, holding), reservation)
                break
            if self.in_flight == int(holding):
                self.stops.budget_exhausted = True
                break
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
                self.in_flight += 1
        return reservations

    def _unclaimed(self, wanted: tuple[Planned, bool], reservation: int | None) -> None:
        """A reservation nobody will use (its task was cancelled or interrupted): released,
        and no longer counted in flight."""
        if reservation is None:
            return
        self.store.release(reservation)
        if not wanted[1]:
            self.in_flight -= 1
            self.wake()
