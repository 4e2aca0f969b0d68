"""The page's data: one JSON document in a non-executed script element, escaped so it cannot
close its element, written in pieces so a large run's data is never one string.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no "</script>", no "<!--", no entity."""
    return "".join(script_json_pieces(value))


def script_json_pieces(value: Any) -> Iterator[str]:
    """``script_json`` in pieces: the outer mapping and its lists (or iterators) piece by
    piece, each item whole (json's C encoder), so the data of a large run is never one
    string. The escapes replace single characters, so escaping piece by piece equals
    escaping the whole."""
    for piece in _json_pieces(value, depth=2):
        for raw, escaped in _SCRIPT_ESCAPES:
            piece = piece.replace(raw, escaped)
        yield piece


_SCRIPT_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def _json_pieces(value: Any, depth: int) -> Iterator[str]:
    if depth and isinstance(value, dict) and all(isinstance(key, str) for key in value):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield ("," if index else "") + _json(key) + ":"
            yield from _json_pieces(item, depth - 1)
        yield "}"
    elif depth == 1 and isinstance(value, (list, Iterator)):
        # Items whole, each with its comma: one piece an item (the 15,000 of a 3,000-case
        # run's page), not two.
        yield "["
        for index, item in enumerate(value):
            yield ("," if index else "") + _json(item)
        yield "]"
    elif depth and isinstance(value, (list, Iterator)):
        yield "["
        for index, item in enumerate(value):
            if index:
                yield ","
            yield from _json_pieces(item, depth - 1)
        yield "]"
    else:
        yield _json(value)


def _json(value: Any) -> str:
    return _COMPACT.encode(value)


# Built once: json.dumps builds an encoder per call when given options (30,000 calls write a
# 3,000-case run's page).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
