"""The PostgreSQL store (spec: "Cache database"): ``PostgresStore``, one module per job
(connections and retries, schema and its version, leases, answers, claims, ledger,
batches), opened by ``open_store`` for a ``postgresql://`` location. Importing it imports
psycopg and psycopg_pool, which nothing else in the package does."""

from .connection import StoreUnavailable
from .leases import DEFAULT_LEASE_S, LEASE_ENV
from .schema import SCHEMA_VERSION
from .store import PostgresStore

__all__ = ["DEFAULT_LEASE_S", "LEASE_ENV", "SCHEMA_VERSION", "PostgresStore", "StoreUnavailable"]
