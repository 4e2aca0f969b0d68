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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..adapters.base import Response

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    cost_usd REAL NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_token TEXT NOT NULL,
    key TEXT NOT NULL,
    reserved_usd REAL NOT NULL,
    spent_usd REAL NOT NULL DEFAULT 0,
    state TEXT NOT NULL CHECK (state IN ('reserved', 'spent', 'released'))
);
CREATE INDEX IF NOT EXISTS ledger_run ON ledger (run_token, state);
CREATE TABLE IF NOT EXISTS claims (
    run_token TEXT NOT NULL,
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    error TEXT,
    error_kind TEXT,
    cost_usd REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_token, key)
);
CREATE TABLE IF NOT EXISTS adapter_state (
    adapter TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class CachedAnswer:
    response: Response
    cost_usd: float


@dataclass(frozen=True)
class Claim:
    owner: str
    status: str
    error: str | None
    error_kind: str | None
    cost_usd: float
    attempts: int


def process_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._connection: sqlite3.Connection | None = None

    @property
    def connection(self) -> sqlite3.Connection:
        if self._connection is None:
            connection = sqlite3.connect(
                self.path, timeout=60, isolation_level=None, check_same_thread=False
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("PRAGMA busy_timeout=60000")
            with self._write(connection):
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        connection.execute(statement)
            self._connection = connection
        return self._connection

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

    def has(self, key: str) -> bool:
        row = self.connection.execute("SELECT 1 FROM answers WHERE key = ?", (key,)).fetchone()
        return row is not None

    def record_paid_answer(
        self,
        *,
        key: str,
        provider: str,
        model: str,
        response: Response,
        cost_usd: float,
        reservation: int | None,
    ) -> None:
        """Store the answer (unless it is not ``cacheable``) and settle its reservation, in one
        transaction."""
        with self._write(self.connection) as db:
            if response.cacheable:
                db.execute(
                    "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                    (key, provider, model, response.to_json(), cost_usd, time.time()),
                )
            if reservation is not None:
                db.execute(
                    "UPDATE ledger SET state = 'spent', spent_usd = ? WHERE id = ?",
                    (cost_usd, reservation),
                )

    # ledger ----------------------------------------------------------------------------
    def reserve(self, run_token: str, key: str, amount: float, cap: float) -> int | None:
        """Reserve ``amount`` against ``cap`` for this run; ``None`` when it does not fit."""
        with self._write(self.connection) as db:
            committed = self._committed(db, run_token)
            if committed + amount > cap + 1e-12:
                return None
            cursor = db.execute(
                "INSERT INTO ledger (run_token, key, reserved_usd, state) "
                "VALUES (?, ?, ?, 'reserved')",
                (run_token, key, amount),
            )
            return int(cursor.lastrowid or 0)

    def release(self, reservation: int) -> None:
        with self._write(self.connection) as db:
            db.execute("UPDATE ledger SET state = 'released' WHERE id = ?", (reservation,))

    def spent(self, run_token: str) -> float:
        row = self.connection.execute(
            "SELECT COALESCE(SUM(spent_usd), 0) FROM ledger WHERE run_token = ? "
            "AND state = 'spent'",
            (run_token,),
        ).fetchone()
        return float(row[0])

    def committed(self, run_token: str) -> float:
        """Spent plus still reserved in this run."""
        return self._committed(self.connection, run_token)

    @staticmethod
    def _committed(db: sqlite3.Connection, run_token: str) -> float:
        row = db.execute(
            "SELECT COALESCE(SUM(CASE state WHEN 'reserved' THEN reserved_usd "
            "WHEN 'spent' THEN spent_usd ELSE 0 END), 0) FROM ledger WHERE run_token = ?",
            (run_token,),
        ).fetchone()
        return float(row[0])

    # claims ----------------------------------------------------------------------------
    def claim(self, run_token: str, key: str, owner: str) -> bool:
        """Take the call for ``key`` in this run; ``False`` when another live process has it."""
        with self._write(self.connection) as db:
            row = db.execute(
                "SELECT owner, status FROM claims WHERE run_token = ? AND key = ?",
                (run_token, key),
            ).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO claims (run_token, key, owner) VALUES (?, ?, ?)",
                    (run_token, key, owner),
                )
                return True
            if row[0] == owner:
                return True
            if row[1] == "running" and not _owner_alive(row[0]):
                db.execute(
                    "UPDATE claims SET owner = ? WHERE run_token = ? AND key = ?",
                    (owner, run_token, key),
                )
                return True
            return False

    def finish_claim(
        self,
        run_token: str,
        key: str,
        *,
        status: str,
        error: str | None = None,
        error_kind: str | None = None,
        cost_usd: float = 0.0,
        attempts: int = 0,
    ) -> None:
        with self._write(self.connection) as db:
            db.execute(
                "UPDATE claims SET status = ?, error = ?, error_kind = ?, cost_usd = ?, "
                "attempts = ? WHERE run_token = ? AND key = ?",
                (status, error, error_kind, cost_usd, attempts, run_token, key),
            )

    def claim_of(self, run_token: str, key: str) -> Claim | None:
        row = self.connection.execute(
            "SELECT owner, status, error, error_kind, cost_usd, attempts FROM claims "
            "WHERE run_token = ? AND key = ?",
            (run_token, key),
        ).fetchone()
        return None if row is None else Claim(*row)


def _owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return True
