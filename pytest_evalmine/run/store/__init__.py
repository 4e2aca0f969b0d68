"""The cache database (spec: "Cache database"): answers cache, claims, ledger and batches.

``Store`` is the SQLite store (sqlite.py), composed of one module per table; ``StoreBackend``
(interface.py) names what the rest of the package asks of a store, the seam another backend
implements. The names importers use live here, whichever module keeps them."""

from .interface import StoreBackend
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
    "StoreBackend",
    "owner_alive",
    "process_owner",
]
