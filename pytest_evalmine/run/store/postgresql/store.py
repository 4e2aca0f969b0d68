"""The PostgreSQL store (spec: "Cache database"): one database shared by every process of
every machine of a team, with the SQLite store's semantics (one call per request, the cap
held in the store, every answer durable before it is reported). Each table's methods come
from its module; here what writes across tables in one transaction, and the small tables."""

from __future__ import annotations

import json
import time
from typing import Any

from ..records import PaidAnswer
from .answers import AnswersCache
from .batches import Batches
from .claims import FINISH, Claims
from .ledger import Ledger, settle

UPSERT_ANSWER = (
    "INSERT INTO answers VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
    "provider = EXCLUDED.provider, model = EXCLUDED.model, response = EXCLUDED.response, "
    "cost_usd = EXCLUDED.cost_usd, created_at = EXCLUDED.created_at"
)
UPSERT_STATE = (
    "INSERT INTO adapter_state VALUES (%s, %s, %s) ON CONFLICT (adapter) DO UPDATE SET "
    "state = EXCLUDED.state, updated_at = EXCLUDED.updated_at"
)


class PostgresStore(AnswersCache, Claims, Ledger, Batches):
    """The store at a ``postgresql://`` URL (``open_store``)."""

    def record_paid_answers(self, paid: list[PaidAnswer]) -> None:
        """Store each answer (unless it is not ``cacheable``), settle its reservation and
        finish its claim, all in one transaction."""
        if not paid:
            return
        now = time.time()

        def work(db: Any) -> None:
            with db.cursor() as cursor:
                answers = [
                    (a.key, a.provider, a.model, a.response.to_json(), a.cost_usd, now)
                    for a in paid
                    if a.response.cacheable
                ]
                if answers:
                    cursor.executemany(UPSERT_ANSWER, answers)
                for answer in paid:
                    if answer.reservation is not None:
                        settle(db, answer.reservation, "spent", answer.cost_usd)
                cursor.executemany(
                    FINISH,
                    [
                        ("ok", None, None, a.cost_usd, a.possibly_billed_usd, a.attempts, a.key)
                        for a in paid
                    ],
                )

        self._transaction(work)

    def record_paid_answer(self, **fields: Any) -> None:
        self.record_paid_answers([PaidAnswer(**fields)])

    def load_recorded(self, answers: list[dict], states: list[dict]) -> None:
        now = time.time()

        def work(db: Any) -> None:
            with db.cursor() as cursor:
                rows = [
                    (
                        entry["key"],
                        entry["provider"],
                        entry["model"],
                        json.dumps(entry["response"]),
                        float(entry["cost_usd"]),
                        now,
                    )
                    for entry in answers
                ]
                if rows:
                    cursor.executemany(
                        "INSERT INTO answers VALUES (%s, %s, %s, %s, %s, %s) "
                        "ON CONFLICT (key) DO NOTHING",
                        rows,
                    )
                kept = [
                    (entry["adapter"], json.dumps(entry["state"], sort_keys=True), now)
                    for entry in states
                ]
                if kept:
                    cursor.executemany(UPSERT_STATE, kept)

        self._transaction(work)

    # what adapters learnt from their servers -------------------------------------------
    def adapter_state(self, adapter: str) -> dict | None:
        row = self._one("SELECT state FROM adapter_state WHERE adapter = %s", (adapter,))
        return json.loads(row[0]) if row else None

    def remember_adapter_state(self, adapter: str, state: dict) -> None:
        row = (adapter, json.dumps(state, sort_keys=True), time.time())
        self._transaction(lambda db: db.execute(UPSERT_STATE, row))

    # learned widths --------------------------------------------------------------------
    def learned_width(self, server: str) -> int | None:
        row = self._one("SELECT width FROM learned_widths WHERE server = %s", (server,))
        return int(row[0]) if row and row[0] >= 1 else None

    def remember_widths(self, widths: dict[str, int]) -> None:
        if not widths:
            return
        rows = [(server, width, time.time()) for server, width in widths.items()]

        def work(db: Any) -> None:
            with db.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO learned_widths VALUES (%s, %s, %s) ON CONFLICT (server) "
                    "DO UPDATE SET width = EXCLUDED.width, updated_at = EXCLUDED.updated_at",
                    rows,
                )

        self._transaction(work)

    # stopping a run's other processes --------------------------------------------------
    def request_stop(self, run_token: str) -> None:
        self._transaction(
            lambda db: db.execute(
                "INSERT INTO run_stops VALUES (%s, %s) ON CONFLICT (run_token) DO NOTHING",
                (run_token, time.time()),
            )
        )

    def stop_requested(self, run_token: str) -> bool:
        return self._one("SELECT 1 FROM run_stops WHERE run_token = %s", (run_token,)) is not None
