"""The records the store hands out and takes in (spec: "Cache database"), and the states
a claim reports: plain data, the same whichever database keeps them."""

from __future__ import annotations

from dataclasses import dataclass

from ...adapters.base import Response


@dataclass(frozen=True)
class CachedAnswer:
    response: Response
    cost_usd: float


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
