"""Anthropic's Message Batches API (spec: "Batch").

Wire format (Anthropic API reference, "Message Batches"): ``POST /v1/messages/batches
{requests: [{custom_id, params}]}`` with ``params`` a Messages request; ``GET
/v1/messages/batches/{id}`` reads ``processing_status`` (in_progress, canceling, ended) and
``request_counts`` (processing, succeeded, errored, canceled, expired); once ended, the JSONL
at ``results_url`` holds one line per request, in any order: ``{custom_id, result: {type:
succeeded, message} | {type: errored, error} | {type: canceled} | {type: expired}}``. At most
100,000 requests or 256 MB a batch; a batch expires 24 hours after it was created. ``POST
/v1/messages/batches/{id}/cancel`` cancels one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .anthropic import API_VERSION, AnthropicAdapter
from .base import AdapterError, Request, max_response_bytes
from .batch_wire import (
    BATCH_CANCELED,
    BATCH_ERRORED,
    BATCH_EXPIRED,
    POLL_TIMEOUT_S,
    RESULTS_TIMEOUT_S,
    SUBMIT_TIMEOUT_S,
    AdapterWire,
    BatchStatus,
    ItemResult,
    compact_json,
    json_or_text,
    jsonl_lines,
    parsed_answer,
    results_limit,
)
from .http import _origin as origin  # scheme, host and port: never a query's key
from .http import (
    api_key_from_env,
    error_from_status,
    error_message,
    exchange_bytes,
    get_json,
)

_KINDS = {"errored": BATCH_ERRORED, "canceled": BATCH_CANCELED, "expired": BATCH_EXPIRED}


class AnthropicBatch(AdapterWire[AnthropicAdapter]):
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    def _headers(self) -> dict[str, str]:
        return {
            "x-api-key": api_key_from_env(self.adapter.api_key_env, self.adapter.name),
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
        }

    def entry(self, custom_id: str, request: Request) -> bytes:
        params = self.adapter.build_body(request)
        for block in params.get("system") if isinstance(params.get("system"), list) else ():
            if "cache_control" in block:
                # A batch may take longer than the default 5-minute cache lives, so its
                # requests would each write the prefix again: ask for the 1-hour cache
                # (Anthropic's batch guide; written at 2x input, priced so: prices.yaml).
                block["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
        return compact_json({"custom_id": custom_id, "params": params})

    async def submit(self, entries: list[bytes], label: str, group: str = "") -> str:
        body = b'{"requests":[' + b",".join(entries) + b"]}"
        status, headers, content, text = await exchange_bytes(
            self.adapter._clients.get(),
            "POST",
            f"{self.adapter.base_url}/v1/messages/batches",
            self._headers(),
            SUBMIT_TIMEOUT_S,
            content=body,
        )
        created = json_or_text(content, text)
        if status >= 400:
            raise error_from_status(status, headers, error_message(created))
        batch_id = created.get("id") if isinstance(created, dict) else None
        if not isinstance(batch_id, str):
            raise AdapterError("malformed_response", "batch create: no batch id", retryable=False)
        return batch_id

    async def cancel(self, batch_id: str) -> None:
        """``POST /v1/messages/batches/{id}/cancel``: ``canceling``, then ``ended`` with the
        requests it did not run as ``canceled`` results."""
        await self._cancel_or_raise(
            f"{self.adapter.base_url}/v1/messages/batches/{batch_id}/cancel"
        )

    async def poll(self, batch_id: str) -> BatchStatus:
        data = await get_json(
            self.adapter._clients.get(),
            f"{self.adapter.base_url}/v1/messages/batches/{batch_id}",
            POLL_TIMEOUT_S,
            headers=self._headers(),
        )
        state = data.get("processing_status") if isinstance(data, dict) else None
        if not isinstance(state, str):
            raise AdapterError(
                "malformed_response", "batch status: no processing_status", retryable=True
            )
        counts = data.get("request_counts") if isinstance(data.get("request_counts"), dict) else {}
        return BatchStatus(
            state=state,
            ended=state == "ended",
            counts={k: int(v) for k, v in counts.items() if isinstance(v, int)},
            results={"results_url": data.get("results_url")},
        )

    async def results(
        self,
        batch_id: str,
        status: BatchStatus,
        requests: dict[str, Request],
        elapsed_s: float,
        sent_order: Sequence[str] = (),
    ) -> list[ItemResult]:
        url = status.results.get("results_url")
        if not isinstance(url, str) or not url:
            url = f"{self.adapter.base_url}/v1/messages/batches/{batch_id}/results"
        if origin(url) != origin(self.adapter.base_url):
            # The key goes only to the server the adapter was configured for.
            raise AdapterError(
                "bad_request",
                f"results_url on {origin(url)}, not the configured server: not fetched",
                retryable=False,
            )
        code, headers, content, text = await exchange_bytes(
            self.adapter._clients.get(),
            "GET",
            url,
            self._headers(),
            RESULTS_TIMEOUT_S,
            limit=results_limit(len(requests), max_response_bytes()),
        )
        if code >= 400:
            raise error_from_status(code, headers, error_message(text))
        lines, unreadable = jsonl_lines(content)
        results = [self._item(line, requests, elapsed_s) for line in lines]
        if unreadable:
            results.append(ItemResult("", error=f"{unreadable} unreadable line(s)"))
        return results

    def _item(self, line: dict[str, Any], requests: dict[str, Request], elapsed_s: float) -> Any:
        custom_id = line["custom_id"]
        request = requests.get(custom_id)
        result = line.get("result")
        if request is None:
            return ItemResult(custom_id, error="a result for a request this batch did not send")
        kind = result.get("type") if isinstance(result, dict) else None
        if kind == "succeeded":
            message = result.get("message")
            request_id = message.get("id") if isinstance(message, dict) else None
            answer, problem = parsed_answer(
                self.adapter._response, request, message, request_id, elapsed_s
            )
            if answer is None:
                return ItemResult(custom_id, error_kind="malformed_response", error=problem)
            return ItemResult(custom_id, response=answer)
        if kind in _KINDS:
            reason = str(kind)
            error = result.get("error") if isinstance(result, dict) else None
            if isinstance(error, dict):
                inner = error.get("error") if isinstance(error.get("error"), dict) else error
                reason = f"{inner.get('type', kind)}: {inner.get('message', '')}".strip(": ")
            return ItemResult(custom_id, error_kind=_KINDS[kind], error=reason)
        return ItemResult(custom_id, error_kind=BATCH_ERRORED, error=f"result type {kind!r}")
