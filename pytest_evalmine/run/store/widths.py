"""The width each server's calls adapted to (table ``learned_widths``, spec: "Dispatch",
concurrency), kept so that the next run starts there instead of slow-starting again."""

from __future__ import annotations

import time

from .schema import SQLiteFile


class LearnedWidths(SQLiteFile):
    def learned_width(self, server: str) -> int | None:
        row = self.connection.execute(
            "SELECT width FROM learned_widths WHERE server = ?", (server,)
        ).fetchone()
        return int(row[0]) if row and row[0] >= 1 else None

    def remember_widths(self, widths: dict[str, int]) -> None:
        """Keep each server's learnt width (one statement per server, autocommitted)."""
        for server, width in widths.items():
            self.connection.execute(
                "INSERT OR REPLACE INTO learned_widths VALUES (?, ?, ?)",
                (server, width, time.time()),
            )
