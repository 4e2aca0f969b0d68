"""The answers cache (table ``answers``, spec: "Cache database"): what each request
answered, read one key or a wave at a time, and as plain data for recordings."""

from __future__ import annotations

import json

from ...adapters.base import Response
from .records import CachedAnswer, Claim, Hit
from .schema import SQLiteFile


class AnswersCache(SQLiteFile):
    def get(self, key: str) -> CachedAnswer | None:
        row = self.connection.execute(
            "SELECT response, cost_usd FROM answers WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return CachedAnswer(response=Response.from_json(row[0]), cost_usd=row[1])

    def hit(self, key: str) -> Hit | None:
        """The cached answer with the claim of whoever paid for it, in one read."""
        return self.hits([key]).get(key)

    def has(self, key: str) -> bool:
        row = self.connection.execute("SELECT 1 FROM answers WHERE key = ?", (key,)).fetchone()
        return row is not None

    def hits(self, keys: list[str]) -> dict[str, Hit]:
        """``hit`` for every key that is cached, read in batches: one query per batch of keys
        instead of one per key (a warm 10,000-case run reads 40,000 cached calls)."""
        found: dict[str, Hit] = {}
        for row in self._rows_of(
            "SELECT a.key, a.response, a.cost_usd, c.run_token, c.owner, c.status, c.error, "
            "c.error_kind, c.cost_usd, c.possibly_billed_usd, c.attempts FROM answers a "
            "LEFT JOIN claims c ON c.key = a.key WHERE a.key IN ({marks})",
            keys,
        ):
            answer = CachedAnswer(response=Response.from_json(row[1]), cost_usd=row[2])
            found[row[0]] = Hit(answer, None if row[3] is None else Claim(*row[3:]))
        return found

    def answers_of(self, keys: list[str]) -> dict[str, CachedAnswer]:
        """``get`` for every key that is cached, read in batches."""
        return {
            row[0]: CachedAnswer(Response.from_json(row[1]), row[2])
            for row in self._rows_of(
                "SELECT key, response, cost_usd FROM answers WHERE key IN ({marks})", keys
            )
        }

    def cached_keys(self, keys: list[str]) -> set[str]:
        """The keys of ``keys`` whose answer is cached, read in batches."""
        return {
            row[0] for row in self._rows_of("SELECT key FROM answers WHERE key IN ({marks})", keys)
        }

    # recordings (engine/recording.py) ----------------------------------------------------
    def answer_rows(self, keys: list[str]) -> list[dict]:
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

    def answer_providers(self, model: str) -> set[str]:
        """The adapters that made the cached answers of ``model`` (a replay miss says so)."""
        rows = self.connection.execute(
            "SELECT DISTINCT provider FROM answers WHERE model = ?", (model,)
        ).fetchall()
        return {row[0] for row in rows}
