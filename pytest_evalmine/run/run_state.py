"""The one owner of what a dispatch's calls wait on (spec: "Dispatch", "Termination").

A call waits for room under the cap, for a place under its provider's width, for its batch
to be submitted and to end, or for another process's claim. Each of those waits ends only
when something changes: a call settles, a reservation is released, a batch is submitted or
read, a Ctrl-C. Two runs of earlier versions never ended because a wait watched a condition
that the change which made it true did not signal (two retries each waiting for the other
to settle; a call queued for a batch after its gatherer had taken the queue). Here every
party that waits, waits through ``until`` on a predicate over this state, and every change
of it goes through a method that wakes every waiter to look again, so no change can be
missed.

The rule that makes every dispatch end: a call that waits for room under the cap gives up
(``budget``) as soon as no reserved call of this process can still move on its own, that is
when every call holding a reservation is itself waiting for another one. Calls that move on
their own (sent, in a backoff's sleep, queued for or inside a provider batch) settle within
the bounds of their timeouts, retries and the batch wait, and each settlement is a change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class RunState:
    """One dispatch's shared state: the calls holding a reservation, those of them waiting
    for another (a retry after a possibly billed try), the calls waiting for room, and the
    calls handed to a provider batch that no batch holds yet."""

    # Calls holding a reservation that has not settled.
    reserved: int = 0
    # Of those, the calls waiting for a further reservation (they free nothing meanwhile).
    reserved_waiting: int = 0
    # Calls (holding or not) waiting for room under the cap.
    budget_waiters: int = 0
    # Calls handed to the batcher and not yet in a submitted batch (or settled).
    batch_queued: int = 0
    # Reservations settled so far: a call waiting for room tries again after each.
    settlements: int = 0
    budget_exhausted: bool = False
    interrupted: bool = False
    _wakeup: asyncio.Event | None = field(default=None, init=False, repr=False)

    def changed(self) -> None:
        """Something a waiter may be waiting for changed: every waiter looks again."""
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None

    async def until(self, ready: Callable[[], bool]) -> None:
        """Return once ``ready()`` holds, looking again at every change."""
        while not ready():
            if self._wakeup is None:
                self._wakeup = asyncio.Event()
            await self._wakeup.wait()

    def can_free_budget(self) -> bool:
        """Whether a reserved call of this process can still settle without waiting for room
        itself: only then may a call that does not fit under the cap wait."""
        return self.reserved > self.reserved_waiting

    def stopped(self) -> bool:
        return self.budget_exhausted or self.interrupted

    # Changes, each signalled.
    def reservation_made(self, *, holding: bool) -> None:
        if not holding:
            self.reserved += 1
        self.changed()

    def reservation_settled(self) -> None:
        self.reserved -= 1
        self.settlements += 1
        self.changed()

    def waiting_for_budget(self, *, holding: bool, waiting: bool) -> None:
        """A call starts (``waiting``) or stops waiting for room under the cap."""
        step = 1 if waiting else -1
        self.budget_waiters += step
        if holding:
            self.reserved_waiting += step
        self.changed()

    def exhaust_budget(self) -> None:
        self.budget_exhausted = True
        self.changed()

    def interrupt(self) -> None:
        self.interrupted = True
        self.changed()

    def batch_queue(self, count: int) -> None:
        """``count`` calls join (positive) or leave (negative) the batch queue."""
        self.batch_queued += count
        self.changed()

    def idle(self) -> bool:
        """Nothing of this state is outstanding: the state a dispatch must end in."""
        return (
            self.reserved == 0
            and self.reserved_waiting == 0
            and self.budget_waiters == 0
            and self.batch_queued == 0
        )
