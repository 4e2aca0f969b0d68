"""API keys never reach a message or a file (spec: "Secrets"): the one redaction function.

Keys come from the environment only. Every value an adapter reads from it is remembered here
for the life of the process, and ``scrub`` replaces those exact values (whatever their shape)
and anything shaped like a provider key, wherever a text from outside enters the run: an
error built from a provider's reply, an answer before it is cached, a report before it is
written. Standard library only, so every layer can call it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

REDACTED = "[redacted]"
# Shorter values are not treated as secrets: replacing every "abc" in every answer would
# corrupt the evaluation, and real API keys and tokens are far longer.
MIN_SECRET_CHARS = 8
# Key shapes refused in suites and redacted from texts even when the value was not loaded
# here: a provider may echo another key.
KEY_PATTERNS = (
    ("Anthropic", re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")),
    ("OpenAI", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("Google", re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}")),
)

_loaded: set[str] = set()
_lock = threading.Lock()


def remember_key(value: str) -> None:
    """Record a key value read from the environment; from now on it is redacted everywhere
    in this process."""
    if len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _loaded.add(value)


def scrub(text: str, extra: Iterable[str | None] = ()) -> tuple[str, int]:
    """``text`` with every loaded key, every value of ``extra`` and every key-shaped string
    replaced by ``[redacted]``, and how many replacements were made. Longer values go first,
    so a key that contains another is replaced whole."""
    with _lock:
        values = set(_loaded)
    values.update(v for v in extra if v and len(v) >= MIN_SECRET_CHARS)
    count = 0
    for value in sorted(values, key=len, reverse=True):
        found = text.count(value)
        if found:
            text = text.replace(value, REDACTED)
            count += found
    for _provider, pattern in KEY_PATTERNS:
        text, found = pattern.subn(REDACTED, text)
        count += found
    return text, count


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """``scrub`` when the count does not matter."""
    return scrub(text, extra)[0]
