"""Provider batches (tables ``batches`` and ``batch_items``, spec: "Batch"): what each
batch asked for, durable before it is sent, and how far it got."""

from __future__ import annotations

import json
import time
from typing import Any

from .records import BATCH_COLUMNS, BatchedItem, batch_listing
from .schema import SQLiteFile


class Batches(SQLiteFile):
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
            f"SELECT {', '.join(BATCH_COLUMNS)} FROM batches {where} ORDER BY created_at DESC"
        ).fetchall()
        return batch_listing(rows)
