"""The claims on PostgreSQL (tables ``claims`` and ``owner_leases``): the SQLite store's
rules (claims.py one level up), with a running claim held while its owner's lease lives.

A wave is claimed in one transaction: its existing claims are locked (``FOR UPDATE``, in key
order, so two processes never wait on each other in a circle), the free ones inserted with
``ON CONFLICT DO NOTHING``: a key another process inserted first is held by it."""

from __future__ import annotations

from typing import Any

from ..records import ANSWERED, CLAIM_COLUMNS, CLAIMED, HELD, Claim, held_by_another
from .connection import PostgresDatabase

FINISH = (
    "UPDATE claims SET status = %s, error = %s, error_kind = %s, cost_usd = %s, "
    "possibly_billed_usd = %s, attempts = %s WHERE key = %s"
)


class Claims(PostgresDatabase):
    def owner_alive(self, owner: str) -> bool:
        """Whether ``owner``'s lease lives (an owner of this store's process always does)."""
        return self._transaction(lambda db: self.leases.alive(db, owner))

    def claim(self, run_token: str, key: str, owner: str, *, reads_cache: bool = True) -> str:
        return self.claim_many(run_token, [key], owner, reads_cache=reads_cache)[key]

    def claim_many(
        self, run_token: str, keys: list[str], owner: str, *, reads_cache: bool = True
    ) -> dict[str, str]:
        """``claim`` for a wave: ``CLAIMED``, ``HELD`` or ``ANSWERED`` by key, as the SQLite
        store decides them; the owner's lease is taken in the same transaction."""
        todo = sorted(set(keys))
        if not todo:
            return {}
        states = self._transaction(
            lambda db: self._claim_wave(db, run_token, todo, owner, reads_cache)
        )
        return {key: states[key] for key in keys}

    def _claim_wave(
        self, db: Any, run_token: str, keys: list[str], owner: str, reads_cache: bool
    ) -> dict[str, str]:
        states: dict[str, str] = {}
        if reads_cache:
            rows = db.execute("SELECT key FROM answers WHERE key = ANY(%s)", (keys,))
            states = dict.fromkeys((row[0] for row in rows), ANSWERED)
        todo = [key for key in keys if key not in states]
        if not todo:
            return states
        self.leases.take(db, owner)
        existing = db.execute(
            "SELECT c.key, c.run_token, c.owner, c.status, COALESCE(l.lease_until > now(), "
            "FALSE) FROM claims c LEFT JOIN owner_leases l ON l.owner = c.owner "
            "WHERE c.key = ANY(%s) ORDER BY c.key FOR UPDATE OF c",
            (todo,),
        ).fetchall()
        lease_lives = {holder: leased for _, _, holder, _, leased in existing}
        taken: list[str] = []
        for key, held_by, holder, status, _ in existing:
            if held_by_another(
                run_token, owner, (held_by, holder, status), lease_lives.__getitem__
            ):
                states[key] = HELD
            else:
                taken.append(key)
        if taken:
            db.execute(
                "UPDATE claims SET run_token = %s, owner = %s, status = 'running', error = NULL, "
                "error_kind = NULL, cost_usd = 0, possibly_billed_usd = 0, attempts = 0 "
                "WHERE key = ANY(%s)",
                (run_token, owner, taken),
            )
            states.update(dict.fromkeys(taken, CLAIMED))
        free = [key for key in todo if key not in states]
        if free:
            inserted = db.execute(
                "INSERT INTO claims (key, run_token, owner) "
                "SELECT k, %s, %s FROM unnest(%s::text[]) AS k ORDER BY k "
                "ON CONFLICT (key) DO NOTHING RETURNING key",
                (run_token, owner, free),
            ).fetchall()
            mine = {row[0] for row in inserted}
            # A key another process inserted since our read: it claimed it first.
            states.update({key: CLAIMED if key in mine else HELD for key in free})
        return states

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
        row = (status, error, error_kind, cost_usd, possibly_billed_usd, attempts, key)
        self._transaction(lambda db: db.execute(FINISH, row))

    def claims_of(self, keys: list[str]) -> dict[str, Claim]:
        rows = self._read(
            f"SELECT key, {CLAIM_COLUMNS} FROM claims WHERE key = ANY(%s)", (list(keys),)
        )
        return {row[0]: Claim(*row[1:]) for row in rows}

    def claim_of(self, key: str) -> Claim | None:
        return self.claims_of([key]).get(key)

    def finished_calls(self, run_token: str) -> int:
        row = self._one(
            "SELECT COUNT(*) FROM claims WHERE run_token = %s AND status != 'running'",
            (run_token,),
        )
        return int(row[0]) if row else 0
