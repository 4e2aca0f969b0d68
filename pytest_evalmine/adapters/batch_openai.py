"""OpenAI's Batch API for Chat Completions (spec: "Batch").

Wire format (OpenAI API reference, "Batch" and "Files"): the requests are uploaded as a
JSONL file of ``{custom_id, method: "POST", url: "/v1/chat/completions", body}`` with
``POST /v1/files`` (multipart, ``purpose=batch``); ``POST /v1/batches {input_file_id,
endpoint, completion_window: "24h"}`` creates the batch; ``GET /v1/batches/{id}`` reads its
``status`` (validating, in_progress, finalizing, completed, failed, expired, cancelling,
cancelled) and ``request_counts``; the answers are lines of ``output_file_id`` and the
failures lines of ``error_file_id``, both read with ``GET /v1/files/{id}/content``, in any
order: ``{custom_id, response: {status_code, request_id, body}, error}``. At most 50,000
requests and 200 MB a batch. Once its results are stored, the batch's input, output and
error files are deleted (``DELETE /v1/files/{id}``); ``POST /v1/batches/{id}/cancel``
cancels one.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from .base import AdapterError, Request, max_response_bytes
from .batch_wire import (
    BATCH_CANCELED,
    BATCH_ERRORED,
    BATCH_EXPIRED,
    BATCH_FAILED,
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
from .http import error_from_status, error_message, exchange_bytes, get_json, post_json
from .openai import OpenAIAdapter

ENDPOINT = "/v1/chat/completions"
# Pages of 100 batches ``find`` reads before it says the batch is not there.
FIND_PAGES = 5
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
# Error codes of the error file's lines that say why a request was not run.
_CODES = {"batch_expired": BATCH_EXPIRED, "batch_cancelled": BATCH_CANCELED}


class OpenAIBatch(AdapterWire[OpenAIAdapter]):
    """The Batch API of the server ``adapter`` talks to (OpenAI, or a compatible server
    that has ``/v1/batches``), with the adapter's key, request bodies and answer parser."""

    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def _headers(self, content_type: str | None = "application/json") -> dict[str, str]:
        key = self.adapter._api_key()
        headers = {"content-type": content_type} if content_type else {}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        return headers

    def entry(self, custom_id: str, request: Request) -> bytes:
        line = {
            "custom_id": custom_id,
            "method": "POST",
            "url": ENDPOINT,
            "body": self.adapter.build_body(request),
        }
        return compact_json(line)

    async def submit(self, entries: list[bytes], label: str, group: str = "") -> str:
        client = self.adapter._clients.get()
        boundary = f"evalmine-{uuid.uuid4().hex}"
        body = b"".join(
            [
                f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n'
                "batch\r\n".encode(),
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                f'filename="{label}.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n'.encode(),
                b"\n".join(entries) + b"\n",
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        status, headers, content, text = await exchange_bytes(
            client,
            "POST",
            f"{self.adapter.base_url}/files",
            self._headers(f"multipart/form-data; boundary={boundary}"),
            SUBMIT_TIMEOUT_S,
            content=body,
        )
        uploaded = _json_or_error(status, headers, content, text, "file upload")
        file_id = uploaded.get("id") if isinstance(uploaded, dict) else None
        if not isinstance(file_id, str):
            raise AdapterError("malformed_response", "file upload: no file id", retryable=False)
        status, headers, created, _ = await post_json(
            client,
            f"{self.adapter.base_url}/batches",
            self._headers(),
            {
                "input_file_id": file_id,
                "endpoint": ENDPOINT,
                "completion_window": "24h",
                "metadata": {"evalmine_batch": label},
            },
            SUBMIT_TIMEOUT_S,
        )
        if status >= 400:
            raise error_from_status(status, headers, error_message(created))
        batch_id = created.get("id") if isinstance(created, dict) else None
        if not isinstance(batch_id, str):
            raise AdapterError("malformed_response", "batch create: no batch id", retryable=False)
        return batch_id

    async def find(self, label: str) -> str | None:
        """The id of the batch created with ``label`` in its metadata, or None: for a run
        killed after OpenAI accepted a batch and before its id was stored. Reads the newest
        batches, a few pages of them."""
        after = None
        for _page in range(FIND_PAGES):
            query = f"?limit=100&after={after}" if after else "?limit=100"
            listing = await get_json(
                self.adapter._clients.get(),
                f"{self.adapter.base_url}/batches{query}",
                POLL_TIMEOUT_S,
                headers=self._headers(None),
            )
            data = listing.get("data") if isinstance(listing, dict) else None
            if not isinstance(data, list) or not data:
                return None
            for batch in data:
                metadata = batch.get("metadata") if isinstance(batch, dict) else None
                if isinstance(metadata, dict) and metadata.get("evalmine_batch") == label:
                    return str(batch["id"])
            if not listing.get("has_more"):
                return None
            after = data[-1].get("id")
        return None

    async def poll(self, batch_id: str) -> BatchStatus:
        data = await get_json(
            self.adapter._clients.get(),
            f"{self.adapter.base_url}/batches/{batch_id}",
            POLL_TIMEOUT_S,
            headers=self._headers(None),
        )
        if not isinstance(data, dict) or not isinstance(data.get("status"), str):
            raise AdapterError("malformed_response", "batch status: no status", retryable=True)
        state = data["status"]
        counts = data.get("request_counts") if isinstance(data.get("request_counts"), dict) else {}
        failure = None
        if state == "failed":
            errors = (data.get("errors") or {}).get("data") or []
            reasons = [e.get("message", "") for e in errors if isinstance(e, dict)]
            failure = "; ".join(r for r in reasons if r) or "the batch failed validation"
        return BatchStatus(
            state=state,
            ended=state in ENDED,
            counts={k: int(v) for k, v in counts.items() if isinstance(v, int)},
            failure=failure,
            results={
                "input_file_id": data.get("input_file_id"),
                "output_file_id": data.get("output_file_id"),
                "error_file_id": data.get("error_file_id"),
            },
        )

    async def cancel(self, batch_id: str) -> None:
        """``POST /v1/batches/{id}/cancel``: the batch is ``cancelling`` (up to 10 minutes),
        then ``cancelled``, with the results of what ran in its output file."""
        await self._cancel_or_raise(f"{self.adapter.base_url}/batches/{batch_id}/cancel")

    async def cleanup(self, batch_id: str, status: BatchStatus) -> list[str]:
        """Delete the files an ended batch leaves on the account (its input, output and
        error files, ``DELETE /v1/files/{id}``) once its results are stored: they would
        otherwise stay, holding the prompts and answers, until someone deletes them. A
        delete that fails is a warning (returned), never an error: the answers are stored."""
        warnings = []
        for name in ("input_file_id", "output_file_id", "error_file_id"):
            file_id = status.results.get(name)
            if not isinstance(file_id, str):
                continue
            try:
                code, headers, content, text = await exchange_bytes(
                    self.adapter._clients.get(),
                    "DELETE",
                    f"{self.adapter.base_url}/files/{file_id}",
                    self._headers(None),
                    POLL_TIMEOUT_S,
                )
                if code >= 400:
                    raise error_from_status(
                        code, headers, error_message(json_or_text(content, text))
                    )
            except AdapterError as exc:
                warnings.append(
                    f"batch {batch_id}: could not delete its {name.removesuffix('_id')} "
                    f"{file_id} ({exc.kind}: {exc}); delete it by hand"
                )
        return warnings

    async def results(
        self,
        batch_id: str,
        status: BatchStatus,
        requests: dict[str, Request],
        elapsed_s: float,
        sent_order: Sequence[str] = (),
    ) -> list[ItemResult]:
        if status.failure is not None:
            return [
                ItemResult(custom_id, error_kind=BATCH_FAILED, error=status.failure)
                for custom_id in requests
            ]
        results: list[ItemResult] = []
        for name in ("output_file_id", "error_file_id"):
            file_id = status.results.get(name)
            if not isinstance(file_id, str):
                continue
            lines, unreadable = await self._lines(file_id, len(requests))
            results += [self._item(line, requests, elapsed_s) for line in lines]
            if unreadable:
                results.append(ItemResult("", error=f"{unreadable} unreadable line(s)"))
        # Requests the files do not mention: what the batch's end says of them.
        kind = {"expired": BATCH_EXPIRED, "cancelled": BATCH_CANCELED}.get(status.state)
        if kind is not None:
            seen = {r.custom_id for r in results}
            results += [
                ItemResult(c, error_kind=kind, error=f"the batch was {status.state}")
                for c in requests
                if c not in seen
            ]
        return results

    async def _lines(self, file_id: str, requests: int) -> tuple[list[dict[str, Any]], int]:
        status, headers, content, text = await exchange_bytes(
            self.adapter._clients.get(),
            "GET",
            f"{self.adapter.base_url}/files/{file_id}/content",
            self._headers(None),
            RESULTS_TIMEOUT_S,
            limit=results_limit(requests, max_response_bytes()),
        )
        if status >= 400:
            raise error_from_status(status, headers, error_message(text))
        return jsonl_lines(content)

    def _item(self, line: dict[str, Any], requests: dict[str, Request], elapsed_s: float) -> Any:
        custom_id = line["custom_id"]
        request = requests.get(custom_id)
        if request is None:
            return ItemResult(custom_id, error="a result for a request this batch did not send")
        error = line.get("error")
        response = line.get("response")
        if isinstance(error, dict):
            code = str(error.get("code") or "")
            reason = f"{code}: {error.get('message', '')}".strip(": ")
            return ItemResult(custom_id, error_kind=_CODES.get(code, BATCH_ERRORED), error=reason)
        if not isinstance(response, dict):
            return ItemResult(custom_id, error_kind=BATCH_ERRORED, error="no response in line")
        body = response.get("body")
        code = response.get("status_code")
        if code != 200:
            reason = f"HTTP {code}: {error_message(body)}"
            return ItemResult(custom_id, error_kind=BATCH_ERRORED, error=reason)
        answer, problem = parsed_answer(
            self.adapter._response, request, body, response.get("request_id"), elapsed_s
        )
        if answer is None:
            return ItemResult(custom_id, error_kind="malformed_response", error=problem)
        return ItemResult(custom_id, response=answer)


def _json_or_error(status: int, headers: Any, content: bytes, text: str, what: str) -> Any:
    parsed = json_or_text(content, text)
    if status >= 400:
        raise error_from_status(status, headers, f"{what}: {error_message(parsed)}")
    if not isinstance(parsed, dict):
        raise AdapterError("malformed_response", f"{what}: not a JSON object", retryable=False)
    return parsed
