"""Runs every benchmark and writes docs/benchmarks.md: the machine, the exact commands, each
goal of issue 10 with its figure before (benchmarks/baseline.json, measured once on the
commit it names) and now, and the scaling series on the fake adapter. ``tox -e bench``.

    python benchmarks/report.py [--repeat 3] [--cases 1000 5000 10000] [--output PATH]
                                [--save-baseline]

Figures are medians over ``--repeat`` runs (the machine may be shared). Wall times move with
the load; CPU seconds move much less, so both are shown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import bench_loopback
import bench_scale

ROOT = Path(__file__).resolve().parent.parent
BASELINE = Path(__file__).resolve().parent / "baseline.json"
LOOPBACK = "python benchmarks/bench_loopback.py --cases 200 --latency 0.1 --concurrency 32"
CPU = "python benchmarks/bench_loopback.py --cases 200 --latency 0 --concurrency 64"
CPU_HTTPS = f"{CPU} --https"
SCALE = "python benchmarks/bench_scale.py --cases"
# Below this line docs/benchmarks.md holds sections written by hand from other benchmarks
# (bench_adaptive, bench_batch, ...): a rewrite keeps them.
KEPT_BELOW = (
    "<!-- Above: written by benchmarks/report.py. Below: sections from the other benchmarks, "
    "kept by it. -->"
)


def measure_all(repeat: int, cases: list[int], scale_repeat: int) -> dict[str, Any]:
    loopback = bench_loopback.median_of(
        [bench_loopback.measure(200, 0.1, 32) for _ in range(repeat)]
    )
    cpu = bench_loopback.median_of([bench_loopback.measure(200, 0.0, 64) for _ in range(repeat)])
    cpu_https = bench_loopback.median_of(
        [bench_loopback.measure(200, 0.0, 64, https=True) for _ in range(repeat)]
    )
    every_plugin = bench_loopback.median_of(
        [bench_loopback.measure(200, 0.1, 32, all_plugins=True) for _ in range(repeat)]
    )
    scale = [_median_scale([bench_scale.measure(n) for _ in range(scale_repeat)]) for n in cases]
    return {
        "commit": _git("rev-parse", "--short", "HEAD") or "(not a git checkout)",
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": _load(),
        "repeat": repeat,
        "loopback": loopback,
        "cpu": cpu,
        "cpu_https": cpu_https,
        "every_plugin": every_plugin,
        "scale": scale,
    }


def _median_scale(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min)"


def _machine() -> list[str]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    ) if Path("/proc/cpuinfo").exists() else platform.processor()  # fmt: skip
    return [
        f"- {os.cpu_count()} CPU(s): {cpu}",
        f"- {platform.system()} {platform.release()}, Python {platform.python_version()}",
    ]


def _scale_at(result: dict[str, Any], cases: int) -> dict[str, float] | None:
    return next((row for row in result["scale"] if row["cases"] == cases), None)


def _goal_rows(before: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    def loop(result: dict[str, Any]) -> dict[str, str]:
        lb, cpu = result["loopback"], result["cpu"]
        return {
            "cold": f"{lb['cold']['wall_s']:.2f} s ({lb['cold']['cpu_s']:.2f} s CPU)",
            "window": f"{lb['window_ratio']:.2f}x ({lb['cold']['window_s']:.2f} s)",
            "warm": f"{lb['warm']['wall_s']:.2f} s, {lb['warm']['requests']:.0f} requests",
            "connections": f"{lb['cold']['connections']:.0f} for {lb['cold']['requests']:.0f}",
            "cpu": f"{cpu['cpu_ms_per_request']:.2f} ms",
            # The baseline predates the https measurement.
            "cpu_https": f"{result['cpu_https']['cpu_ms_per_request']:.2f} ms"
            if "cpu_https" in result
            else "not measured",
            "in_flight": f"{cpu['cold']['max_in_flight']:.0f} of 64",
        }

    def scale(result: dict[str, Any]) -> dict[str, str]:
        row = _scale_at(result, 10000)
        if row is None:
            return dict.fromkeys(("collection", "cold_scale", "warm_scale", "rss"), "not measured")
        return {
            "collection": f"{row['collection_s']:.2f} s",
            "cold_scale": f"{row['cold_s']:.0f} s ({row['cold_cpu_s']:.0f} s CPU)",
            "warm_scale": f"{row['warm_s']:.0f} s ({row['warm_cpu_s']:.0f} s CPU)",
            "rss": f"{row['cold_rss_mb']:.0f} / {row['warm_rss_mb']:.0f} MB",
        }

    def every_plugin(result: dict[str, Any]) -> dict[str, str]:
        # The baseline predates the plugin-only measurement: its processes autoloaded all.
        lb = result.get("every_plugin", result["loopback"])
        return {
            "every_plugin": f"{lb['cold']['wall_s']:.2f} s ({lb['cold']['cpu_s']:.2f} s CPU), "
            f"warm {lb['warm']['wall_s']:.2f} s"
        }

    b = {**loop(before), **scale(before), **every_plugin(before)}
    n = {**loop(now), **scale(now), **every_plugin(now)}
    goals = [
        ("800 requests, 100 ms, concurrency 32: whole process", "<= 3.5 s", "cold"),
        ("the same, every plugin installed here autoloaded", "(for comparison)", "every_plugin"),
        ("request window / physical limit (2.5 s)", "<= 1.15x", "window"),
        ("warm rerun", "<= 1.0 s, 0 requests", "warm"),
        ("TCP connections (server-side accepts)", "count", "connections"),
        ("client CPU per request, 0 ms, concurrency 64", "<= 0.7 ms", "cpu"),
        ("the same over https (loopback certificate)", "<= 0.7 ms (issue 21)", "cpu_https"),
        ("most requests in flight, 0 ms, concurrency 64", "count", "in_flight"),
        ("10,000 cases x 2 models + judge: collection", "<= 2 s", "collection"),
        ("10,000 cases: cold run (40,000 calls)", "<= 60 s", "cold_scale"),
        ("10,000 cases: warm rerun", "<= 20 s", "warm_scale"),
        ("10,000 cases: peak RSS cold / warm", "< 300 MB", "rss"),
    ]
    rows = [(label, goal, b[key], n[key]) for label, goal, key in goals]
    return rows


def render(
    before: dict[str, Any], now: dict[str, Any], cases: list[int], repeat: int, scale_repeat: int
) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Written by `tox -e bench` (`python benchmarks/report.py`); numbers for people, never",
        "thresholds in tests (tests/test_request_counts.py counts connections and SQLite",
        "transactions instead). Goals from issue 10.",
        "",
        "## Machine",
        "",
        *_machine(),
        f"- before: commit {before['commit']}, {before['measured']}, load {before['load']}",
        f"- now: commit {now['commit']}, {now['measured']}, load {now['load']}",
        *([f"- before, {before['scale_note']}"] if before.get("scale_note") else []),
        "",
        "The machine is shared: wall times move with the load, CPU seconds much less. Each",
        f"loopback figure is the median of {repeat} run(s), each scaling point of "
        f"{scale_repeat}. Measured processes run with Python's",
        "bytecode cache on, as on a user's machine, and load this project's pytest plugin only",
        "(`PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p pytest_evalmine.plugin`), as in a virtualenv",
        "holding the project and its dependencies; this machine also has the dev extra and",
        'more installed, whose plugins cost every pytest process time (the row "every plugin',
        'installed here autoloaded" shows how much; benchmarks/common.py).',
        "",
        "## Commands",
        "",
        "```",
        f"{LOOPBACK} --repeat {repeat}",
        f"{LOOPBACK} --repeat {repeat} --all-plugins",
        f"{CPU} --repeat {repeat}",
        f"{CPU_HTTPS} --repeat {repeat}",
        f"{SCALE} {' '.join(map(str, cases))}  # x {scale_repeat}",
        "```",
        "",
        "## Goals",
        "",
        "| what | goal | before | now |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in _goal_rows(before, now)]
    lines += [
        "",
        "CPU per request: CPU seconds of the cold process minus those of its warm rerun (which",
        "does all the rest: start-up, collection, planning, cache reads, reports), divided by",
        "the requests sent. Request window: first request received to last reply sent, seen",
        "by the server.",
        "",
        "## Scaling on the fake adapter (cases x 2 models, judged in both orders)",
        "",
        "| cases | calls | collection | cold wall (CPU) | warm wall (CPU) | peak RSS cold / warm |",
        "|---|---|---|---|---|---|",
    ]
    for label, result in (("before", before), ("now", now)):
        for row in result["scale"]:
            lines.append(
                f"| {row['cases']:.0f} ({label}) | {4 * row['cases']:.0f} | "
                f"{row['collection_s']:.2f} s | {row['cold_s']:.1f} s ({row['cold_cpu_s']:.1f} s) "
                f"| {row['warm_s']:.1f} s ({row['warm_cpu_s']:.1f} s) | "
                f"{row['cold_rss_mb']:.0f} / {row['warm_rss_mb']:.0f} MB |"
            )
    return "\n".join(lines) + "\n"


def with_kept_sections(generated: str, existing: str) -> str:
    """``generated`` followed by what ``existing`` holds below ``KEPT_BELOW`` (nothing when
    it has no such line)."""
    _, found, kept = existing.partition(KEPT_BELOW)
    return f"{generated}\n{KEPT_BELOW}{kept if found else chr(10)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", type=int, nargs="*", default=[1000, 5000, 10000])
    parser.add_argument("--scale-repeat", type=int, default=1, help="runs per scaling point")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument(
        "--save-baseline", action="store_true", help="store this run as the 'before' figures"
    )
    args = parser.parse_args()
    now = measure_all(args.repeat, args.cases, args.scale_repeat)
    if args.save_baseline:
        BASELINE.write_text(json.dumps(now, indent=1) + "\n")
        print(f"wrote {BASELINE}")
        return
    before = json.loads(BASELINE.read_text())
    existing = args.output.read_text() if args.output.exists() else ""
    generated = render(before, now, args.cases, args.repeat, args.scale_repeat)
    args.output.write_text(with_kept_sections(generated, existing))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
