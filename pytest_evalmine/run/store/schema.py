"""The SQLite file (spec: "Cache database"): its tables, their version and migrations, and
how a connection opens it (WAL, busy timeout) and writes (``BEGIN IMMEDIATE``).

A new table goes into ``SCHEMA`` (``CREATE TABLE IF NOT EXISTS``: an older file gains it
when it is opened), with ``SCHEMA_VERSION`` one higher and a line below saying what that
version added; a table that changes shape gets an upgrade step in ``_set_up``."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LEDGER_TABLE = """
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_token TEXT NOT NULL,
    key TEXT NOT NULL,
    reserved_usd REAL NOT NULL,
    spent_usd REAL NOT NULL DEFAULT 0,
    state TEXT NOT NULL
        CHECK (state IN ('reserved', 'spent', 'released', 'possibly_billed')),
    budget TEXT NOT NULL
)
"""
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    cost_usd REAL NOT NULL,
    created_at REAL NOT NULL
);
{LEDGER_TABLE};
CREATE INDEX IF NOT EXISTS ledger_run ON ledger (run_token, state);
CREATE INDEX IF NOT EXISTS ledger_budget ON ledger (budget);
CREATE TABLE IF NOT EXISTS run_totals (
    budget TEXT PRIMARY KEY,
    committed_usd REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    run_token TEXT NOT NULL,
    owner TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    error TEXT,
    error_kind TEXT,
    cost_usd REAL NOT NULL DEFAULT 0,
    possibly_billed_usd REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS adapter_state (
    adapter TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS run_stops (
    run_token TEXT PRIMARY KEY,
    stopped_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    local_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    batch_id TEXT,
    state TEXT NOT NULL CHECK (state IN ('submitting', 'submitted', 'collected')),
    provider_state TEXT,
    counts TEXT,
    requests INTEGER NOT NULL,
    run_token TEXT NOT NULL,
    owner TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_items (
    local_id TEXT NOT NULL,
    custom_id TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (local_id, custom_id)
);
CREATE INDEX IF NOT EXISTS batch_items_key ON batch_items (key);
CREATE TABLE IF NOT EXISTS learned_widths (
    server TEXT PRIMARY KEY,
    width INTEGER NOT NULL,
    updated_at REAL NOT NULL
);
"""
# Version 2: claims keyed by the request alone (visible to every run on the cache), and the
# ledger state possibly_billed. Claims only matter while a call is in flight, so an older
# claims table is dropped; the ledger's rows are copied into the new table.
# Version 3: the provider batches (tables batches and batch_items, spec "Batch"), only added:
# a version-2 file keeps its claims and ledger as they are.
# Version 4: learned_widths (the width each server's calls adapted to, ``run/widths.py``),
# only added.
# Version 5: the budget scope (spec "Prices and the budget"): each ledger row names the
# budget its reservation was checked against (``budget``, the run token unless the run shares
# a cap with other processes), and ``run_totals`` is keyed by it. An older file's rows get
# their run token as budget, which is what they were checked against.
SCHEMA_VERSION = 5
_LEDGER_V1_UPGRADE = (
    "ALTER TABLE ledger RENAME TO ledger_v1",
    "DROP INDEX IF EXISTS ledger_run",
    LEDGER_TABLE,
    "INSERT INTO ledger SELECT *, run_token FROM ledger_v1",
    "DROP TABLE ledger_v1",
)
_BUDGET_V5_UPGRADE = (
    "ALTER TABLE ledger ADD COLUMN budget TEXT NOT NULL DEFAULT ''",
    "UPDATE ledger SET budget = run_token",
)


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def _add_budget_scope(connection: sqlite3.Connection) -> None:
    """Version 5 on an older file: the ledger's rows keep the run token they were checked
    against as their budget, and ``run_totals`` is keyed by budget (the same strings)."""
    ledger = _columns(connection, "ledger")
    if ledger and "budget" not in ledger:
        for statement in _BUDGET_V5_UPGRADE:
            connection.execute(statement)
    if "run_token" in _columns(connection, "run_totals"):
        connection.execute("ALTER TABLE run_totals RENAME COLUMN run_token TO budget")


# How long a process waits for another's write to the cache before it gives up.
BUSY_TIMEOUT_S = 60.0


def _is_busy(error: sqlite3.OperationalError) -> bool:
    message = str(error).lower()
    return "locked" in message or "busy" in message


class SQLiteFile:
    """One connection to the cache file, opened on first use, shared by every table's
    methods so that a transaction may span tables."""

    # One connection: another thread opens its own store (``run/watch.py``).
    thread_safe = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._connection: sqlite3.Connection | None = None

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def connection(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = self._open()
        return self._connection

    def _open(self) -> sqlite3.Connection:
        """A connection in WAL mode with the schema in place, opened while other processes may
        be opening the same file.

        SQLite's busy handler does not cover every lock taken while a connection first sets
        up WAL (switching the journal mode, recovering another process's WAL index: it then
        returns "database is locked" at once, to avoid a deadlock). Those cases are retried
        here, for as long as the busy timeout would have waited."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        pause = 0.005
        while True:
            connection = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            try:
                self._set_up(connection)
                return connection
            except sqlite3.OperationalError as error:
                connection.close()
                if not _is_busy(error) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.25)

    def _set_up(self, connection: sqlite3.Connection) -> None:
        if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        with self._write(connection):
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version < 2:
                connection.execute("DROP TABLE IF EXISTS claims")
                if connection.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'ledger'"
                ).fetchone():
                    for statement in _LEDGER_V1_UPGRADE:
                        connection.execute(statement)
            if version < 5:
                _add_budget_scope(connection)
            if version < SCHEMA_VERSION:
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    @staticmethod
    @contextmanager
    def _write(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def _rows_of(self, query: str, keys: Sequence[str]) -> Iterator[Any]:
        """The rows of ``query`` for ``keys``, its ``IN ({marks})`` taking them ``_BATCH`` at
        a time (a query each): SQLite bounds the parameters of one statement."""
        for start in range(0, len(keys), _BATCH):
            batch = keys[start : start + _BATCH]
            yield from self.connection.execute(
                query.format(marks=",".join("?" * len(batch))), batch
            )


# SQLite's default limit on bound parameters is 999 in older builds.
_BATCH = 500
