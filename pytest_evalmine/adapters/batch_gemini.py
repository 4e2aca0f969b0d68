"""Gemini batch mode with inline requests (spec: "Batch").

Wire format (Gemini API reference, "Batch Mode"): ``POST
/v1beta/models/{model}:batchGenerateContent {batch: {display_name, input_config: {requests:
{requests: [{request, metadata: {key}}]}}}}`` creates a batch of one model's
``generateContent`` requests and answers with a long-running operation named
``batches/{id}``; ``GET /v1beta/batches/{id}`` reads it: ``metadata.state``
(BATCH_STATE_PENDING, _RUNNING, _SUCCEEDED, _FAILED, _CANCELLED, _EXPIRED), ``done``, and once
done ``response.inlinedResponses.inlinedResponses``: ``{response | error, metadata: {key}}``
per request, in the order of the requests (the key is matched when echoed, else the
position). Inline requests: under 20 MB a batch. ``POST /v1beta/{name}:cancel`` cancels one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from .base import AdapterError, Request
from .batch_wire import (
    BATCH_CANCELED,
    BATCH_ERRORED,
    BATCH_EXPIRED,
    BATCH_FAILED,
    POLL_TIMEOUT_S,
    SUBMIT_TIMEOUT_S,
    AdapterWire,
    BatchStatus,
    ItemResult,
    compact_json,
    json_or_text,
)
from .gemini import KEY_HEADER, GeminiAdapter, gemini_error, parse_response
from .http import api_key_from_env, exchange_bytes, get_json

FIND_PAGES = 5
_ENDED = {
    "SUCCEEDED": None,
    "FAILED": BATCH_FAILED,
    "CANCELLED": BATCH_CANCELED,
    "EXPIRED": BATCH_EXPIRED,
}


class GeminiBatch(AdapterWire[GeminiAdapter]):
    max_requests = 100_000
    max_bytes = 20 * 1000 * 1000

    def group(self, request: Request) -> str:
        """A batch holds one model's requests (the model is in its URL)."""
        return request.model_name.removeprefix("models/")

    def _headers(self) -> dict[str, str]:
        key = api_key_from_env(self.adapter.api_key_env, "google")
        return {KEY_HEADER: key, "content-type": "application/json"}

    def entry(self, custom_id: str, request: Request) -> bytes:
        entry = {"request": self.adapter.body(request), "metadata": {"key": custom_id}}
        return compact_json(entry)

    async def submit(self, entries: list[bytes], label: str, group: str = "") -> str:
        head = json.dumps({"display_name": label})[:-1].encode()
        body = (
            b'{"batch":' + head + b',"input_config":{"requests":{"requests":['
            + b",".join(entries) + b"]}}}}"
        )  # fmt: skip
        url = f"{self.adapter.base_url}/models/{quote(group, safe='')}:batchGenerateContent"
        status, headers, content, text = await exchange_bytes(
            self.adapter._clients.get(), "POST", url, self._headers(), SUBMIT_TIMEOUT_S,
            content=body,
        )  # fmt: skip
        created = json_or_text(content, text)
        if status >= 400:
            raise gemini_error(status, headers, created)
        name = created.get("name") if isinstance(created, dict) else None
        if not isinstance(name, str) or not name.startswith("batches/"):
            raise AdapterError("malformed_response", "batch create: no batch name", retryable=False)
        return name

    async def cancel(self, batch_id: str) -> None:
        """``POST /v1beta/{name}:cancel`` (``name`` is ``batches/{id}``): the operation ends
        ``BATCH_STATE_CANCELLED``."""
        status, headers, content, text = await self._cancel_at(
            f"{self.adapter.base_url}/{batch_id}:cancel", b"{}"
        )
        if status >= 400:
            raise gemini_error(status, headers, json_or_text(content, text))

    async def find(self, label: str) -> str | None:
        """The name of the batch created with display name ``label``, or None (a run killed
        after Gemini accepted a batch and before its name was stored)."""
        token = None
        for _page in range(FIND_PAGES):
            query = f"?pageSize=100&pageToken={token}" if token else "?pageSize=100"
            listing = await get_json(
                self.adapter._clients.get(),
                f"{self.adapter.base_url}/batches{query}",
                POLL_TIMEOUT_S,
                headers=self._headers(),
            )
            operations = listing.get("operations") if isinstance(listing, dict) else None
            for operation in operations if isinstance(operations, list) else []:
                metadata = operation.get("metadata") if isinstance(operation, dict) else None
                if isinstance(metadata, dict) and label in (
                    metadata.get("displayName"),
                    metadata.get("display_name"),
                ):
                    return str(operation["name"])
            token = listing.get("nextPageToken") if isinstance(listing, dict) else None
            if not token:
                return None
        return None

    async def poll(self, batch_id: str) -> BatchStatus:
        data = await get_json(
            self.adapter._clients.get(),
            f"{self.adapter.base_url}/{batch_id}",
            POLL_TIMEOUT_S,
            headers=self._headers(),
        )
        metadata = data.get("metadata") if isinstance(data, dict) else None
        state = metadata.get("state") if isinstance(metadata, dict) else None
        if not isinstance(state, str):
            raise AdapterError("malformed_response", "batch status: no state", retryable=True)
        word = state.removeprefix("BATCH_STATE_").removeprefix("JOB_STATE_")
        ended = word in _ENDED or data.get("done") is True
        response = data.get("response") if isinstance(data.get("response"), dict) else {}
        inlined = (response.get("inlinedResponses") or {}).get("inlinedResponses") or []
        stats = metadata.get("batchStats") if isinstance(metadata.get("batchStats"), dict) else {}
        counts = {k: int(v) for k, v in stats.items() if str(v).isdecimal()}
        failure = None
        if word == "FAILED":
            error = data.get("error") if isinstance(data.get("error"), dict) else {}
            failure = str(error.get("message") or "the batch failed")
        return BatchStatus(
            state=state, ended=ended, counts=counts, failure=failure,
            results={"inlined": inlined, "word": word},
        )  # fmt: skip

    async def results(
        self,
        batch_id: str,
        status: BatchStatus,
        requests: dict[str, Request],
        elapsed_s: float,
        sent_order: Sequence[str] = (),
    ) -> list[ItemResult]:
        if status.failure is not None and not status.results.get("inlined"):
            return [ItemResult(c, error_kind=BATCH_FAILED, error=status.failure) for c in requests]
        results = []
        unreadable = 0
        for position, line in enumerate(status.results.get("inlined") or []):
            key = (line.get("metadata") or {}).get("key") if isinstance(line, dict) else None
            if key is None and isinstance(line, dict) and position < len(sent_order):
                # The reference: inline responses come in the order of the requests; the
                # key we sent in each request's metadata is not always echoed back.
                key = sent_order[position]
            if not isinstance(key, str):
                unreadable += 1
                continue
            results.append(self._item(key, line, requests, elapsed_s))
        if unreadable:
            results.append(ItemResult("", error=f"{unreadable} unreadable response(s)"))
        kind = _ENDED.get(str(status.results.get("word")))
        if kind is not None:
            seen = {r.custom_id for r in results}
            word = str(status.results.get("word")).lower()
            results += [
                ItemResult(c, error_kind=kind, error=f"the batch ended {word}")
                for c in requests
                if c not in seen
            ]
        return results

    def _item(
        self, key: str, line: dict[str, Any], requests: dict[str, Request], elapsed_s: float
    ) -> ItemResult:
        request = requests.get(key)
        if request is None:
            return ItemResult(key, error="a result for a request this batch did not send")
        error = line.get("error")
        if isinstance(error, dict):
            reason = f"{error.get('code', '')}: {error.get('message', '')}".strip(": ")
            return ItemResult(key, error_kind=BATCH_ERRORED, error=reason)
        body = self.adapter.body(request)
        try:
            answer = parse_response(
                line.get("response"),
                latency_s=elapsed_s,
                schema_mode=self.adapter.schema_mode(request),
                estimate_input=(request.system or "") + body["contents"][0]["parts"][0]["text"],
            )
        except AdapterError as exc:
            return ItemResult(key, error_kind="malformed_response", error=str(exc))
        return ItemResult(key, response=answer)
