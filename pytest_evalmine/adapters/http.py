"""Shared plumbing for adapters that speak JSON over HTTP with httpx.

Adapters make exactly one attempt; the dispatcher owns retries, backoff, the hard timeout and
the budget. So everything here turns a failure into an ``AdapterError`` whose ``kind``,
``retryable`` and ``retry_after_s`` tell the dispatcher what to do next, and whose message never
carries a credential (providers sometimes echo the key they were sent).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import httpx

from .base import AdapterError

REDACTED = "[redacted]"
# Longest provider message we keep: enough to act on, short enough for a one-line outcome.
MAX_MESSAGE_CHARS = 500
# Request headers whose values are credentials; their values are redacted from every message.
SECRET_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
# Key shapes redacted even when we were not told the value: a provider may echo another key.
_KEY_PATTERNS = (
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
)
RETRYABLE_STATUSES = frozenset({408, 409, 529})


def api_key_from_env(env_name: str, provider: str) -> str:
    """The credential in ``env_name``. A missing or blank value is an ``auth`` error naming the
    variable (never a value), raised before any network call so a run refuses early."""
    value = os.environ.get(env_name, "").strip()
    if not value:
        raise AdapterError(
            "auth",
            f"{provider}: environment variable {env_name} is not set (it holds the API key)",
            retryable=False,
        )
    return value


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every given secret and anything shaped like a provider key replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    for pattern in _KEY_PATTERNS:
        text = pattern.sub(REDACTED, text)
    return text


def secrets_in(headers: Mapping[str, str]) -> list[str]:
    """Credential values among request headers, bearer tokens also without their scheme."""
    found = []
    for name, value in headers.items():
        if name.lower() in SECRET_HEADERS and value:
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() == "bearer":
                found.append(token.strip())
    return found


class ClientHolder:
    """One ``httpx.AsyncClient`` per event loop, created on first use.

    An AsyncClient's connection pool is bound to the loop that opened it, and the dispatcher
    runs a fresh loop (``asyncio.run``) per batch, then calls ``aclose``. A client found bound
    to another loop is dropped rather than reused: awaiting its close from a foreign loop can
    hang or raise, and its sockets die with their loop anyway.
    """

    def __init__(self, **client_options: Any) -> None:
        self._options = client_options
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            self._client = httpx.AsyncClient(**self._options)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, loop = self._client, self._loop
        self._client, self._loop = None, None
        if client is not None and not client.is_closed and loop is _running_loop():
            await client.aclose()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    headers: Mapping[str, str],
    body: Any,
    timeout_s: float,
    *,
    secrets: Iterable[str] | None = None,
) -> tuple[int, httpx.Headers, Any, float]:
    """POST ``body`` as JSON once; returns ``(status, headers, parsed, latency_s)``.

    An error status is returned, not raised: only the adapter knows its provider's error body.
    For an error status whose body is not JSON (a gateway's HTML page), ``parsed`` is the body
    text; use ``error_message``. A 2xx body that is not JSON, or is cut short, is a retryable
    ``malformed_response``. ``timeout_s`` bounds the whole exchange, not just each read, so a
    server that drips bytes cannot hold a call past it. ``secrets`` defaults to the credential
    headers' values and are redacted from every message.
    """
    hidden = list(secrets) if secrets is not None else secrets_in(headers)
    started = time.perf_counter()
    try:
        response = await asyncio.wait_for(
            client.post(url, headers=dict(headers), json=body, timeout=timeout_s),
            timeout=timeout_s,
        )
    except (httpx.TimeoutException, asyncio.TimeoutError):
        raise AdapterError(
            "timeout", f"no response within {timeout_s:g} s from {_origin(url)}", retryable=True
        ) from None
    except httpx.UnsupportedProtocol as exc:
        raise AdapterError(
            "bad_request", redact(f"cannot send to {url}: {exc}", hidden), retryable=False
        ) from None
    except httpx.InvalidURL as exc:
        raise AdapterError(
            "bad_request", redact(f"invalid URL: {exc}", hidden), retryable=False
        ) from None
    except httpx.DecodingError as exc:
        raise AdapterError(
            "malformed_response",
            redact(f"undecodable response body from {_origin(url)}: {exc}", hidden),
            retryable=True,
        ) from None
    except httpx.TransportError as exc:
        # ConnectError, ReadError, RemoteProtocolError ("Server disconnected without sending a
        # response", a body shorter than its Content-Length) and the rest: the request may
        # never have arrived, or its answer was lost; another attempt can succeed.
        detail = str(exc) or type(exc).__name__
        raise AdapterError(
            "connection",
            redact(f"connection to {_origin(url)} failed: {detail}", hidden),
            retryable=True,
        ) from None
    latency_s = time.perf_counter() - started
    status = response.status_code
    try:
        parsed = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        if status >= 400:
            return status, response.headers, response.text, latency_s
        raise AdapterError(
            "malformed_response",
            redact(
                f"HTTP {status} body is not valid JSON ({len(response.content)} bytes): "
                f"{_clip(response.text, 200)}",
                hidden,
            ),
            retryable=True,
            status=status,
        ) from None
    return status, response.headers, parsed, latency_s


async def get_json(
    client: httpx.AsyncClient,
    url: str,
    timeout_s: float,
    *,
    headers: Mapping[str, str] | None = None,
    unreachable_hint: str = "",
) -> Any:
    """GET once and parse JSON (unpaid look-ups such as a model listing), with the failure
    kinds ``post_json`` uses; an error status is raised through ``error_from_status``."""
    hidden = secrets_in(headers or {})
    hint = f" ({unreachable_hint})" if unreachable_hint else ""
    try:
        response = await client.get(url, headers=dict(headers or {}), timeout=timeout_s)
    except httpx.TimeoutException:
        raise AdapterError(
            "timeout", f"no response within {timeout_s:g} s from {_origin(url)}", retryable=True
        ) from None
    except httpx.TransportError as exc:
        raise AdapterError(
            "connection",
            redact(f"cannot reach {_origin(url)}{hint}: {str(exc) or type(exc).__name__}", hidden),
            retryable=True,
        ) from None
    try:
        parsed: Any = response.json()
    except ValueError:
        if response.status_code >= 400:
            parsed = response.text
        else:
            raise AdapterError(
                "malformed_response",
                f"{_origin(url)} did not return JSON",
                retryable=True,
                status=response.status_code,
            ) from None
    if response.status_code >= 400:
        raise error_from_status(
            response.status_code, response.headers, error_message(parsed), secrets=hidden
        )
    return parsed


def error_message(parsed: Any) -> str:
    """The provider's own words from an error body. Covers the shapes in use:
    ``{"error": {"message": ...}}`` (Anthropic, OpenAI, Gemini, vLLM), ``{"error": "..."}``
    (Ollama), a flat ``{"message": ...}`` (older vLLM) and a non-JSON body text."""
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        if isinstance(parsed.get("message"), str):
            return parsed["message"]
        return json.dumps(parsed)
    if isinstance(parsed, str):
        return " ".join(parsed.split())
    return "" if parsed is None else json.dumps(parsed)


def error_from_status(
    status: int,
    headers: Mapping[str, str],
    message: str,
    *,
    secrets: Iterable[str | None] = (),
) -> AdapterError:
    """The ``AdapterError`` for an HTTP error status.

    429 is a retryable rate limit (with the server's ``retry-after``); 408/409/5xx/529 are
    retryable server errors; 401/403 are auth errors and other 4xx bad requests, neither
    retryable: the same request would fail the same way. An explicit ``x-should-retry`` header
    (sent by Anthropic and OpenAI, honoured by their SDKs) overrides the status.
    """
    text = redact(f"HTTP {status}: {_clip(message, MAX_MESSAGE_CHARS)}", secrets)
    retry_after_s = None
    if status == 429:
        kind, retryable = "rate_limit", True
        retry_after_s = retry_after(headers)
    elif status in RETRYABLE_STATUSES or status >= 500:
        kind, retryable = "server_error", True
        retry_after_s = retry_after(headers)
    elif status in (401, 403):
        kind, retryable = "auth", False
    else:
        kind, retryable = "bad_request", False
    should_retry = (_header(headers, "x-should-retry") or "").lower()
    if should_retry in ("true", "false"):
        retryable = should_retry == "true"
    return AdapterError(kind, text, retryable=retryable, retry_after_s=retry_after_s, status=status)


def retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (more precise, preferred), else ``retry-after``
    as seconds or an HTTP date; None when absent or unreadable."""
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def schema_instruction(schema: Any) -> str:
    """Text appended to the prompt in ``prompted`` schema mode (no native constraint). One
    wording for every adapter, so prompted answers of different providers stay comparable."""
    return (
        "\n\nAnswer with a single JSON value and nothing else. It must satisfy this JSON "
        "Schema:\n" + json.dumps(schema, ensure_ascii=False, sort_keys=True)
    )


def _header(headers: Mapping[str, str], name: str) -> str | None:
    # httpx.Headers is case-insensitive; a plain dict (tests, other callers) may not be.
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return None if value is None else value.strip()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _origin(url: str) -> str:
    """Scheme and host only: a URL may carry a key in its query string."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "the server"
    return f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")
