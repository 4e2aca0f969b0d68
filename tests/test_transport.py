"""The plain-http transport under httpx (adapters/transport.py), against real TCP servers on
127.0.0.1 that write scripted bytes: every framing HTTP/1.1 allows, keep-alive and its edge
cases, and hostile bytes. What it reads is checked against httpx's own transport (httpcore and
h11) reading the same bytes."""

from __future__ import annotations

import asyncio
import functools
import gzip
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_evalmine.adapters.base import AdapterError
from pytest_evalmine.adapters.http import ClientHolder, new_client, post_json
from pytest_evalmine.adapters.transport import PlainHttpTransport, plain_http_transport_for

from .http_server import refused_url


def synchronously(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """The test on an event loop of its own (the project runs no asyncio pytest plugin)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


BODY = b'{"model": "m", "messages": []}'


@dataclass
class RawServer:
    """Answers each request with ``script(request_bytes)``; then keeps the connection for the
    next request unless ``close_after`` is set. Counts accepted connections."""

    script: Callable[[bytes], bytes] = lambda _: b""
    close_after: bool = False
    connections: int = 0
    closed_by_client: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0
    handlers: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                writer.write(self.script(request))
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client += 1
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@asynccontextmanager
async def serving(server: RawServer) -> AsyncIterator[RawServer]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listener.close()
        for handler in server.handlers:
            handler.cancel()
        await asyncio.gather(*server.handlers, return_exceptions=True)
        await listener.wait_closed()


@asynccontextmanager
async def connected(server: RawServer) -> AsyncIterator[tuple[RawServer, httpx.AsyncClient]]:
    """``server`` listening, and a client on this transport."""
    async with serving(server), httpx.AsyncClient(transport=PlainHttpTransport()) as client:
        yield server, client


def reply(body: bytes = b'{"ok": true}', status: bytes = b"200 OK", *headers: bytes) -> bytes:
    lines = [b"HTTP/1.1 " + status, b"Content-Length: %d" % len(body), *headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def chunked(body: bytes, sizes: list[int], extension: bytes = b"", trailer: bytes = b"") -> bytes:
    out, at = [], 0
    for size in sizes:
        piece = body[at : at + size]
        if not piece:
            break
        out.append(b"%x%b\r\n%b\r\n" % (len(piece), extension, piece))
        at += len(piece)
    if at < len(body):
        out.append(b"%x\r\n%b\r\n" % (len(body) - at, body[at:]))
    return b"".join(out) + b"0\r\n" + trailer + b"\r\n"


async def fetch(client: httpx.AsyncClient, url: str, method: str = "POST") -> httpx.Response:
    content = BODY if method == "POST" else None
    response = await client.request(method, url + "/v1/x", content=content)
    await response.aread()
    return response


async def both_read(raw: bytes, method: str = "POST") -> tuple[object, object]:
    """(ours, httpx's own) reading of one response made of ``raw``: (status, headers, body) or
    the name of the error family."""
    results = []
    for transport in (PlainHttpTransport(), httpx.AsyncHTTPTransport()):
        server = RawServer(script=lambda _: raw, close_after=True)
        async with serving(server), httpx.AsyncClient(transport=transport, timeout=5) as client:
            try:
                response = await fetch(client, server.url, method)
                # h11 folds a repeated identical Content-Length into one.
                headers = sorted(set(response.headers.multi_items()))
                results.append((response.status_code, headers, response.content))
            except httpx.TransportError:
                results.append("transport error")
            except httpx.DecodingError:
                results.append("decoding error")
    return results[0], results[1]


# --- framings a server may use, read the same as httpx's own transport reads them ---


@pytest.mark.parametrize(
    "raw",
    [
        reply(),
        reply(b"", b"204 No Content"),
        reply(b'{"error": {"message": "slow down"}}', b"429 Too Many", b"Retry-After: 3"),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunked(b'{"a": "' + b"x" * 5000 + b'"}', [1, 7, 4096]),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunked(b'{"a": 1}', [3], b";name=value", b"X-Trailer: yes\r\n"),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b'{"until": "close"}',
        b"HTTP/1.0 200 OK\r\n\r\n" + b'{"old": 1}',
        b"HTTP/1.1 100 Continue\r\n\r\n" + reply(),
        reply(gzip.compress(b'{"zipped": true}'), b"200 OK", b"Content-Encoding: gzip"),
        reply(b"{}", b"200 OK", b"Content-Length: 2"),  # the same length twice is allowed
        b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\n{}",  # no reason phrase
        reply(b"{}", b"200 OK", b"X-Empty:", b"X-Spaces:   padded   "),
    ],
    ids=[
        "content-length", "204", "error status", "chunked", "chunk extension and trailer",
        "until close", "HTTP/1.0", "100 continue first", "gzip", "repeated length",
        "no reason", "odd header spacing",
    ],
)  # fmt: skip
@synchronously
async def test_a_framing_reads_as_httpx_own_transport_reads_it(raw: bytes) -> None:
    ours, theirs = await both_read(raw)
    assert not isinstance(ours, str), ours
    assert ours == theirs


@pytest.mark.parametrize(
    "raw",
    [
        b"",  # closed without a byte
        b"HTTP/1.1 200 OK\r\n",  # closed in the headers
        b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}",  # shorter than announced
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0x2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}\r\n",  # cut in a chunk
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{}\r\n0\r\n\r\n",
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded: header\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 300 + b"\r\n",
    ],
    ids=[
        "nothing", "cut in the headers", "short body", "conflicting lengths", "negative length",
        "hex length",
        "hex-prefixed chunk size", "cut in a chunk", "chunk longer than its size", "HTTP/2",
        "four-digit status", "not HTTP", "no colon", "obsolete line folding",
        "space in a name", "huge header line", "too many headers",
    ],
)  # fmt: skip
@synchronously
async def test_a_broken_response_is_a_transport_error(raw: bytes) -> None:
    ours, theirs = await both_read(raw)
    assert ours == "transport error"
    if theirs != "transport error":
        # h11 takes long and many header lines (and folds lines) where this transport draws
        # a line; refusing is the safe side: the dispatcher retries a transport error.
        assert raw.count(b"X: y") in (1, 300) or b"\r\n folded" in raw


status_codes = st.sampled_from([200, 201, 400, 401, 404, 429, 500, 503, 529])
header_names = st.from_regex(r"\AX-[A-Za-z0-9-]{1,12}\Z")
header_values = st.from_regex(r"\A[!-~]([ !-~]{0,20}[!-~])?\Z")
bodies = st.binary(max_size=3000)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    status=status_codes,
    headers=st.lists(st.tuples(header_names, header_values), max_size=6),
    body=bodies,
    framing=st.sampled_from(["length", "chunked", "close"]),
    sizes=st.lists(st.integers(1, 700), max_size=8),
)
def test_any_well_formed_response_reads_as_httpx_own_transport_reads_it(
    status: int, headers: list[tuple[str, str]], body: bytes, framing: str, sizes: list[int]
) -> None:
    head = [b"HTTP/1.1 %d Reason" % status] + [f"{n}: {v}".encode() for n, v in headers]
    if framing == "length":
        raw = b"\r\n".join([*head, b"Content-Length: %d" % len(body)]) + b"\r\n\r\n" + body
    elif framing == "chunked":
        raw = b"\r\n".join([*head, b"Transfer-Encoding: chunked"]) + b"\r\n\r\n"
        raw += chunked(body, sizes)
    else:
        raw = b"\r\n".join([*head, b"Connection: close"]) + b"\r\n\r\n" + body
    ours, theirs = asyncio.run(both_read(raw))
    assert ours == theirs


@settings(max_examples=150, deadline=None)
@given(
    raw=st.one_of(
        st.binary(max_size=400),
        st.builds(
            lambda start, noise: start + noise,
            st.sampled_from([b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: "]),
            st.binary(max_size=200),
        ),
    )
)
def test_hostile_bytes_give_a_response_or_a_transport_error_never_anything_else(
    raw: bytes,
) -> None:
    async def read() -> None:
        server = RawServer(script=lambda _: raw, close_after=True)
        async with (
            serving(server),
            httpx.AsyncClient(transport=PlainHttpTransport(), timeout=5) as client,
        ):
            with suppress(httpx.TransportError, httpx.DecodingError):
                await fetch(client, server.url)

    asyncio.run(read())


# --- keep-alive: reuse, and never reuse what is not clean ---


@synchronously
async def test_sequential_requests_share_one_connection() -> None:
    async with connected(RawServer(script=lambda _: reply())) as (server, client):
        for _ in range(5):
            assert (await fetch(client, server.url)).json() == {"ok": True}
    assert server.connections == 1
    assert len(server.requests) == 5


@synchronously
async def test_concurrent_requests_open_one_connection_each_then_reuse_them() -> None:
    async with connected(RawServer(script=lambda _: reply())) as (server, client):
        for _ in range(3):
            await asyncio.gather(*(fetch(client, server.url) for _ in range(8)))
    assert server.connections == 8
    assert len(server.requests) == 24


@synchronously
async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async with connected(RawServer(script=lambda _: reply(), close_after=True)) as (server, client):
        await fetch(client, server.url)
        await asyncio.sleep(0.05)  # the server's FIN arrives while the connection is idle
        assert (await fetch(client, server.url)).status_code == 200
    assert server.connections == 2


def test_a_connection_closed_while_the_loop_was_not_running_is_not_reused() -> None:
    # Between batches (answers, then items, then the judge) no event loop runs, so the FIN
    # of a server's keep-alive timeout waits unprocessed in the kernel when the next batch
    # takes its first connection: the connection must be checked at the socket.
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve_one_then_close() -> None:
        for _ in range(2):
            connection, _ = listener.accept()
            accepted.append(connection)
            connection.recv(65536)
            connection.sendall(reply())
            time.sleep(0.02)
            connection.close()  # a keep-alive timeout, while the client's loop is stopped

    server = threading.Thread(target=serve_one_then_close, daemon=True)
    server.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    loop = asyncio.new_event_loop()
    try:
        client = httpx.AsyncClient(transport=PlainHttpTransport())
        assert loop.run_until_complete(fetch(client, url)).status_code == 200
        time.sleep(0.2)  # the FIN arrives; no loop runs
        assert loop.run_until_complete(fetch(client, url)).status_code == 200
        loop.run_until_complete(client.aclose())
    finally:
        loop.close()
        server.join(5)
        listener.close()
    assert len(accepted) == 2


@synchronously
async def test_a_connection_whose_response_was_refused_is_closed_not_reused() -> None:
    answers = iter([b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}", reply()])
    async with connected(RawServer(script=lambda _: next(answers))) as (server, client):
        with pytest.raises(httpx.RemoteProtocolError):
            await fetch(client, server.url)
        assert (await fetch(client, server.url)).status_code == 200
        await asyncio.sleep(0.05)
        assert server.closed_by_client == 1  # the refused one, at once
    assert server.connections == 2


@pytest.mark.parametrize(
    "raw",
    [
        reply(b"{}", b"200 OK", b"Connection: close"),
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["Connection: close", "101 unasked", "HTTP/1.0 without keep-alive"],
)
@synchronously
async def test_a_server_that_says_close_gets_a_new_connection_next_time(raw: bytes) -> None:
    async with connected(RawServer(script=lambda _: raw)) as (server, client):
        await fetch(client, server.url)
        await fetch(client, server.url)
    assert server.connections == 2


@synchronously
async def test_a_body_not_read_to_its_end_closes_the_connection() -> None:
    big = reply(b"[" + b"1," * 100_000 + b"1]")
    async with connected(RawServer(script=lambda _: big)) as (server, client):
        request = client.build_request("POST", server.url + "/v1/x", content=BODY)
        response = await client.send(request, stream=True)
        async for _ in response.aiter_raw():
            break  # the caller's size cap stops reading here
        await response.aclose()
        assert (await fetch(client, server.url)).status_code == 200
    assert server.connections == 2


@synchronously
async def test_a_cancelled_exchange_closes_its_connection() -> None:
    started = asyncio.Event()

    def slow(_: bytes) -> bytes:
        started.set()
        return b""  # never answers this request

    async with connected(RawServer(script=slow)) as (server, client):
        task = asyncio.ensure_future(fetch(client, server.url))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        server.script = lambda _: reply()
        assert (await fetch(client, server.url)).status_code == 200
    assert server.connections == 2


# --- what is sent ---


@synchronously
async def test_the_request_on_the_wire_is_what_httpx_built() -> None:
    async with connected(RawServer(script=lambda _: reply())) as (server, client):
        await client.post(server.url + "/v1/chat?x=1", json={"a": "ü"}, headers={"X-Api-Key": "k"})
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat?x=1 HTTP/1.1"
    assert f"host: 127.0.0.1:{server.port}".encode() in [line.lower() for line in lines]
    assert b"x-api-key: k" in [line.lower() for line in lines]
    assert body == '{"a":"ü"}'.encode()
    assert f"content-length: {len(body)}".encode() in [line.lower() for line in lines]


@synchronously
async def test_a_streamed_request_body_is_sent_chunked() -> None:
    async def pieces() -> AsyncIterator[bytes]:
        yield b'{"a":'
        yield b""
        yield b" 1}"

    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"0\r\n\r\n"))
        writer.write(reply())
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(transport=PlainHttpTransport()) as client:
            response = await client.post(f"http://127.0.0.1:{port}/", content=pieces())
    finally:
        listener.close()
        await listener.wait_closed()
    assert response.status_code == 200
    assert received[0].endswith(b'\r\n\r\n5\r\n{"a":\r\n3\r\n 1}\r\n0\r\n\r\n')
    assert b"transfer-encoding: chunked" in received[0].lower()


@synchronously
async def test_a_header_value_with_a_line_break_is_never_sent() -> None:
    async with connected(RawServer(script=lambda _: reply())) as (server, client):
        with pytest.raises(httpx.LocalProtocolError):
            await client.post(server.url, content=BODY, headers={"X-A": "v\r\nX-Injected: 1"})
    assert server.requests == []


@synchronously
async def test_a_refused_port_is_a_connect_error() -> None:
    with refused_url() as url:
        async with httpx.AsyncClient(transport=PlainHttpTransport()) as client:
            with pytest.raises(httpx.ConnectError):
                await client.post(url, content=BODY)


@synchronously
async def test_only_plain_http_is_spoken() -> None:
    async with httpx.AsyncClient(transport=PlainHttpTransport()) as client:
        with pytest.raises(httpx.UnsupportedProtocol):
            await client.post("https://127.0.0.1:1/", content=BODY)


@synchronously
async def test_a_closed_transport_closes_its_idle_connections() -> None:
    async with serving(RawServer(script=lambda _: reply())) as server:
        transport = PlainHttpTransport()
        async with httpx.AsyncClient(transport=transport) as client:
            await fetch(client, server.url)
        with pytest.raises(httpx.ConnectError):
            await transport.handle_async_request(httpx.Request("GET", server.url))
    assert server.connections == 1


# --- which clients get it ---


@pytest.mark.parametrize(
    ("url", "environment", "gets_it"),
    [
        ("http://127.0.0.1:8080/v1", {}, True),
        ("http://localhost:11434", {}, True),
        ("https://api.openai.com/v1", {}, False),
        ("http://10.0.0.5:8000", {"HTTP_PROXY": "http://proxy:3128"}, False),
        ("http://10.0.0.5:8000", {"ALL_PROXY": "http://proxy:3128"}, False),
        (
            "http://10.0.0.5:8000",
            {"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "10.0.0.5"},
            True,
        ),
        ("http://10.0.0.5:8000", {"HTTPS_PROXY": "http://proxy:3128"}, True),
        ("not a url", {}, False),
    ],
)
def test_plain_http_without_a_proxy_gets_the_lean_transport(
    url: str, environment: dict[str, str], gets_it: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
                 "HTTPS_PROXY", "https_proxy"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert (plain_http_transport_for(url) is not None) is gets_it


@synchronously
async def test_every_client_of_a_holder_gets_a_transport_of_its_own() -> None:
    holder = ClientHolder("http://127.0.0.1:9")
    first = holder.get()
    transport = first._transport
    assert isinstance(transport, PlainHttpTransport)
    await holder.aclose()
    second = holder.get()
    assert isinstance(second._transport, PlainHttpTransport)
    assert second._transport is not transport
    await holder.aclose()
    assert not isinstance(new_client("https://example.invalid")._transport, PlainHttpTransport)


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/x", "http://[::1/x", "http:///no-host", "https://127.0.0.1:1/x"]
)
@synchronously
async def test_a_url_the_client_cannot_send_to_is_a_bad_request_not_a_crash(url: str) -> None:
    async with new_client("http://127.0.0.1:9") as client:
        with pytest.raises(AdapterError) as raised:
            await post_json(client, url, {}, {"a": 1}, 5)
    assert raised.value.kind == "bad_request"
    assert not raised.value.retryable
