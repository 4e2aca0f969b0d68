"""Requests made in one turn of the event loop, served together at its end (spec: "Dispatch").

When 32 replies arrive at once, 32 tasks each want a SQLite write (a reservation for their
next call, the answer they just got). One transaction for all of them costs what one costs
alone, and nobody waits longer: the batch is served as soon as every task that was ready in
that turn has queued its request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class SameTurn(Generic[T, R]):
    """``submit(item)`` waits for ``serve(items)``, called once at the end of the turn with
    every item submitted in it; its results are handed back in order. A result whose
    submitter is gone (cancelled) goes to ``unclaimed`` so that nothing it holds leaks."""

    def __init__(
        self,
        serve: Callable[[list[T]], list[R]],
        unclaimed: Callable[[T, R], None] | None = None,
    ) -> None:
        self._serve = serve
        self._unclaimed = unclaimed
        self._queued: list[tuple[T, asyncio.Future[R]]] = []

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[R] = loop.create_future()
        if not self._queued:
            loop.call_soon(self._serve_queued)
        self._queued.append((item, done))
        return await done

    def _serve_queued(self) -> None:
        batch, self._queued = self._queued, []
        try:
            results = self._serve([item for item, _ in batch])
        except BaseException as exc:
            for _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            return
        for (item, done), result in zip(batch, results, strict=True):
            if not done.done():
                done.set_result(result)
            elif self._unclaimed is not None:
                self._unclaimed(item, result)
