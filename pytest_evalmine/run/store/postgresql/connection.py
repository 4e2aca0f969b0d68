"""The PostgreSQL store's connections (spec: "Cache database"): a pool shared by the
process's threads, each method's work one transaction on one pooled connection, retried when
the connection broke (a server restart) or the server rolled it back (a deadlock), and a
clear ``EvalmineError`` naming the URL, password masked, when the server stays away.

psycopg and psycopg_pool are imported here, when a ``postgresql://`` store is opened."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from ....errors import StoreUnavailable
from ....redaction import redact, remember_key
from ..urls import masked, password_of
from .leases import Leases
from .schema import NAMESPACE, set_up

T = TypeVar("T")

# A server that does not answer a connection attempt within this is down.
CONNECT_TIMEOUT_S = 10
# The longest one operation waits for a pooled connection (the pool reconnects meanwhile).
POOL_TIMEOUT_S = 10.0
# Tries of one operation: a restart breaks every pooled connection at once, a deadlock
# rolls back one transaction; after these the store is reported unreachable.
ATTEMPTS = 3
POOL_SIZE = 8


class PostgresDatabase:
    """A pool of connections to the store's database, set up (schema created or checked)
    when the store is opened, so that a bad URL or a server down is one error at once."""

    thread_safe = True

    def __init__(self, url: str) -> None:
        self._url = url
        self.location = masked(url)
        self._secret = password_of(url)
        if self._secret:
            remember_key(self._secret)  # kept out of every message and report, as API keys
        self._connect_options: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S}
        # Set once an operation has spent its tries: every later one fails at once, so a
        # run whose server went away ends within one operation's timeouts instead of
        # waiting them out again for each of its remaining requests.
        self._gone: StoreUnavailable | None = None
        try:
            with psycopg.connect(url, **self._connect_options) as connection:
                set_up(connection, self.location)
        except psycopg.Error as exc:
            raise self._unavailable(exc) from None
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs=self._connect_options,
            configure=_use_namespace,
            timeout=POOL_TIMEOUT_S,
            name="evalmine-store",
            open=False,
        )
        try:
            self.pool.open(wait=True, timeout=POOL_TIMEOUT_S)
        except psycopg.Error as exc:
            self.pool.close()
            raise self._unavailable(exc) from None
        self.leases = Leases(self._transaction)

    def _unavailable(self, error: BaseException) -> StoreUnavailable:
        detail = " ".join(str(error).split()) or type(error).__name__
        detail = redact(detail.replace(self._url, self.location), [self._secret])
        return StoreUnavailable(f"the store {self.location} cannot be used: {detail}")

    def _transaction(self, work: Callable[[psycopg.Connection], T]) -> T:
        """``work`` in one transaction, committed when it returns. A broken connection (the
        server restarted) or a transaction the server rolled back (a deadlock) is tried
        again on another connection, up to ``ATTEMPTS`` times in all; ``work`` is written
        so that running it again does what running it once would."""
        if self._gone is not None:
            raise StoreUnavailable(str(self._gone)) from None
        error: psycopg.OperationalError | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                self.pool.check()  # drop the idle connections the restart broke too
            try:
                with self.pool.connection() as connection:
                    return work(connection)
            except psycopg.OperationalError as exc:
                error = exc
        assert error is not None
        unavailable = self._unavailable(error)
        if not (error.sqlstate or "").startswith("40"):
            # The server, not a transaction it rolled back (class 40: a deadlock).
            self._gone = unavailable
        raise unavailable from None

    def _read(self, query: str, parameters: Any = None) -> list[tuple[Any, ...]]:
        return self._transaction(lambda db: db.execute(query, parameters).fetchall())

    def _one(self, query: str, parameters: Any = None) -> tuple[Any, ...] | None:
        return self._transaction(lambda db: db.execute(query, parameters).fetchone())

    def close(self) -> None:
        self.leases.close()
        self.pool.close()


def _use_namespace(connection: psycopg.Connection) -> None:
    connection.execute(f"SET search_path TO {NAMESPACE}")
    connection.commit()
