"""Ctrl-C while dispatching (spec: "Dispatch", Ctrl-C and xdist).

The first Ctrl-C stops sending: nothing new goes out, and the calls already out get
``INTERRUPT_GRACE_S`` to land in the cache before they are cancelled; a second Ctrl-C raises
``KeyboardInterrupt`` at once. The pieces a dispatcher puts together for it: Python's SIGINT
handler for the length of a batch (``Sigint``), the calls out now and the end of their
grace (``InFlightCalls``), and the watch for a stop asked by another process of the run
(``watch_stop``, the xdist controller's Ctrl-C, ``stopping.py``).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .store import StoreBackend

T = TypeVar("T")
# After the first Ctrl-C, how long calls already sent may take to land in the cache.
INTERRUPT_GRACE_S = 10.0
# How often a dispatch looks whether another process of its run (the xdist controller, on its
# Ctrl-C) asked the run to stop sending: one read of a one-row table.
STOP_POLL_S = 0.05


class Sigint:
    """Python's SIGINT handler, replaced while a batch dispatches and restored after."""

    def __init__(self) -> None:
        self._previous: Any = None

    def catch(self, on_interrupt: Callable[[], None]) -> bool:
        """On the main thread, a Ctrl-C calls ``on_interrupt`` on the running loop.

        A handler of Python's own rather than the loop's: while a streamed dispatch waits
        for pytest to run an item, the loop is not running, and a Ctrl-C then stops that
        item's code at once, as Python's default would (a slow or hanging check of the
        user's stays interruptible); the dispatch takes the Ctrl-C on its next turn."""
        if threading.current_thread() is not threading.main_thread():
            return False
        loop = asyncio.get_running_loop()

        def on_sigint(signum: int, frame: object) -> None:
            loop.call_soon_threadsafe(on_interrupt)
            if not loop.is_running():
                raise KeyboardInterrupt

        try:
            self._previous = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # not the main interpreter
            return False
        return True

    def restore(self) -> None:
        """The handler from before ``catch`` back (Python's own: a Ctrl-C then raises)."""
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


class InFlightCalls:
    """The adapter calls out now, tracked so that the end of the Ctrl-C grace can cancel
    them; ``grace_over`` tells a cancelled call that it was cut off, not abandoned."""

    def __init__(self) -> None:
        self.calls: set[asyncio.Future[Any]] = set()
        self.grace_over = False

    def __len__(self) -> int:
        return len(self.calls)

    async def track(self, coroutine: Coroutine[Any, Any, T]) -> T:
        call = asyncio.ensure_future(coroutine)
        self.calls.add(call)
        try:
            return await call
        finally:
            self.calls.discard(call)

    def end_grace(self) -> None:
        self.grace_over = True
        for call in list(self.calls):
            call.cancel()


async def watch_stop(
    store: StoreBackend,
    run_token: str,
    interrupted: Callable[[], bool],
    on_interrupt: Callable[[], None],
) -> None:
    """While a batch runs: when another process of the run asked it to stop
    (``Store.request_stop``: the xdist controller's Ctrl-C reaches no worker when only the
    controller was signalled), the dispatch stops as at its own first Ctrl-C."""
    while not interrupted():
        if store.stop_requested(run_token):
            on_interrupt()
            return
        await asyncio.sleep(STOP_POLL_S)
