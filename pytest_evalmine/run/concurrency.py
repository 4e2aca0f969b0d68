"""How many calls one provider gets at once (spec: "Dispatch", concurrency).

A one-slot server handed 8 calls at once queues 7 of them: answers of 0.2 s took seconds and
the last ones timed out while waiting. ``ConcurrencyLimiter`` finds the width a server takes
from what is known about it and what its calls tell it (no clock of its own, so a test drives
it with scripted latencies):

- it starts where knowledge says: at the ceiling for a provider that declares its limits
  (a hosted API: ``known`` is the ceiling), at the capacity the server declares (llama.cpp's
  ``total_slots``, never exceeded), at the width an earlier dispatcher or run learnt
  (``known``); only a server nothing is known about slow-starts from 1, doubling each
  round while latency stays flat (a first wave at the ceiling would already sit in a one-slot
  server's queue before any answer came back);
- a round is as many answers as the width, of calls sent at that width; its latency is
  compared with the best round at the next lower width measured (the provider's first answer
  is in no round: it carries the connection's set-up and the server's cold start, and as a
  baseline would hide the queue behind it);
- two rounds in a row at one width whose mean latency rose by more than ``QUEUE_SHARE`` of
  the width's growth (and by more than ``QUEUE_SLACK_S``) say the extra calls waited in the
  server's queue: the width goes back to the widest proven flat and probing stops below it
  (``cap``) for the rest of the run (one long answer rises one round, not two);
- a 429/503 or a timeout halves the width (a back-off); a flat round at full width proves
  it and adds 1 up to the cap; never below 1;
- the provider's rate-limit headers (``sized``) bound the width by the requests and tokens
  it says it still takes;
- signals from calls sent before the last change are ignored: they were sent at another width
  and say nothing about the width now;
- ``fixed``: the width is the ceiling and never changes (``concurrency=fixed:N``).

``capacity`` is the widest width proven flat (the ceiling when fixed): the scorecard's latency
is taken from answers sent at no more than it. ``Gate`` is the asyncio side: calls wait for
room in FIFO order.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# A round whose mean latency grew by more than this share of its width's growth over the
# next lower width (doubling: 1.25x; one more than 4: 1.06x) means the extra calls waited in
# the server's queue: 5 calls on 4 slots wait a quarter longer and finish no sooner.
QUEUE_SHARE = 0.25
# ... and by more than this much: loopback and cached answers take milliseconds, whose jitter
# alone can double them.
QUEUE_SLACK_S = 0.03
DECREASE_FACTOR = 0.5
# How much a slow start widens after a flat round: doubling puts at most one call too many
# in a one-slot server's queue (its answer waits one answer time, far from a timeout).
SLOW_START_FACTOR = 2
# Statuses that say "too many at once": rate limited, unavailable, Anthropic's overloaded.
OVERLOAD_STATUSES = frozenset({429, 503, 529})


@dataclass(frozen=True)
class Attempt:
    """What a sent call remembers: the epoch (changes of width so far) it was sent in, the
    width then, and whether every call still out was of that epoch (``clean``)."""

    epoch: int
    width: int
    clean: bool = True


@dataclass
class ConcurrencyLimiter:
    ceiling: int
    fixed: bool = False
    # The capacity the server declared (llama.cpp's slots): where it starts, never exceeded.
    declared: int | None = None
    # Where knowledge says to start when nothing is declared: the ceiling for a provider that
    # declares its limits in headers, an earlier dispatcher's or run's width; None: slow start.
    known: int | None = None
    limit: int = field(init=False)
    in_flight: int = field(default=0, init=False)
    epoch: int = field(default=0, init=False)
    backoffs: int = field(default=0, init=False)
    # Calls sent (retries included): a provider whose answers were all cached sent none.
    sent: int = field(default=0, init=False)
    lowest: int = field(init=False)
    highest: int = field(init=False)
    # The widest width probing may reach: the ceiling, the declared slots, or one below the
    # width whose latency rose.
    cap: int = field(init=False)
    # The widest width whose round was flat with all its calls out at once (0: none yet).
    proven: int = field(default=0, init=False)
    # How many calls the provider's rate-limit headers say it still takes (None: no headers).
    headroom: int | None = field(default=None, init=False)
    _slow_start: bool = field(init=False)
    # A width whose round's latency rose once: a second such round in a row confirms it.
    _suspect: int | None = field(default=None, init=False)
    _round: list[float] = field(default_factory=list, init=False)
    # Calls of this round sent and not yet returned: the server's view of the width, which
    # the gate's count is not (a call holds its gate place a moment after its answer, and a
    # call waiting to be sent holds one too).
    _round_out: int = field(default=0, init=False)
    # Whether this round's calls were out at the full width at once: only then may it grow.
    _round_full: bool = field(default=False, init=False)
    # Calls sent before the last change and still out. A call sent while one is out is in no
    # round: the first calls after a change meet the old width's queue, not the new one's (a
    # doubling's first round had half its calls wait, too few to show the queue, and proved
    # a width twice the slots).
    _stale_out: int = field(default=0, init=False)
    # The best round latency (mean) seen at each width.
    _best: dict[int, float] = field(default_factory=dict, init=False)
    _warmed_up: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.ceiling = max(1, self.ceiling)
        declared = self.declared if self.declared is not None and self.declared >= 1 else None
        self.cap = self.ceiling if declared is None else min(self.ceiling, declared)
        if self.fixed:
            start = self.ceiling
        elif declared is not None:
            start = self.cap
        elif self.known is not None and self.known >= 1:
            start = min(self.cap, self.known)
        else:
            start = 1
        self.limit = self.lowest = self.highest = start
        self._slow_start = not self.fixed and declared is None and not self.known
        if not self._slow_start:
            # What was declared or learnt is taken as served: only wider is probed.
            self.proven = start

    @property
    def capacity(self) -> int:
        """The widest width known to be served at once: the ceiling when fixed, else the
        widest proven flat (1 while a slow start has proven none)."""
        if self.fixed:
            return self.ceiling
        return max(1, min(self.cap, self.proven))

    @property
    def learnt(self) -> bool:
        """Whether the width is known (declared, learnt, or its slow start over)."""
        return not self._slow_start

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
        return Attempt(self.epoch, self.limit, clean=self._stale_out == 0)

    def returned(self, attempt: Attempt) -> None:
        if attempt.epoch == self.epoch:
            self._round_out -= 1
        else:
            self._stale_out -= 1

    def answered(self, attempt: Attempt, latency_s: float) -> None:
        """A call sent at ``attempt`` was answered after ``latency_s`` (from its send)."""
        if self.fixed or attempt.epoch != self.epoch or not attempt.clean:
            return
        if not self._warmed_up:
            self._warmed_up = True
            return
        self._round.append(latency_s)
        if len(self._round) < self.limit:
            return
        width = self.limit
        lower, rise = self._rise(width, statistics.fmean(self._round))
        # Throughput is width over latency (Little's law): when more than QUEUE_SHARE of the
        # width's growth went into latency, the extra calls bought little, they waited in
        # the server's queue (a loaded client's own delays grow far less with the width).
        rose = lower is not None and rise > 1 + QUEUE_SHARE * (width / lower - 1)
        if rose and self._suspect == width:
            # Latency rose with the width, twice: the server serves fewer at once. Probing
            # stops below this width for the rest of the run (no sawtooth of probes and
            # back-offs, each a round of answers that measured the queue).
            self.backoffs += 1
            self._slow_start = False
            assert lower is not None
            self.cap = max(1, min(self.cap, width - 1))
            self.proven = min(self.proven, lower)  # back to the width it rose from
            self._set(max(1, self.proven))
        elif rose:
            # Once may be chance (a loaded machine, one long answer): a second round at this
            # width decides, and the cap it sets holds for the rest of the run.
            self._suspect = width
            self._set(width)
        elif self._round_full:
            self.proven = max(self.proven, width)
            grown = width * SLOW_START_FACTOR if self._slow_start else width + 1
            if grown >= self.cap:
                self._slow_start = False  # as wide as it may go: the width is known
            self._set(min(self._room(), max(width, grown)))
        else:
            self._set(width)

    def _rise(self, width: int, latency: float) -> tuple[int | None, float]:
        """The next lower width measured, and how much ``latency`` (a round's mean at
        ``width``) grew over its best round (1.0: not measurably); it enters ``_best``. The
        next lower, not the lowest: a loaded client's own delays grow a little with every
        doubling, and summed over a slow start they would look like a queue that no single
        step shows."""
        below = [at for at in self._best if at < width]
        lower = max(below) if below else None
        baseline = self._best[lower] if lower is not None else None
        self._best[width] = min(latency, self._best.get(width, math.inf))
        if baseline is None or latency - baseline <= QUEUE_SLACK_S:
            return lower, 1.0
        return lower, latency / baseline

    def overloaded(self, attempt: Attempt) -> None:
        """A call sent at ``attempt`` was refused for load (429/503) or timed out."""
        if self.fixed or attempt.epoch != self.epoch:
            return
        self._back_off()

    def sized(
        self, remaining_requests: int | None, remaining_tokens: int | None, tokens: int
    ) -> None:
        """The provider's rate-limit headers on a reply: it still takes ``remaining_requests``
        requests and ``remaining_tokens`` tokens (a call takes about ``tokens``). The width
        never exceeds that; a provider that says so is known: no slow start."""
        if self.fixed:
            return
        bounds = [n for n in (remaining_requests,) if n is not None]
        if remaining_tokens is not None:
            bounds.append(remaining_tokens // max(1, tokens))
        if not bounds:
            return
        self.headroom = max(1, min(bounds))
        if self.limit > self.headroom:
            self._set(self.headroom)
        elif self._slow_start:
            self._slow_start = False
            if self._room() > self.limit:
                self._set(self._room())

    def _room(self) -> int:
        """The widest the width may grow now: the cap, within the rate-limit headroom."""
        return self.cap if self.headroom is None else max(1, min(self.cap, self.headroom))

    def _back_off(self) -> None:
        self.backoffs += 1
        self._slow_start = False
        self._set(max(1, math.floor(self.limit * DECREASE_FACTOR)))

    def _set(self, limit: int) -> None:
        """A new round (a new epoch) at ``limit``."""
        if limit != self._suspect:
            self._suspect = None
        self.limit = limit
        self.lowest = min(self.lowest, limit)
        self.highest = max(self.highest, limit)
        self.epoch += 1
        self._round = []
        self._stale_out += self._round_out
        self._round_out = 0
        self._round_full = False

    def summary(self) -> dict[str, Any]:
        """report.json ``concurrency.PROVIDER``: the widths used, the back-offs and the
        capacity the scorecard's latency is taken within."""
        return {
            "mode": "fixed" if self.fixed else "adaptive",
            "min": self.lowest,
            "max": self.highest,
            "final": self.limit,
            "backoffs": self.backoffs,
            "capacity": self.capacity,
        }


def merged_concurrency(used: Iterable[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Several dispatchers' ``concurrency_used`` (the answers', the judge's), in the order
    they were built: per provider the lowest and highest width, the last one's final width
    and mode, every back-off, and the narrowest capacity found (the scorecard's latency is
    taken within it: ``Session.latency_widths``)."""
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
            if "capacity" in row:
                seen["capacity"] = min(seen.get("capacity", row["capacity"]), row["capacity"])
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
