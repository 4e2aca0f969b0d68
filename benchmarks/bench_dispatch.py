"""Wall time of the example suite on the fake adapter: cold at several concurrencies, then warm.

Numbers for closing notes and the README, never thresholds in tests. Each cold run gets a
fresh EVALMINE_HOME so nothing is cached; the warm run reuses the last cold run's cache.

    python benchmarks/bench_dispatch.py [--latency 0.2] [--concurrency 1 16] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(home: Path, reports: Path, *extra: str) -> tuple[float, dict]:
    env = {**os.environ, "EVALMINE_HOME": str(home)}
    command = [
        sys.executable, "-m", "pytest", "examples/", "--evalmine-fake", "-q",
        "-p", "no:cacheprovider", f"--evalmine-report-dir={reports}", *extra,
    ]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    elapsed = time.perf_counter() - started
    latest = json.loads((reports / "support-desk" / "latest.json").read_text())
    report = json.loads((reports / "support-desk" / latest["path"]).read_text())
    return elapsed, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        reports = base / "reports"
        home = base / "home"
        for concurrency in args.concurrency:
            for attempt in range(args.repeat):
                home = base / f"home-{concurrency}-{attempt}"
                elapsed, report = run(
                    home,
                    reports,
                    f"--evalmine-fake-latency={args.latency}",
                    f"--evalmine-concurrency={concurrency}",
                )
                print(
                    f"cold  concurrency={concurrency:<3} latency={args.latency}s  "
                    f"{elapsed:6.2f} s  calls made={report['calls']['made']}"
                )
        elapsed, report = run(home, reports, f"--evalmine-fake-latency={args.latency}")
        print(
            f"warm  (cache of the last cold run)            {elapsed:6.2f} s  "
            f"calls made={report['calls']['made']} cost=${report['cost']['spent_usd']:.4f}"
        )


if __name__ == "__main__":
    main()
