"""A big run where every item fails a check: N cases x 2 models on the fake adapter, each
answer failing ``number`` (the case's gold is a number no fake answer holds). How long the
output is, on which line the evalmine summary starts and where pytest's final line is, and
the process's wall and CPU time as ``/usr/bin/time`` measures them. Numbers for
docs/benchmarks.md ("A run where every item fails"), never thresholds.

    python benchmarks/bench_failing_run.py [--cases 2000] [--json] [-- PYTEST_ARGS...]

Arguments after ``--`` go to pytest (``--tb=long`` measures the long failure form).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from pathlib import Path

from common import child_environment, pytest_command, write_ticket_suite

# What /usr/bin/time writes last, on stderr: wall seconds, user and system CPU seconds.
TIME_FORMAT = "evalmine-bench-time %e %U %S"
TIME_LINE = re.compile(r"evalmine-bench-time ([0-9.]+) ([0-9.]+) ([0-9.]+)")
PYTEST_FINAL = re.compile(r"^=+ .*\d+ failed.* in [0-9.]+s.* =+$")


def run(folder: Path, *extra: str, exit_code: int = 1) -> tuple[dict[str, float], str]:
    """One pytest process under /usr/bin/time: (wall and CPU seconds, its stdout)."""
    command = [
        "/usr/bin/time", "-f", TIME_FORMAT,
        *pytest_command(
            "failing.eval.yaml", "--evalmine-fake", "-p", "no:cacheprovider", *extra
        ),
    ]  # fmt: skip
    env = {**child_environment(), "EVALMINE_HOME": str(folder / ".evalmine")}
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    timing = TIME_LINE.search(done.stderr)
    if timing is None or done.returncode != exit_code:
        raise SystemExit(
            f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
        )
    wall, user, system = (float(g) for g in timing.groups())
    return {"wall_s": wall, "cpu_s": user + system}, done.stdout


def measure(cases: int, extra: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        write_ticket_suite(folder, "failing", cases, judge=False, checks="[number]", gold=123456789)
        run(folder, "--collect-only", exit_code=0)  # fills the bytecode cache
        times, output = run(folder, *extra)
    lines = output.splitlines()
    summary = next(i for i, line in enumerate(lines, 1) if re.match(r"=+ evalmine =+$", line))
    final = next(i for i, line in enumerate(lines, 1) if PYTEST_FINAL.match(line))
    return {
        "cases": cases,
        "items": 2 * cases,
        "output_lines": len(lines),
        "summary_line": summary,
        "pytest_final_line": final,
        "lines_between_summary_and_final": final - summary,
        **times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    options = parser.parse_args()
    result = measure(options.cases, options.pytest_args)
    if options.json:
        print(json.dumps(result))
        return
    print(
        f"{result['cases']} cases x 2 models ({result['items']} failing items) "
        f"{' '.join(options.pytest_args)}".rstrip()
    )
    print(
        f"output {result['output_lines']} lines; evalmine summary at line "
        f"{result['summary_line']}; pytest's final line at {result['pytest_final_line']}"
    )
    print(f"wall {result['wall_s']:.1f} s, CPU {result['cpu_s']:.1f} s")


if __name__ == "__main__":
    main()
