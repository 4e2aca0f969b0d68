"""The claims (table ``claims``, spec: "Cache database"): who makes each call, and how it
ended, visible to every process and run on the cache."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from .owners import owner_alive
from .records import ANSWERED, CLAIM_COLUMNS, CLAIMED, HELD, Claim, held_by_another
from .schema import _BATCH, SQLiteFile


class Claims(SQLiteFile):
    # The answers cache's (answers.py): a cached request needs no claim.
    cached_keys: Callable[[list[str]], set[str]]

    def owner_alive(self, owner: str) -> bool:
        """On one machine's file, an owner is alive while its process runs."""
        return owner_alive(owner)

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

        def holder_alive(holder: str) -> bool:
            # Asked once per holder in a wave: each ask looks at a process.
            if holder not in alive:
                alive[holder] = self.owner_alive(holder)
            return alive[holder]

        for start in range(0, len(todo), _BATCH):
            with self._write(self.connection) as db:
                for key in todo[start : start + _BATCH]:
                    states[key] = _claim(db, run_token, key, owner, reads_cache, holder_alive)
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
        with self._write(self.connection) as db:
            _finish_claim(
                db, key, status, error, error_kind, cost_usd, possibly_billed_usd, attempts
            )

    def claims_of(self, keys: list[str]) -> dict[str, Claim]:
        """The claims of ``keys`` (those that have one), read in batches."""
        query = f"SELECT key, {CLAIM_COLUMNS} FROM claims WHERE key IN ({{marks}})"
        return {row[0]: Claim(*row[1:]) for row in self._rows_of(query, keys)}

    def claim_of(self, key: str) -> Claim | None:
        return self.claims_of([key]).get(key)

    def finished_calls(self, run_token: str) -> int:
        """Calls of the run that ended (answered or failed for good), across processes."""
        row = self.connection.execute(
            "SELECT COUNT(*) FROM claims WHERE run_token = ? AND status != 'running'",
            (run_token,),
        ).fetchone()
        return int(row[0])


def _claim(
    db: sqlite3.Connection,
    run_token: str,
    key: str,
    owner: str,
    reads_cache: bool,
    holder_alive: Callable[[str], bool],
) -> str:
    if reads_cache and db.execute("SELECT 1 FROM answers WHERE key = ?", (key,)).fetchone():
        return ANSWERED
    row = db.execute("SELECT run_token, owner, status FROM claims WHERE key = ?", (key,)).fetchone()
    if row is not None and held_by_another(run_token, owner, row, holder_alive):
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
