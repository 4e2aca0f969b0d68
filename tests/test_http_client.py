"""The adapters' HTTP client (adapters/http.py on adapters/aiohttp_transport.py: httpx over
aiohttp, for http and https alike), against real servers on 127.0.0.1: connections reused per
origin and never when not clean (counted at the server), deadlines, hostile bytes, TLS and
proxies from the environment, and every failure as the error kind the dispatcher acts on."""

from __future__ import annotations

import asyncio
import functools
import gzip
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evalmine.adapters.aiohttp_transport import Transport
from pytest_evalmine.adapters.base import AdapterError, set_max_response_mb
from pytest_evalmine.adapters.http import ClientHolder, get_json, new_client, post_json
from pytest_evalmine.options import DEFAULT_MAX_RESPONSE_MB

from .conftest import clear_proxies, unavailable
from .http_server import (
    LoopbackCertificate,
    Reply,
    loopback_certificate,
    refused_url,
    running_server,
)


def synchronously(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """The test on an event loop of its own (the project runs no asyncio pytest plugin)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy set on the machine would carry these loopback requests elsewhere.
    clear_proxies(monkeypatch)


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
    """``server`` listening, and an adapters' client of it."""
    async with serving(server), new_client(server.url) as client:
        yield server, client


def reply(body: bytes = b'{"ok": true}', status: bytes = b"200 OK", *headers: bytes) -> bytes:
    lines = [b"HTTP/1.1 " + status, b"Content-Length: %d" % len(body), *headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def call(client: httpx.AsyncClient, url: str, timeout_s: float = 5) -> Any:
    """One POST as an adapter makes it; the parsed body."""
    _, _, parsed, _ = await post_json(client, url + "/v1/x", {}, {"model": "m"}, timeout_s)
    return parsed


async def failure(client: httpx.AsyncClient, url: str, timeout_s: float = 5) -> AdapterError:
    with pytest.raises(AdapterError) as raised:
        await call(client, url, timeout_s)
    return raised.value


@pytest.fixture
def certificate() -> Iterator[LoopbackCertificate]:
    with loopback_certificate() as made:
        if made is None:
            unavailable(
                "a TLS test needs a certificate: install the cryptography package or the "
                "openssl command"
            )
        yield made


# --- every endpoint, http and https, runs on aiohttp ---


@synchronously
async def test_every_client_of_a_holder_runs_on_aiohttp_with_a_transport_of_its_own() -> None:
    for url in ("http://127.0.0.1:9", "https://api.example.invalid/v1"):
        holder = ClientHolder(url)
        first = holder.get()
        assert isinstance(first._transport, Transport)
        await holder.aclose()
        second = holder.get()
        assert isinstance(second._transport, Transport)
        assert second._transport is not first._transport
        await holder.aclose()


# --- failures, each as the kind the dispatcher acts on ---


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
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 300 + b"\r\n",
    ],
    ids=[
        "nothing", "cut in the headers", "short body", "conflicting lengths", "negative length",
        "hex length", "hex-prefixed chunk size", "cut in a chunk", "chunk longer than its size",
        "HTTP/2", "four-digit status", "not HTTP", "no colon", "space in a name",
        "huge header line", "too many headers",
    ],
)  # fmt: skip
@synchronously
async def test_a_broken_response_is_a_retryable_connection_error_possibly_billed(
    raw: bytes,
) -> None:
    server = RawServer(script=lambda _: raw, close_after=True)
    async with connected(server) as (server, client):
        error = await failure(client, server.url)
    assert (error.kind, error.retryable, error.possibly_billed) == ("connection", True, True)
    assert f"connection to {server.url} failed: " in str(error)
    assert "\n" not in str(error)
    assert len(str(error)) < 400  # hostile bytes are quoted, not all of them


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
def test_hostile_bytes_give_an_answer_or_an_adapter_error_never_anything_else(raw: bytes) -> None:
    async def read() -> None:
        server = RawServer(script=lambda _: raw, close_after=True)
        async with connected(server) as (server, client):
            with suppress(AdapterError):
                await call(client, server.url)

    asyncio.run(read())


@synchronously
async def test_a_refused_connection_is_a_connection_error_never_sent() -> None:
    with refused_url() as url:
        async with new_client(url) as client:
            error = await failure(client, url)
    assert (error.kind, error.retryable, error.possibly_billed) == ("connection", True, False)
    # In our words (issue 28): aiohttp's said "Cannot connect to host ... ssl:default [...]"
    # of a plain http URL.
    host_port = url.removeprefix("http://")
    assert str(error) == f"connection to {url} failed: connection refused by {host_port}"


@contextmanager
def full_listener() -> Iterator[str]:
    """A URL whose listener never accepts and whose queue of pending connections is full:
    the kernel ignores the next connection attempt, so connecting times out."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    waiting = []
    try:
        for _ in range(4):
            pending = socket.socket()
            pending.setblocking(False)
            with suppress(BlockingIOError):
                pending.connect(listener.getsockname())
            waiting.append(pending)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        for pending in waiting:
            pending.close()
        listener.close()


@synchronously
async def test_a_connect_timeout_is_a_timeout_never_sent() -> None:
    with full_listener() as url:
        async with new_client(url) as client:
            error = await failure(client, url, timeout_s=0.5)
    assert (error.kind, error.retryable, error.possibly_billed) == ("timeout", True, False)


@synchronously
async def test_a_server_that_never_answers_is_a_timeout_possibly_billed() -> None:
    async with connected(RawServer(script=lambda _: b"")) as (server, client):
        error = await failure(client, server.url, timeout_s=0.3)
    assert (error.kind, error.retryable, error.possibly_billed) == ("timeout", True, True)
    assert "no response within 0.3 s" in str(error)


@synchronously
async def test_a_server_that_drips_its_body_cannot_hold_a_call_past_its_deadline() -> None:
    # Every read gets bytes at once, so only one deadline for the whole exchange ends it.
    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\n")
        with suppress(ConnectionError):
            for _ in range(60):
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.05)
        writer.close()

    listener = await asyncio.start_server(drip, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        async with new_client(url) as client:
            error = await failure(client, url, timeout_s=0.5)
    finally:
        listener.close()
    assert (error.kind, error.possibly_billed) == ("timeout", True)


@synchronously
async def test_a_server_that_drops_the_request_is_a_connection_error_possibly_billed() -> None:
    with running_server() as server:
        server.add(Reply(drop=True))
        async with new_client(server.url) as client:
            error = await failure(client, server.url)
    assert (error.kind, error.retryable, error.possibly_billed) == ("connection", True, True)


@synchronously
async def test_a_connection_reset_in_the_body_is_a_connection_error_possibly_billed() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b" " * 1000)
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # an RST, not a FIN

    listener = await asyncio.start_server(reset, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        async with new_client(url) as client:
            error = await failure(client, url)
    finally:
        listener.close()
    assert (error.kind, error.retryable, error.possibly_billed) == ("connection", True, True)


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/x", "http://[::1/x", "http:///no-host", "file:///etc/passwd"]
)
@synchronously
async def test_a_url_the_client_cannot_send_to_is_a_bad_request_not_a_crash(url: str) -> None:
    async with new_client("http://127.0.0.1:9") as client:
        with pytest.raises(AdapterError) as raised:
            await post_json(client, url, {}, {"a": 1}, 5)
    assert raised.value.kind == "bad_request"
    assert not raised.value.retryable


@synchronously
async def test_a_header_value_with_a_line_break_is_never_sent() -> None:
    async with connected(RawServer(script=lambda _: reply())) as (server, client):
        with pytest.raises(AdapterError) as raised:
            await post_json(client, server.url, {"X-A": "v\r\nX-Injected: 1"}, {}, 5)
    assert raised.value.kind == "bad_request"
    assert not raised.value.retryable
    assert server.requests == []


# --- keep-alive: reuse, and never reuse what is not clean ---


@synchronously
async def test_sequential_requests_share_one_connection() -> None:
    async with connected(RawServer(script=lambda _: reply())) as (server, client):
        for _ in range(5):
            assert await call(client, server.url) == {"ok": True}
    assert server.connections == 1
    assert len(server.requests) == 5


@synchronously
async def test_concurrent_requests_open_one_connection_each_then_reuse_them() -> None:
    async with connected(RawServer(script=lambda _: reply())) as (server, client):
        for _ in range(3):
            await asyncio.gather(*(call(client, server.url) for _ in range(40)))
    # No pool limit: 40 at once open 40 (aiohttp's own default would stop at 100 in all).
    assert server.connections == 40
    assert len(server.requests) == 120


@synchronously
async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async with connected(RawServer(script=lambda _: reply(), close_after=True)) as (server, client):
        await call(client, server.url)
        await asyncio.sleep(0.05)  # the server's FIN arrives while the connection is idle
        assert await call(client, server.url) == {"ok": True}
    assert server.connections == 2


def test_a_connection_closed_while_the_loop_was_not_running_is_not_reused() -> None:
    # Between batches (answers, then items, then the judge) no event loop runs, so the FIN
    # of a server's keep-alive timeout waits unprocessed in the kernel when the next batch
    # takes its first connection: that connection must not be used.
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
    holder = ClientHolder(url)

    async def batch() -> Any:
        return await call(holder.get(), url)

    try:
        assert loop.run_until_complete(batch()) == {"ok": True}
        time.sleep(0.2)  # the FIN arrives; no loop runs
        assert loop.run_until_complete(batch()) == {"ok": True}
        loop.run_until_complete(holder.aclose())
    finally:
        loop.close()
        server.join(5)
        listener.close()
    assert len(accepted) == 2


@synchronously
async def test_a_connection_whose_response_was_refused_is_closed_not_reused() -> None:
    answers = iter([b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}", reply()])
    async with connected(RawServer(script=lambda _: next(answers))) as (server, client):
        assert (await failure(client, server.url)).kind == "connection"
        assert await call(client, server.url) == {"ok": True}
        await asyncio.sleep(0.05)
        assert server.closed_by_client == 1  # the refused one, at once
    assert server.connections == 2


@pytest.mark.parametrize(
    "raw",
    [
        reply(b"{}", b"200 OK", b"Connection: close"),
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["Connection: close", "HTTP/1.0 without keep-alive"],
)
@synchronously
async def test_a_server_that_says_close_gets_a_new_connection_next_time(raw: bytes) -> None:
    async with connected(RawServer(script=lambda _: raw)) as (server, client):
        await call(client, server.url)
        await call(client, server.url)
    assert server.connections == 2


@pytest.fixture
def one_megabyte_cap() -> Iterator[None]:
    set_max_response_mb(1)
    yield
    set_max_response_mb(DEFAULT_MAX_RESPONSE_MB)  # the cap is process-wide


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
@synchronously
async def test_a_body_over_the_cap_is_refused_and_its_connection_closed(
    one_megabyte_cap: None, announced: bool
) -> None:
    # Far more than the client buffers: the body is not read to its end when it is refused.
    big = b"[" + b"1," * 4_000_000 + b"1]"
    if announced:
        oversized = reply(big)
    else:
        pieces = b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in (big[:700_000], big[700_000:]))
        oversized = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + pieces + b"0\r\n\r\n"
    answers = iter([oversized, reply()])
    async with connected(RawServer(script=lambda _: next(answers))) as (server, client):
        error = await failure(client, server.url)
        assert (error.kind, error.retryable) == ("malformed_response", False)
        assert "larger than the 1,048,576 bytes" in str(error)
        assert await call(client, server.url) == {"ok": True}
    assert server.connections == 2


@synchronously
async def test_a_cancelled_exchange_closes_its_connection() -> None:
    started = asyncio.Event()

    def slow(_: bytes) -> bytes:
        started.set()
        return b""  # never answers this request

    async with connected(RawServer(script=slow)) as (server, client):
        task = asyncio.ensure_future(call(client, server.url))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        server.script = lambda _: reply()
        assert await call(client, server.url) == {"ok": True}
    assert server.connections == 2


# --- what is sent, what is read ---


@synchronously
async def test_the_request_on_the_wire_is_what_httpx_built() -> None:
    async with connected(RawServer(script=lambda _: reply())) as (server, client):
        await post_json(client, server.url + "/v1/chat?x=1", {"X-Api-Key": "k"}, {"a": "ü"}, 5)
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    request_line, *lines = head.split(b"\r\n")
    names = [line.split(b":", 1)[0].lower() for line in lines]
    assert request_line == b"POST /v1/chat?x=1 HTTP/1.1"
    assert len(names) == len(set(names)), names  # no header twice (httpx's and aiohttp's)
    lowered = [line.lower() for line in lines]
    assert f"host: 127.0.0.1:{server.port}".encode() in lowered
    assert b"x-api-key: k" in lowered
    assert b"content-type: application/json" in lowered
    assert body == '{"a":"ü"}'.encode()
    assert f"content-length: {len(body)}".encode() in lowered


@synchronously
async def test_a_compressed_body_is_decoded_once() -> None:
    zipped = reply(gzip.compress(b'{"zipped": true}'), b"200 OK", b"Content-Encoding: gzip")
    async with connected(RawServer(script=lambda _: zipped)) as (server, client):
        assert await call(client, server.url) == {"zipped": True}


@synchronously
async def test_a_redirect_is_not_followed() -> None:
    moved = reply(b"", b"307 Temporary Redirect", b"Location: /elsewhere")
    async with connected(RawServer(script=lambda _: moved)) as (server, client):
        error = await failure(client, server.url)
    assert (error.kind, error.retryable, error.status) == ("bad_request", False, 307)
    assert len(server.requests) == 1


# --- https ---


@synchronously
async def test_https_with_a_trusted_certificate_reuses_its_connections(
    certificate: LoopbackCertificate,
) -> None:
    with running_server(certificate.server_context()) as server:
        server.add(*(Reply.json(200, {"n": n}) for n in range(6)))
        holder = ClientHolder(server.url, verify=certificate.client_context())
        client = holder.get()
        try:
            for _ in range(2):
                await asyncio.gather(*(call(client, server.url) for _ in range(3)))
        finally:
            await holder.aclose()
        assert server.url.startswith("https://")
        assert len(server.requests) == 6
        assert server.connections == 3


@synchronously
async def test_https_verifies_the_certificate_by_default(
    certificate: LoopbackCertificate,
) -> None:
    with running_server(certificate.server_context()) as server:
        async with new_client(server.url) as client:
            error = await failure(client, server.url)
        assert server.requests == []
    assert (error.kind, error.retryable, error.possibly_billed) == ("connection", True, False)
    assert "certificate" in str(error).lower()


@synchronously
async def test_https_redirects_are_not_followed_either(certificate: LoopbackCertificate) -> None:
    with running_server(certificate.server_context()) as server:
        server.add(Reply(302, b"{}", headers={"Location": "http://127.0.0.1:9/x"}))
        async with new_client(server.url, verify=certificate.client_context()) as client:
            error = await failure(client, server.url)
        assert len(server.requests) == 1
    assert (error.kind, error.status) == ("bad_request", 302)


# --- proxies from the environment ---


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
@synchronously
async def test_a_proxy_from_the_environment_carries_the_request(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(RawServer(script=lambda _: reply(b'{"via": "proxy"}'))) as proxy:
        monkeypatch.setenv(variable, proxy.url)
        target = "http://10.255.0.1:8000"  # never reached: the proxy answers
        async with new_client(target) as client:
            assert await call(client, target) == {"via": "proxy"}
    request_line = proxy.requests[0].split(b"\r\n", 1)[0]
    assert request_line == b"POST http://10.255.0.1:8000/v1/x HTTP/1.1"


@synchronously
async def test_no_proxy_sends_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    async with (
        serving(RawServer(script=lambda _: reply(b'{"via": "proxy"}'))) as proxy,
        serving(RawServer(script=lambda _: reply(b'{"via": "direct"}'))) as server,
    ):
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        async with new_client(server.url) as client:
            assert await call(client, server.url) == {"via": "direct"}
    assert proxy.requests == []


@synchronously
async def test_a_socks_proxy_is_a_bad_request_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:9")
    async with new_client("http://10.255.0.1:8000") as client:
        with pytest.raises(AdapterError) as raised:
            await get_json(client, "http://10.255.0.1:8000/v1/models", 5)
    assert (raised.value.kind, raised.value.retryable) == ("bad_request", False)
    assert "socks5 proxy" in str(raised.value)
