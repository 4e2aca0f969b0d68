"""The PostgreSQL store's tables (spec: "Cache database"): the same as the SQLite file's, in
their own schema ``evalmine``, with a version table, created by whichever process comes
first while an advisory lock keeps the others waiting.

A new table or column goes into ``TABLES`` with ``SCHEMA_VERSION`` one higher, and an
upgrade step in ``set_up`` for a database at the version before."""

from __future__ import annotations

from typing import Any

from ....errors import EvalmineError

NAMESPACE = "evalmine"
# Version 1: the SQLite file's tables at its version 5 (the budget scope), plus
# ``owner_leases`` (claims as leases) and ``batch_items.position`` (SQLite's rowid order).
SCHEMA_VERSION = 1
# Any number the tool alone takes: two processes creating the tables at once queue on it.
SCHEMA_LOCK = 0x6576616C6D696E65 % (2**63)  # "evalmine"

TABLES = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_token TEXT NOT NULL,
    key TEXT NOT NULL,
    reserved_usd DOUBLE PRECISION NOT NULL,
    spent_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    state TEXT NOT NULL
        CHECK (state IN ('reserved', 'spent', 'released', 'possibly_billed')),
    budget TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_run ON ledger (run_token, state);
CREATE INDEX IF NOT EXISTS ledger_budget ON ledger (budget);
CREATE TABLE IF NOT EXISTS run_totals (
    budget TEXT PRIMARY KEY,
    committed_usd DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    run_token TEXT NOT NULL,
    owner TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    error TEXT,
    error_kind TEXT,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    possibly_billed_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS claims_run ON claims (run_token);
CREATE TABLE IF NOT EXISTS owner_leases (
    owner TEXT PRIMARY KEY,
    lease_until TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS adapter_state (
    adapter TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS run_stops (
    run_token TEXT PRIMARY KEY,
    stopped_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    local_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    batch_id TEXT,
    state TEXT NOT NULL CHECK (state IN ('submitting', 'submitted', 'collected')),
    provider_state TEXT,
    counts TEXT,
    requests INTEGER NOT NULL,
    run_token TEXT NOT NULL,
    owner TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_items (
    local_id TEXT NOT NULL,
    custom_id TEXT NOT NULL,
    key TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (local_id, custom_id)
);
CREATE INDEX IF NOT EXISTS batch_items_key ON batch_items (key);
CREATE TABLE IF NOT EXISTS learned_widths (
    server TEXT PRIMARY KEY,
    width INTEGER NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
)
"""


def _create_namespace(connection: Any, location: str) -> None:
    """The schema ``evalmine``, created unless it is there: PostgreSQL checks the database's
    ``CREATE`` privilege before it looks whether the schema exists, so a user without it can
    still use a schema an administrator created for it."""
    import psycopg

    present = connection.execute(
        "SELECT 1 FROM pg_namespace WHERE nspname = %s", (NAMESPACE,)
    ).fetchone()
    if present:
        return
    try:
        with connection.transaction():  # a savepoint: the refusal is ours to word
            connection.execute(f"CREATE SCHEMA {NAMESPACE}")
    except psycopg.errors.InsufficientPrivilege:
        raise EvalmineError(
            f"the store {location} cannot be used: its user may not create the schema "
            f"{NAMESPACE} (CREATE on the database): grant it, or create the schema beforehand "
            f"(CREATE SCHEMA {NAMESPACE} AUTHORIZATION the_user)"
        ) from None


def set_up(connection: Any, location: str) -> None:
    """Create the schema, or check the one there, in one transaction under the schema lock.
    A database whose version is newer than this code's is refused (``EvalmineError``): this
    code would misread what a newer one wrote."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        _create_namespace(connection, location)
        connection.execute(f"SET LOCAL search_path TO {NAMESPACE}")
        connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = connection.execute("SELECT MAX(version) FROM schema_version").fetchone()
        version = row[0] if row else None
        if version is not None and version > SCHEMA_VERSION:
            raise EvalmineError(
                f"the store {location} has schema version {version}, newer than the version "
                f"this pytest-evalmine knows ({SCHEMA_VERSION}): upgrade pytest-evalmine, or "
                "name another database"
            )
        if version == SCHEMA_VERSION:
            return
        for statement in TABLES.split(";"):
            if statement.strip():
                connection.execute(statement)
        connection.execute("DELETE FROM schema_version")
        connection.execute("INSERT INTO schema_version VALUES (%s)", (SCHEMA_VERSION,))
