"""Reservations against the cost cap (spec: "Dispatch" step 4, "Cost cap").

Before a call is sent its worst-case cost is reserved in the ledger the run's processes
share, so that no number of concurrent calls, in any number of processes, can together pass
the cap. The reservations asked for in one turn of the loop are made in one transaction
(``SameTurn``); a call that does not fit waits while a reserved call of ours can still
settle (its settled cost is usually below what it reserved) and gives up when none can.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from .outcome import Outcome, budget_outcome, interrupted_outcome
from .planned import Planned
from .run_state import RunState
from .same_turn import SameTurn
from .store import StoreBackend


class Reservations:
    """One batch's reservations for the run ``run_token`` under ``cap_usd`` (which holds
    for everything committed under ``budget_token``, default the run token); what calls wait
    on (the calls holding a reservation, those waiting for room) is the dispatch's
    ``RunState``, which signals every change of it."""

    def __init__(
        self,
        store: StoreBackend,
        run_token: str,
        cap_usd: float,
        state: RunState,
        budget_token: str | None = None,
    ) -> None:
        self.store = store
        self.run_token = run_token
        self.budget_token = budget_token or run_token
        self.cap_usd = cap_usd
        self.state = state
        self._turn: SameTurn[tuple[Planned, bool], int | None] = SameTurn(
            self._reserve_each, self._unclaimed
        )

    async def within_budget(
        self, item: Planned, send: Callable[[Planned, int], Coroutine[Any, Any, Outcome]]
    ) -> Outcome:
        """Reserve the call's worst case, then make it through ``send`` (online, or a
        provider batch) with that reservation."""
        reservation = await self.reserve(item, holding=False)
        if reservation is None:
            stopped = self.state.interrupted
            return interrupted_outcome(item.key) if stopped else budget_outcome(item.key)
        try:
            return await send(item, reservation)
        finally:
            self.state.reservation_settled()

    async def reserve(self, item: Planned, *, holding: bool) -> int | None:
        """Reserve the call's worst case. While another reserved call of ours can still
        settle, its settled cost will usually be below what it reserved, so wait for it
        before giving up; once none can (each is waiting for room itself), every waiter
        gives up at once (``RunState``). ``holding``: this call holds a reservation already
        (a retry after a possibly billed try). A call that is not ``holding`` holds one from
        its reservation on."""
        state = self.state
        while not state.stopped():
            reservation = await self._turn.submit((item, holding))
            if reservation is not None:
                if not state.interrupted:
                    return reservation
                # Ctrl-C came while this turn's reservations were being made.
                self._unclaimed((item, holding), reservation)
                break
            # Counted as waiting before it looks, so that it never waits on its own settling
            # and a wait whose last hope was this call sees that it cannot come.
            seen = state.settlements
            state.waiting_for_budget(holding=holding, waiting=True)
            try:
                if state.can_free_budget():
                    await state.until(
                        lambda seen=seen: (
                            state.stopped()
                            or state.settlements != seen
                            or not state.can_free_budget()
                        )
                    )
            finally:
                state.waiting_for_budget(holding=holding, waiting=False)
            if not state.stopped() and state.settlements == seen:
                # No reserved call can settle: none of the waiters will ever fit.
                state.exhaust_budget()
        return None

    def _reserve_each(self, wanted: list[tuple[Planned, bool]]) -> list[int | None]:
        """The reservations asked for in one turn of the loop, in one transaction. A granted
        one is counted at once, so a request of the same turn that did not fit waits for it
        to settle instead of giving up."""
        reservations = self.store.reserve_each(
            self.run_token,
            [(item.key, item.max_cost_usd) for item, _ in wanted],
            self.cap_usd,
            self.budget_token,
        )
        for (_, holding), reservation in zip(wanted, reservations, strict=True):
            if reservation is not None:
                self.state.reservation_made(holding=holding)
        return reservations

    def _unclaimed(self, wanted: tuple[Planned, bool], reservation: int | None) -> None:
        """A reservation nobody will use (its task was cancelled or interrupted): released,
        and no longer counted."""
        if reservation is None:
            return
        self.store.release(reservation)
        if not wanted[1]:
            self.state.reservation_settled()
