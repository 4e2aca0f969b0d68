"""A lean HTTP/1.1 transport under httpx for plain-http endpoints (spec: "Connections").

Local model servers (Ollama, vLLM, llama.cpp) and test doubles speak plain http on a fast
network, where the client's own CPU is the limit: httpx's default transport (httpcore) spends
1.5-3 ms of CPU a request, most of it scanning its pool for idle and expired connections,
against under 0.1 ms for the socket work itself (benchmarks/bench_http_client.py). This
transport keeps httpx's client API (request building, headers, content decoding, errors
as ``httpx`` exceptions) and replaces only the wire: asyncio streams, one keep-alive stack of
idle connections per origin, HTTP/1.1 framing by Content-Length or chunked encoding. The
connect timeout is honoured here (``httpx.ConnectTimeout``: the request never left); read and
write deadlines are the caller's, as one overall timeout per exchange (adapters/http.py gives
every call one), which spares a timer per read.

It refuses what it does not speak (any scheme but http) and never sits behind a proxy:
``plain_http_transport_for`` hands it out only for an http URL no proxy setting applies to.
Every failure is an ``httpx.TransportError`` subclass, so callers map errors exactly as they
do for httpx's own transport. A connection whose exchange did not end cleanly (cancelled,
cut short, body not read to its end) is closed, never reused.
"""

from __future__ import annotations

import asyncio
import select
import urllib.request
from collections.abc import AsyncIterator

import httpx

# Bounds on what a server may send before the body: a hostile one cannot make us buffer more.
MAX_HEADER_LINE_BYTES = 64 * 1024
MAX_HEADER_COUNT = 200
# Reads of a body are handed to httpx in pieces of at most this size.
READ_CHUNK_BYTES = 64 * 1024
_NO_BODY_STATUSES = frozenset({204, 304})


def plain_http_transport_for(base_url: str) -> PlainHttpTransport | None:
    """A new transport for a client of ``base_url``, or None when httpx's own must serve it:
    TLS, another scheme, or a proxy configured for the host (httpx honours proxy variables;
    this transport does not speak to proxies)."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError):
        return None
    if url.scheme != "http" or not url.host:
        return None
    proxies = urllib.request.getproxies()
    if (proxies.get("http") or proxies.get("all")) and not urllib.request.proxy_bypass(url.host):
        return None
    return PlainHttpTransport()


def _readable(fileno: int) -> bool:
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fileno, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fileno], [], [], 0)[0])  # Windows: no poll, no fd limit


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def reusable(self) -> bool:
        """Whether an idle connection can carry the next request. The socket itself is asked:
        between batches no event loop runs, so a server's close (its keep-alive timeout) can
        wait in the kernel unseen by the stream; an idle connection that is readable holds
        that close, or bytes nobody asked for, and is not reused."""
        if self.reader.at_eof() or self.writer.is_closing():
            return False
        sock = self.writer.get_extra_info("socket")
        return sock is None or not _readable(sock.fileno())

    def close(self) -> None:
        self.writer.close()


class PlainHttpTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio streams with keep-alive; one instance per client and event loop."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http" or not url.host:
            raise httpx.UnsupportedProtocol(
                "this client sends to http:// URLs with a host only", request=request
            )
        if self._closed:
            raise httpx.ConnectError("the client is closed", request=request)
        timeouts = request.extensions.get("timeout", {})
        origin = (url.host, url.port or 80)
        head, chunked = _request_head(request)
        connection = await self._connection(origin, timeouts.get("connect"), request)
        try:
            await _send_request(connection, head, chunked, request)
            version, status, reason, headers = await _read_head(connection.reader, request)
            stream = _ResponseBody(self, origin, connection, request, version, status, headers)
        except BaseException:
            connection.close()
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=stream,
            extensions={"http_version": version, "reason_phrase": reason},
        )

    async def _connection(
        self, origin: tuple[str, int], connect_timeout: float | None, request: httpx.Request
    ) -> _Connection:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if connection.reusable():
                return connection
            connection.close()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(origin[0], origin[1], limit=MAX_HEADER_LINE_BYTES),
                connect_timeout,
            )
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout("timed out connecting", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        return _Connection(reader, writer)

    def _release(self, origin: tuple[str, int], connection: _Connection) -> None:
        if self._closed or not connection.reusable():
            connection.close()
            return
        self._idle.setdefault(origin, []).append(connection)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()


def _request_head(request: httpx.Request) -> tuple[bytes, bool]:
    """The request line and headers, and whether the body goes chunked (a body of unknown
    length: httpx then sets ``Transfer-Encoding: chunked`` and leaves the framing to us)."""
    target = request.url.raw_path or b"/"
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    chunked = False
    for name, value in request.headers.raw:
        if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name:
            raise httpx.LocalProtocolError("a header holds a line break", request=request)
        if name.lower() == b"transfer-encoding":
            chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n\r\n", chunked


async def _send_request(
    connection: _Connection, head: bytes, chunked: bool, request: httpx.Request
) -> None:
    writer = connection.writer
    try:
        if chunked:
            writer.write(head)
            async for piece in request.stream:  # type: ignore[union-attr]
                if piece:
                    writer.write(b"%x\r\n%b\r\n" % (len(piece), piece))
            writer.write(b"0\r\n\r\n")
        else:
            # A body of known length is in memory already: head and body leave in one write
            # (one send system call instead of two).
            pieces = [head]
            async for piece in request.stream:  # type: ignore[union-attr]
                pieces.append(piece)
            writer.write(b"".join(pieces))
        await writer.drain()
    except OSError as exc:
        raise httpx.WriteError(str(exc) or type(exc).__name__, request=request) from None


async def _read_line(reader: asyncio.StreamReader, request: httpx.Request) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            ) from None
        raise httpx.RemoteProtocolError("response cut short", request=request) from None
    except asyncio.LimitOverrunError:
        raise httpx.RemoteProtocolError(
            f"a response line longer than {MAX_HEADER_LINE_BYTES} bytes", request=request
        ) from None
    except OSError as exc:
        raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from None
    return line.rstrip(b"\r\n")


async def _read_head(
    reader: asyncio.StreamReader, request: httpx.Request
) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """Version, status, reason and headers of the final response; informational (1xx) ones
    skipped."""
    while True:
        version, status, reason = parse_status_line(await _read_line(reader, request), request)
        headers: list[tuple[bytes, bytes]] = []
        while True:
            line = await _read_line(reader, request)
            if not line:
                break
            if len(headers) >= MAX_HEADER_COUNT:
                raise httpx.RemoteProtocolError(
                    f"more than {MAX_HEADER_COUNT} response headers", request=request
                )
            headers.append(parse_header_line(line, request))
        if status >= 200 or status == 101:
            return version, status, reason, headers


def parse_status_line(line: bytes, request: httpx.Request) -> tuple[bytes, int, bytes]:
    version, _, rest = line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(
            f"not an HTTP/1.1 status line: {line[:80]!r}", request=request
        )
    return version, int(code), reason.strip()


def parse_header_line(line: bytes, request: httpx.Request) -> tuple[bytes, bytes]:
    name, colon, value = line.partition(b":")
    if not colon or not name or name != name.strip() or b" " in name or b"\t" in name:
        raise httpx.RemoteProtocolError(f"not a header line: {line[:80]!r}", request=request)
    return name, value.strip(b" \t")


class _ResponseBody(httpx.AsyncByteStream):
    """The body as httpx reads it; gives the connection back to the pool only when the body
    was read to its declared end and the server keeps the connection open."""

    def __init__(
        self,
        transport: PlainHttpTransport,
        origin: tuple[str, int],
        connection: _Connection,
        request: httpx.Request,
        version: bytes,
        status: int,
        headers: list[tuple[bytes, bytes]],
    ) -> None:
        self._transport = transport
        self._origin = origin
        self._connection: _Connection | None = connection
        self._request = request
        self._framing = body_framing(request.method, status, headers, request)
        # After a 101 the connection speaks another protocol (we never ask for one).
        self._keep_alive = (
            self._framing != "until-close" and status != 101 and keeps_alive(version, headers)
        )
        self._complete = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        framing = self._framing
        reader = connection.reader
        request = self._request
        try:
            if framing == "chunked":
                async for piece in _read_chunked(reader, request):
                    yield piece
            elif framing == "until-close":
                while piece := await reader.read(READ_CHUNK_BYTES):
                    yield piece
            else:
                remaining = framing
                while remaining:
                    piece = await reader.read(min(remaining, READ_CHUNK_BYTES))
                    if not piece:
                        raise httpx.RemoteProtocolError(
                            f"peer closed connection without sending complete message body "
                            f"({remaining} bytes short)",
                            request=request,
                        )
                    remaining -= len(piece)
                    yield piece
        except OSError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from None
        self._complete = True

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._complete and self._keep_alive:
            self._transport._release(self._origin, connection)
        else:
            connection.close()


def keeps_alive(version: bytes, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the server keeps the connection open after this response (RFC 9112 9.3):
    HTTP/1.1 unless it says ``close``; HTTP/1.0 only when it says ``keep-alive``."""
    tokens = {
        token.strip()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.lower().split(b",")
    }
    if b"close" in tokens:
        return False
    return version == b"HTTP/1.1" or b"keep-alive" in tokens


def body_framing(
    method: str, status: int, headers: list[tuple[bytes, bytes]], request: httpx.Request
) -> int | str:
    """How the body ends (RFC 9112 section 6.3): a byte count, "chunked", or "until-close"."""
    if method == "HEAD" or status < 200 or status in _NO_BODY_STATUSES:
        return 0
    lengths = set()
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            if value.lower().rsplit(b",", 1)[-1].strip() == b"chunked":
                return "chunked"
            return "until-close"
        if lowered == b"content-length":
            lengths.update(part.strip() for part in value.split(b","))
    if not lengths:
        return "until-close"
    if len(lengths) > 1 or not all(length.isdigit() for length in lengths):
        raise httpx.RemoteProtocolError(
            f"unreadable Content-Length: {sorted(lengths)!r}", request=request
        )
    return int(lengths.pop())


async def _read_chunked(
    reader: asyncio.StreamReader, request: httpx.Request
) -> AsyncIterator[bytes]:
    while True:
        size_line = (await _read_line(reader, request)).split(b";", 1)[0].strip()
        # int() alone would also take "0x1f", "1_0" and spaces.
        if not size_line or size_line.strip(b"0123456789abcdefABCDEF"):
            raise httpx.RemoteProtocolError(
                f"not a chunk size: {size_line[:40]!r}", request=request
            )
        size = int(size_line, 16)
        if size == 0:
            while await _read_line(reader, request):  # trailers, then the blank line
                pass
            return
        remaining = size
        while remaining:
            piece = await reader.read(min(remaining, READ_CHUNK_BYTES))
            if not piece:
                raise httpx.RemoteProtocolError("response cut short in a chunk", request=request)
            remaining -= len(piece)
            yield piece
        if await _read_line(reader, request):
            raise httpx.RemoteProtocolError("a chunk longer than its size", request=request)
