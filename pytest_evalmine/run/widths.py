"""The width each server's calls adapted to, kept in the cache database (table
``learned_widths``) so that the next run starts there instead of slow-starting again (spec:
"Dispatch", concurrency). Keyed by the server's base URL: two endpoint names for one server
share what it serves at once."""

from __future__ import annotations

import time

from ..adapters.base import Adapter
from .store import Store


def server_of(adapter: Adapter) -> str:
    """The server an adapter calls: its base URL, else (an adapter of your own) its name."""
    base_url = getattr(adapter, "base_url", None)
    if isinstance(base_url, str) and base_url:
        return base_url.rstrip("/")
    return f"adapter:{adapter.name}"


def remembered(store: Store, server: str) -> int | None:
    row = store.connection.execute(
        "SELECT width FROM learned_widths WHERE server = ?", (server,)
    ).fetchone()
    return int(row[0]) if row and row[0] >= 1 else None


def remember(store: Store, widths: dict[str, int]) -> None:
    """Keep each server's learnt width (one statement per server, autocommitted)."""
    for server, width in widths.items():
        store.connection.execute(
            "INSERT OR REPLACE INTO learned_widths VALUES (?, ?, ?)", (server, width, time.time())
        )
