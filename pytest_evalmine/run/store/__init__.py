"""The cache database (spec: "Cache database"): answers cache, claims, ledger and batches.

``Store`` is the SQLite store (sqlite.py), composed of one module per table. The names
importers use live here, whichever module keeps them."""

from .owners import owner_alive, process_owner
from .records import (
    ANSWERED,
    CLAIMED,
    HELD,
    RUNNING,
    BatchedItem,
    CachedAnswer,
    Claim,
    Hit,
    PaidAnswer,
)
from .schema import BUSY_TIMEOUT_S, SCHEMA, SCHEMA_VERSION
from .sqlite import Store

__all__ = [
    "ANSWERED",
    "BUSY_TIMEOUT_S",
    "CLAIMED",
    "HELD",
    "RUNNING",
    "SCHEMA",
    "SCHEMA_VERSION",
    "BatchedItem",
    "CachedAnswer",
    "Claim",
    "Hit",
    "PaidAnswer",
    "Store",
    "owner_alive",
    "process_owner",
]
