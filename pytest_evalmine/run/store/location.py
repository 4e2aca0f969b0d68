"""Which store a run uses (spec: "Cache database"): the SQLite file by default, or a
PostgreSQL server named by ``--evalmine-store=postgresql://...`` (``EVALMINE_STORE``, ini
``evalmine_store``). One factory, ``open_store``, for the session, the progress watcher and
the ``evalmine batches`` command; the URL's password is masked wherever it is named."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from ...errors import EvalmineError
from .interface import StoreBackend
from .urls import masked

STORE_ENV = "EVALMINE_STORE"
POSTGRESQL_SCHEMES = ("postgresql", "postgres")
INSTALL_HINT = "pip install 'pytest-evalmine[postgresql]'"


def store_location(option_value: str | None) -> str | None:
    """The store the run names: the option (flag or ini key), else ``EVALMINE_STORE``; None
    for the default SQLite file."""
    value = (option_value or os.environ.get(STORE_ENV) or "").strip()
    return value or None


def is_postgresql(location: str | None) -> bool:
    return bool(location) and urlsplit(str(location)).scheme in POSTGRESQL_SCHEMES


def check_location(location: str | None) -> None:
    """A store named that is neither a PostgreSQL URL nor empty is refused at start-up
    (``EvalmineError``, the URL masked)."""
    if location is None or is_postgresql(location):
        if location is not None:
            parts = urlsplit(location)
            if not parts.hostname and "host=" not in parts.query:
                raise EvalmineError(
                    f"--evalmine-store={masked(location)}: no host (expected "
                    "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE)"
                )
        return
    raise EvalmineError(
        f"--evalmine-store={masked(location)}: not a postgresql:// URL (leave the option out "
        "for the SQLite file under EVALMINE_HOME)"
    )


def open_store(location: str | None, sqlite_path: Path) -> StoreBackend:
    """The store at ``location`` (a ``postgresql://`` URL), or the SQLite file at
    ``sqlite_path`` when there is none. A server that cannot be reached, or psycopg not
    installed, is an ``EvalmineError`` naming the URL with its password masked."""
    check_location(location)
    if location is None:
        from .sqlite import Store

        return Store(sqlite_path)
    try:
        from .postgresql import PostgresStore
    except ImportError as exc:
        raise EvalmineError(
            f"--evalmine-store={masked(location)}: the PostgreSQL store needs psycopg 3 and "
            f"psycopg-pool ({exc.name or exc}): {INSTALL_HINT}"
        ) from None
    return PostgresStore(location)
