"""The brief's dispatch benchmark: 200 cases x 2 models, judged in both orders (800 requests),
against a loopback OpenAI-compatible server answering after 100 ms, at concurrency 32; then
the warm-cache rerun. Prints wall times of the whole pytest process and the server's request
count. Numbers for notes, never thresholds.

    python benchmarks/bench_loopback.py [--cases 200] [--latency 0.1] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_server(latency_s: float) -> tuple[ThreadingHTTPServer, list[int]]:
    count = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                count[0] += 1
            time.sleep(latency_s)
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
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    return server, count


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


def run(folder: Path, url: str, concurrency: int) -> float:
    command = [
        sys.executable, "-m", "pytest", "bench.eval.yaml", "-q", "-p", "no:cacheprovider",
        f"--evalmine-endpoint=srv={url}/v1,free", f"--evalmine-concurrency={concurrency}",
    ]  # fmt: skip
    env = {**os.environ, "EVALMINE_HOME": str(folder / ".evalmine")}
    started = time.perf_counter()
    subprocess.run(command, cwd=folder, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    server, count = make_server(args.latency)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            write_suite(folder, args.cases)
            cold = run(folder, url, args.concurrency)
            cold_requests = count[0]
            warm = run(folder, url, args.concurrency)
            print(
                f"cold: {cold:.2f} s, {cold_requests} requests "
                f"({args.cases} cases x 2 models + judge both orders, {args.latency * 1000:.0f} "
                f"ms latency, concurrency {args.concurrency})"
            )
            print(f"warm: {warm:.2f} s, {count[0] - cold_requests} requests")
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
