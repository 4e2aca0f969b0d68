"""A loopback provider that speaks the batch wire formats (OpenAI files + batches, Anthropic
message batches, Gemini batchGenerateContent with inline requests) and the online calls of
OpenAI and Anthropic, for the batch tests and benchmarks/bench_batch.py.

Its state lives in ``BatchProvider``, apart from the HTTP server, so a test can stop the
server and start another on the same port with the same batches (a server restart). It
counts what a client would pay for: batches created, requests batched, online calls.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.http_server import LoopbackServer, Received, Reply

INPUT_TOKENS, OUTPUT_TOKENS = 10, 5


@dataclass
class Batch:
    id: str
    wire: str  # openai | anthropic | gemini
    requests: list[tuple[str, Any]]  # (custom id, request body)
    created: float
    polls: int = 0
    canceled: bool = False
    # What the client named it (OpenAI's metadata, Gemini's display name).
    label: str = ""
    input_file: str | None = None
    output_file: str | None = None
    error_file: str | None = None
    # The results, fixed the first time the batch is seen ended (a re-read is identical).
    gemini_results: list[dict[str, Any]] | None = None


@dataclass
class BatchProvider:
    """The provider's state and its knobs."""

    # Polls of a batch before it is seen ended (-1: never ends until ``finish_all``).
    polls_to_end: int = 2
    # custom id (or a predicate over it) -> "errored" | "expired" | "canceled"
    failures: dict[str, str] = field(default_factory=dict)
    fail_when: Callable[[str], str | None] | None = None
    out_of_order: bool = True
    # Gemini's inline responses echo each request's metadata (else: none, in request order).
    gemini_echoes_keys: bool = True
    malformed_line: bool = False
    # Cancel every batch: half answered, the rest canceled.
    cancel: bool = False
    # A batch canceled by its client (``.../cancel``) has run half of its requests (False:
    # none, as one canceled before it started).
    canceled_runs_half: bool = True
    # Expire every batch: half answered, the rest expired.
    expire: bool = False
    # A poll answered 500 once every N polls (0: never).
    flaky_polls: int = 0
    # A compatible server without /v1/files and /v1/batches (404), answering online only.
    no_batch_api: bool = False
    # OpenAI's DELETE /v1/files/{id} answers this status (200: deleted).
    delete_status: int = 200
    batches: dict[str, Batch] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    deleted_files: list[str] = field(default_factory=list)
    cancels: int = 0
    batches_created: int = 0
    requests_batched: int = 0
    online_calls: int = 0
    polls: int = 0
    results_read: int = 0
    ended_all: bool = False
    seed: int = 7
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: int = 0

    # answers ---------------------------------------------------------------------------
    @staticmethod
    def answer_text(prompt: str) -> str:
        return f"answer: {prompt[:40]}"

    def _failure(self, custom_id: str) -> str | None:
        if custom_id in self.failures:
            return self.failures[custom_id]
        return self.fail_when(custom_id) if self.fail_when else None

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids:05d}"

    def finish_all(self) -> None:
        self.ended_all = True

    def _ended(self, batch: Batch) -> bool:
        if batch.canceled or self.ended_all:
            return True
        return self.polls_to_end >= 0 and batch.polls > self.polls_to_end

    def _split(self, batch: Batch) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]], str]:
        """(answered, not run, why not) for a batch's end."""
        if self.cancel or batch.canceled or self.expire:
            half = len(batch.requests) // 2
            if batch.canceled and not (self.cancel or self.canceled_runs_half):
                half = 0
            why = "expired" if self.expire else "canceled"
            return batch.requests[:half], batch.requests[half:], why
        return batch.requests, [], ""

    def _shuffled(self, lines: list[bytes]) -> list[bytes]:
        if self.out_of_order:
            random.Random(self.seed).shuffle(lines)
        if self.malformed_line:
            lines.insert(len(lines) // 2, b'{"custom_id": "x", "result": ')
        return lines

    # routing ----------------------------------------------------------------------------
    def respond(self, received: Received) -> Reply:
        with self._lock:
            path = received.path.split("?", 1)[0]
            method = received.method
            if path.startswith("/v1/") and not path.startswith("/v1/messages"):
                return self._openai(method, path.removeprefix("/v1"), received)
            if path.startswith("/v1/messages"):
                return self._anthropic(method, path, received)
            if path.startswith("/v1beta/"):
                return self._gemini(method, path.removeprefix("/v1beta"), received)
            return Reply.json(404, {"error": {"message": f"no route {path}"}})

    def _poll(
        self, batch_id: str, not_found: dict[str, Any], shown: Callable[[Batch], dict[str, Any]]
    ) -> Reply:
        """A poll of one batch in any wire: counted (every ``flaky_polls``-th answered 500),
        ``not_found`` (the wire's error body) with 404 for an unknown id, else the batch as
        ``shown`` after counting the poll against it."""
        self.polls += 1
        if self.flaky_polls and self.polls % self.flaky_polls == 0:
            return Reply.json(500, {"error": {"message": "internal error, try again"}})
        batch = self.batches.get(batch_id)
        if batch is None:
            return Reply.json(404, not_found)
        batch.polls += 1
        return Reply.json(200, shown(batch))

    def _cancel(
        self, batch_id: str, not_found: dict[str, Any], shown: Callable[[Batch], dict[str, Any]]
    ) -> Reply:
        """A client's cancel, in any wire: the batch ends canceled (``canceled_runs_half``
        says what it ran); 404 with the wire's body for an unknown id."""
        batch = self.batches.get(batch_id)
        if batch is None:
            return Reply.json(404, not_found)
        batch.canceled = True
        self.cancels += 1
        return Reply.json(200, shown(batch))

    # OpenAI --------------------------------------------------------------------------------
    def _openai(self, method: str, path: str, received: Received) -> Reply:
        if method == "POST" and path == "/chat/completions":
            self.online_calls += 1
            return Reply.json(200, self._chat(received.body))
        if self.no_batch_api and (path == "/files" or path.startswith("/batches")):
            return Reply.json(404, {"error": {"message": f"no route {path}"}})
        if method == "POST" and path == "/files":
            content = _multipart_file(received)
            file_id = self._new_id("file-")
            self.files[file_id] = content
            return Reply.json(200, {"id": file_id, "object": "file", "purpose": "batch"})
        if method == "POST" and path == "/batches":
            content = self.files.get(received.body["input_file_id"])
            if content is None:
                return Reply.json(404, {"error": {"message": "no such file"}})
            lines = [json.loads(line) for line in content.splitlines() if line.strip()]
            batch = Batch(
                self._new_id("batch_"),
                "openai",
                [(line["custom_id"], line["body"]) for line in lines],
                time.time(),
                label=(received.body.get("metadata") or {}).get("evalmine_batch", ""),
                input_file=received.body["input_file_id"],
            )
            return self._created(batch, self._openai_batch(batch))
        if method == "GET" and path == "/batches":
            # Newest first, one page (the tests hold a few batches).
            shown = [
                self._openai_batch(b) for b in reversed(self.batches.values()) if b.wire == "openai"
            ]
            return Reply.json(200, {"object": "list", "data": shown, "has_more": False})
        if method == "POST" and path.startswith("/batches/") and path.endswith("/cancel"):
            return self._cancel(
                path.removeprefix("/batches/").removesuffix("/cancel"),
                {"error": {"message": "no such batch"}},
                self._openai_batch,
            )
        if method == "GET" and path.startswith("/batches/"):
            return self._poll(
                path.removeprefix("/batches/"),
                {"error": {"message": "no such batch"}},
                self._openai_batch,
            )
        if method == "DELETE" and path.startswith("/files/"):
            file_id = path.removeprefix("/files/")
            if self.delete_status != 200:
                return Reply.json(self.delete_status, {"error": {"message": "cannot delete"}})
            if self.files.pop(file_id, None) is None:
                return Reply.json(404, {"error": {"message": "no such file"}})
            self.deleted_files.append(file_id)
            return Reply.json(200, {"id": file_id, "object": "file", "deleted": True})
        if method == "GET" and path.startswith("/files/") and path.endswith("/content"):
            file_id = path.removeprefix("/files/").removesuffix("/content")
            if file_id not in self.files:
                return Reply.json(404, {"error": {"message": "no such file"}})
            self.results_read += 1
            return Reply(status=200, body=self.files[file_id])
        return Reply.json(404, {"error": {"message": f"no route {path}"}})

    def _created(self, batch: Batch, shown: dict[str, Any]) -> Reply:
        self.batches[batch.id] = batch
        self.batches_created += 1
        self.requests_batched += len(batch.requests)
        return Reply.json(200, shown)

    def _chat(self, body: Any) -> dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        return {
            "id": "chatcmpl-1",
            "choices": [
                {
                    "message": {"role": "assistant", "content": self.answer_text(prompt)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS},
        }

    def _openai_batch(self, batch: Batch) -> dict[str, Any]:
        ended = self._ended(batch)
        answered, not_run, why = self._split(batch)
        status = "in_progress" if batch.polls else "validating"
        if ended:
            status = {"canceled": "cancelled", "expired": "expired"}.get(why, "completed")
            if batch.output_file is None:
                self._openai_files(batch, answered, not_run, why)
        done = len(answered) if ended else 0
        failed = sum(1 for c, _ in batch.requests if self._failure(c)) if ended else 0
        return {
            "id": batch.id,
            "object": "batch",
            "metadata": {"evalmine_batch": batch.label},
            "endpoint": "/v1/chat/completions",
            "status": status,
            "input_file_id": batch.input_file,
            "output_file_id": batch.output_file,
            "error_file_id": batch.error_file,
            "request_counts": {
                "total": len(batch.requests),
                "completed": done - failed,
                "failed": failed,
            },
        }

    def _openai_files(
        self, batch: Batch, answered: list[tuple[str, Any]], not_run: list[Any], why: str
    ) -> None:
        out, errors = [], []
        for custom_id, body in answered:
            failure = self._failure(custom_id)
            if failure == "errored":
                line = {
                    "id": f"req-{custom_id[:8]}",
                    "custom_id": custom_id,
                    "response": {
                        "status_code": 400,
                        "request_id": "r1",
                        "body": {"error": {"message": "Invalid 'max_completion_tokens'"}},
                    },
                    "error": None,
                }
                errors.append(json.dumps(line).encode())
            elif failure in ("expired", "canceled"):
                code = "batch_expired" if failure == "expired" else "batch_cancelled"
                errors.append(_openai_error_line(custom_id, code))
            else:
                line = {
                    "id": f"req-{custom_id[:8]}",
                    "custom_id": custom_id,
                    "response": {"status_code": 200, "request_id": "r1", "body": self._chat(body)},
                    "error": None,
                }
                out.append(json.dumps(line).encode())
        # An expired batch lists the requests it did not run in its error file; a
        # cancelled one leaves them out of both files.
        if why == "expired":
            errors += [_openai_error_line(c, "batch_expired") for c, _ in not_run]
        batch.output_file = self._new_id("file-out-")
        self.files[batch.output_file] = b"\n".join(self._shuffled(out)) + b"\n"
        if errors:
            batch.error_file = self._new_id("file-err-")
            self.files[batch.error_file] = b"\n".join(errors) + b"\n"

    # Anthropic -----------------------------------------------------------------------------
    def _anthropic(self, method: str, path: str, received: Received) -> Reply:
        if method == "POST" and path == "/v1/messages":
            self.online_calls += 1
            return Reply.json(200, self._message(received.body))
        if method == "POST" and path == "/v1/messages/batches":
            requests = [(r["custom_id"], r["params"]) for r in received.body["requests"]]
            batch = Batch(self._new_id("msgbatch_"), "anthropic", requests, time.time())
            return self._created(batch, self._anthropic_batch(batch, received))
        rest = path.removeprefix("/v1/messages/batches/")
        if method == "POST" and rest.endswith("/cancel"):
            return self._cancel(
                rest.removesuffix("/cancel"),
                {"error": {"type": "not_found_error", "message": "?"}},
                lambda batch: self._anthropic_batch(batch, received),
            )
        if method == "GET" and rest.endswith("/results"):
            batch = self.batches.get(rest.removesuffix("/results"))
            if batch is None or not self._ended(batch):
                return Reply.json(404, {"error": {"message": "no results yet"}})
            self.results_read += 1
            return Reply(status=200, body=self._anthropic_results(batch))
        if method == "GET" and rest:
            return self._poll(
                rest,
                {"error": {"type": "not_found_error", "message": "?"}},
                lambda batch: self._anthropic_batch(batch, received),
            )
        return Reply.json(404, {"error": {"message": f"no route {path}"}})

    def _message(self, params: Any) -> dict[str, Any]:
        prompt = params["messages"][-1]["content"]
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": self.answer_text(prompt)}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
        }

    def _anthropic_batch(self, batch: Batch, received: Received) -> dict[str, Any]:
        ended = self._ended(batch)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for kind in self._anthropic_kinds(batch).values():
                counts[kind] += 1
        else:
            counts["processing"] = len(batch.requests)
        host = received.headers.get("host", "127.0.0.1")
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "results_url": f"http://{host}/v1/messages/batches/{batch.id}/results"
            if ended
            else None,
        }

    def _anthropic_kinds(self, batch: Batch) -> dict[str, str]:
        answered, not_run, why = self._split(batch)
        kinds = {c: self._failure(c) or "succeeded" for c, _ in answered}
        kinds.update({c: why for c, _ in not_run})
        return kinds

    def _anthropic_results(self, batch: Batch) -> bytes:
        kinds = self._anthropic_kinds(batch)
        lines = []
        for custom_id, params in batch.requests:
            kind = kinds[custom_id]
            result: dict[str, Any] = {"type": kind}
            if kind == "succeeded":
                result["message"] = self._message(params)
            elif kind == "errored":
                result["error"] = {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "max_tokens: too big"},
                }
            lines.append(json.dumps({"custom_id": custom_id, "result": result}).encode())
        return b"\n".join(self._shuffled(lines)) + b"\n"

    # Gemini --------------------------------------------------------------------------------
    def _gemini(self, method: str, path: str, received: Received) -> Reply:
        if method == "POST" and path.endswith(":generateContent"):
            self.online_calls += 1
            text = received.body["contents"][-1]["parts"][0]["text"]
            return Reply.json(200, self._gemini_answer(text))
        if method == "POST" and path.endswith(":batchGenerateContent"):
            inline = received.body["batch"]["input_config"]["requests"]["requests"]
            requests = [(r["metadata"]["key"], r["request"]) for r in inline]
            label = received.body["batch"].get("display_name", "")
            batch = Batch(self._new_id("batches/"), "gemini", requests, time.time(), label=label)
            return self._created(batch, self._gemini_batch(batch))
        if method == "POST" and path.startswith("/batches/") and path.endswith(":cancel"):
            return self._cancel(
                path.removeprefix("/").removesuffix(":cancel"),
                {"error": {"code": 404, "message": "not found"}},
                self._gemini_batch,
            )
        if method == "GET" and path == "/batches":
            shown = [self._gemini_batch(b) for b in self.batches.values() if b.wire == "gemini"]
            return Reply.json(200, {"operations": shown})
        if method == "GET" and path.startswith("/batches/"):
            return self._poll(
                path.removeprefix("/"),
                {"error": {"code": 404, "message": "not found"}},
                self._gemini_batch,
            )
        return Reply.json(404, {"error": {"message": f"no route {path}"}})

    def _gemini_batch(self, batch: Batch) -> dict[str, Any]:
        ended = self._ended(batch)
        answered, _not_run, why = self._split(batch)
        state = "BATCH_STATE_RUNNING" if batch.polls else "BATCH_STATE_PENDING"
        shown: dict[str, Any] = {"name": batch.id, "done": ended}
        if ended:
            state = {"canceled": "BATCH_STATE_CANCELLED", "expired": "BATCH_STATE_EXPIRED"}.get(
                why, "BATCH_STATE_SUCCEEDED"
            )
            if batch.gemini_results is None:
                results = []
                for key, request in answered:
                    if self._failure(key) == "errored":
                        results.append(
                            {
                                "error": {"code": 400, "message": "Invalid argument"},
                                "metadata": {"key": key},
                            }
                        )
                        continue
                    text = request["contents"][-1]["parts"][0]["text"]
                    results.append(
                        {"response": self._gemini_answer(text), "metadata": {"key": key}}
                    )
                if not self.gemini_echoes_keys:
                    for result in results:
                        result.pop("metadata")
                elif self.out_of_order:
                    random.Random(self.seed).shuffle(results)
                batch.gemini_results = results
            self.results_read += 1
            shown["response"] = {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main."
                "GenerateContentBatchOutput",
                "inlinedResponses": {"inlinedResponses": batch.gemini_results},
            }
        # JSON of a proto3 message: a count of zero is left out.
        stats = {"requestCount": str(len(batch.requests))}
        if ended and answered:
            stats["successfulRequestCount"] = str(len(answered))
        shown["metadata"] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "state": state,
            "displayName": batch.label,
            "batchStats": stats,
        }
        return shown

    def _gemini_answer(self, prompt: str) -> dict[str, Any]:
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": self.answer_text(prompt)}]},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": INPUT_TOKENS,
                "candidatesTokenCount": OUTPUT_TOKENS,
            },
        }


def _openai_error_line(custom_id: str, code: str) -> bytes:
    message = {
        "batch_expired": "This request could not be executed before the completion window expired.",
        "batch_cancelled": "This request was cancelled.",
    }[code]
    line = {
        "id": None,
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }
    return json.dumps(line).encode()


def _multipart_file(received: Received) -> bytes:
    """The ``file`` part of a multipart/form-data upload."""
    content_type = received.headers.get("content-type", "")
    boundary = content_type.split("boundary=", 1)[1].encode()
    for part in received.raw.split(b"--" + boundary):
        head, _, body = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return body.removesuffix(b"\r\n")
    raise ValueError("no file part")


class ProviderServer:
    """A ``BatchProvider`` served on loopback; ``restart`` serves the same state from a new
    server on the same port (the old one's connections die with it)."""

    def __init__(self, provider: BatchProvider | None = None) -> None:
        self.provider = provider or BatchProvider()
        self.server = self._serve(0)

    def _serve(self, port: int) -> LoopbackServer:
        server = LoopbackServer(port=port)
        server.respond = self.provider.respond
        server.start()
        return server

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.stop()

    def restart(self, down_s: float = 0.0) -> None:
        port = int(self.url.rsplit(":", 1)[1])
        self.server.stop()
        time.sleep(down_s)
        self.server = self._serve(port)
