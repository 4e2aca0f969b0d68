"""``evalmine batches cancel ID`` (spec: "Batch", "Command line"): a provider batch of the
cache canceled by our local id or the provider's, with what that frees under the cap.

A canceled batch answers the requests the provider ran before the cancel took hold (billed)
and marks the rest canceled (not billed). Which ran is known only from its results, which a
rerun reads as it reads any batch's (storing the answers, releasing the canceled requests'
reservations), so the batch stays ``submitted`` for it. Only when the provider's counts say
that the ended batch ran nothing are its reservations released here and the batch closed,
unless a live run still waits for it (that run releases them as it reads the end).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ..adapters.base import AdapterError
from ..adapters.registry import AdapterRegistry
from ..errors import EvalmineError
from .batch import BatchSettings, wire_for
from .store import StoreBackend


@dataclass(frozen=True)
class Canceled:
    """What a cancel did: the batch's row, the provider's state after it, and the
    reservations it released (none until the rerun reads the batch, unless nothing ran)."""

    batch: dict[str, Any]
    state: str
    counts: dict[str, int]
    released: int
    released_usd: float


def batch_named(store: StoreBackend, name: str) -> dict[str, Any] | None:
    """The batch whose local id (``em-...``) or provider id is ``name``, or None."""
    for entry in store.batches(open_only=False):
        if name in (entry["local_id"], entry["batch_id"]):
            return entry
    return None


def answered_count(counts: dict[str, int]) -> int | None:
    """Requests the provider ran, from a poll's counts in its own names: OpenAI's
    ``completed``, Anthropic's ``succeeded``, Gemini's ``successfulRequestCount`` (left out of
    its JSON when 0). None when the counts do not say."""
    if "completed" in counts:
        return counts["completed"]
    if "succeeded" in counts:
        return counts["succeeded"]
    if "requestCount" in counts:
        return counts.get("successfulRequestCount", 0)
    return None


def cancel_batch(store: StoreBackend, name: str, registry: AdapterRegistry) -> Canceled:
    """Cancel the batch ``name`` (local or provider id) at its provider, through the adapter
    ``registry`` has for its provider; ``EvalmineError`` with the reason when it cannot."""
    entry = batch_named(store, name)
    where = f"in {store.location}"
    if entry is None:
        raise EvalmineError(f"no batch {name!r} {where} (`evalmine batches --all` lists them)")
    if entry["state"] == "collected":
        raise EvalmineError(f"batch {name!r} was collected already: nothing to cancel")
    batch_id = entry["batch_id"]
    if batch_id is None:
        raise EvalmineError(
            f"batch {name!r} was never accepted by {entry['provider']} as far as the cache "
            "knows (state submitting): nothing to cancel there; a rerun looks for it"
        )
    provider = entry["provider"]
    if provider not in registry.factories:
        raise EvalmineError(
            f"batch {name!r}: provider {provider!r} is not a built-in one; name its endpoint "
            f"with --endpoint {provider}=BASE_URL"
        )
    adapter = registry.adapter_for(f"{provider}/batch")
    wire = wire_for(adapter, BatchSettings(providers=frozenset({provider})))
    if wire is None or getattr(wire, "cancel", None) is None:
        raise EvalmineError(f"batch {name!r}: provider {provider!r} has no batch cancel here")

    async def cancel() -> Any:
        try:
            await wire.cancel(batch_id)  # type: ignore[attr-defined]
            return await wire.poll(batch_id)
        finally:
            await registry.aclose()

    try:
        status = asyncio.run(cancel())
    except AdapterError as exc:
        raise EvalmineError(
            f"batch {batch_id}: {provider} did not cancel it: {exc.kind}: {exc}"
        ) from None
    store.batch_polled(entry["local_id"], status.state, status.counts)
    released, released_usd = 0, 0.0
    ran_nothing = status.ended and answered_count(status.counts) == 0
    if ran_nothing and not store.polled_by_a_live_run(entry["local_id"]):
        released, released_usd = store.release_unrun(entry["local_id"])
    return Canceled(entry, status.state, dict(status.counts), released, released_usd)
