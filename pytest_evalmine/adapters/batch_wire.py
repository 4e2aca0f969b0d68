"""What every provider batch API has in common (spec: "Batch"), as ``run/batch.py`` uses it.

A wire (``batch_openai``, ``batch_anthropic``, ``batch_gemini``) turns requests into the
provider's batch entries, submits them as one batch, reads the batch's state and, once it
ended, its results: one ``ItemResult`` per request it can attribute. It makes one attempt per
call, as adapters do: the orchestration decides what to do with a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from .base import Adapter, AdapterError, Request, Response

# Per-item failure kinds: the provider's word for why a request of a batch got no answer.
BATCH_ERRORED = "batch_errored"
BATCH_EXPIRED = "batch_expired"
BATCH_CANCELED = "batch_canceled"
BATCH_FAILED = "batch_failed"  # the whole batch was refused (OpenAI's validation failed)
NO_RESULT = "batch_no_result"  # the batch ended without a readable line for the request
# How long one batch call (an upload, a poll, a results file) may take.
SUBMIT_TIMEOUT_S = 300.0
POLL_TIMEOUT_S = 30.0
RESULTS_TIMEOUT_S = 300.0
# The largest results file read: a batch of N requests may send N answers of the response
# cap each, but never more than this.
MAX_RESULTS_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True)
class BatchStatus:
    """One poll of a batch: the provider's state word, whether it ended, and its counts of
    requests by state (the provider's own names)."""

    state: str
    ended: bool
    counts: dict[str, int] = field(default_factory=dict)
    # Why the whole batch failed, when it did (every request gets this reason).
    failure: str | None = None
    # What the results are read from (a file id, a URL), as the poll found it.
    results: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemResult:
    """One request's result: its answer, or why it has none (``error_kind``, ``error``)."""

    custom_id: str
    response: Response | None = None
    error_kind: str | None = None
    error: str | None = None


class BatchWire(Protocol):
    """A provider's batch API. ``max_requests`` and ``max_bytes`` bound one batch."""

    provider: str

    @property
    def max_requests(self) -> int: ...

    @property
    def max_bytes(self) -> int: ...

    def entry(self, custom_id: str, request: Request) -> bytes: ...

    # ``group``: what the requests of one batch share (``group(request)`` when the wire has
    # one: Gemini's model, which is in the URL; "" for a wire whose batches mix models).
    async def submit(self, entries: list[bytes], label: str, group: str = "") -> str: ...

    async def poll(self, batch_id: str) -> BatchStatus: ...

    # Optional: ``async find(label) -> batch id | None``, the batch submitted with ``label``
    # (ours, in the provider's metadata), for a run killed before it stored the batch's id.

    # ``sent_order``: the batch's custom ids in the order they were sent, for a wire whose
    # results are matched by position (Gemini's inline responses need not echo the key).
    async def results(
        self,
        batch_id: str,
        status: BatchStatus,
        requests: dict[str, Request],
        elapsed_s: float,
        sent_order: Sequence[str] = (),
    ) -> list[ItemResult]: ...


A = TypeVar("A", bound=Adapter)


class AdapterWire(Generic[A]):
    """What every wire shares: the adapter whose key, request bodies and answer parser it
    uses, its provider's name, and the bounds of one batch (each wire sets its own)."""

    max_requests: int
    max_bytes: int

    def __init__(self, adapter: A) -> None:
        self.adapter = adapter
        self.provider = adapter.name

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    async def _cancel_at(self, url: str, content: bytes = b"") -> tuple[int, Any, bytes, str]:
        """``POST url`` (a batch's cancel), its status, headers and body as sent back. The
        first request imports the HTTP client: dispatch imports this module for every run."""
        from .http import exchange_bytes

        client = self.adapter._clients.get()  # type: ignore[attr-defined]
        return await exchange_bytes(
            client, "POST", url, self._headers(), POLL_TIMEOUT_S, content=content
        )

    async def _cancel_or_raise(self, url: str) -> None:
        """``_cancel_at``; a refusal (4xx/5xx) raised as the provider's error."""
        from .http import error_from_status, error_message

        status, headers, content, text = await self._cancel_at(url)
        if status >= 400:
            raise error_from_status(status, headers, error_message(json_or_text(content, text)))


def compact_json(value: Any) -> bytes:
    """``value`` as a batch entry's bytes: JSON with no spaces, non-ASCII text as UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def json_or_text(content: bytes, text: str) -> Any:
    """The JSON value of a response body, or its ``text`` when the body is not JSON (an
    error page): what its error message is read from."""
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return text


def jsonl_lines(content: bytes) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSONL body, and how many non-blank lines were unreadable (not
    JSON, not an object): those name no request, so they are counted, not guessed at."""
    parsed, unreadable = [], 0
    for line in content.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            unreadable += 1
            continue
        if isinstance(value, dict) and isinstance(value.get("custom_id", value.get("key")), str):
            parsed.append(value)
        else:
            unreadable += 1
    return parsed, unreadable


def parsed_answer(
    parse: Any, request: Request, body: Any, request_id: str | None, elapsed_s: float
) -> tuple[Response | None, str | None]:
    """``parse(request, body, request_id, latency_s)`` (the adapter's own parser of an
    online answer): the answer, or why the body is not one."""
    try:
        return parse(request, body, request_id, elapsed_s), None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        return None, f"unexpected answer shape in the batch results ({exc!r})"
    except AdapterError as exc:
        return None, str(exc)


def results_limit(requests: int, per_answer: int) -> int:
    return min(MAX_RESULTS_BYTES, max(1, requests) * per_answer + 1024 * 1024)


def split_entries(
    entries: Iterable[tuple[str, bytes]], max_requests: int, max_bytes: int, overhead: int = 0
) -> list[list[tuple[str, bytes]]]:
    """Entries in batches of at most ``max_requests`` and ``max_bytes`` (each entry's bytes
    and a newline or comma, plus ``overhead`` a batch), in order. An entry larger than a batch
    alone goes in a batch of its own (the provider then says why it is refused)."""
    batches: list[list[tuple[str, bytes]]] = []
    current: list[tuple[str, bytes]] = []
    size = overhead
    for custom_id, entry in entries:
        grows = len(entry) + 1
        if current and (len(current) >= max_requests or size + grows > max_bytes):
            batches.append(current)
            current, size = [], overhead
        current.append((custom_id, entry))
        size += grows
    if current:
        batches.append(current)
    return batches
