"""How many calls one provider gets at once (spec: "Dispatch", concurrency).

A one-slot server handed 8 calls at once queues 7 of them: answers of 0.2 s took seconds and
the last ones timed out while waiting. ``ConcurrencyLimiter`` finds the width a server takes,
AIMD-style, from what its calls tell it and nothing else (no clock of its own, so a test
drives it with scripted latencies):

- it starts at the capacity the server declares (llama.cpp's ``total_slots``) or else at 1,
  and doubles each round while latency stays flat (a slow start: a first wave at the ceiling
  would already sit in the server's queue before any answer came back);
- a round is as many answers as the width, of calls sent at that width; its latency is their
  upper median (one long answer is not a queue), compared with the best round at a lower
  width (the provider's first answer is in no round: it carries the connection's set-up and
  the server's cold start, and as a baseline would hide the queue behind it): grown by more
  than ``QUEUE_RATIO`` (and ``QUEUE_SLACK_S``), the server is queueing;
- a queue, a 429/503 or a timeout halves the width (a back-off); a flat round at full width
  adds 1; never below 1 nor above the ceiling (``--evalmine-concurrency``);
- signals from calls sent before the last back-off are ignored: they were sent too wide and
  say nothing about the width now;
- ``fixed``: the width is the ceiling and never changes (``concurrency=fixed:N``).

``Gate`` is the asyncio side: calls wait for room in FIFO order.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# A round whose latency grew by more than this factor over the best at a lower width means
# the extra calls waited in the server's queue (a server with spare slots answers as fast).
QUEUE_RATIO = 1.5
# ... and by more than this much: loopback and cached answers take milliseconds, whose jitter
# alone can double them.
QUEUE_SLACK_S = 0.05
DECREASE_FACTOR = 0.5
# Statuses that say "too many at once": rate limited, unavailable, Anthropic's overloaded.
OVERLOAD_STATUSES = frozenset({429, 503, 529})


@dataclass(frozen=True)
class Attempt:
    """What a sent call remembers: the epoch (back-offs and changes so far) it was sent in."""

    epoch: int


@dataclass
class ConcurrencyLimiter:
    ceiling: int
    fixed: bool = False
    # The capacity the server declared (None: unknown, slow start from 1).
    declared: int | None = None
    limit: int = field(init=False)
    in_flight: int = field(default=0, init=False)
    epoch: int = field(default=0, init=False)
    backoffs: int = field(default=0, init=False)
    # Calls sent (retries included): a provider whose answers were all cached sent none.
    sent: int = field(default=0, init=False)
    lowest: int = field(init=False)
    highest: int = field(init=False)
    _slow_start: bool = field(init=False)
    _round: list[float] = field(default_factory=list, init=False)
    # Calls of this round sent and not yet returned: the server's view of the width, which
    # the gate's count is not (a call holds its gate place a moment after its answer, and a
    # call waiting to be sent holds one too).
    _round_out: int = field(default=0, init=False)
    # Whether this round's calls were out at the full width at once: only then may it grow.
    _round_full: bool = field(default=False, init=False)
    # The best round latency seen at each width.
    _best: dict[int, float] = field(default_factory=dict, init=False)
    _warmed_up: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.ceiling = max(1, self.ceiling)
        if self.fixed:
            start = self.ceiling
        elif self.declared is not None and self.declared >= 1:
            start = min(self.ceiling, self.declared)
        else:
            start = 1
        self.limit = self.lowest = self.highest = start
        # A declared capacity is where the server's queue starts: probe above it gently.
        self._slow_start = not self.fixed and self.declared is None

    def has_room(self) -> bool:
        return self.in_flight < self.limit

    def acquire(self) -> None:
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1

    def attempt(self) -> Attempt:
        """A call is being sent; ``returned`` follows when its exchange ends, however."""
        self.sent += 1
        self._round_out += 1
        if self._round_out >= self.limit:
            self._round_full = True
        return Attempt(self.epoch)

    def returned(self, attempt: Attempt) -> None:
        if attempt.epoch == self.epoch:
            self._round_out -= 1

    def answered(self, attempt: Attempt, latency_s: float) -> None:
        """A call sent at ``attempt`` was answered after ``latency_s`` (from its send)."""
        if self.fixed or attempt.epoch != self.epoch:
            return
        if not self._warmed_up:
            self._warmed_up = True
            return
        self._round.append(latency_s)
        if len(self._round) < self.limit:
            return
        latency = statistics.median_high(self._round)
        lower = [best for width, best in self._best.items() if width < self.limit]
        baseline = min(lower) if lower else None
        self._best[self.limit] = min(latency, self._best.get(self.limit, math.inf))
        if (
            baseline is not None
            and latency > baseline * QUEUE_RATIO
            and latency - baseline > QUEUE_SLACK_S
        ):
            self._back_off()
        elif self._round_full and self.limit < self.ceiling:
            grown = self.limit * 2 if self._slow_start else self.limit + 1
            self._set(min(self.ceiling, grown))
        else:
            self._set(self.limit)

    def overloaded(self, attempt: Attempt) -> None:
        """A call sent at ``attempt`` was refused for load (429/503) or timed out."""
        if self.fixed or attempt.epoch != self.epoch:
            return
        self._back_off()

    def _back_off(self) -> None:
        self.backoffs += 1
        self._slow_start = False
        self._set(max(1, math.floor(self.limit * DECREASE_FACTOR)))

    def _set(self, limit: int) -> None:
        """A new round (a new epoch) at ``limit``."""
        self.limit = limit
        self.lowest = min(self.lowest, limit)
        self.highest = max(self.highest, limit)
        self.epoch += 1
        self._round = []
        self._round_out = 0
        self._round_full = False

    def summary(self) -> dict[str, Any]:
        """report.json ``concurrency.PROVIDER``: the widths used and the back-offs."""
        return {
            "mode": "fixed" if self.fixed else "adaptive",
            "min": self.lowest,
            "max": self.highest,
            "final": self.limit,
            "backoffs": self.backoffs,
        }


def merged_concurrency(used: Iterable[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Several dispatchers' ``concurrency_used`` (the answers', the judge's), in the order
    they were built: per provider the lowest and highest width, the last one's final width
    and mode, and every back-off."""
    merged: dict[str, dict[str, Any]] = {}
    for one in used:
        for provider, row in one.items():
            seen = merged.get(provider)
            if seen is None:
                merged[provider] = dict(row)
                continue
            seen["min"] = min(seen["min"], row["min"])
            seen["max"] = max(seen["max"], row["max"])
            seen["final"], seen["mode"] = row["final"], row["mode"]
            seen["backoffs"] += row["backoffs"]
    return {provider: merged[provider] for provider in sorted(merged)}


def is_overload(kind: str, status: int | None) -> bool:
    """An error that says the server has too much to do: a rate limit, 503/529, a timeout."""
    return kind in ("rate_limit", "timeout") or status in OVERLOAD_STATUSES


class Gate:
    """``async with gate:`` waits for room under the limiter's width, first come first served."""

    def __init__(self, limiter: ConcurrencyLimiter) -> None:
        self.limiter = limiter
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def __aenter__(self) -> Gate:
        if not self._waiters and self.limiter.has_room():
            self.limiter.acquire()
            return self
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # granted, then cancelled before it ran: give the room back
            else:
                self._waiters.remove(waiter)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        self.limiter.release()
        self.wake()

    def wake(self) -> None:
        """Let waiting calls in while there is room (after a release or a wider limit)."""
        while self._waiters and self.limiter.has_room():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.limiter.acquire()
                waiter.set_result(None)
