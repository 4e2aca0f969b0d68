"""API keys never reach a message or a file (spec: "Secrets"): the one redaction function.

Keys come from the environment only. Every value an adapter reads from it is remembered here
for the life of the process, and ``redact`` replaces those exact values (whatever their shape)
and anything shaped like a provider key, wherever a text from outside enters the run: an
error built from a provider's reply, an answer before it is cached, a report before it is
written. ``count_redacted`` counts what a kept text holds, for the report. Standard library
only, so every layer can call it.
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
# Every key shape above starts with one of these. A text holding none (nearly every answer
# and report) skips the expressions: a substring search is some 25 times cheaper than their
# scan, which was seconds of writing a 10,000-case run's reports.
KEY_PREFIXES = ("sk-", "AIza")

# The loaded keys, longest first; replaced whole (never mutated) so ``redact``, called for
# every piece of every file a run writes, reads it without a lock or a copy.
_loaded: tuple[str, ...] = ()
_lock = threading.Lock()


def remember_key(value: str) -> None:
    """Record a key value read from the environment; from now on it is redacted everywhere
    in this process."""
    global _loaded
    if len(value) >= MIN_SECRET_CHARS:
        with _lock:
            if value not in _loaded:
                _loaded = tuple(sorted((*_loaded, value), key=len, reverse=True))


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """``text`` with every loaded key, every value of ``extra`` and every key-shaped string
    replaced by ``[redacted]``. Longer values go first, so a key that contains another is
    replaced whole."""
    values = _loaded
    more = [v for v in extra if v and len(v) >= MIN_SECRET_CHARS and v not in values]
    if more:
        values = tuple(sorted({*values, *more}, key=len, reverse=True))
    for value in values:
        text = text.replace(value, REDACTED)
    if any(prefix in text for prefix in KEY_PREFIXES):
        for _provider, pattern in KEY_PATTERNS:
            text = pattern.sub(REDACTED, text)
    return text


def count_redacted(*texts: str | None) -> int:
    """Redacted keys in texts as kept: counted from the texts themselves, so the number is
    the same whichever process (xdist worker, earlier run) redacted them."""
    return sum(text.count(REDACTED) for text in texts if text)
