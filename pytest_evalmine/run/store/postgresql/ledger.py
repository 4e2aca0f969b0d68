"""The spend ledger on PostgreSQL (tables ``ledger`` and ``run_totals``, spec: "Prices and
the budget"): each reservation checked against the cap while the budget's running total is
locked (``SELECT ... FOR UPDATE``), so processes on any machine reserving under one budget
never commit past its cap together. A settlement or release changes the total only for a
row still open, so doing one twice (a retry after a lost commit) counts it once."""

from __future__ import annotations

from typing import Any

from ..budget import amounts_that_fit
from .connection import PostgresDatabase

COUNTED = (
    "COALESCE(SUM(CASE state WHEN 'spent' THEN spent_usd WHEN 'released' THEN 0 "
    "ELSE reserved_usd END), 0)"
)
LEDGER_SUM = f"SELECT {COUNTED} FROM ledger WHERE budget = %s"
RUN_SUM = f"SELECT {COUNTED} FROM ledger WHERE run_token = %s"
OPEN = "('reserved', 'possibly_billed')"


class Ledger(PostgresDatabase):
    def reserve(
        self, run_token: str, key: str, amount: float, cap: float, budget: str | None = None
    ) -> int | None:
        return self.reserve_each(run_token, [(key, amount)], cap, budget)[0]

    def reserve_each(
        self,
        run_token: str,
        wanted: list[tuple[str, float]],
        cap: float,
        budget: str | None = None,
    ) -> list[int | None]:
        """Each ``(key, amount)`` in turn against ``cap`` for everything committed under
        ``budget`` (default: the run token), in one transaction: an id, or None where it
        does not fit."""
        scope = budget or run_token
        return self._transaction(lambda db: _reserve(db, run_token, scope, wanted, cap))

    def release(self, reservation: int) -> None:
        self._transaction(lambda db: settle(db, reservation, "released", 0.0))

    def keep_as_possibly_billed(self, reservation: int) -> None:
        self._transaction(
            lambda db: db.execute(
                "UPDATE ledger SET state = 'possibly_billed' WHERE id = %s", (reservation,)
            )
        )

    def possibly_billed(self, run_token: str) -> float:
        row = self._one(
            "SELECT COALESCE(SUM(reserved_usd), 0) FROM ledger WHERE run_token = %s "
            "AND state = 'possibly_billed'",
            (run_token,),
        )
        return float(row[0]) if row else 0.0

    def spent(self, run_token: str) -> float:
        row = self._one(
            "SELECT COALESCE(SUM(spent_usd), 0) FROM ledger WHERE run_token = %s "
            "AND state = 'spent'",
            (run_token,),
        )
        return float(row[0]) if row else 0.0

    def committed(self, budget: str) -> float:
        row = self._one("SELECT committed_usd FROM run_totals WHERE budget = %s", (budget,))
        return float(row[0]) if row is not None else self.ledger_total(budget)

    def committed_by_run(self, run_token: str) -> float:
        row = self._one(RUN_SUM, (run_token,))
        return float(row[0]) if row else 0.0

    def ledger_total(self, budget: str) -> float:
        row = self._one(LEDGER_SUM, (budget,))
        return float(row[0]) if row else 0.0

    def reserved_keys(self, run_token: str) -> set[str]:
        rows = self._read(
            "SELECT key FROM ledger WHERE run_token = %s AND state = 'reserved'", (run_token,)
        )
        return {row[0] for row in rows}


def _reserve(
    db: Any, run_token: str, budget: str, wanted: list[tuple[str, float]], cap: float
) -> list[int | None]:
    db.execute(
        f"INSERT INTO run_totals SELECT %s, ({LEDGER_SUM}) ON CONFLICT (budget) DO NOTHING",
        (budget, budget),
    )
    row = db.execute(
        "SELECT committed_usd FROM run_totals WHERE budget = %s FOR UPDATE", (budget,)
    ).fetchone()
    chosen, added = amounts_that_fit(float(row[0]), [amount for _, amount in wanted], cap)
    fitting = [wish for wish, fits in zip(wanted, chosen, strict=True) if fits]
    ids: list[int] = []
    if fitting:
        with db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO ledger (run_token, key, reserved_usd, state, budget) "
                "VALUES (%s, %s, %s, 'reserved', %s) RETURNING id",
                [(run_token, key, amount, budget) for key, amount in fitting],
                returning=True,
            )
            while True:
                ids.append(int(cursor.fetchone()[0]))
                if not cursor.nextset():
                    break
        db.execute(
            "UPDATE run_totals SET committed_usd = committed_usd + %s WHERE budget = %s",
            (added, budget),
        )
    given = iter(ids)
    return [next(given) if fits else None for fits in chosen]


def settle(db: Any, reservation: int, state: str, counted_usd: float) -> None:
    """An open reservation is now ``state`` (``spent`` at ``counted_usd``, or ``released``),
    and its budget's total counts ``counted_usd`` instead of what it reserved."""
    row = db.execute(
        f"UPDATE ledger SET state = %s, spent_usd = %s WHERE id = %s AND state IN {OPEN} "
        "RETURNING budget, reserved_usd",
        (state, counted_usd if state == "spent" else 0.0, reservation),
    ).fetchone()
    if row is not None:
        db.execute(
            "UPDATE run_totals SET committed_usd = committed_usd + %s - %s WHERE budget = %s",
            (counted_usd, row[1], row[0]),
        )
