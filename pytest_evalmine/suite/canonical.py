"""Canonical JSON and hashing: the one definition every hash in the project uses."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Built once: json.dumps builds an encoder per call when given options, a quarter of hashing a
# request (every cache key, pair id and suite hash is one of these).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept as is (spec: "Canonical form")."""
    return _CANONICAL.encode(value)


def sha256_hex(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``, as 64 hex digits."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
