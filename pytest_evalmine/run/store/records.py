"""The records the store hands out and takes in (spec: "Cache database"), the states a claim
reports and the rule that decides them, and the columns both backends read records from:
the same whichever database keeps them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...adapters.base import Response


@dataclass(frozen=True)
class CachedAnswer:
    response: Response
    cost_usd: float


# A claim's columns in ``Claim``'s field order.
CLAIM_COLUMNS = (
    "run_token, owner, status, error, error_kind, cost_usd, possibly_billed_usd, attempts"
)


@dataclass(frozen=True)
class Claim:
    run_token: str
    owner: str
    status: str
    error: str | None
    error_kind: str | None
    cost_usd: float
    possibly_billed_usd: float
    attempts: int

    @property
    def running(self) -> bool:
        return self.status == RUNNING


@dataclass(frozen=True)
class PaidAnswer:
    """An answer that arrived, with what the store needs to keep it and settle its cost."""

    key: str
    provider: str
    model: str
    response: Response
    cost_usd: float
    reservation: int | None
    attempts: int = 1
    possibly_billed_usd: float = 0.0


@dataclass(frozen=True)
class BatchedItem:
    """A request sent in a provider batch whose results are still to be read."""

    custom_id: str
    local_id: str
    batch_id: str
    provider: str


@dataclass(frozen=True)
class Hit:
    """A cached answer and the claim that paid for it, when one is still recorded."""

    answer: CachedAnswer
    claim: Claim | None


RUNNING = "running"
# What ``Store.claim`` found: the call is ours to make, another process holds it, or its
# answer is already cached.
CLAIMED, HELD, ANSWERED = "claimed", "held", "answered"


def held_by_another(
    run_token: str,
    owner: str,
    claim: tuple[str, str, str],
    owner_alive: Callable[[str], bool],
) -> bool:
    """Whether the existing ``claim`` (its run token, owner and status) keeps ``owner`` of
    ``run_token`` from taking the call (``HELD``): another owner's running claim while that
    owner is alive, or a claim another worker of this run finished (read its claim). A dead
    owner's claim, or one another run finished, is taken over."""
    held_by, holder, status = claim
    if holder == owner:
        return False
    if status != RUNNING:
        return held_by == run_token
    return owner_alive(holder)


# What ``batches()`` lists of each batch, in its columns' order.
BATCH_COLUMNS = (
    "local_id", "provider", "batch_id", "state", "provider_state", "counts",
    "requests", "run_token", "owner", "created_at", "updated_at",
)  # fmt: skip


def batch_listing(rows: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Rows of ``BATCH_COLUMNS`` as ``batches()`` lists them, the provider's counts decoded."""
    listed = []
    for row in rows:
        entry = dict(zip(BATCH_COLUMNS, row, strict=True))
        entry["counts"] = json.loads(entry["counts"]) if entry["counts"] else {}
        listed.append(entry)
    return listed
