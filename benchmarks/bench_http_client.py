"""Client CPU per request of the HTTP layer alone: N chat-completion POSTs at a given
concurrency against the loopback benchmark server (in another process, so its CPU is not
counted), with httpx as the adapters use it (the project's plain-http transport under it),
httpx on httpcore with the adapters' pool settings and with its default pool, httpcore
directly, and a bare asyncio HTTP/1.1 client as the floor. Numbers for notes.

    python benchmarks/bench_http_client.py [--requests 2000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
BODY = json.dumps(
    {"model": "a", "messages": [{"role": "user", "content": "Question 1"}], "max_tokens": 64}
).encode()
SERVE = (
    "import sys, threading; sys.path.insert(0, {here!r}); import bench_loopback as b; "
    "s = b.BenchServer(0.0); print(s.server_address[1], flush=True); s.serve_forever()"
)


async def with_httpx(url: str, requests: int, concurrency: int, configured: str) -> None:
    import httpx

    sys.path.insert(0, str(HERE.parent))
    from pytest_evalmine.adapters.http import client_options_for, new_client

    if configured == "adapters":
        client = new_client(url, **client_options_for(url))
    elif configured == "pool":
        client = httpx.AsyncClient(**client_options_for(url))
    else:
        client = httpx.AsyncClient()
    async with client:
        await _spread(requests, concurrency, lambda: _httpx_post(client, url))


async def _httpx_post(client: object, url: str) -> None:
    response = await client.post(  # type: ignore[attr-defined]
        url + "/v1/chat/completions", content=BODY, headers={"content-type": "application/json"}
    )
    json.loads(response.content)


async def with_httpcore(url: str, requests: int, concurrency: int) -> None:
    import httpcore

    async with httpcore.AsyncConnectionPool(max_connections=None) as pool:

        async def post() -> None:
            response = await pool.request(
                "POST",
                url + "/v1/chat/completions",
                headers={"content-type": "application/json"},
                content=BODY,
            )
            json.loads(response.content)

        await _spread(requests, concurrency, post)


async def with_streams(url: str, requests: int, concurrency: int) -> None:
    """A keep-alive HTTP/1.1 client in 30 lines: the floor for asyncio on this machine."""
    host, port = url.removeprefix("http://").split(":")
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
    ).encode()

    async def post() -> None:
        reader, writer = idle.pop() if idle else await asyncio.open_connection(host, int(port))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE.format(here=str(HERE))], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}"
        n, width = args.requests, args.concurrency
        clients = {
            "httpx as the adapters use it": lambda: with_httpx(url, n, width, "adapters"),
            "httpx, httpcore with the adapters' pool": lambda: with_httpx(url, n, width, "pool"),
            "httpx, default pool": lambda: with_httpx(url, n, width, "default"),
            "httpcore directly": lambda: with_httpcore(url, n, width),
            "asyncio streams": lambda: with_streams(url, n, width),
        }
        for name, make in clients.items():
            started, wall = time.process_time(), time.perf_counter()
            asyncio.run(make())
            cpu = time.process_time() - started
            print(
                f"{name:<28} {1000 * cpu / args.requests:6.3f} ms CPU per request "
                f"({args.requests} requests, concurrency {args.concurrency}, "
                f"{time.perf_counter() - wall:.2f} s wall)",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
