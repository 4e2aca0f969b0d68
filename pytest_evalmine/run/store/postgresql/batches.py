"""Provider batches on PostgreSQL (tables ``batches`` and ``batch_items``, spec: "Batch"),
and what the ledger holds for their calls: the SQLite store's batches.py and
batch_ledger.py, one level up, in PostgreSQL's SQL."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..records import BATCH_COLUMNS, BatchedItem, batch_listing
from .connection import PostgresDatabase
from .ledger import OPEN, settle


class Batches(PostgresDatabase):
    # The claims' (claims.py).
    owner_alive: Callable[[str], bool]

    def begin_batch(
        self,
        local_id: str,
        provider: str,
        run_token: str,
        owner: str,
        items: list[tuple[str, str]],
    ) -> None:
        now = time.time()

        def work(db: Any) -> None:
            db.execute(
                "INSERT INTO batches (local_id, provider, state, requests, run_token, owner, "
                "created_at, updated_at) VALUES (%s, %s, 'submitting', %s, %s, %s, %s, %s)",
                (local_id, provider, len(items), run_token, owner, now, now),
            )
            with db.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO batch_items VALUES (%s, %s, %s, %s)",
                    [(local_id, custom_id, key, n) for n, (custom_id, key) in enumerate(items)],
                )

        self._transaction(work)

    def _update(self, query: str, parameters: tuple[Any, ...]) -> None:
        self._transaction(lambda db: db.execute(query, parameters))

    def batch_submitted(self, local_id: str, batch_id: str) -> None:
        self._update(
            "UPDATE batches SET batch_id = %s, state = 'submitted', updated_at = %s "
            "WHERE local_id = %s",
            (batch_id, time.time(), local_id),
        )

    def batch_polled(self, local_id: str, provider_state: str, counts: dict[str, int]) -> None:
        self._update(
            "UPDATE batches SET provider_state = %s, counts = %s, updated_at = %s "
            "WHERE local_id = %s",
            (provider_state, json.dumps(counts, sort_keys=True), time.time(), local_id),
        )

    def batch_collected(self, local_id: str) -> None:
        self._update(
            "UPDATE batches SET state = 'collected', updated_at = %s WHERE local_id = %s",
            (time.time(), local_id),
        )

    def batch_forgotten(self, local_id: str) -> None:
        def work(db: Any) -> None:
            db.execute("DELETE FROM batch_items WHERE local_id = %s", (local_id,))
            db.execute("DELETE FROM batches WHERE local_id = %s", (local_id,))

        self._transaction(work)

    def batch_order(self, local_id: str) -> list[str]:
        rows = self._read(
            "SELECT custom_id FROM batch_items WHERE local_id = %s ORDER BY position",
            (local_id,),
        )
        return [row[0] for row in rows]

    def open_batch_items(self, keys: list[str]) -> dict[str, BatchedItem]:
        rows = self._read(
            "SELECT i.key, i.custom_id, b.local_id, b.batch_id, b.provider FROM batch_items i "
            "JOIN batches b ON b.local_id = i.local_id "
            "WHERE b.state = 'submitted' AND i.key = ANY(%s) ORDER BY b.created_at",
            (list(keys),),
        )
        return {row[0]: BatchedItem(*row[1:5]) for row in rows}

    def unconfirmed_batches(self, keys: list[str]) -> dict[str, tuple[str, list[str]]]:
        found: dict[str, tuple[str, list[str]]] = {}
        for local_id, provider, key in self._read(
            "SELECT b.local_id, b.provider, i.key FROM batch_items i "
            "JOIN batches b ON b.local_id = i.local_id "
            "WHERE b.state = 'submitting' AND i.key = ANY(%s)",
            (list(keys),),
        ):
            found.setdefault(local_id, (provider, []))[1].append(key)
        return found

    def batches(self, *, open_only: bool = True) -> list[dict[str, Any]]:
        where = "WHERE state != 'collected'" if open_only else ""
        rows = self._read(
            f"SELECT {', '.join(BATCH_COLUMNS)} FROM batches {where} ORDER BY created_at DESC"
        )
        return batch_listing(rows)

    # what the ledger holds for batched calls -------------------------------------------
    def submitted_reservations(self, keys: list[str]) -> dict[str, int]:
        rows = self._read(
            "SELECT i.key, MAX(l.id) FROM batch_items i "
            "JOIN batches b ON b.local_id = i.local_id "
            "JOIN ledger l ON l.run_token = b.run_token AND l.key = i.key "
            f"AND l.state IN {OPEN} "
            "WHERE b.state = 'submitted' AND i.key = ANY(%s) GROUP BY i.key",
            (list(keys),),
        )
        return {row[0]: int(row[1]) for row in rows}

    def polled_by_a_live_run(self, local_id: str) -> bool:
        owners = self._read(
            "SELECT DISTINCT c.owner FROM claims c JOIN batch_items i ON i.key = c.key "
            "WHERE i.local_id = %s AND c.status = 'running'",
            (local_id,),
        )
        return any(self.owner_alive(owner) for (owner,) in owners)

    def release_unrun(self, local_id: str) -> tuple[int, float]:
        def work(db: Any) -> list[tuple[int, float]]:
            rows = db.execute(
                "SELECT l.id, l.reserved_usd FROM ledger l "
                "JOIN batches b ON b.local_id = %s AND l.run_token = b.run_token "
                "JOIN batch_items i ON i.local_id = b.local_id AND i.key = l.key "
                f"WHERE l.state IN {OPEN} ORDER BY l.id FOR UPDATE OF l",
                (local_id,),
            ).fetchall()
            for reservation, _amount in rows:
                settle(db, reservation, "released", 0.0)
            db.execute(
                "UPDATE batches SET state = 'collected', updated_at = %s WHERE local_id = %s",
                (time.time(), local_id),
            )
            return rows

        released = self._transaction(work)
        return len(released), sum(amount for _, amount in released)
