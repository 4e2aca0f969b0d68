"""The SQLite store (spec: "Cache database"): answer cache, spend ledger and call claims.

One file shared by every process of a run (xdist workers included). WAL mode lets readers
proceed while one writer commits; ``BEGIN IMMEDIATE`` serialises the ledger's
check-then-reserve so two processes cannot both take the last dollar. Every paid answer is
committed the moment it arrives, so a killed run loses nothing it paid for.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...adapters.base import Response

LEDGER_TABLE = """
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_token TEXT NOT NULL,
    key TEXT NOT NULL,
    reserved_usd REAL NOT NULL,
    spent_usd REAL NOT NULL DEFAULT 0,
    state TEXT NOT NULL
        CHECK (state IN ('reserved', 'spent', 'released', 'possibly_billed'))
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
CREATE TABLE IF NOT EXISTS run_totals (
    run_token TEXT PRIMARY KEY,
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
"""
# Version 2: claims keyed by the request alone (visible to every run on the cache), and the
# ledger state possibly_billed. Claims only matter while a call is in flight, so an older
# claims table is dropped; the ledger's rows are copied into the new table.
# Version 3: the provider batches (tables batches and batch_items, spec "Batch"), only added:
# a version-2 file keeps its claims and ledger as they are.
SCHEMA_VERSION = 3
_LEDGER_V1_UPGRADE = (
    "ALTER TABLE ledger RENAME TO ledger_v1",
    "DROP INDEX IF EXISTS ledger_run",
    LEDGER_TABLE,
    "INSERT INTO ledger SELECT * FROM ledger_v1",
    "DROP TABLE ledger_v1",
)


@dataclass(frozen=True)
class CachedAnswer:
    response: Response
    cost_usd: float


@dataclass(frozen=True)
class Claim:
    run_token: str
    owner: str
    status: str
    error: str | None
    error_kind: str | None
    cost_usd: float
    possibly_billed_usd: float
    attempts: int

    @property
    def running(self) -> bool:
        return self.status == RUNNING


@dataclass(frozen=True)
class PaidAnswer:
    """An answer that arrived, with what the store needs to keep it and settle its cost."""

    key: str
    provider: str
    model: str
    response: Response
    cost_usd: float
    reservation: int | None
    attempts: int = 1
    possibly_billed_usd: float = 0.0


@dataclass(frozen=True)
class BatchedItem:
    """A request sent in a provider batch whose results are still to be read."""

    custom_id: str
    local_id: str
    batch_id: str
    provider: str


@dataclass(frozen=True)
class Hit:
    """A cached answer and the claim that paid for it, when one is still recorded."""

    answer: CachedAnswer
    claim: Claim | None


RUNNING = "running"
# What ``Store.claim`` found: the call is ours to make, another process holds it, or its
# answer is already cached.
CLAIMED, HELD, ANSWERED = "claimed", "held", "answered"
_CLAIM_COLUMNS = (
    "run_token, owner, status, error, error_kind, cost_usd, possibly_billed_usd, attempts"
)


def process_owner() -> str:
    """``host:pid:start``: the start time tells a live owner from a later process that was
    given the same pid."""
    status = _start_time(os.getpid())
    return f"{socket.gethostname()}:{os.getpid()}:{status[1] if status else 0}"


# How long a process waits for another's write to the cache before it gives up.
BUSY_TIMEOUT_S = 60.0


def _is_busy(error: sqlite3.OperationalError) -> bool:
    message = str(error).lower()
    return "locked" in message or "busy" in message


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._connection: sqlite3.Connection | None = None

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

    # stopping a run's other processes (the xdist controller's Ctrl-C, spec "Dispatch") ----
    def request_stop(self, run_token: str) -> None:
        """Ask every process of the run to send nothing new (``stop_requested``)."""
        with self._write(self.connection) as db:
            db.execute("INSERT OR IGNORE INTO run_stops VALUES (?, ?)", (run_token, time.time()))

    def stop_requested(self, run_token: str) -> bool:
        row = self.connection.execute(
            "SELECT 1 FROM run_stops WHERE run_token = ?", (run_token,)
        ).fetchone()
        return row is not None

    def reserved_keys(self, run_token: str) -> set[str]:
        """The requests of the run whose call is in flight: reserved, neither settled nor
        released (a call is reserved before it is sent)."""
        rows = self.connection.execute(
            "SELECT key FROM ledger WHERE run_token = ? AND state = 'reserved'", (run_token,)
        )
        return {row[0] for row in rows}

    def finished_calls(self, run_token: str) -> int:
        """Calls of the run that ended (answered or failed for good), across processes."""
        row = self.connection.execute(
            "SELECT COUNT(*) FROM claims WHERE run_token = ? AND status != 'running'",
            (run_token,),
        ).fetchone()
        return int(row[0])

    # recordings (engine/recording.py) ----------------------------------------------------
    def answer_rows(self, keys: list[str]) -> list[dict]:
        """The cached answers of ``keys`` that exist, in the order given, as plain data."""
        rows = []
        for key in keys:
            row = self.connection.execute(
                "SELECT provider, model, response, cost_usd FROM answers WHERE key = ?", (key,)
            ).fetchone()
            if row is not None:
                rows.append(
                    {
                        "key": key,
                        "provider": row[0],
                        "model": row[1],
                        "response": json.loads(row[2]),
                        "cost_usd": row[3],
                    }
                )
        return rows

    def answer_providers(self, model: str) -> set[str]:
        """The adapters that made the cached answers of ``model`` (a replay miss says so)."""
        rows = self.connection.execute(
            "SELECT DISTINCT provider FROM answers WHERE model = ?", (model,)
        ).fetchall()
        return {row[0] for row in rows}

    def load_recorded(self, answers: list[dict], states: list[dict]) -> None:
        """Answers from a recording, kept where the cache already has the key; adapter
        states replaced (the recorded keys were made with them). One transaction."""
        with self._write(self.connection) as db:
            for entry in answers:
                db.execute(
                    "INSERT OR IGNORE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        entry["key"],
                        entry["provider"],
                        entry["model"],
                        json.dumps(entry["response"]),
                        float(entry["cost_usd"]),
                        time.time(),
                    ),
                )
            for entry in states:
                db.execute(
                    "INSERT OR REPLACE INTO adapter_state VALUES (?, ?, ?)",
                    (entry["adapter"], json.dumps(entry["state"], sort_keys=True), time.time()),
                )

    # what adapters learnt from their servers (model listings, digests) ------------------
    def adapter_state(self, adapter: str) -> dict | None:
        row = self.connection.execute(
            "SELECT state FROM adapter_state WHERE adapter = ?", (adapter,)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def remember_adapter_state(self, adapter: str, state: dict) -> None:
        with self._write(self.connection) as db:
            db.execute(
                "INSERT OR REPLACE INTO adapter_state VALUES (?, ?, ?)",
                (adapter, json.dumps(state, sort_keys=True), time.time()),
            )

    # answers ---------------------------------------------------------------------------
    def get(self, key: str) -> CachedAnswer | None:
        row = self.connection.execute(
            "SELECT response, cost_usd FROM answers WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return CachedAnswer(response=Response.from_json(row[0]), cost_usd=row[1])

    def hit(self, key: str) -> Hit | None:
        """The cached answer with the claim of whoever paid for it, in one read."""
        return self.hits([key]).get(key)

    def has(self, key: str) -> bool:
        row = self.connection.execute("SELECT 1 FROM answers WHERE key = ?", (key,)).fetchone()
        return row is not None

    def hits(self, keys: list[str]) -> dict[str, Hit]:
        """``hit`` for every key that is cached, read in batches: one query per batch of keys
        instead of one per key (a warm 10,000-case run reads 40,000 cached calls)."""
        found: dict[str, Hit] = {}
        for row in self._rows_of(
            "SELECT a.key, a.response, a.cost_usd, c.run_token, c.owner, c.status, c.error, "
            "c.error_kind, c.cost_usd, c.possibly_billed_usd, c.attempts FROM answers a "
            "LEFT JOIN claims c ON c.key = a.key WHERE a.key IN ({marks})",
            keys,
        ):
            answer = CachedAnswer(response=Response.from_json(row[1]), cost_usd=row[2])
            found[row[0]] = Hit(answer, None if row[3] is None else Claim(*row[3:]))
        return found

    def answers_of(self, keys: list[str]) -> dict[str, CachedAnswer]:
        """``get`` for every key that is cached, read in batches."""
        return {
            row[0]: CachedAnswer(Response.from_json(row[1]), row[2])
            for row in self._rows_of(
                "SELECT key, response, cost_usd FROM answers WHERE key IN ({marks})", keys
            )
        }

    def cached_keys(self, keys: list[str]) -> set[str]:
        """The keys of ``keys`` whose answer is cached, read in batches."""
        return {
            row[0] for row in self._rows_of("SELECT key FROM answers WHERE key IN ({marks})", keys)
        }

    def record_paid_answer(self, **fields: Any) -> None:
        """One ``PaidAnswer`` (its fields as keywords), as ``record_paid_answers`` does."""
        self.record_paid_answers([PaidAnswer(**fields)])

    def record_paid_answers(self, paid: list[PaidAnswer]) -> None:
        """Store each answer (unless it is not ``cacheable``), settle its reservation and
        finish its claim, all in one transaction: the answers are durable before anyone is
        told they arrived, and a wave of answers costs one commit."""
        with self._write(self.connection) as db:
            for answer in paid:
                if answer.response.cacheable:
                    db.execute(
                        "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            answer.key,
                            answer.provider,
                            answer.model,
                            answer.response.to_json(),
                            answer.cost_usd,
                            time.time(),
                        ),
                    )
                if answer.reservation is not None:
                    _recount(db, answer.reservation, answer.cost_usd)
                    db.execute(
                        "UPDATE ledger SET state = 'spent', spent_usd = ? WHERE id = ?",
                        (answer.cost_usd, answer.reservation),
                    )
                _finish_claim(
                    db,
                    answer.key,
                    "ok",
                    None,
                    None,
                    answer.cost_usd,
                    answer.possibly_billed_usd,
                    answer.attempts,
                )

    # ledger ----------------------------------------------------------------------------
    def reserve(self, run_token: str, key: str, amount: float, cap: float) -> int | None:
        """Reserve ``amount`` against ``cap`` for this run; ``None`` when it does not fit."""
        return self.reserve_each(run_token, [(key, amount)], cap)[0]

    def reserve_each(
        self, run_token: str, wanted: list[tuple[str, float]], cap: float
    ) -> list[int | None]:
        """Reserve each ``(key, amount)`` in turn against ``cap`` in one transaction, exactly
        as one ``reserve`` after another would: a reservation id, or ``None`` where the
        amount does not fit what the earlier ones left."""
        reservations: list[int | None] = []
        with self._write(self.connection) as db:
            committed = _running_total(db, run_token)
            added = 0.0
            for key, amount in wanted:
                if committed + added + amount > cap + 1e-12:
                    reservations.append(None)
                    continue
                cursor = db.execute(
                    "INSERT INTO ledger (run_token, key, reserved_usd, state) "
                    "VALUES (?, ?, ?, 'reserved')",
                    (run_token, key, amount),
                )
                added += amount
                reservations.append(int(cursor.lastrowid or 0))
            if added:
                db.execute(
                    "UPDATE run_totals SET committed_usd = committed_usd + ? WHERE run_token = ?",
                    (added, run_token),
                )
        return reservations

    def release(self, reservation: int) -> None:
        with self._write(self.connection) as db:
            _recount(db, reservation, 0.0)
            db.execute("UPDATE ledger SET state = 'released' WHERE id = ?", (reservation,))

    def keep_as_possibly_billed(self, reservation: int) -> None:
        """The call was sent and failed: the provider may bill it, so its worst case stays
        committed against the cap."""
        with self._write(self.connection) as db:
            db.execute("UPDATE ledger SET state = 'possibly_billed' WHERE id = ?", (reservation,))

    def possibly_billed(self, run_token: str) -> float:
        row = self.connection.execute(
            "SELECT COALESCE(SUM(reserved_usd), 0) FROM ledger WHERE run_token = ? "
            "AND state = 'possibly_billed'",
            (run_token,),
        ).fetchone()
        return float(row[0])

    def spent(self, run_token: str) -> float:
        row = self.connection.execute(
            "SELECT COALESCE(SUM(spent_usd), 0) FROM ledger WHERE run_token = ? "
            "AND state = 'spent'",
            (run_token,),
        ).fetchone()
        return float(row[0])

    def committed(self, run_token: str) -> float:
        """Spent, possibly billed and still reserved in this run."""
        row = self.connection.execute(
            "SELECT committed_usd FROM run_totals WHERE run_token = ?", (run_token,)
        ).fetchone()
        return float(row[0]) if row is not None else _ledger_sum(self.connection, run_token)

    def ledger_total(self, run_token: str) -> float:
        """The same amount summed from the ledger's rows (the source of truth)."""
        return _ledger_sum(self.connection, run_token)

    # provider batches (run/batch.py, spec "Batch") -------------------------------------
    def begin_batch(
        self,
        local_id: str,
        provider: str,
        run_token: str,
        owner: str,
        items: list[tuple[str, str]],
    ) -> None:
        """Before a batch is sent: its ``(custom_id, key)`` mapping, durable, so that a run
        killed after the provider accepted it can find what it asked for."""
        now = time.time()
        with self._write(self.connection) as db:
            db.execute(
                "INSERT INTO batches (local_id, provider, state, requests, run_token, owner, "
                "created_at, updated_at) VALUES (?, ?, 'submitting', ?, ?, ?, ?, ?)",
                (local_id, provider, len(items), run_token, owner, now, now),
            )
            db.executemany(
                "INSERT INTO batch_items VALUES (?, ?, ?)",
                [(local_id, custom_id, key) for custom_id, key in items],
            )

    def batch_submitted(self, local_id: str, batch_id: str) -> None:
        """The provider accepted the batch as ``batch_id``: from now on it is polled, never
        sent again."""
        with self._write(self.connection) as db:
            db.execute(
                "UPDATE batches SET batch_id = ?, state = 'submitted', updated_at = ? "
                "WHERE local_id = ?",
                (batch_id, time.time(), local_id),
            )

    def batch_polled(self, local_id: str, provider_state: str, counts: dict[str, int]) -> None:
        with self._write(self.connection) as db:
            db.execute(
                "UPDATE batches SET provider_state = ?, counts = ?, updated_at = ? "
                "WHERE local_id = ?",
                (provider_state, json.dumps(counts, sort_keys=True), time.time(), local_id),
            )

    def batch_collected(self, local_id: str) -> None:
        """Every result of the batch was read (and each answer stored as it was read)."""
        with self._write(self.connection) as db:
            db.execute(
                "UPDATE batches SET state = 'collected', updated_at = ? WHERE local_id = ?",
                (time.time(), local_id),
            )

    def batch_forgotten(self, local_id: str) -> None:
        """A batch the provider refused (its POST failed): nothing of it was accepted."""
        with self._write(self.connection) as db:
            db.execute("DELETE FROM batch_items WHERE local_id = ?", (local_id,))
            db.execute("DELETE FROM batches WHERE local_id = ?", (local_id,))

    def batch_order(self, local_id: str) -> list[str]:
        """The batch's custom ids in the order they were sent (inserted, one statement)."""
        rows = self.connection.execute(
            "SELECT custom_id FROM batch_items WHERE local_id = ? ORDER BY rowid", (local_id,)
        )
        return [row[0] for row in rows]

    def open_batch_items(self, keys: list[str]) -> dict[str, BatchedItem]:
        """Of ``keys``, those sent in a batch the provider accepted and whose results were
        not all read yet: resumed by polling that batch, never sent again."""
        rows = self._rows_of(
            "SELECT i.key, i.custom_id, b.local_id, b.batch_id, b.provider, b.created_at "
            "FROM batch_items i JOIN batches b ON b.local_id = i.local_id "
            "WHERE b.state = 'submitted' AND i.key IN ({marks}) ORDER BY b.created_at",
            keys,
        )
        return {row[0]: BatchedItem(*row[1:5]) for row in rows}

    def unconfirmed_batches(self, keys: list[str]) -> dict[str, tuple[str, list[str]]]:
        """Batches still ``submitting`` that hold some of ``keys`` (whose claims the caller
        holds, so whoever was submitting them is gone): local id -> (provider, those keys).
        The provider may have accepted them before the process died."""
        found: dict[str, tuple[str, list[str]]] = {}
        for local_id, provider, key in self._rows_of(
            "SELECT b.local_id, b.provider, i.key FROM batch_items i "
            "JOIN batches b ON b.local_id = i.local_id "
            "WHERE b.state = 'submitting' AND i.key IN ({marks})",
            keys,
        ):
            found.setdefault(local_id, (provider, []))[1].append(key)
        return found

    def batches(self, *, open_only: bool = True) -> list[dict[str, Any]]:
        """The batches of this cache, newest first (``evalmine batches``): those not yet
        collected, or every one."""
        where = "WHERE state != 'collected'" if open_only else ""
        rows = self.connection.execute(
            "SELECT local_id, provider, batch_id, state, provider_state, counts, requests, "
            f"run_token, owner, created_at, updated_at FROM batches {where} "
            "ORDER BY created_at DESC"
        ).fetchall()
        names = (
            "local_id", "provider", "batch_id", "state", "provider_state", "counts",
            "requests", "run_token", "owner", "created_at", "updated_at",
        )  # fmt: skip
        listed = []
        for row in rows:
            entry = dict(zip(names, row, strict=True))
            entry["counts"] = json.loads(entry["counts"]) if entry["counts"] else {}
            listed.append(entry)
        return listed

    # claims ----------------------------------------------------------------------------
    def claim(self, run_token: str, key: str, owner: str, *, reads_cache: bool = True) -> str:
        """Take the call for ``key``: ``CLAIMED`` (ours to make), ``HELD`` (another live
        process holds it, or another worker of this run has finished it: read its claim) or
        ``ANSWERED`` (its answer is cached; only when ``reads_cache``). The claim is keyed by
        the request alone, so every run on this cache sees it."""
        return self.claim_many(run_token, [key], owner, reads_cache=reads_cache)[key]

    def claim_many(
        self, run_token: str, keys: list[str], owner: str, *, reads_cache: bool = True
    ) -> dict[str, str]:
        """``claim`` for a whole wave of requests, one transaction per batch of keys that
        are not cached (a cached one needs no claim: a warm run writes nothing)."""
        states: dict[str, str] = {}
        if reads_cache:
            states = dict.fromkeys(self.cached_keys(keys), ANSWERED)
        todo = [key for key in keys if key not in states]
        alive: dict[str, bool] = {}
        for start in range(0, len(todo), _BATCH):
            with self._write(self.connection) as db:
                for key in todo[start : start + _BATCH]:
                    states[key] = _claim(db, run_token, key, owner, reads_cache, alive)
        return states

    def _rows_of(self, query: str, keys: Sequence[str]) -> Iterator[Any]:
        """The rows of ``query`` for ``keys``, its ``IN ({marks})`` taking them ``_BATCH`` at
        a time (a query each): SQLite bounds the parameters of one statement."""
        for start in range(0, len(keys), _BATCH):
            batch = keys[start : start + _BATCH]
            yield from self.connection.execute(
                query.format(marks=",".join("?" * len(batch))), batch
            )

    def finish_claim(
        self,
        key: str,
        *,
        status: str,
        error: str | None = None,
        error_kind: str | None = None,
        cost_usd: float = 0.0,
        possibly_billed_usd: float = 0.0,
        attempts: int = 0,
    ) -> None:
        with self._write(self.connection) as db:
            _finish_claim(
                db, key, status, error, error_kind, cost_usd, possibly_billed_usd, attempts
            )

    def claims_of(self, keys: list[str]) -> dict[str, Claim]:
        """The claims of ``keys`` (those that have one), read in batches."""
        query = f"SELECT key, {_CLAIM_COLUMNS} FROM claims WHERE key IN ({{marks}})"
        return {row[0]: Claim(*row[1:]) for row in self._rows_of(query, keys)}

    def claim_of(self, key: str) -> Claim | None:
        return self.claims_of([key]).get(key)


# SQLite's default limit on bound parameters is 999 in older builds.
_BATCH = 500


def _claim(
    db: sqlite3.Connection,
    run_token: str,
    key: str,
    owner: str,
    reads_cache: bool,
    alive: dict[str, bool],
) -> str:
    if reads_cache and db.execute("SELECT 1 FROM answers WHERE key = ?", (key,)).fetchone():
        return ANSWERED
    row = db.execute("SELECT run_token, owner, status FROM claims WHERE key = ?", (key,)).fetchone()
    if row is not None:
        held_by, holder, status = row
        if holder != owner:
            if status != RUNNING:
                held = held_by == run_token
            else:
                if holder not in alive:
                    alive[holder] = owner_alive(holder)
                held = alive[holder]
            if held:
                return HELD
    db.execute(
        "INSERT OR REPLACE INTO claims (key, run_token, owner) VALUES (?, ?, ?)",
        (key, run_token, owner),
    )
    return CLAIMED


def _finish_claim(
    db: sqlite3.Connection,
    key: str,
    status: str,
    error: str | None,
    error_kind: str | None,
    cost_usd: float,
    possibly_billed_usd: float,
    attempts: int,
) -> None:
    db.execute(
        "UPDATE claims SET status = ?, error = ?, error_kind = ?, cost_usd = ?, "
        "possibly_billed_usd = ?, attempts = ? WHERE key = ?",
        (status, error, error_kind, cost_usd, possibly_billed_usd, attempts, key),
    )


def _ledger_sum(db: sqlite3.Connection, run_token: str) -> float:
    row = db.execute(
        "SELECT COALESCE(SUM(CASE state WHEN 'spent' THEN spent_usd "
        "WHEN 'released' THEN 0 ELSE reserved_usd END), 0) FROM ledger WHERE run_token = ?",
        (run_token,),
    ).fetchone()
    return float(row[0])


def _running_total(db: sqlite3.Connection, run_token: str) -> float:
    """The run's committed amount, kept next to the ledger and changed in the same
    transaction as every ledger row, so a reservation reads one row instead of summing the
    run's ledger (which made a run quadratic in its calls). A run without a total yet (its
    first reservation, or a ledger written by an older version) starts from the ledger's sum.
    Call inside a write transaction."""
    row = db.execute(
        "SELECT committed_usd FROM run_totals WHERE run_token = ?", (run_token,)
    ).fetchone()
    if row is not None:
        return float(row[0])
    total = _ledger_sum(db, run_token)
    db.execute("INSERT INTO run_totals VALUES (?, ?)", (run_token, total))
    return total


def _recount(db: sqlite3.Connection, reservation: int, counted_usd: float) -> None:
    """An open reservation now counts ``counted_usd`` (its real cost, or 0 when released)
    instead of what it reserved."""
    db.execute(
        "UPDATE run_totals SET committed_usd = committed_usd + ? - "
        "(SELECT reserved_usd FROM ledger WHERE id = ?) "
        "WHERE run_token = (SELECT run_token FROM ledger WHERE id = ?)",
        (counted_usd, reservation, reservation),
    )


def _start_time(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a process, from Linux's /proc;
    ``None`` where there is no /proc or no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[19])


def owner_alive(owner: str) -> bool:
    """Whether the process named by ``owner`` (``host:pid:start``) still runs. An owner on
    another host is taken to be alive: its process table cannot be read from here."""
    host, pid_text, start = [*owner.rsplit(":", 2), "0"][:3]
    if host != socket.gethostname():
        return True
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    status = _start_time(pid)
    if status is None:
        return True
    state, started = status
    # A zombie (killed, not yet reaped) holds its pid but will never finish the call.
    return state != "Z" and (start in ("", "0") or int(start) == started)
