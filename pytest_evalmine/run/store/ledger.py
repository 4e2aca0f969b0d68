"""The spend ledger (tables ``ledger`` and ``run_totals``, spec: "Cache database" and
"Prices and the budget"): each call's reservation against the cap, settled or released."""

from __future__ import annotations

import sqlite3

from .budget import amounts_that_fit
from .schema import SQLiteFile

# A ledger row counts its real cost once spent, nothing once released, else what it reserved.
COUNTED = (
    "COALESCE(SUM(CASE state WHEN 'spent' THEN spent_usd WHEN 'released' THEN 0 "
    "ELSE reserved_usd END), 0)"
)
RUN_SUM = f"SELECT {COUNTED} FROM ledger WHERE run_token = ?"


class Ledger(SQLiteFile):
    def reserve(
        self, run_token: str, key: str, amount: float, cap: float, budget: str | None = None
    ) -> int | None:
        """Reserve ``amount`` against ``cap`` for this run; ``None`` when it does not fit."""
        return self.reserve_each(run_token, [(key, amount)], cap, budget)[0]

    def reserve_each(
        self,
        run_token: str,
        wanted: list[tuple[str, float]],
        cap: float,
        budget: str | None = None,
    ) -> list[int | None]:
        """Reserve each ``(key, amount)`` in turn against ``cap`` in one transaction, exactly
        as one ``reserve`` after another would: a reservation id, or ``None`` where the
        amount does not fit what the earlier ones left. The cap holds for everything
        committed under ``budget`` (default: the run token), whichever run made the rows."""
        scope = budget or run_token
        reservations: list[int | None] = []
        with self._write(self.connection) as db:
            committed = _running_total(db, scope)
            fits, added = amounts_that_fit(committed, [amount for _, amount in wanted], cap)
            for (key, amount), fitting in zip(wanted, fits, strict=True):
                if not fitting:
                    reservations.append(None)
                    continue
                cursor = db.execute(
                    "INSERT INTO ledger (run_token, key, reserved_usd, state, budget) "
                    "VALUES (?, ?, ?, 'reserved', ?)",
                    (run_token, key, amount, scope),
                )
                reservations.append(int(cursor.lastrowid or 0))
            if added:
                db.execute(
                    "UPDATE run_totals SET committed_usd = committed_usd + ? WHERE budget = ?",
                    (added, scope),
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

    def committed(self, budget: str) -> float:
        """Spent, possibly billed and still reserved under ``budget`` (a run token, unless
        the run shares its cap with others), by every process that reserved in it."""
        row = self.connection.execute(
            "SELECT committed_usd FROM run_totals WHERE budget = ?", (budget,)
        ).fetchone()
        return float(row[0]) if row is not None else _ledger_sum(self.connection, budget)

    def committed_by_run(self, run_token: str) -> float:
        """What one run committed (spent, possibly billed, still reserved), whichever budget
        it reserved under (its own token, or a budget it shares with other runs)."""
        row = self.connection.execute(RUN_SUM, (run_token,)).fetchone()
        return float(row[0])

    def ledger_total(self, budget: str) -> float:
        """The same amount summed from the ledger's rows (the source of truth)."""
        return _ledger_sum(self.connection, budget)

    def reserved_keys(self, run_token: str) -> set[str]:
        """The requests of the run whose call is in flight: reserved, neither settled nor
        released (a call is reserved before it is sent)."""
        rows = self.connection.execute(
            "SELECT key FROM ledger WHERE run_token = ? AND state = 'reserved'", (run_token,)
        )
        return {row[0] for row in rows}


def _ledger_sum(db: sqlite3.Connection, budget: str) -> float:
    row = db.execute(f"SELECT {COUNTED} FROM ledger WHERE budget = ?", (budget,)).fetchone()
    return float(row[0])


def _running_total(db: sqlite3.Connection, budget: str) -> float:
    """The budget's committed amount, kept next to the ledger and changed in the same
    transaction as every ledger row, so a reservation reads one row instead of summing the
    run's ledger (which made a run quadratic in its calls). A run without a total yet (its
    first reservation, or a ledger written by an older version) starts from the ledger's sum.
    Call inside a write transaction."""
    row = db.execute("SELECT committed_usd FROM run_totals WHERE budget = ?", (budget,)).fetchone()
    if row is not None:
        return float(row[0])
    total = _ledger_sum(db, budget)
    db.execute("INSERT INTO run_totals VALUES (?, ?)", (budget, total))
    return total


def _recount(db: sqlite3.Connection, reservation: int, counted_usd: float) -> None:
    """An open reservation now counts ``counted_usd`` (its real cost, or 0 when released)
    instead of what it reserved."""
    db.execute(
        "UPDATE run_totals SET committed_usd = committed_usd + ? - "
        "(SELECT reserved_usd FROM ledger WHERE id = ?) "
        "WHERE budget = (SELECT budget FROM ledger WHERE id = ?)",
        (counted_usd, reservation, reservation),
    )
