"""Ollama adapter: the native ``POST /api/chat`` of a local (or remote) Ollama server.

Wire format: Ollama's API documentation and types (https://github.com/ollama/ollama,
``docs/api.md`` and ``api/types.go``, 2026-08-21). No key. A schema is sent natively as
``format`` (the server constrains decoding with a grammar).

A tag such as ``qwen3:8b`` can be re-pulled and then names other weights, so ``prepare`` looks
up each model's digest once (``GET /api/tags``; ``POST /api/show`` carries no digest) and
``key_extra`` puts it, with the adapter's own options, into the cache key.
"""

from __future__ import annotations

from typing import Any

from .base import (
    SCHEMA_NATIVE,
    SCHEMA_PROMPTED,
    TEMPLATE_OVERHEAD_TOKENS,
    AdapterError,
    Request,
    Response,
    Usage,
    estimate_tokens,
)
from .http import (
    ClientHolder,
    error_from_status,
    error_message,
    get_json,
    post_json,
    schema_instruction,
)

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
PREPARE_TIMEOUT_S = 30.0
FINISH_REASONS = {"stop": "stop", "length": "length"}


class OllamaAdapter:
    name = "ollama"
    version = "1"

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        think: bool | str | None = None,
        num_ctx: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.think = think
        self.num_ctx = num_ctx
        self.seed = seed
        self.digests: dict[str, str] = {}
        self._clients = ClientHolder(self.base_url)

    def schema_mode(self, request: Request) -> str | None:
        if request.schema is None:
            return None
        return SCHEMA_PROMPTED if request.asks_prompted else SCHEMA_NATIVE

    # -- planning ------------------------------------------------------------------------------

    async def prepare(self, models: list[str]) -> None:
        """Look up the digest of every model not yet known, with one ``GET /api/tags``.

        A model the server does not have is a ``bad_request``: calling it would fail every
        item, and a pull is the user's decision (it can be gigabytes)."""
        wanted = [m.split("/", 1)[1] if "/" in m else m for m in models]
        wanted = [name for name in dict.fromkeys(wanted) if name not in self.digests]
        if not wanted:
            return
        listing = await get_json(
            self._clients.get(),
            f"{self.base_url}/api/tags",
            PREPARE_TIMEOUT_S,
            unreachable_hint="is `ollama serve` running?",
        )
        available = _digests_by_name(listing)
        missing = []
        for name in wanted:
            digest = available.get(_full_name(name))
            if digest is None:
                missing.append(name)
            else:
                self.digests[name] = digest
        if missing:
            names = ", ".join(sorted(available)) or "none"
            raise AdapterError(
                "bad_request",
                f"model(s) {', '.join(missing)} not found on the Ollama server at "
                f"{self.base_url} (run `ollama pull <model>`); available: {names}",
                retryable=False,
            )

    def prepared_state(self) -> dict[str, Any] | None:
        """The digests ``prepare`` looked up, for the cache database (a replay restores them)."""
        return {"digests": dict(self.digests)} if self.digests else None

    def restore_state(self, state: dict[str, Any]) -> None:
        self.digests.update(state.get("digests") or {})

    def key_extra(self, request: Request) -> dict[str, Any]:
        """The model digest (from ``prepare``; None if it was not run) and the options that
        change answers but are not fields of the request."""
        return {
            "digest": self.digests.get(request.model_name),
            "think": self.think,
            "num_ctx": self.num_ctx,
            "seed": self.seed,
        }

    # -- the call ------------------------------------------------------------------------------

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body of ``/api/chat`` for ``request`` (reference section 4)."""
        messages = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        prompt = request.prompt
        if request.asks_prompted:
            prompt += schema_instruction(request.schema)
        messages.append({"role": "user", "content": prompt})
        options: dict[str, Any] = {"num_predict": request.max_tokens}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.top_p is not None:
            options["top_p"] = request.top_p
        if request.stop:
            options["stop"] = list(request.stop)
        if self.num_ctx is not None:
            options["num_ctx"] = self.num_ctx
        if self.seed is not None:
            options["seed"] = self.seed
        body: dict[str, Any] = {
            "model": request.model_name,
            "messages": messages,
            "stream": False,
            "options": options,
        }
        if self.think is not None:
            body["think"] = self.think
        if self.schema_mode(request) == SCHEMA_NATIVE:
            body["format"] = request.schema
        return body

    async def complete(self, request: Request) -> Response:
        status, headers, parsed, latency_s = await post_json(
            self._clients.get(),
            f"{self.base_url}/api/chat",
            {},
            self.body(request),
            request.timeout_s,
        )
        if status >= 400:
            raise error_from_status(status, headers, error_message(parsed))
        return parse_response(
            parsed,
            latency_s=latency_s,
            schema_mode=self.schema_mode(request),
            estimate_input=(request.system or "") + request.prompt,
            status=status,
        )

    async def aclose(self) -> None:
        await self._clients.aclose()


def parse_response(
    data: Any,
    *,
    latency_s: float,
    schema_mode: str | None,
    estimate_input: str,
    status: int = 200,
) -> Response:
    """A ``Response`` from a non-streamed ``/api/chat`` body. ``message.thinking`` is not part
    of the answer; wall-clock latency is kept (``total_duration`` is the server's view only)."""
    if not isinstance(data, dict):
        raise _malformed("the body is not a JSON object", status)
    if "error" in data:  # an error reported under a 2xx status
        raise AdapterError(
            "server_error", f"HTTP {status}: {error_message(data)}", retryable=True, status=status
        )
    message = data.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        raise _malformed("message.content is missing", status)
    text = message["content"]
    raw_reason = data.get("done_reason")
    finish_reason = FINISH_REASONS.get(raw_reason, "other") if raw_reason else "stop"
    counts = {}
    for field in ("prompt_eval_count", "eval_count"):
        value = data.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise _malformed(f"{field} is not a count: {value!r}", status)
        counts[field] = value
    # Counts are omitempty on the server: an absent one is unknown, so the usage is an estimate.
    reported = all(value is not None for value in counts.values())
    input_tokens = counts["prompt_eval_count"]
    output_tokens = counts["eval_count"]
    usage = Usage(
        input_tokens=(
            input_tokens
            if input_tokens is not None
            else estimate_tokens(estimate_input) + TEMPLATE_OVERHEAD_TOKENS
        ),
        output_tokens=output_tokens if output_tokens is not None else estimate_tokens(text),
        reported=reported,
    )
    return Response(
        text=text,
        usage=usage,
        latency_s=latency_s,
        finish_reason=finish_reason,
        schema_mode=schema_mode,
        provider_request_id=None,
    )


def _full_name(name: str) -> str:
    """``llama3.2`` is listed as ``llama3.2:latest``; a namespace may hold a colon-free path."""
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def _digests_by_name(listing: Any) -> dict[str, str]:
    """``{"models": [{"name", "model", "digest", ...}]}`` -> full name -> digest."""
    models = listing.get("models") if isinstance(listing, dict) else None
    if not isinstance(models, list):
        raise _malformed("/api/tags has no models list", 200)
    found: dict[str, str] = {}
    for entry in models:
        if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
            continue
        for key in ("name", "model"):
            if isinstance(entry.get(key), str):
                found[_full_name(entry[key])] = entry["digest"]
    return found


def _malformed(problem: str, status: int) -> AdapterError:
    return AdapterError(
        "malformed_response",
        f"unexpected Ollama response: {problem}",
        retryable=True,
        status=status,
    )
