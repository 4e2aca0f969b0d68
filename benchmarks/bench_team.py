"""Team scale (issue 30): one store, shards and merge, measured. Numbers for
docs/benchmarks.md, never thresholds.

``cpu``: N cases x 2 fake models with the fake judge (4 N calls, CPU-bound): one process on
the SQLite store, one process on a PostgreSQL store, then 3 shards at once on one PostgreSQL
store followed by ``evalmine merge``. Reported: wall and CPU of each process, the PostgreSQL
store's CPU per request over SQLite's, and the merge's wall time.

``latency``: N cases x 2 models and the judge against a loopback OpenAI-compatible server that
answers after ``--latency`` seconds, ``fixed:W`` per process: one process against 3 shards at
once (one PostgreSQL store), the ratio of their wall times.

The PostgreSQL server is the tests' own (tests/postgres_server.py: initdb/pg_ctl in a
temporary folder on a loopback port, stopped at the end).

    python benchmarks/bench_team.py cpu [--cases 10000] [--json]
    python benchmarks/bench_team.py latency [--cases 3000] [--latency 0.1] [--width 16] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench_loopback import BenchServer, server_url
from bench_loopback import write_suite as write_server_suite
from common import child_environment, pytest_command, write_ticket_suite

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from postgres_server import PostgresServer, server_bin  # noqa: E402

SHARDS = 3


@dataclass
class Process:
    wall_s: float
    cpu_s: float
    exit_code: int


def start(command: list[str], folder: Path, home: Path) -> tuple[subprocess.Popen, float]:
    env = {**child_environment(), "EVALMINE_HOME": str(home)}
    process = subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return process, time.perf_counter()


def finish(process: subprocess.Popen, started: float) -> Process:
    output = process.stdout.read() if process.stdout else b""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(
            f"{process.args} exited {code}:\n{output.decode(errors='replace')[-3000:]}"
        )
    return Process(wall, usage.ru_utime + usage.ru_stime, code)


def run_one(command: list[str], folder: Path, home: Path) -> Process:
    return finish(*start(command, folder, home))


def run_shards(commands: list[list[str]], folder: Path, home: Path) -> tuple[float, list[Process]]:
    """The shards at once, as a CI matrix runs them: (wall of the slowest, each process)."""
    began = time.perf_counter()
    started = [start(command, folder, home) for command in commands]
    processes = [finish(*pair) for pair in started]
    return time.perf_counter() - began, processes


def pytest_run(suite: str, *extra: str) -> list[str]:
    return pytest_command(suite, "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", *extra)


def shard_commands(suite: str, store: str, name: str, *extra: str) -> list[list[str]]:
    return [
        pytest_run(
            suite,
            f"--evalmine-store={store}",
            f"--evalmine-run-name={name}",
            f"--evalmine-shard={k}/{SHARDS}",
            *extra,
        )
        for k in range(1, SHARDS + 1)
    ]


def merge(folder: Path, home: Path, name: str) -> Process:
    evalmine = [sys.executable, "-m", "pytest_evalmine.commands.cli", "merge", name]
    return run_one(evalmine, folder, home)


def measure_cpu(server: PostgresServer, cases: int) -> dict[str, Any]:
    requests = 4 * cases
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        write_ticket_suite(folder, "team", cases)
        suite = "team.eval.yaml"
        fake = "--evalmine-fake"
        run_one(pytest_run(suite, fake, "--collect-only"), folder, folder / "h0")  # bytecode
        sqlite = run_one(pytest_run(suite, fake), folder, folder / "h1")
        shutil.rmtree(folder / "reports", ignore_errors=True)
        store = server.url(server.fresh_database())
        postgres = run_one(
            pytest_run(suite, fake, f"--evalmine-store={store}"), folder, folder / "h2"
        )
        shutil.rmtree(folder / "reports", ignore_errors=True)
        store = server.url(server.fresh_database())
        wall, shards = run_shards(
            shard_commands(suite, store, "bench", fake), folder, folder / "h3"
        )
        merged = merge(folder, folder / "h3", "bench")
    return {
        "cases": cases,
        "requests": requests,
        "sqlite": asdict(sqlite),
        "postgresql": asdict(postgres),
        "postgresql_extra_cpu": postgres.cpu_s / sqlite.cpu_s - 1,
        "postgresql_cpu_ms_per_request_over_sqlite": 1000
        * (postgres.cpu_s - sqlite.cpu_s)
        / requests,
        "shards_wall_s": wall,
        "shards": [asdict(process) for process in shards],
        "merge": asdict(merged),
    }


def measure_latency(
    server: PostgresServer, cases: int, latency_s: float, width: int
) -> dict[str, Any]:
    http = BenchServer(latency_s)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            write_server_suite(folder, cases)
            suite = "bench.eval.yaml"
            extra = (
                f"--evalmine-endpoint=srv={server_url(http)}/v1,free",
                f"--evalmine-concurrency=fixed:{width}",
            )
            run_one(pytest_run(suite, *extra, "--collect-only"), folder, folder / "h0")
            store = server.url(server.fresh_database())
            one = run_one(
                pytest_run(suite, *extra, f"--evalmine-store={store}"), folder, folder / "h1"
            )
            one_requests = http.traffic.requests
            store = server.url(server.fresh_database())
            wall, shards = run_shards(
                shard_commands(suite, store, "bench", *extra), folder, folder / "h2"
            )
    finally:
        http.shutdown()
        http.server_close()
    return {
        "cases": cases,
        "latency_s": latency_s,
        "width_per_process": width,
        "requests": one_requests,
        "one_process": asdict(one),
        "shards_wall_s": wall,
        "shards": [asdict(process) for process in shards],
        "ratio": wall / one.wall_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("which", choices=["cpu", "latency"])
    parser.add_argument("--cases", type=int)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folder = server_bin()
    if folder is None:
        raise SystemExit("needs PostgreSQL's initdb and pg_ctl: apt-get install postgresql")
    server = PostgresServer(folder)
    server.start()
    try:
        if args.which == "cpu":
            result = measure_cpu(server, args.cases or 10_000)
        else:
            result = measure_latency(server, args.cases or 3_000, args.latency, args.width)
    finally:
        server.stop()
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
