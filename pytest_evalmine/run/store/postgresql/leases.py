"""Claims as leases (spec: "Cache database"): across machines a claim's owner cannot be
looked up in a process table, so each owner renews a lease in the database (table
``owner_leases``) every third of its length while its store is open. A running claim whose
owner's lease lapsed is taken over; while the lease lives, it is held. Times are the
server's (``now()``), so machines' clocks need not agree."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from ....errors import EvalmineError
from ....options import parse_number

LEASE_ENV = "EVALMINE_LEASE_S"
DEFAULT_LEASE_S = 30.0


def lease_seconds() -> float:
    """The lease length: ``EVALMINE_LEASE_S`` (seconds, 0.3 to 86400), else 30 s."""
    raw = os.environ.get(LEASE_ENV)
    if not raw:
        return DEFAULT_LEASE_S
    try:
        return float(parse_number(raw, LEASE_ENV, minimum=0.3, maximum=86400.0))
    except ValueError as exc:
        raise EvalmineError(str(exc)) from None


RENEW = (
    "UPDATE owner_leases SET lease_until = now() + make_interval(secs => %s) WHERE owner = ANY(%s)"
)
TAKE = (
    "INSERT INTO owner_leases VALUES (%s, now() + make_interval(secs => %s)) "
    "ON CONFLICT (owner) DO UPDATE SET lease_until = EXCLUDED.lease_until"
)


class Leases:
    """The leases of the owners that claimed through this store, renewed by a daemon thread
    (started with the first owner) until ``close``."""

    def __init__(self, transaction: Callable[[Callable[[Any], Any]], Any]) -> None:
        self.seconds = lease_seconds()
        self._transaction = transaction
        self.owners: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def take(self, db: Any, owner: str) -> None:
        """Inside a claim's transaction: the owner's lease, from now on, kept renewed."""
        db.execute(TAKE, (owner, self.seconds))
        with self._lock:
            self.owners.add(owner)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._renew, name="evalmine-lease", daemon=True
                )
                self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            with self._lock:
                owners = sorted(self.owners)
            try:
                self._transaction(
                    lambda db, owners=owners: db.execute(RENEW, (self.seconds, owners))
                )
            except EvalmineError:
                # The server is away: the next beat tries again. A lease that lapses in
                # the meantime lets another process take the claims over.
                continue

    def alive(self, db: Any, owner: str) -> bool:
        if owner in self.owners:
            return True
        row = db.execute(
            "SELECT lease_until > now() FROM owner_leases WHERE owner = %s", (owner,)
        ).fetchone()
        return bool(row and row[0])

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.seconds)
