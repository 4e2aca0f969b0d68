"""What the ledger holds for calls in provider batches (spec: "Batch"): the reservations of
the run that submitted them, which a rerun collects on and ``evalmine batches cancel``
releases."""

from __future__ import annotations

import time
from collections.abc import Callable

from .ledger import _recount
from .schema import SQLiteFile


class BatchLedger(SQLiteFile):
    """Reads and writes that join the batch tables with the ledger and the claims."""

    # The claims' (claims.py).
    owner_alive: Callable[[str], bool]

    def submitted_reservations(self, keys: list[str]) -> dict[str, int]:
        """Of ``keys``, those in an open (``submitted``) batch whose submitting run still holds
        their reservation (reserved, or kept as possibly billed once that run stopped waiting):
        key -> that ledger row. A rerun collects such a call on that row, so the cap counts it
        once, in the run that sent it ("Nothing paid twice")."""
        rows = self._rows_of(
            "SELECT i.key, MAX(l.id) FROM batch_items i "
            "JOIN batches b ON b.local_id = i.local_id "
            "JOIN ledger l ON l.run_token = b.run_token AND l.key = i.key "
            "AND l.state IN ('reserved', 'possibly_billed') "
            "WHERE b.state = 'submitted' AND i.key IN ({marks}) GROUP BY i.key",
            keys,
        )
        return {row[0]: int(row[1]) for row in rows}

    def polled_by_a_live_run(self, local_id: str) -> bool:
        """Whether a live process holds a running claim on a call of the batch: a run still
        waiting for it, which settles its calls' reservations itself when it reads the end."""
        owners = self.connection.execute(
            "SELECT DISTINCT c.owner FROM claims c JOIN batch_items i ON i.key = c.key "
            "WHERE i.local_id = ? AND c.status = 'running'",
            (local_id,),
        ).fetchall()
        return any(self.owner_alive(owner) for (owner,) in owners)

    def release_unrun(self, local_id: str) -> tuple[int, float]:
        """A batch canceled before the provider ran any of its requests: nothing of it will be
        billed, so the reservations its submitting run holds for its calls are released and the
        batch is closed (``collected``: nothing is left to read). Returns how many reservations
        were released and their sum. Not for a batch a live run still waits for
        (``polled_by_a_live_run``): that run releases them as it reads the batch's end."""
        with self._write(self.connection) as db:
            rows = db.execute(
                "SELECT l.id, l.reserved_usd FROM ledger l "
                "JOIN batches b ON b.local_id = ? AND l.run_token = b.run_token "
                "JOIN batch_items i ON i.local_id = b.local_id AND i.key = l.key "
                "WHERE l.state IN ('reserved', 'possibly_billed')",
                (local_id,),
            ).fetchall()
            for reservation, _amount in rows:
                _recount(db, reservation, 0.0)
                db.execute("UPDATE ledger SET state = 'released' WHERE id = ?", (reservation,))
            db.execute(
                "UPDATE batches SET state = 'collected', updated_at = ? WHERE local_id = ?",
                (time.time(), local_id),
            )
        return len(rows), sum(amount for _, amount in rows)
