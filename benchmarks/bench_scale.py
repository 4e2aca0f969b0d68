"""Scaling on the fake adapter: N cases (one JSONL file) x 2 models, judged in both orders
(4 N calls). For each N: pytest's collection time, the cold run, the warm rerun (same cache)
and the peak RSS of each process. Numbers for docs/benchmarks.md, never thresholds.

    python benchmarks/bench_scale.py [--cases 1000 5000 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from common import child_environment, pytest_command, write_ticket_suite

COLLECTED = re.compile(r"(\d+) tests? collected in ([0-9.]+)s")


def run(folder: Path, *extra: str) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS in MB, stdout) of one pytest process. CPU time
    is reported beside wall time: on a shared machine it is the steadier of the two."""
    command = pytest_command(
        "scale.eval.yaml", "--evalmine-fake", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
        *extra,
    )  # fmt: skip
    env = {**child_environment(), "EVALMINE_HOME": str(folder / ".evalmine")}
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        raise SystemExit(f"pytest exited {process.returncode}:\n{output[-3000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output


def measure(cases: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        write_ticket_suite(folder, "scale", cases)
        run(folder, "--collect-only")  # fills the bytecode cache
        collect_wall, collect_cpu, _, output = run(folder, "--collect-only")
        found = COLLECTED.search(output)
        if found is None:
            raise SystemExit(f"no collection line in:\n{output[-2000:]}")
        cold, cold_cpu, cold_rss, _ = run(folder)
        warm, warm_cpu, warm_rss, _ = run(folder)
    return {
        "cases": cases,
        "items": int(found.group(1)),
        "collection_s": float(found.group(2)),
        "collect_only_process_s": collect_wall,
        "collect_only_cpu_s": collect_cpu,
        "cold_s": cold,
        "cold_cpu_s": cold_cpu,
        "cold_rss_mb": cold_rss,
        "warm_s": warm,
        "warm_cpu_s": warm_cpu,
        "warm_rss_mb": warm_rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args()
    for cases in args.cases:
        result = measure(cases)
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            print(
                f"{cases:>6} cases: collection {result['collection_s']:.2f} s, "
                f"cold {result['cold_s']:.1f} s ({result['cold_rss_mb']:.0f} MB), "
                f"warm {result['warm_s']:.1f} s ({result['warm_rss_mb']:.0f} MB)",
                flush=True,
            )


if __name__ == "__main__":
    main()
