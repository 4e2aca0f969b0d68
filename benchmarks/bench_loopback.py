"""The brief's dispatch benchmark: 200 cases x 2 models, judged in both orders (800 requests),
against a loopback OpenAI-compatible server answering after 100 ms, at concurrency 32; then
the warm-cache rerun. Numbers for notes, never thresholds.

Reported per run: the whole pytest process (wall and CPU), the request window (first request
received to last reply sent, seen by the server) against its physical limit (requests /
concurrency x latency), the most requests in flight at once, and the TCP connections the
server accepted. With ``--latency 0`` the figure that matters is the client's CPU per request:
CPU of the cold process minus CPU of the warm rerun (which does everything else: collection,
planning, cache look-ups, reports), divided by the requests sent.

``--https``: the server speaks TLS with a self-signed certificate for 127.0.0.1 made for the
run, which the measured process trusts through ``SSL_CERT_FILE`` (read by httpx, verification
on as for a real provider): the path of Anthropic, OpenAI and Gemini, handshakes included.

    python benchmarks/bench_loopback.py [--cases 200] [--latency 0.1] [--concurrency 32]
                                        [--repeat 1] [--https] [--fixed] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from common import child_environment, pytest_command

ROOT = Path(__file__).resolve().parent.parent

# Python's default backlog (5) drops connections when 32 arrive at once; each drop costs the
# client a one-second SYN retry and inflates every figure.
LISTEN_BACKLOG = 1024


@dataclass
class Traffic:
    """What the server saw, reset between runs."""

    requests: int = 0
    connections: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    first_request: float | None = None
    last_reply: float | None = None

    @property
    def window_s(self) -> float:
        if self.first_request is None or self.last_reply is None:
            return 0.0
        return self.last_reply - self.first_request


class BenchServer(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def __init__(self, latency_s: float, tls: ssl.SSLContext | None = None) -> None:
        self.latency_s = latency_s
        self.tls = tls
        self.traffic = Traffic()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.traffic.connections += 1
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The handshake on the connection's own thread, never in the accept loop.
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)


@contextmanager
def loopback_tls() -> Iterator[tuple[ssl.SSLContext, Path]]:
    """A server context with a certificate for 127.0.0.1 made now, and the certificate's file
    (what a client trusts); made by tests/http_server.py (cryptography, else openssl)."""
    sys.path.insert(0, str(ROOT))
    from tests.http_server import loopback_certificate

    with loopback_certificate() as made:
        if made is None:
            raise SystemExit("--https needs the cryptography package or the openssl command")
        yield made.server_context(), made.cert


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: BenchServer

    def do_GET(self) -> None:  # the compatible adapter's one model listing
        self._send(json.dumps({"object": "list", "data": []}).encode())

    def do_POST(self) -> None:
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            traffic = server.traffic
            traffic.requests += 1
            traffic.in_flight += 1
            traffic.max_in_flight = max(traffic.max_in_flight, traffic.in_flight)
            if traffic.first_request is None:
                traffic.first_request = time.perf_counter()
        if server.latency_s:
            time.sleep(server.latency_s)
        schema = json.dumps(body.get("response_format", {}))
        content = (
            json.dumps({"winner": "tie", "reason": "both fine"})
            if "winner" in schema
            else f"A short answer from {body['model']}."
        )
        payload = json.dumps(
            {
                "id": "bench",
                "choices": [
                    {"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58},
            }
        ).encode()  # fmt: skip
        self._send(payload)
        with server.lock:
            server.traffic.in_flight -= 1
            server.traffic.last_reply = time.perf_counter()

    def _send(self, payload: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        return None


def write_suite(folder: Path, cases: int) -> None:
    lines = [
        "version: 1",
        "suite: bench",
        "models: [srv/a, srv/b]",
        "judge: {model: srv/judge}",
        "defaults: {max_tokens: 64}",
        "tasks:",
        "  - id: answer",
        "    kind: answer",
        '    prompt: "Question {{ n }}: what is our refund window?"',
        "    cases:",
    ]
    lines += [f"      - {{id: case-{i}, vars: {{n: {i}}}}}" for i in range(cases)]
    (folder / "bench.eval.yaml").write_text("\n".join(lines) + "\n")


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    requests: int
    connections: int
    window_s: float
    max_in_flight: int


def run(
    folder: Path,
    server: BenchServer,
    concurrency: int,
    *extra: str,
    all_plugins: bool = False,
    trusted: Path | None = None,
    fixed: bool = False,
) -> Run:
    width = f"fixed:{concurrency}" if fixed else str(concurrency)
    command = pytest_command(
        "bench.eval.yaml", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
        f"--evalmine-endpoint=srv={server_url(server)}/v1,free",
        f"--evalmine-concurrency={width}", *extra, all_plugins=all_plugins,
    )  # fmt: skip
    env = {**child_environment(all_plugins), "EVALMINE_HOME": str(folder / ".evalmine")}
    if trusted is not None:
        env["SSL_CERT_FILE"] = str(trusted)
        env.pop("SSL_CERT_DIR", None)
    with server.lock:
        server.traffic = Traffic()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    output = process.stdout.read() if process.stdout else b""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"pytest failed:\n{output.decode(errors='replace')[-3000:]}")
    traffic = server.traffic
    return Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        requests=traffic.requests,
        connections=traffic.connections,
        window_s=traffic.window_s,
        max_in_flight=traffic.max_in_flight,
    )


def server_url(server: BenchServer) -> str:
    scheme = "https" if server.tls is not None else "http"
    return f"{scheme}://127.0.0.1:{server.server_address[1]}"


def measure(
    cases: int,
    latency_s: float,
    concurrency: int,
    all_plugins: bool = False,
    https: bool = False,
    fixed: bool = False,
) -> dict[str, Any]:
    """One cold run and its warm rerun in a fresh cache folder; ``all_plugins``: with every
    pytest plugin installed here autoloaded (common.child_environment); ``https``: over TLS;
    ``fixed``: ``--evalmine-concurrency=fixed:N`` instead of the adaptive default."""
    if https:
        with loopback_tls() as (tls, trusted):
            return _measure(cases, latency_s, concurrency, all_plugins, tls, trusted, fixed)
    return _measure(cases, latency_s, concurrency, all_plugins, None, None, fixed)


def _measure(
    cases: int,
    latency_s: float,
    concurrency: int,
    all_plugins: bool,
    tls: ssl.SSLContext | None,
    trusted: Path | None,
    fixed: bool = False,
) -> dict[str, Any]:
    server = BenchServer(latency_s, tls)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            write_suite(folder, cases)
            options = {"all_plugins": all_plugins, "trusted": trusted, "fixed": fixed}
            # The first process fills the bytecode cache.
            run(folder, server, concurrency, "--collect-only", **options)
            cold = run(folder, server, concurrency, **options)
            warm = run(folder, server, concurrency, **options)
    finally:
        server.shutdown()
        server.server_close()
    posts = cases * 4
    limit_s = posts / concurrency * latency_s
    return {
        "cases": cases,
        "latency_s": latency_s,
        "concurrency": concurrency,
        "https": tls is not None,
        "cold": asdict(cold),
        "warm": asdict(warm),
        "window_limit_s": limit_s,
        "window_ratio": cold.window_s / limit_s if limit_s else None,
        "connections_per_request": cold.connections / max(1, cold.requests),
        "cpu_ms_per_request": 1000 * (cold.cpu_s - warm.cpu_s) / max(1, cold.requests),
    }


def median_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each number the median over the repeats (runs share the machine with others)."""

    def merge(values: list[Any]) -> Any:
        if isinstance(values[0], dict):
            return {k: merge([v[k] for v in values]) for k in values[0]}
        if values[0] is None:
            return None
        return statistics.median(values)

    merged = merge(results)
    merged["repeats"] = len(results)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the medians as JSON")
    parser.add_argument("--https", action="store_true", help="TLS, as to a real provider")
    parser.add_argument("--fixed", action="store_true", help="fixed:N, never adapted")
    parser.add_argument(
        "--all-plugins",
        action="store_true",
        help="autoload every pytest plugin installed here (default: this project's only)",
    )
    args = parser.parse_args()
    result = median_of(
        [
            measure(
                args.cases, args.latency, args.concurrency, args.all_plugins, args.https, args.fixed
            )
            for _ in range(args.repeat)
        ]
    )
    if args.json:
        print(json.dumps(result))
        return
    cold, warm = result["cold"], result["warm"]
    print(
        f"cold: {cold['wall_s']:.2f} s ({cold['cpu_s']:.2f} s CPU), {cold['requests']:.0f} "
        f"requests over {cold['connections']:.0f} connections ({args.cases} cases x 2 models + "
        f"judge both orders, {args.latency * 1000:.0f} ms latency, concurrency "
        f"{args.concurrency}, {'https' if args.https else 'http'}, median of {args.repeat})"
    )
    if result["window_ratio"] is not None:
        print(
            f"request window: {cold['window_s']:.2f} s = {result['window_ratio']:.2f}x the "
            f"{result['window_limit_s']:.2f} s limit; at most {cold['max_in_flight']:.0f} "
            "in flight"
        )
    print(f"client CPU per request: {result['cpu_ms_per_request']:.2f} ms")
    print(
        f"warm: {warm['wall_s']:.2f} s ({warm['cpu_s']:.2f} s CPU), {warm['requests']:.0f} requests"
    )


if __name__ == "__main__":
    main()
