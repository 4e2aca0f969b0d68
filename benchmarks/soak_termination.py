"""The termination soak (issue 28): many more generated dispatch scenarios than the CI profile
of tests/test_termination.py runs, each checked for the same invariants (it ended within its
guard, every request has an outcome, the ledger within the cap, no paid answer lost, no
reservation, claim or batch submission left open). It does not stop at the first broken
scenario: it counts them, and prints the figures for docs/benchmarks.md.

    python benchmarks/soak_termination.py [--examples 300] [--max-cases 4] [--seed 0]
        [--ways online batch mixed]

Prints scenarios run, calls, outcomes by kind, the longest run and the largest ratio of a
run's wall time to its computed bound, and each broken scenario with what it broke. Exit 1
when any scenario broke an invariant. Numbers for notes, never thresholds in tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from tests.termination_scenarios import (  # noqa: E402
    Scenario,
    describe,
    run,
    scenarios,
    violations,
)


def soak(examples: int, max_cases: int, random_seed: int, ways: tuple[str, ...]) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "scenarios": 0,
        "calls": 0,
        "outcomes": Counter(),
        "ways": Counter(),
        "two_processes": 0,
        "interrupted": 0,
        "max_wall_s": 0.0,
        "max_wall_to_bound": 0.0,
        "broken": [],
    }

    @seed(random_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(scenarios(max_cases=max_cases, ways=ways))
    def one(scenario: Scenario) -> None:
        with tempfile.TemporaryDirectory() as directory:
            result = run(scenario, Path(directory))
            broken = violations(result)
        counts = describe(result)
        figures["scenarios"] += 1
        figures["calls"] += counts["calls"]
        figures["outcomes"].update(counts["outcomes"])
        way = "online" if not scenario.batched else (
            "batch" if scenario.batched == set(scenario.providers) else "mixed"
        )  # fmt: skip
        figures["ways"][way] += 1
        figures["two_processes"] += scenario.second is not None
        figures["interrupted"] += result.interrupted
        figures["max_wall_s"] = max(figures["max_wall_s"], result.wall_s)
        figures["max_wall_to_bound"] = max(
            figures["max_wall_to_bound"], result.wall_s / scenario.bound_s()
        )
        if broken:
            figures["broken"].append({"scenario": repr(scenario), "broke": broken})
            print(f"BROKEN: {scenario!r}\n  " + "\n  ".join(broken), flush=True)

    started = time.perf_counter()
    one()
    figures["total_s"] = round(time.perf_counter() - started, 1)
    figures["outcomes"] = dict(figures["outcomes"].most_common())
    figures["ways"] = dict(figures["ways"])
    figures["max_wall_s"] = round(figures["max_wall_s"], 2)
    figures["max_wall_to_bound"] = round(figures["max_wall_to_bound"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--max-cases", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ways",
        nargs="+",
        choices=("online", "batch", "mixed"),
        default=["online", "batch", "mixed"],
    )
    args = parser.parse_args()
    figures = soak(args.examples, args.max_cases, args.seed, tuple(args.ways))
    print(json.dumps({k: v for k, v in figures.items() if k != "broken"}, indent=2))
    print(f"broken scenarios: {len(figures['broken'])}")
    sys.exit(1 if figures["broken"] else 0)


if __name__ == "__main__":
    main()
