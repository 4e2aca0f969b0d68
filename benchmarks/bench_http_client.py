"""Client CPU per request of the HTTP layer alone: N chat-completion POSTs at a given
concurrency against the loopback benchmark server (in another process, so its CPU is not
counted), with httpx as the adapters use it (on aiohttp, adapters/aiohttp_transport.py), httpx
on httpcore (its own transport) with the adapters' pool settings and with its default pool,
aiohttp and httpcore directly, and a bare asyncio HTTP/1.1 client as the floor. Numbers for
notes.

``--https``: the server speaks TLS with a self-signed certificate for 127.0.0.1 made for the
run, which every client trusts through an ``ssl.SSLContext`` (verification on, as for a real
provider; the adapters' client gets it as ``verify`` in its client options). Connections are
kept alive, so the handshakes (one per connection) are a small part of the figure.

    python benchmarks/bench_http_client.py [--requests 2000] [--concurrency 64] [--https]
                                           [--only SUBSTRING ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# What a client trusts for --https (None: plain http).
Trust = ssl.SSLContext | None
BODY = json.dumps(
    {"model": "a", "messages": [{"role": "user", "content": "Question 1"}], "max_tokens": 64}
).encode()
SERVE = (
    "import ssl, sys; sys.path.insert(0, {here!r}); import bench_loopback as b; "
    "tls = None if not {cert!r} else ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); "
    "tls and tls.load_cert_chain({cert!r}, {key!r}); "
    "s = b.BenchServer(0.0, tls); print(s.server_address[1], flush=True); s.serve_forever()"
)


async def with_httpx(
    url: str, requests: int, concurrency: int, configured: str, trust: Trust
) -> None:
    import httpx

    from pytest_evalmine.adapters.http import client_options_for, new_client

    verify = {"verify": trust} if trust is not None else {}
    if configured == "adapters":
        client = new_client(url, **verify)
    elif configured == "pool":
        client = httpx.AsyncClient(**{**client_options_for(url), **verify})
    else:
        client = httpx.AsyncClient(**verify)
    async with client:
        await _spread(requests, concurrency, lambda: _httpx_post(client, url))


async def _httpx_post(client: object, url: str) -> None:
    response = await client.post(  # type: ignore[attr-defined]
        url + "/v1/chat/completions", content=BODY, headers={"content-type": "application/json"}
    )
    json.loads(response.content)


async def with_aiohttp(url: str, requests: int, concurrency: int, trust: Trust) -> None:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, ssl=trust if trust is not None else True)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def post() -> None:
            async with session.post(
                url + "/v1/chat/completions",
                data=BODY,
                headers={"content-type": "application/json"},
            ) as response:
                json.loads(await response.read())

        await _spread(requests, concurrency, post)


async def with_httpcore(url: str, requests: int, concurrency: int, trust: Trust) -> None:
    import httpcore

    async with httpcore.AsyncConnectionPool(max_connections=None, ssl_context=trust) as pool:

        async def post() -> None:
            response = await pool.request(
                "POST",
                url + "/v1/chat/completions",
                headers={"content-type": "application/json"},
                content=BODY,
            )
            json.loads(response.content)

        await _spread(requests, concurrency, post)


async def with_streams(url: str, requests: int, concurrency: int, trust: Trust) -> None:
    """A keep-alive HTTP/1.1 client in 30 lines: the floor for asyncio on this machine."""
    host, port = url.split("://", 1)[1].split(":")
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
    ).encode()

    async def post() -> None:
        if idle:
            reader, writer = idle.pop()
        else:
            reader, writer = await asyncio.open_connection(host, int(port), ssl=trust)
        writer.write(head + BODY)
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        json.loads(await reader.readexactly(length))
        idle.append((reader, writer))

    await _spread(requests, concurrency, post)
    for _, writer in idle:
        writer.close()


async def _spread(requests: int, concurrency: int, post: Callable[[], Awaitable[None]]) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await post()

    await asyncio.gather(*(one() for _ in range(requests)))


def measure(
    requests: int, concurrency: int, https: bool, only: list[str] | None = None
) -> dict[str, float]:
    """CPU ms per request of each client (named as printed), over http or https."""
    if not https:
        return _measure(requests, concurrency, None, ("", ""), only)
    from tests.http_server import loopback_certificate

    with loopback_certificate() as made:
        if made is None:
            raise SystemExit("--https needs the cryptography package or the openssl command")
        files = (str(made.cert), str(made.key))
        return _measure(requests, concurrency, made.client_context(), files, only)


def _measure(
    requests: int,
    concurrency: int,
    trust: Trust,
    server_files: tuple[str, str],
    only: list[str] | None,
) -> dict[str, float]:
    cert, key = server_files
    # Imports are not per-request work (the adapters' first client imports aiohttp: 0.1-0.2 s,
    # which bench_loopback.py's whole-process figures include).
    import aiohttp  # noqa: F401
    import httpcore  # noqa: F401
    import httpx  # noqa: F401

    import pytest_evalmine.adapters.aiohttp_transport  # noqa: F401

    server = subprocess.Popen(
        [sys.executable, "-c", SERVE.format(here=str(HERE), cert=cert, key=key)],
        stdout=subprocess.PIPE,
        text=True,
    )
    figures = {}
    try:
        assert server.stdout is not None
        scheme = "https" if trust is not None else "http"
        url = f"{scheme}://127.0.0.1:{server.stdout.readline().strip()}"
        n, width = requests, concurrency
        clients = {
            "httpx on aiohttp, as the adapters use it": lambda: with_httpx(
                url, n, width, "adapters", trust
            ),
            "httpx on httpcore, the adapters' pool": lambda: with_httpx(
                url, n, width, "pool", trust
            ),
            "httpx on httpcore, default pool": lambda: with_httpx(url, n, width, "default", trust),
            "aiohttp directly": lambda: with_aiohttp(url, n, width, trust),
            "httpcore directly": lambda: with_httpcore(url, n, width, trust),
            "asyncio streams": lambda: with_streams(url, n, width, trust),
        }
        for name, make in clients.items():
            if only and not any(part in name for part in only):
                continue
            started, wall = time.process_time(), time.perf_counter()
            asyncio.run(make())
            cpu = time.process_time() - started
            figures[name] = 1000 * cpu / requests
            print(
                f"{name:<42} {figures[name]:6.3f} ms CPU per request ({requests} requests, "
                f"concurrency {concurrency}, {scheme}, {time.perf_counter() - wall:.2f} s wall)",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--https", action="store_true", help="TLS, as to a real provider")
    parser.add_argument(
        "--only", nargs="*", help="measure the clients whose name holds one of these"
    )
    args = parser.parse_args()
    measure(args.requests, args.concurrency, args.https, args.only)


if __name__ == "__main__":
    main()
