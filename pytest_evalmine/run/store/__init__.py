"""The cache database (spec: "Cache database"): answers cache, claims, ledger and batches.

The names importers use live here, whichever module of the package keeps them."""

from .sqlite import (
    ANSWERED,
    BUSY_TIMEOUT_S,
    CLAIMED,
    HELD,
    RUNNING,
    SCHEMA,
    SCHEMA_VERSION,
    BatchedItem,
    CachedAnswer,
    Claim,
    Hit,
    PaidAnswer,
    Store,
    _recount,
    owner_alive,
    process_owner,
)

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
    "_recount",
    "owner_alive",
    "process_owner",
]
