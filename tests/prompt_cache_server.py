"""A loopback provider with a prompt cache (issue 23): it answers verdict requests in
Anthropic's, OpenAI's or Gemini's wire shape and reports cached input the way that provider
does, so the judge's cached prefix, its cost at the cache rates and the report's cache hits
are tested (and benchmarked) over real sockets.

What each simulated cache does, after the providers' documentation as kept in
/work/shared/reference/prices.md ("Usage fields per provider"):

- ``anthropic``: only a prefix marked with ``cache_control`` is cached (here: the system
  blocks up to the last marked one), and only from ``min_tokens`` on. The first request with a
  prefix writes it (``cache_creation_input_tokens``), later ones read it
  (``cache_read_input_tokens``); ``input_tokens`` counts only the rest.
- ``openai``: no marker; the longest prefix seen before, in blocks of 128 tokens from
  ``min_tokens`` on, is read (``prompt_tokens_details.cached_tokens``, counted inside
  ``prompt_tokens``). No writes are reported (models before GPT-5.6 bill none).
- ``gemini``: implicit caching, the same prefix rule; ``usageMetadata.cachedContentTokenCount``
  is counted inside ``promptTokenCount``.

Tokens are four characters, as the estimate counts them. Requests are taken one at a time
under a lock, so the first request with a prefix is the one that writes it: a real provider
may miss on requests sent together (the cache is there only once the first answer has begun),
which can only lower the hits, never raise them. ``enabled=False`` is the same server with no
cache: what the judge paid before its prefix was cached.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .http_server import LoopbackServer, Received, Reply, running_server

TOKEN_CHARS = 4
# The smallest prefix every one of the three caches takes (Anthropic's Sonnet and Opus, OpenAI,
# Gemini 2.5 Flash); some models need more (Anthropic's Haiku 2,048).
MIN_PREFIX_TOKENS = 1024
OPENAI_BLOCK_TOKENS = 128
OUTPUT = '{"winner": "%s", "reason": "The answer in slot %s is more complete."}'
SHAPES = ("anthropic", "openai", "gemini")


def tokens(text: str) -> int:
    return -(-len(text) // TOKEN_CHARS)


@dataclass
class PromptCacheServer:
    """The provider's side: what it cached, and the usage it reported for every request."""

    shape: str
    server: LoopbackServer
    enabled: bool = True
    min_tokens: int = MIN_PREFIX_TOKENS
    # (input, cached read, cache write, output) tokens as reported, one tuple per request.
    reported: list[tuple[int, int, int, int]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return self.server.url

    def respond(self, received: Received) -> Reply:
        body = received.body
        if received.method == "GET":
            # An OpenAI-compatible server's model listing (the adapter reads it once).
            return Reply.json(200, {"object": "list", "data": [{"id": "judge", "object": "model"}]})
        with self._lock:
            if self.shape == "anthropic":
                return self._anthropic(body)
            if self.shape == "openai":
                return self._openai(body)
            return self._gemini(body)

    # --- the caches ---------------------------------------------------------------------

    def _marked_prefix(self, text: str) -> tuple[int, int]:
        """(read, written) tokens of a prefix marked for the cache."""
        size = tokens(text)
        if not self.enabled or size < self.min_tokens:
            return 0, 0
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in self._seen:
            return size, 0
        self._seen.add(digest)
        return 0, size

    def _longest_prefix(self, text: str) -> int:
        """Tokens of the longest prefix seen before, in whole blocks; the prompt's blocks are
        remembered for the next request."""
        if not self.enabled:
            return 0
        block = OPENAI_BLOCK_TOKENS * TOKEN_CHARS
        ends = range(self.min_tokens * TOKEN_CHARS, len(text) + 1, block)
        digests = [hashlib.sha256(text[:end].encode()).hexdigest() for end in ends]
        hit = 0
        for end, digest in zip(ends, digests, strict=True):
            if digest in self._seen:
                hit = end // TOKEN_CHARS
        self._seen.update(digests)
        return hit

    # --- the wire shapes ----------------------------------------------------------------

    def _anthropic(self, body: dict[str, Any]) -> Reply:
        system = body.get("system") or ""
        blocks = [{"text": system}] if isinstance(system, str) else system
        marked = [i for i, b in enumerate(blocks) if b.get("cache_control")]
        prefix = "".join(b["text"] for b in blocks[: marked[-1] + 1]) if marked else ""
        read, written = self._marked_prefix(prefix) if marked else (0, 0)
        rest = "".join(b["text"] for b in blocks) + "".join(m["content"] for m in body["messages"])
        uncached = tokens(rest) - read - written
        text = _verdict(rest)
        self.reported.append((uncached, read, written, tokens(text)))
        return Reply.json(
            200,
            {
                "id": f"msg_{len(self.reported)}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {
                    "input_tokens": uncached,
                    "output_tokens": tokens(text),
                    "cache_creation_input_tokens": written,
                    "cache_read_input_tokens": read,
                },
            },
        )

    def _openai(self, body: dict[str, Any]) -> Reply:
        prompt = "".join(m["content"] for m in body["messages"])
        read = self._longest_prefix(prompt)
        text = _verdict(prompt)
        self.reported.append((tokens(prompt) - read, read, 0, tokens(text)))
        return Reply.json(
            200,
            {
                "id": f"chatcmpl-{len(self.reported)}",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": tokens(prompt),
                    "completion_tokens": tokens(text),
                    "total_tokens": tokens(prompt) + tokens(text),
                    "prompt_tokens_details": {"cached_tokens": read},
                },
            },
        )

    def _gemini(self, body: dict[str, Any]) -> Reply:
        parts = [*body.get("systemInstruction", {}).get("parts", [])]
        for content in body["contents"]:
            parts += content["parts"]
        prompt = "".join(p.get("text", "") for p in parts)
        read = self._longest_prefix(prompt)
        text = _verdict(prompt)
        self.reported.append((tokens(prompt) - read, read, 0, tokens(text)))
        metadata = {
            "promptTokenCount": tokens(prompt),
            "candidatesTokenCount": tokens(text),
            "totalTokenCount": tokens(prompt) + tokens(text),
        }
        if read:
            metadata["cachedContentTokenCount"] = read
        return Reply.json(
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": metadata,
                "modelVersion": "loopback",
                "responseId": f"r{len(self.reported)}",
            },
        )


def _verdict(prompt: str) -> str:
    """A verdict that follows from the request alone (so a rerun gets the same one)."""
    slot = "12"[hashlib.sha256(prompt.encode()).digest()[0] % 2]
    return OUTPUT % (slot, slot)


@contextmanager
def prompt_cache_server(
    shape: str, *, enabled: bool = True, min_tokens: int = MIN_PREFIX_TOKENS
) -> Iterator[PromptCacheServer]:
    assert shape in SHAPES, shape
    with running_server() as server:
        cache = PromptCacheServer(shape, server, enabled=enabled, min_tokens=min_tokens)
        server.respond = cache.respond
        yield cache


def reported_cost(cache: PromptCacheServer, rates: tuple[float, float, float, float]) -> float:
    """What the provider bills for every request it answered, at (input, output, cache read,
    cache write) USD per million tokens."""
    input_rate, output_rate, read_rate, write_rate = rates
    return (
        sum(
            uncached * input_rate + output * output_rate + read * read_rate + write * write_rate
            for uncached, read, write, output in cache.reported
        )
        / 1e6
    )
