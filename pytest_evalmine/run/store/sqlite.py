"""The SQLite store (spec: "Cache database"): answer cache, spend ledger, claims and batches.

One file shared by every process of a run (xdist workers included). WAL mode lets readers
proceed while one writer commits; ``BEGIN IMMEDIATE`` serialises the ledger's
check-then-reserve so two processes cannot both take the last dollar. Every paid answer is
committed the moment it arrives, so a killed run loses nothing it paid for.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .answers import AnswersCache
from .batch_ledger import BatchLedger
from .batches import Batches
from .claims import Claims, _finish_claim
from .ledger import Ledger, _recount
from .records import PaidAnswer
from .widths import LearnedWidths


class Store(AnswersCache, Claims, Ledger, Batches, BatchLedger, LearnedWidths):
    """The SQLite store: each table's methods from its module, one shared connection, and
    here what writes across tables in one transaction."""

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
