"""The answers cache on PostgreSQL (table ``answers``): as the SQLite store's (answers.py
one level up), each wave of keys read in one query (``= ANY``: no bound on parameters)."""

from __future__ import annotations

import json

from ....adapters.base import Response
from ..records import CachedAnswer, Claim, Hit
from .connection import PostgresDatabase


class AnswersCache(PostgresDatabase):
    def get(self, key: str) -> CachedAnswer | None:
        return self.answers_of([key]).get(key)

    def hit(self, key: str) -> Hit | None:
        return self.hits([key]).get(key)

    def has(self, key: str) -> bool:
        return bool(self.cached_keys([key]))

    def hits(self, keys: list[str]) -> dict[str, Hit]:
        """The cached answers of ``keys`` with the claim of whoever paid for each."""
        found: dict[str, Hit] = {}
        for row in self._read(
            "SELECT a.key, a.response, a.cost_usd, c.run_token, c.owner, c.status, c.error, "
            "c.error_kind, c.cost_usd, c.possibly_billed_usd, c.attempts FROM answers a "
            "LEFT JOIN claims c ON c.key = a.key WHERE a.key = ANY(%s)",
            (list(keys),),
        ):
            answer = CachedAnswer(response=Response.from_json(row[1]), cost_usd=row[2])
            found[row[0]] = Hit(answer, None if row[3] is None else Claim(*row[3:]))
        return found

    def answers_of(self, keys: list[str]) -> dict[str, CachedAnswer]:
        rows = self._read(
            "SELECT key, response, cost_usd FROM answers WHERE key = ANY(%s)", (list(keys),)
        )
        return {row[0]: CachedAnswer(Response.from_json(row[1]), row[2]) for row in rows}

    def cached_keys(self, keys: list[str]) -> set[str]:
        rows = self._read("SELECT key FROM answers WHERE key = ANY(%s)", (list(keys),))
        return {row[0] for row in rows}

    def answer_rows(self, keys: list[str]) -> list[dict]:
        rows = self._read(
            "SELECT key, provider, model, response, cost_usd FROM answers WHERE key = ANY(%s)",
            (list(keys),),
        )
        by_key = {row[0]: row for row in rows}
        return [
            {
                "key": key,
                "provider": row[1],
                "model": row[2],
                "response": json.loads(row[3]),
                "cost_usd": row[4],
            }
            for key in keys
            if (row := by_key.get(key)) is not None
        ]

    def answer_providers(self, model: str) -> set[str]:
        rows = self._read("SELECT DISTINCT provider FROM answers WHERE model = %s", (model,))
        return {row[0] for row in rows}
