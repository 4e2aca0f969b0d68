"""What a run would send and spend, before it sends anything (spec: "Dispatch", "Cost cap").

The dispatcher's estimates read the cache and the ledger and nothing else: how many planned
calls are cached (free), what the rest cost on average and at worst, and what the run has
committed already. Apart from dispatch, which reserves and sends, so that the figures a run
refuses on are plainly read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from .planned import Estimate, Planned
from .store import StoreBackend

T = TypeVar("T")


def of_parts(
    store: StoreBackend,
    budget_token: str,
    record: str,
    parts: Iterable[list[Planned]],
    batched: Callable[[Planned], bool] | None = None,
) -> Estimate:
    """The estimate of planned calls that come in parts, each looked up in one read; a call
    in two parts counts once. ``record``: the record mode (``all`` reads no cache; ``none``
    sends nothing, so costs nothing). ``batched``: whether a call goes by provider batch; such
    a call already in a batch an earlier run submitted is collected from it, costing this
    run nothing (``Store.submitted_reservations``)."""
    reads = record != "all"
    seen: set[str] = set()
    cached = 0
    in_batch = 0
    costs: list[float] = []
    worst: list[float] = []
    for planned in parts:
        unique = {p.key: p for p in planned if p.key not in seen}
        seen.update(unique)
        found = store.cached_keys(list(unique)) if reads else set()
        sent = [p for key, p in unique.items() if key not in found]
        cached += len(unique) - len(sent)
        if batched is not None and record != "none":
            collecting = store.submitted_reservations([p.key for p in sent if batched(p)])
            in_batch += len(collecting)
            sent = [p for p in sent if p.key not in collecting]
        if record != "none":
            costs += (p.estimated_cost_usd for p in sent)
            worst += (p.max_cost_usd for p in sent)
    return Estimate(
        calls=len(seen),
        cached=cached,
        uncached=len(costs),
        cost_usd=sum(costs),
        already_committed_usd=store.committed(budget_token),
        worst_case_usd=sum(worst),
        in_batch=in_batch,
    )


def by_size(
    store: StoreBackend, budget_token: str, record: str, like: Planned, text_chars: list[int]
) -> Estimate:
    """Calls that cannot be built yet (the judge of answers still to come), known by the
    length of their system and prompt: each is new, so uncached, priced like ``like``."""
    sent = [] if record == "none" else text_chars
    return Estimate(
        calls=len(text_chars),
        cached=0,
        uncached=len(sent),
        cost_usd=sum(like.estimated_cost_for(chars) for chars in sent),
        already_committed_usd=store.committed(budget_token),
        worst_case_usd=sum(like.max_cost_for(chars) for chars in sent),
    )


def parts(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), drawn as they are needed."""
    part: list[T] = []
    for item in items:
        part.append(item)
        if len(part) == size:
            yield part
            part = []
    if part:
        yield part
