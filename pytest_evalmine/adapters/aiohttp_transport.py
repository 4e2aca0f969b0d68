"""httpx over aiohttp: the wire under every adapter's client, http and https alike (spec
section 6, "Connections").

httpx stays the API the adapters use (requests, headers, content decoding, timeouts, errors);
aiohttp, through the httpx-aiohttp package, moves the bytes, with a C parser, keep-alive pools
per origin and TLS from the standard library, at a fraction of httpcore's client CPU per
request (benchmarks/bench_http_client.py). This module is imported only when the first client
is built (adapters/http.py, ``new_client``): aiohttp and its dependencies are some 130 modules
and 0.1 s of CPU, which a run that makes no real call (the fake adapter, a warm cache) never
pays.

What it adds to httpx-aiohttp's transport:

- one aiohttp session per transport with the pool the adapters want: no connection limit (the
  dispatcher's concurrency bounds it), idle connections kept for httpx's keep-alive expiry,
  no cookie jar (httpx keeps the cookies), no proxies or credentials of aiohttp's own (httpx
  reads the proxy variables and mounts one transport per proxy: ``AiohttpClient``), and
  response header lines up to 64 KiB;
- every aiohttp failure raised as the ``httpx`` exception that says what happened (the package
  maps a refused connection and a server's disconnect to ``ConnectTimeout``, and lets an
  invalid response through as ``aiohttp.ClientResponseError``): never sent (``ConnectError``,
  ``ConnectTimeout``), sent and then lost (``ReadError``, ``RemoteProtocolError``,
  ``ReadTimeout``), or not sendable (``UnsupportedProtocol``), so adapters/http.py maps them
  to error kinds exactly as it did for httpcore.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from errno import ECONNREFUSED
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

# The longest response header line (and status line) accepted; aiohttp's default is 8 KiB.
MAX_HEADER_LINE_BYTES = 64 * 1024
# Error details quote what the server sent; a hostile server can send a lot of it.
MAX_DETAIL_CHARS = 200
_DEFAULT_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=None)

# Most specific first: each aiohttp failure becomes the httpx exception of the first entry it
# is an instance of.
_HTTPX_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientHttpProxyError, httpx.ProxyError),
    # Refused, unresolvable, TLS handshake or certificate refused, proxy unreachable.
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    # A body cut short or framed wrongly.
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
    # Raised by aiohttp's parser for a response that is not HTTP/1.x (never for a status:
    # statuses are adapters/http.py's to judge).
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
    (aiohttp.ClientConnectionError, httpx.ReadError),
)


class AiohttpClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` whose transports are all ``Transport``: the direct one, and one
    per proxy httpx reads from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``,
    ``ALL_PROXY``, ``NO_PROXY``), as it would mount httpcore's."""

    def _init_transport(  # type: ignore[override]
        self,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = _DEFAULT_LIMITS,
        transport: httpx.AsyncBaseTransport | None = None,
        **_: Any,
    ) -> httpx.AsyncBaseTransport:
        if transport is not None:
            return transport
        return Transport(verify=verify, cert=cert, trust_env=trust_env, limits=limits)

    def _init_proxy_transport(  # type: ignore[override]
        self,
        proxy: httpx.Proxy,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = _DEFAULT_LIMITS,
        **_: Any,
    ) -> httpx.AsyncBaseTransport:
        return Transport(verify=verify, cert=cert, trust_env=trust_env, limits=limits, proxy=proxy)


class Transport(AiohttpTransport):
    """httpx-aiohttp's transport with this project's pool and its exceptions as httpx's."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        limits: httpx.Limits = _DEFAULT_LIMITS,
        proxy: httpx.Proxy | None = None,
    ) -> None:
        # The session is made on the first request: it binds to the running event loop.
        super().__init__(
            verify=verify,
            cert=cert,
            trust_env=trust_env,
            limits=limits,
            proxy=proxy,
            client=self._new_session,
        )

    def _new_session(self) -> aiohttp.ClientSession:
        expiry = self.limits.keepalive_expiry
        connector = aiohttp.TCPConnector(
            limit=self.limits.max_connections or 0,  # 0: no limit
            limit_per_host=0,
            ssl=self.ssl_context,
            **({"keepalive_timeout": expiry} if expiry is not None else {}),
        )
        return aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            # Proxies are httpx's (one transport per proxy); aiohttp's own reading of the
            # environment would also add ~/.netrc credentials, and costs two thread hops a
            # request.
            trust_env=False,
            auto_decompress=False,
            max_line_size=MAX_HEADER_LINE_BYTES,
            max_field_size=MAX_HEADER_LINE_BYTES,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.proxy is not None and self.proxy.url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(
                f"a {self.proxy.url.scheme} proxy is set in the environment; only http and "
                "https proxies are supported",
                request=request,
            )
        try:
            response = await super().handle_async_request(request)
        except Exception as exc:
            _raise_as_httpx(exc, request)
            raise
        response.stream = _Body(response.stream, request)
        return response


class _Body(httpx.AsyncByteStream):
    """A response body whose read failures are raised as httpx's."""

    def __init__(self, stream: Any, request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except Exception as exc:
            _raise_as_httpx(exc, self._request)
            raise

    async def aclose(self) -> None:
        # A body not read to its end closes its connection rather than returning it.
        try:
            await self._stream.aclose()
        except Exception as exc:
            _raise_as_httpx(exc, self._request)
            raise


def _connect_failure(cause: aiohttp.ClientConnectorError) -> str:
    """What stopped the connection, in our words: aiohttp's ("Cannot connect to host H:P
    ssl:default [Connect call failed ...]") names a TLS setting even for a plain http URL."""
    where = f"{cause.host}:{cause.port}"
    reason = cause.os_error
    why = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    if isinstance(cause, aiohttp.ClientConnectorDNSError):
        return f"cannot resolve host {cause.host} ({why})"
    if isinstance(cause, aiohttp.ClientConnectorCertificateError):
        return f"certificate of {where} refused: {cause.certificate_error}"
    if isinstance(cause, aiohttp.ClientConnectorSSLError):
        return f"TLS handshake with {where} failed: {why}"
    if isinstance(cause, aiohttp.ClientProxyConnectionError):
        return f"cannot connect to the proxy {where}: {why}"
    if isinstance(reason, ConnectionRefusedError) or getattr(reason, "errno", None) == ECONNREFUSED:
        return f"connection refused by {where}"
    return f"cannot connect to {where}: {why}"


def _raise_as_httpx(exc: Exception, request: httpx.Request) -> None:
    """Raises the httpx exception for an aiohttp failure, whether raised as it is or already
    mapped by httpx-aiohttp (the original is then its cause), and ``LocalProtocolError`` for
    a request aiohttp would not send; returns for any other exception, which the caller
    re-raises unchanged."""
    cause = exc.__cause__ if isinstance(exc, httpx.HTTPError) else exc
    if isinstance(cause, ValueError) and not isinstance(cause, aiohttp.ClientError):
        # aiohttp refuses to write a request it cannot frame (a line break in a header).
        raise httpx.LocalProtocolError(f"the request cannot be sent: {cause}", request=request)
    if not isinstance(cause, aiohttp.ClientError):
        return
    if isinstance(cause, aiohttp.ClientConnectorError):
        text = _connect_failure(cause)
    elif isinstance(cause, aiohttp.ClientResponseError):
        text = cause.message
    elif isinstance(cause, aiohttp.ServerDisconnectedError) and not isinstance(cause.message, str):
        # Its message is then the response head read so far, not words.
        text = "Server disconnected in the middle of the response head"
    else:
        text = str(cause)
    detail = " ".join(text.split()) or type(cause).__name__
    if len(detail) > MAX_DETAIL_CHARS:
        detail = detail[:MAX_DETAIL_CHARS] + "..."
    kind = next((to for of, to in _HTTPX_ERRORS if isinstance(cause, of)), httpx.TransportError)
    raise kind(detail, request=request) from cause
