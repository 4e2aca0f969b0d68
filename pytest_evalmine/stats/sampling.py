"""Samples chosen by a hash of an item's id (spec: "Binary judges", "Prediction-powered
estimates"): the binary judges' test split and the preference judge's audit sample. The
hash never sees a label, a verdict or the run, so a sample cannot be tuned to flatter the
judge; it is as good as uniformly random over ids; and it is nested: an item in the sample
at one fraction stays in it at every larger fraction. Standard library only."""

from __future__ import annotations

import hashlib

HASH_RULE = "sha256(ids joined by \\x1f), first 8 hex digits as an integer < fraction x 2^32"


def in_hash_sample(fraction: float, *ids: str) -> bool:
    """True when the item named by ``ids`` falls in the sample holding ``fraction`` of all
    items."""
    return hash_rank(*ids) < fraction * 2**32


def hash_rank(*ids: str) -> int:
    """The number ``in_hash_sample`` compares: sorting by it is a random order that the
    samples agree with (every prefix of it is the sample at some fraction)."""
    return int(hashlib.sha256("\x1f".join(ids).encode()).hexdigest()[:8], 16)
