"""The width each server's calls adapted to, kept in the cache database (table
``learned_widths``) so that the next run starts there instead of slow-starting again (spec:
"Dispatch", concurrency). Keyed by the server's base URL: two endpoint names for one server
share what it serves at once."""

from __future__ import annotations

from ..adapters.base import Adapter
from .store import StoreBackend


def server_of(adapter: Adapter) -> str:
    """The server an adapter calls: its base URL, else (an adapter of your own) its name."""
    base_url = getattr(adapter, "base_url", None)
    if isinstance(base_url, str) and base_url:
        return base_url.rstrip("/")
    return f"adapter:{adapter.name}"


def remembered(store: StoreBackend, server: str) -> int | None:
    return store.learned_width(server)


def remember(store: StoreBackend, widths: dict[str, int]) -> None:
    """Keep each server's learnt width."""
    store.remember_widths(widths)
