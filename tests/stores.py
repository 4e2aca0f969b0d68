"""The stores tests open by location (``store_location`` in conftest.py): a SQLite file's
path or a PostgreSQL URL, each open kept so the fixture closes it when its test ends (a
PostgreSQL store holds a pool of connections and a lease thread). Light: the batch tests'
child processes import it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_OPENED: list[Any] = []


def open_test_store(location: str) -> Any:
    """The store at ``location``: SQLite for a path, PostgreSQL for a URL. Each call opens
    another store (another process's view of the same data)."""
    from pytest_evalmine.run.store.location import is_postgresql, open_store

    if is_postgresql(location):
        store = open_store(location, Path("unused.sqlite"))
    else:
        store = open_store(None, Path(location))
    _OPENED.append(store)
    return store


def is_sqlite(location: str) -> bool:
    from pytest_evalmine.run.store.location import is_postgresql

    return not is_postgresql(location)


def close_test_stores() -> None:
    while _OPENED:
        _OPENED.pop().close()
