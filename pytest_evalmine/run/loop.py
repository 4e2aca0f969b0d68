"""The event loop dispatch runs on (spec: "Dispatch", "Connections").

An HTTP client's connection pool belongs to the loop that opened it. A session runs every
batch (planning's look-ups, the answers, the judge) on one ``SessionLoop``, so each provider
keeps one client and its open connections from the first call to the last; closing the loop
closes the adapters' connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
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
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        loop = self._loop
        task = loop.create_task(coroutine)
        try:
            return loop.run_until_complete(task)
        except BaseException:
            # Ctrl-C lands outside the task: cancel it so no call of this batch runs on
            # when the loop is next used or closed.
            task.cancel()
            loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
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
