"""Which items a shard runs (spec: "Shards"): item i is in shard K of N when
``int(sha256(json([suite, task, case])), 16) % N == K - 1``. Keyed by the suite's name and the
case, never by the model or the repeat, so every model and repeat of a case, and the judge
pairs built from them, land in the same shard; sha256, not Python's ``hash`` (salted per
process), so every machine and every xdist worker computes the same slice."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import TypeVar

from ..options import Shard

T = TypeVar("T")


def shard_of(key: tuple[str, ...], count: int) -> int:
    """The 1-based shard of ``count`` that the item keyed ``key`` belongs to."""
    text = json.dumps(list(key), ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest, "big") % count + 1


def split(
    items: Iterable[T], key_of: Callable[[T], tuple[str, ...]], shard: Shard
) -> tuple[list[T], list[T]]:
    """``items`` as (kept by ``shard``, left to the other shards), each in the given order."""
    kept: list[T] = []
    dropped: list[T] = []
    for item in items:
        (kept if shard_of(key_of(item), shard.count) == shard.index else dropped).append(item)
    return kept, dropped
