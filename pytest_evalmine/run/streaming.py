"""A dispatch streaming its answers while pytest runs the items (spec: "Run lifecycle" step
5): each item turns the session's loop until its own answer is in."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from .loop import SessionLoop
from .outcome import Outcome, Progress
from .planned import Planned


class Dispatching(Protocol):
    """What a streamed dispatch needs of its dispatcher (``dispatch.Dispatcher``, which
    imports this module)."""

    concurrency: int
    interrupted: bool
    other_runs: dict[str, float]

    def _run_all(
        self,
        planned: list[Planned],
        progress: Progress | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
    ) -> Coroutine[Any, Any, dict[str, Outcome]]: ...


# How long items whose answers are in may run back to back before the loop gets a turn.
TURN_EVERY_S = 0.001
# Turns from an answer's arrival to the next call's send (its commit, the freed slot, the
# next reservation's commit, the send).
SEND_TURNS = 4


class Streaming:
    """A dispatch running on the session's loop while pytest runs the items: each item turns
    the loop until its own answer is in, so items run while later answers are still on their
    way (the last items finish right after the last answer, instead of all of them after
    it). ``wait`` turns the loop at least once a millisecond, so the calls in flight keep
    moving while items whose answers came early run; ``finish`` turns it until the dispatch
    ends."""

    def __init__(
        self,
        loop: SessionLoop,
        dispatcher: Dispatching,
        planned: list[Planned],
        progress: Progress,
    ) -> None:
        self._loop = loop
        self.dispatcher = dispatcher
        self.outcomes: dict[str, Outcome] = {}
        self._waiting: tuple[Callable[[], bool], asyncio.Future[None]] | None = None
        self._expected = len({plan.key for plan in planned})
        self._turned = time.monotonic()
        self._task = loop.start(dispatcher._run_all(planned, progress, self._arrived))

    @property
    def done(self) -> bool:
        return self._task.done()

    def _arrived(self, outcome: Outcome) -> None:
        self.outcomes[outcome.key] = outcome
        if self._waiting is not None:
            arrived, waiting = self._waiting
            if arrived() and not waiting.done():
                waiting.set_result(None)

    def wait(self, key: str) -> Outcome:
        """The outcome of the request ``key`` of this dispatch. An outcome already in costs
        a turn of the loop at most once a millisecond: items whose answers came early run
        back to back while the calls in flight still move every millisecond."""
        if key not in self.outcomes:
            self._loop.run_until(self._arrival(key), self._task)
            self._turned = time.monotonic()
        elif not self._task.done() and time.monotonic() - self._turned > TURN_EVERY_S:
            self._loop.turn(self._task)
            self._turned = time.monotonic()
        if len(self.outcomes) == self._expected and not self._task.done():
            # The last answer is in: the dispatch ends within a turn or two.
            self._loop.run_until(self._task, self._task)
        if key not in self.outcomes:
            self._task.result()  # the dispatch failed: its error, here
            raise KeyError(key)
        return self.outcomes[key]

    async def _arrival(self, key: str) -> None:
        """Until ``key``'s outcome is in and, after it, as many more as the dispatch's
        concurrency (or all that remain): an item that had to wait lets the next ones find
        their answers in, so items and loop take turns in batches rather than one by one.
        Then a few more turns, so that the calls those answers freed are sent before the
        items run."""
        if key not in self.outcomes and not self._task.done():
            await self._until(lambda: key in self.outcomes)
        enough = min(self._expected, len(self.outcomes) + self.dispatcher.concurrency)
        await self._until(lambda: len(self.outcomes) >= enough)
        for _ in range(SEND_TURNS):
            await asyncio.sleep(0)

    async def _until(self, arrived: Callable[[], bool]) -> None:
        if arrived() or self._task.done():
            return
        waiting: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting = (arrived, waiting)

        def ended(_: object) -> None:
            if not waiting.done():
                waiting.set_result(None)

        self._task.add_done_callback(ended)
        try:
            await waiting
        finally:
            self._task.remove_done_callback(ended)
            self._waiting = None

    def finish(self) -> dict[str, Outcome]:
        """Every outcome, once the dispatch has ended (calls in flight land in the cache);
        only those that arrived when a second Ctrl-C cancelled it."""
        if not self._task.done():
            self._loop.run_until(self._task, self._task)
        if self._task.cancelled():
            return dict(self.outcomes)
        return self._task.result()
