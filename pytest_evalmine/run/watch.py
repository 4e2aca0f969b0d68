"""Progress of a run whose calls other processes make (xdist workers): read from the cache
database, where every call is claimed and settled, by a thread of the process that prints
(spec: "Dispatch", progress line)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .store import Store, StoreBackend


class CallWatcher:
    """Every ``every_s`` seconds, writes ``evalmine: N calls made by workers, $X spent`` when
    N changed; once more, with the final numbers, when stopped."""

    def __init__(
        self,
        store: StoreBackend,
        run_token: str,
        write: Callable[[str], None],
        every_s: float,
    ) -> None:
        self.store = store
        self.run_token = run_token
        self.write = write
        self.every_s = every_s
        self._stop = threading.Event()
        self._shown: int | None = None
        self._thread = threading.Thread(target=self._run, name="evalmine-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop polling and write the final line (from the calling thread)."""
        if not self._thread.is_alive():
            return
        self._stop.set()
        self._thread.join()
        self.tick(final=True)

    def _run(self) -> None:
        while not self._stop.wait(max(self.every_s, 0.05)):
            self.tick()

    def tick(self, *, final: bool = False) -> None:
        # A connection of its own unless the store is a pool: a sqlite3 connection is not
        # shared between threads here.
        shared = self.store.thread_safe
        store = self.store if shared else Store(self.store.location)
        try:
            done = store.finished_calls(self.run_token)
            spent = store.spent(self.run_token)
        finally:
            if not shared:
                store.close()
        if done == self._shown and not final:
            return
        self._shown = done
        self.write(f"evalmine: {done} calls made by workers, ${spent:.4f} spent")
