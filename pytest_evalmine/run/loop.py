"""The event loop dispatch runs on (spec: "Dispatch", "Connections").

An HTTP client's connection pool belongs to the loop that opened it. A session runs every
batch (planning's look-ups, the answers, the judge) on one ``SessionLoop``, so each provider
keeps one client and its open connections from the first call to the last; closing the loop
closes the adapters' connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..adapters.registry import AdapterRegistry

T = TypeVar("T")


class SessionLoop:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._registries: list[AdapterRegistry] = []

    def attach(self, registry: AdapterRegistry) -> None:
        """Close ``registry``'s adapters when this loop closes."""
        if not any(known is registry for known in self._registries):
            self._registries.append(registry)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` to completion on this loop and return its result."""
        return _outside_running_loop(self._run_here, coroutine)

    def _run_here(self, coroutine: Coroutine[Any, Any, T]) -> T:
        task = self.start(coroutine)
        return self._run_until_here(task, task)

    def start(self, coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """``coroutine`` as a task of this loop, which runs while ``run_until`` turns it."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.create_task(coroutine)

    def run_until(self, awaited: Awaitable[T], batch: asyncio.Task[Any]) -> T:
        """Turn this loop until ``awaited`` is done (at least one turn) and return its result;
        ``batch`` is the task it belongs to, cancelled when the wait is broken off."""
        return _outside_running_loop(self._run_until_here, awaited, batch)

    def turn(self, batch: asyncio.Task[Any]) -> None:
        """One turn of this loop: its ready callbacks and whatever input is waiting."""
        _outside_running_loop(self._turn_here, batch)

    def _turn_here(self, batch: asyncio.Task[Any]) -> None:
        loop = self._loop
        assert loop is not None
        loop.call_soon(loop.stop)
        try:
            loop.run_forever()
        except BaseException:
            batch.cancel()
            loop.run_until_complete(asyncio.gather(batch, return_exceptions=True))
            raise

    def _run_until_here(self, awaited: Awaitable[T], batch: asyncio.Task[Any]) -> T:
        loop = self._loop
        assert loop is not None
        try:
            return loop.run_until_complete(awaited)
        except BaseException:
            # Ctrl-C lands outside the task: cancel it so no call of this batch runs on
            # when the loop is next used or closed.
            batch.cancel()
            loop.run_until_complete(asyncio.gather(batch, return_exceptions=True))
            raise

    def close(self) -> None:
        """Close the attached adapters' connections, then the loop. Safe to call twice."""
        _outside_running_loop(self._close_here)

    def _close_here(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            for registry in self._registries:
                loop.run_until_complete(registry.aclose())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _outside_running_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` here, or on a thread of its own when this thread already runs a
    loop (an async test), where ``run_until_complete`` would refuse to start."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, *args).result()
