"""API keys never reach a message or a file (spec: "Secrets"): the one redaction function.

Keys come from the environment only. Every value an adapter reads from it is remembered here
for the life of the process, and ``redact`` replaces those exact values (whatever their shape),
every run of ``FRAGMENT_CHARS`` or more of their characters (a server may echo a key in
pieces), and anything shaped like a provider key, wherever a text from outside enters the run:
an error built from a provider's reply, an answer before it is cached, a report before it is
written. ``count_redacted`` counts what a kept text holds, for the report. Standard library
only, so every layer can call it.
"""

from __future__ import annotations

import functools
import re
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass

REDACTED = "[redacted]"
# Shorter values are not treated as secrets: replacing every "abc" in every answer would
# corrupt the evaluation, and real API keys and tokens are far longer.
MIN_SECRET_CHARS = 8
# A run of this many characters of a key is secret on its own: a server that echoes a key's
# head and tail separately gives away most of it. Twelve random base64url characters never
# turn up in an answer by chance (64^12 = 5e21); a value shorter than this is replaced whole.
FRAGMENT_CHARS = 12
# Any run of FRAGMENT_CHARS characters of a key holds one of the key's consecutive blocks of
# this length whole (blocks start every _BLOCK characters and 2 * _BLOCK - 1 <= 12), so a
# text that contains none of the blocks (a substring search each, in C) holds no fragment.
_BLOCK = FRAGMENT_CHARS // 2
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


@dataclass(frozen=True)
class _Secret:
    """A secret value with its blocks, for finding runs of its characters in a text."""

    value: str
    # Each distinct block of the value -> every offset in the value where those characters
    # stand (a block that repeats inside the value may match a fragment at any of them).
    blocks: tuple[tuple[str, tuple[int, ...]], ...]


@functools.lru_cache(maxsize=256)
def _secret(value: str) -> _Secret:
    starts = range(0, len(value) - _BLOCK + 1, _BLOCK) if len(value) >= FRAGMENT_CHARS else ()
    blocks = dict.fromkeys(value[start : start + _BLOCK] for start in starts)
    return _Secret(
        value,
        tuple(
            (block, tuple(i for i in range(len(value) - _BLOCK + 1) if value.startswith(block, i)))
            for block in blocks
        ),
    )


_MARKED, _PLAIN = b"\x01", b"\x00"
_STRETCH = _MARKED * FRAGMENT_CHARS
# Up to this many stretches (code is full of long identifiers, prose has few long words) each
# is looked at on its own; past it one pass over the whole text's bytes is cheaper.
_FEW_STRETCHES = 32
_BYTE_BLOCKS = struct.Struct(f"{_BLOCK}s")


@dataclass(frozen=True)
class _Secrets:
    """The values ``redact`` replaces, and what tells in a few C-speed passes where a text
    may hold a run of one (in nearly every text: nowhere). ``marks`` maps each UTF-8 byte a
    long value uses to 1 and every other byte to 0, so a run lies inside a stretch of at
    least ``FRAGMENT_CHARS`` ones. Any ``FRAGMENT_CHARS`` consecutive characters (bytes)
    hold ``_BLOCK`` of them starting at a multiple of ``_BLOCK``, counted from anywhere
    before: ``grams`` maps every ``_BLOCK`` characters of a long value to the values holding
    them (a bit each), for the blocks of a stretch; ``byte_grams`` holds every ``_BLOCK``
    bytes of their UTF-8 forms, for the blocks of the whole text's bytes."""

    # Values of FRAGMENT_CHARS or more, whose every run is redacted (the whole value too).
    long: tuple[_Secret, ...]
    # Shorter values, replaced whole.
    short: tuple[str, ...]
    marks: bytes
    grams: dict[str, int]
    byte_grams: frozenset[tuple[bytes]]

    @property
    def values(self) -> tuple[str, ...]:
        return (*(secret.value for secret in self.long), *self.short)

    def stretches(self, text: str) -> list[tuple[int, int, int]]:
        """``(start, stop, values)``: the stretches of ``text`` that may hold a run of the
        values whose bits are set in ``values``."""
        if not self.grams or len(text) < FRAGMENT_CHARS:
            return []
        data = text.encode("utf-8", "surrogatepass")
        marked = data.translate(self.marks)
        at = marked.find(_STRETCH)
        if at == -1:  # nearly every text: no stretch at all
            return []
        # Stretches start at the text's start or after an unmarked byte.
        count = marked.count(_PLAIN + _STRETCH, at - 1 if at else 0) + (at == 0)
        if count > _FEW_STRETCHES or not text.isascii():
            # Byte offsets are not character offsets, or there are many stretches: is any
            # block of the text's bytes one of a value's? Then look at the whole text.
            blocks = _BYTE_BLOCKS.iter_unpack(memoryview(data)[: len(data) // _BLOCK * _BLOCK])
            if self.byte_grams.isdisjoint(blocks):
                return []
            return [(0, len(text), (1 << len(self.long)) - 1)]
        found = []
        while at != -1:
            end = marked.find(_PLAIN, at)
            end = len(marked) if end == -1 else end
            stretch = text[at:end]
            which = 0
            for i in range(0, len(stretch) - _BLOCK + 1, _BLOCK):
                which |= self.grams.get(stretch[i : i + _BLOCK], 0)
            if which:
                found.append((at, end, which))
            at = marked.find(_STRETCH, end)
        return found


@functools.lru_cache(maxsize=64)
def _secrets(values: frozenset[str]) -> _Secrets:
    long = sorted(value for value in values if len(value) >= FRAGMENT_CHARS)
    encoded = [value.encode("utf-8", "surrogatepass") for value in long]
    grams: dict[str, int] = {}
    for index, value in enumerate(long):
        for i in range(len(value) - _BLOCK + 1):
            gram = value[i : i + _BLOCK]
            grams[gram] = grams.get(gram, 0) | 1 << index
    return _Secrets(
        long=tuple(map(_secret, long)),
        short=tuple(sorted(value for value in values if len(value) < FRAGMENT_CHARS)),
        marks=bytes(1 if any(byte in e for e in encoded) else 0 for byte in range(256)),
        grams=grams,
        byte_grams=frozenset(
            (e[i : i + _BLOCK],) for e in encoded for i in range(len(e) - _BLOCK + 1)
        ),
    )


# The loaded keys; replaced whole (never mutated) so ``redact``, called for every piece of
# every file a run writes, reads it without a lock or a copy.
_loaded: _Secrets = _secrets(frozenset())
_lock = threading.Lock()


def remember_key(value: str) -> None:
    """Record a key value read from the environment; from now on it is redacted everywhere
    in this process."""
    global _loaded
    if len(value) >= MIN_SECRET_CHARS:
        with _lock:
            if value not in _loaded.values:
                _loaded = _secrets(frozenset((*_loaded.values, value)))


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """``text`` with every loaded key and every value of ``extra`` replaced by
    ``[redacted]``, and with them every run of at least ``FRAGMENT_CHARS`` characters of
    one, and every key-shaped string. Each stretch of text that such runs and values cover
    (overlapping ones together: a key that contains another) becomes one marker."""
    known = _loaded
    more = {v for v in extra if v and len(v) >= MIN_SECRET_CHARS}
    if more and not more <= set(known.values):
        known = _secrets(frozenset((*known.values, *more)))
    spans: list[tuple[int, int]] = []
    for value in known.short:
        if value in text:
            spans += _occurrences(text, value, 0, len(text))
    for start, stop, which in known.stretches(text):
        for index, secret in enumerate(known.long):
            if which >> index & 1:
                spans += _runs(text, secret, start, stop)
    if spans:
        text = _replaced(text, spans)
    if any(prefix in text for prefix in KEY_PREFIXES):
        for _provider, pattern in KEY_PATTERNS:
            text = pattern.sub(REDACTED, text)
    return text


def _occurrences(text: str, value: str, start: int, stop: int) -> list[tuple[int, int]]:
    spans = []
    at = text.find(value, start, stop)
    while at != -1:
        spans.append((at, at + len(value)))
        at = text.find(value, at + 1, stop)
    return spans


def _runs(text: str, secret: _Secret, start: int, stop: int) -> list[tuple[int, int]]:
    """Where ``text[start:stop]`` holds ``FRAGMENT_CHARS`` or more consecutive characters of
    the secret. The whole value is found first; then, in each gap it leaves of at least
    FRAGMENT_CHARS, every block of the value found is grown both ways while the text and the
    value agree (a block inside a run already found is not grown again). What stays outside
    the spans holds no whole block of a run, so no run: a key echoed back whole costs one
    search, and its absence a few."""
    value = secret.value
    spans = _occurrences(text, value, start, stop)
    edges = [start, *(edge for span in spans for edge in span), stop]
    gaps = [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= FRAGMENT_CHARS]
    for gap_start, gap_stop in gaps:
        for block, offsets in secret.blocks:
            at = text.find(block, gap_start, gap_stop)
            while at != -1:
                if not any(begin <= at < end for begin, end in spans):
                    spans += _grown(text, value, at, offsets, start, stop)
                at = text.find(block, at + 1, gap_stop)
    return spans


def _grown(
    text: str, value: str, at: int, offsets: tuple[int, ...], start: int, stop: int
) -> list[tuple[int, int]]:
    """The runs of ``value`` around the block at ``text[at:]``, one per place the block
    stands in the value, that reach FRAGMENT_CHARS, within ``text[start:stop]``."""
    runs = []
    for offset in offsets:
        left, most = 0, min(at - start, offset)
        while left < most and text[at - left - 1] == value[offset - left - 1]:
            left += 1
        right, most = _BLOCK, min(stop - at, len(value) - offset)
        while right < most and text[at + right] == value[offset + right]:
            right += 1
        if left + right >= FRAGMENT_CHARS:
            runs.append((at - left, at + right))
    return runs


def _replaced(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each stretch the spans cover (overlapping ones merged) one marker."""
    pieces, end = [], 0
    for start, stop in sorted(spans):
        if start < end:
            end = max(end, stop)
            continue
        pieces += [text[end:start], REDACTED]
        end = stop
    return "".join(pieces) + text[end:]


def count_redacted(*texts: str | None) -> int:
    """Redacted keys in texts as kept: counted from the texts themselves, so the number is
    the same whichever process (xdist worker, earlier run) redacted them."""
    return sum(text.count(REDACTED) for text in texts if text)


# Text from a model or a check reaches terminals and Markdown files: an escape sequence in it
# would act there (clear the screen, hide text, set the window title, write the clipboard
# through OSC 52), and a bidirectional override would reorder what is shown. Such characters
# are shown as escapes instead (``\x1b``, ``\u202e``): the C0 controls (but a newline and a
# tab, unless the text must stay on one line), DEL, the C1 controls (``\x9b`` is a CSI on
# its own) and Unicode's bidirectional controls.
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNPRINTABLE = re.compile(f"[{_CONTROL}]")
_UNPRINTABLE_LINE = re.compile(f"[{_CONTROL}\t\n]")


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character that acts on a terminal shown as its escape; with
    ``one_line``, newlines and tabs too."""
    pattern = _UNPRINTABLE_LINE if one_line else _UNPRINTABLE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escaped, text)


_SHORT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
