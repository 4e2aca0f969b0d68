"""Shared plumbing for adapters that speak JSON over HTTP with httpx.

Adapters make exactly one attempt; the dispatcher owns retries, backoff, the hard timeout and
the budget. So everything here turns a failure into an ``AdapterError`` whose ``kind``,
``retryable`` and ``retry_after_s`` tell the dispatcher what to do next, and whose message never
carries a credential (providers sometimes echo the key they were sent).
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import functools
import json
import os
import ssl
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..redaction import redact, remember_key
from .base import AdapterError, RateLimit, Response, max_response_bytes

# Longest provider message we keep: enough to act on, short enough for a one-line outcome.
MAX_MESSAGE_CHARS = 500
# Request headers whose values are credentials; their values are redacted from every message.
SECRET_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
RETRYABLE_STATUSES = frozenset({408, 409, 529})
# Every provider we speak to answers a completion with 200; another 2xx is not an answer.
ANSWER_STATUS = 200
# Longest wait for a TCP (and TLS) connection: a reachable server accepts in milliseconds,
# and the kernel's SYN retries (1, 3, 7 s) fit in it. The SDKs of Anthropic and OpenAI use 5 s.
CONNECT_TIMEOUT_S = 10.0


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
    remember_key(value)
    return value


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

    An AsyncClient's connection pool is bound to the loop that opened it. In a session the
    dispatcher runs every batch (look-ups, answers, judge) on one loop, so one client and its
    keep-alive connections serve them all; a dispatcher of its own runs a loop per batch and
    calls ``aclose`` after it. A client found bound to another loop is dropped rather than
    reused: awaiting its close from a foreign loop can hang or raise, and its sockets die with
    their loop anyway. ``client_options`` go to ``new_client`` (e.g. ``verify``, an
    ``ssl.SSLContext`` trusting a test server's certificate).
    """

    def __init__(self, base_url: str = "", **client_options: Any) -> None:
        self._base_url = base_url
        self._options = client_options
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            self._client = new_client(self._base_url, **self._options)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, loop = self._client, self._loop
        self._client, self._loop = None, None
        if client is not None and not client.is_closed and loop is _running_loop():
            await client.aclose()


_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalised_base_url(url: str) -> str:
    """The server a base URL names, spelled one way (it enters an endpoint's cache key):
    scheme and host lowercased, the scheme's default port dropped, trailing slashes dropped.
    User info, query and fragment are left out: they name no other server, and a secret may
    sit in them. The path keeps its case (servers may tell ``/V1`` from ``/v1``)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: kept as written
        port = parts.netloc.rpartition(":")[2] or None
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def server_in_key(base_url: str, default: str) -> str | None:
    """The normalised ``base_url`` when it names another server than the provider's
    ``default`` (it then enters the cache key: a gateway's answers never mix with the
    provider's), else None (the provider's own keys stay as they were)."""
    server = normalised_base_url(base_url)
    return None if server == normalised_base_url(default) else server


def client_options_for(base_url: str) -> dict[str, Any]:
    """Pool settings for a client of ``base_url``.

    No pool limit: the dispatcher's per-provider concurrency bounds the connections in use,
    and every one of them stays open for the next call (httpx keeps only 20 idle by default,
    so at concurrency 32 most calls opened a new connection). A plain-http endpoint gets a
    TLS context without trust anchors instead of one loading the certificate store (about
    30 ms a client); it is never used, and would refuse any certificate if it were.
    """
    options: dict[str, Any] = {
        "limits": httpx.Limits(max_connections=None, max_keepalive_connections=None)
    }
    if base_url.startswith("http://"):
        options["verify"] = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return options


def new_client(base_url: str, **options: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for ``base_url`` with ``client_options_for`` under
    ``options``, on aiohttp (``aiohttp_transport.AiohttpClient``) for http and https alike.
    aiohttp is imported here, when a run builds its first client: a run that makes no real
    call never loads it."""
    from .aiohttp_transport import AiohttpClient

    return AiohttpClient(**{**client_options_for(base_url), **options})


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

    The status returned is 200 or an error status (400 and up): only the adapter knows its
    provider's error body. For an error status whose body is not JSON (a gateway's HTML page),
    ``parsed`` is the body text; use ``error_message``. A redirect or any other status is raised
    here (``_refuse_status``), as is a body over the response cap. A 200 body that is not JSON,
    or is cut short, is a retryable ``malformed_response``. ``timeout_s`` bounds the whole
    exchange, not just each read, so a server that drips bytes cannot hold a call past it.
    ``secrets`` defaults to the credential headers' values; they and every key the process
    loaded are redacted from every message.
    """
    hidden = list(secrets) if secrets is not None else secrets_in(headers)
    started = time.perf_counter()
    status, reply_headers, content, text = await _exchange(
        client, "POST", url, headers, timeout_s, hidden, json_body=body
    )
    latency_s = time.perf_counter() - started
    try:
        parsed = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        if status >= 400:
            return status, reply_headers, text, latency_s
        detail = redact(
            f"HTTP {status} body is not valid JSON ({len(content)} bytes): {text}", hidden
        )
        raise AdapterError(
            "malformed_response",
            _clip(detail, MAX_MESSAGE_CHARS),
            retryable=True,
            status=status,
        ) from None
    return status, reply_headers, parsed, latency_s


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
    status, reply_headers, content, text = await _exchange(
        client, "GET", url, headers or {}, timeout_s, hidden, unreachable_hint=unreachable_hint
    )
    try:
        parsed: Any = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        if status < 400:
            raise AdapterError(
                "malformed_response",
                f"{_origin(url)} did not return JSON",
                retryable=True,
                status=status,
            ) from None
        parsed = text
    if status >= 400:
        raise error_from_status(status, reply_headers, error_message(parsed), secrets=hidden)
    return parsed


async def exchange_bytes(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: Mapping[str, str],
    timeout_s: float,
    *,
    content: bytes | None = None,
    limit: int | None = None,
) -> tuple[int, httpx.Headers, bytes, str]:
    """One exchange whose bodies need not be JSON (a batch's JSONL upload and results file),
    with every rule of ``post_json`` (no redirects, a body cap: ``limit`` bytes when given,
    one deadline): ``(status, headers, body bytes, body text)`` for 200 and error statuses."""
    return await _exchange(
        client, method, url, headers, timeout_s, secrets_in(headers), content=content, limit=limit
    )


async def _exchange(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: Mapping[str, str],
    timeout_s: float,
    hidden: list[str],
    *,
    json_body: Any = None,
    content: bytes | None = None,
    limit: int | None = None,
    unreachable_hint: str = "",
) -> tuple[int, httpx.Headers, bytes, str]:
    """One request, its body read as a stream and never past the response cap (or
    ``limit`` bytes), within ``timeout_s`` overall: ``(status, headers, body bytes, body
    text)`` for 200 and error statuses; every failure is an ``AdapterError``. The request
    body is ``json_body`` as JSON, or ``content`` as it is."""
    hint = f" ({unreachable_hint})" if unreachable_hint else ""
    try:
        request = client.build_request(
            method,
            parsed_url(url),
            headers=dict(headers),
            json=json_body,
            content=content,
            timeout=timeouts_for(timeout_s),
        )
        return await asyncio.wait_for(_send(client, request, hidden, limit), timeout=timeout_s)
    except (httpx.TimeoutException, asyncio.TimeoutError) as exc:
        raise AdapterError(
            "timeout",
            f"no response within {timeout_s:g} s from {_origin(url)}",
            retryable=True,
            # Only a connect timeout proves the request never arrived.
            possibly_billed=not isinstance(exc, httpx.ConnectTimeout),
        ) from None
    except httpx.UnsupportedProtocol as exc:
        raise AdapterError(
            "bad_request", redact(f"cannot send to {url}: {exc}", hidden), retryable=False
        ) from None
    except httpx.InvalidURL as exc:
        raise AdapterError(
            "bad_request", redact(f"invalid URL: {exc}", hidden), retryable=False
        ) from None
    except httpx.LocalProtocolError as exc:
        # A request that cannot be framed (a line break in a header value) never will be.
        raise AdapterError(
            "bad_request",
            redact(f"cannot send to {_origin(url)}: {exc}", hidden),
            retryable=False,
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
            redact(f"connection to {_origin(url)}{hint} failed: {detail}", hidden),
            retryable=True,
            possibly_billed=not isinstance(exc, httpx.ConnectError),
        ) from None


@functools.lru_cache(maxsize=64)
def timeouts_for(timeout_s: float) -> httpx.Timeout:
    """Per-phase timeouts of an exchange whose overall deadline is ``timeout_s``: connecting
    (and waiting for a pooled connection) gets half of it, at most ``CONNECT_TIMEOUT_S``, so a
    connect timeout is always seen as one (the request never left, nothing is billed) instead
    of racing the overall deadline, which cannot tell whether the request was sent."""
    connect_s = min(CONNECT_TIMEOUT_S, timeout_s / 2)
    return httpx.Timeout(timeout_s, connect=connect_s, pool=connect_s)


@functools.lru_cache(maxsize=256)
def parsed_url(url: str) -> httpx.URL:
    """``url`` parsed once per process: an adapter calls the same few URLs thousands of times,
    and parsing was a third of building each request."""
    return httpx.URL(url)


async def _send(
    client: httpx.AsyncClient, request: httpx.Request, hidden: list[str], limit: int | None
) -> tuple[int, httpx.Headers, bytes, str]:
    # Redirects are never followed: a POST re-sent elsewhere could pay twice, and the key
    # would travel to a host nobody configured.
    response = await client.send(request, stream=True, follow_redirects=False)
    try:
        _refuse_status(response, hidden)
        limit = max_response_bytes() if limit is None else limit
        content = await _read_capped(response, limit)
        if content is None:
            if response.status_code < 400:
                raise AdapterError(
                    "malformed_response",
                    f"HTTP {response.status_code} body from {_origin(str(request.url))} is larger "
                    f"than the {limit:,} bytes a response may have (--evalmine-max-response-mb); "
                    "not read further",
                    retryable=False,
                    status=response.status_code,
                )
            # An error page this large says nothing more than its status.
            content = b""
        text = content.decode(response.encoding or "utf-8", errors="replace")
        return response.status_code, response.headers, content, text
    finally:
        await response.aclose()


def _refuse_status(response: httpx.Response, hidden: list[str]) -> None:
    """Only 200 carries an answer; a redirect or another 2xx (or 1xx) is an error whatever its
    body says, so it is never parsed, cached or paid for as an answer."""
    status = response.status_code
    if status == ANSWER_STATUS or status >= 400:
        return
    if 300 <= status < 400:
        location = response.headers.get("location")
        target = f" to {_origin(str(response.url.join(location)))}" if location else ""
        raise AdapterError(
            "bad_request",
            redact(
                f"HTTP {status}: redirect{target} not followed; point base_url at the server "
                "that answers",
                hidden,
            ),
            retryable=False,
            status=status,
        )
    raise AdapterError(
        "malformed_response",
        f"HTTP {status} is not an answer (the API answers with 200)",
        retryable=False,
        status=status,
    )


async def _read_capped(response: httpx.Response, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed ``limit`` bytes (announced by
    Content-Length, or counted while streaming): a huge body never sits in memory."""
    declared = response.headers.get("content-length", "")
    if declared.isdecimal() and int(declared) > limit:
        return None
    chunks = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


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
    # Redact before clipping: a key cut in two by the clip would no longer match.
    text = _clip(redact(f"HTTP {status}: {message}", secrets), MAX_MESSAGE_CHARS)
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
    error = AdapterError(
        kind,
        text,
        retryable=retryable,
        retry_after_s=retry_after_s,
        status=status,
    )
    error.rate_limit = rate_limit_of(headers)
    return error


# (remaining requests, remaining tokens) header names: OpenAI's, then Anthropic's.
RATE_LIMIT_HEADERS = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-tokens-remaining"),
)


def rate_limit_of(headers: Mapping[str, str]) -> RateLimit | None:
    """What a reply's rate-limit headers say the provider still takes; None without any."""
    for requests_header, tokens_header in RATE_LIMIT_HEADERS:
        requests, tokens = _count(headers, requests_header), _count(headers, tokens_header)
        if requests is not None or tokens is not None:
            return RateLimit(requests, tokens)
    return None


def with_rate_limit(response: Response, headers: Mapping[str, str]) -> Response:
    """``response`` carrying its reply's rate-limit headers, when it has any."""
    limit = rate_limit_of(headers)
    return response if limit is None else dataclasses.replace(response, rate_limit=limit)


def _count(headers: Mapping[str, str], name: str) -> int | None:
    value = _header(headers, name)
    return int(value) if value is not None and value.isdecimal() else None


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
