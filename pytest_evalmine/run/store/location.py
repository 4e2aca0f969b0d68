"""Which store a run uses (spec: "Cache database"): the SQLite file by default, or a
PostgreSQL server named by ``--evalmine-store=postgresql://...`` (``EVALMINE_STORE``, ini
``evalmine_store``). One factory, ``open_store``, for the session, the progress watcher and
the ``evalmine batches`` command; the URL's password is masked wherever it is named."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from ...errors import EvalmineError
from .interface import StoreBackend

STORE_ENV = "EVALMINE_STORE"
POSTGRESQL_SCHEMES = ("postgresql", "postgres")
MASK = "***"
INSTALL_HINT = "pip install 'pytest-evalmine[postgresql]'"


def store_location(option_value: str | None) -> str | None:
    """The store the run names: the option (flag or ini key), else ``EVALMINE_STORE``; None
    for the default SQLite file."""
    value = (option_value or os.environ.get(STORE_ENV) or "").strip()
    return value or None


def is_postgresql(location: str | None) -> bool:
    return bool(location) and urlsplit(str(location)).scheme in POSTGRESQL_SCHEMES


def masked(location: str) -> str:
    """``location`` as messages may show it: a URL's password (in its user info, or a
    ``password=`` query parameter) replaced by ``***``."""
    try:
        parts = urlsplit(location)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if sep else netloc
    query = "&".join(
        f"{part.partition('=')[0]}={MASK}" if _is_password(part) else part
        for part in parts.query.split("&")
        if part
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _is_password(parameter: str) -> bool:
    return parameter.partition("=")[0].strip().lower() == "password"


def password_of(location: str) -> str | None:
    """The password a URL carries (user info or ``password=``), to keep out of every text."""
    try:
        parts = urlsplit(location)
        if parts.password:
            return unquote(parts.password)
    except ValueError:
        return None
    for part in parts.query.split("&"):
        if _is_password(part) and part.partition("=")[2]:
            return unquote(part.partition("=")[2])
    return None


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
