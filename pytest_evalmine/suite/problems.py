"""How one suite load words and collects its problems (spec: "Suite file"): values quoted and
clipped, mapping keys escaped as path steps, and every problem found raised together as one
``SuiteError``. The lowest suite module: the others word their problems with these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import SuiteError

MAX_ERRORS = 20
QUOTE_CHARS = 60


def clip(text: str, limit: int = QUOTE_CHARS, length: int | None = None) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: error messages quote
    values, and a 100 KB value must not become a 100 KB message. ``length`` is the length
    to report when ``text`` is a rendering of something else (a string's ``repr``)."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text) if length is None else length} characters)"


def path_key(key: Any) -> str:
    """A mapping key as one step of an error's path: clipped, and escaped when it holds
    characters that would break the one-line message (``\x1c``, ``\u2028``, ...)."""
    text = str(key)
    return clip(text if text.isprintable() else repr(text)[1:-1], 40, length=len(text))


def quoted(value: Any) -> str:
    """``value`` as ``repr`` shows it, clipped; a string's length is its own, without the
    quotes and escapes ``repr`` adds (a value of 5,000 characters says 5000)."""
    return clip(repr(value), length=len(value) if isinstance(value, str) else None)


def path_order(where: str) -> tuple[Any, ...]:
    """Sort key for JSON paths: ``$.tasks[10]`` after ``$.tasks[9]``, ``line 10`` after
    ``line 9``."""
    return tuple(
        (0, int(part), "") if part.isdecimal() else (1, 0, part)
        for part in re.split(r"[.\[\] ]+", where)
        if part
    )


@dataclass
class Problems:
    """Problems found in one load, raised together (sorted by file and path, up to a limit)
    so a suite with several mistakes is fixed in one round."""

    found: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, file: str, where: str, problem: str) -> None:
        self.found.append((file, where, problem))

    def __bool__(self) -> bool:
        return bool(self.found)

    def raise_any(self) -> None:
        if not self.found:
            return
        ordered = sorted(set(self.found), key=lambda p: (p[0], path_order(p[1]), p[2]))
        shown = ordered[:MAX_ERRORS]
        raise SuiteError(*shown[0], more=shown[1:], hidden=len(ordered) - len(shown))
