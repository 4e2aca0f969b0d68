"""Time of the win-rate interval on 10,000 pairs x 10,000 draws (the brief's target: under
1 s), and of the other intervals at that size. Numbers for closing notes, never thresholds.

    python benchmarks/bench_stats.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import time

from common import best_of

from pytest_evalmine.stats.paired import PairedCase, compare_paired
from pytest_evalmine.stats.resample import Cluster, kappa_interval, mean_interval


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(1)
    scores = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(10_000)]
    pairs = [Cluster("", score, 1) for score in scores]
    categories = ["baseline", "tie", "candidate"]
    ratings = [(rng.choice(categories), rng.choice(categories)) for _ in range(10_000)]
    cases = [
        PairedCase(f"t{i % 40}", f"c{i}", (rng.random(),), (rng.random(),)) for i in range(10_000)
    ]
    one_task = [PairedCase("t", c.case, c.a, c.b) for c in cases]
    started = time.perf_counter()
    import numpy  # noqa: F401  (the first import is paid once per run; reported apart)

    print(f"numpy import: {time.perf_counter() - started:.3f} s")
    rows = {
        "win rate, 10,000 pairs x 10,000 draws": lambda: mean_interval(
            pairs, low_end=0.0, high_end=1.0, seed=7
        ),
        "kappa, 10,000 labels x 10,000 draws": lambda: kappa_interval(ratings, seed=7),
        "paired delta, 10,000 cases (all distinct, 40 tasks) x 10,000 draws": lambda: (
            compare_paired(cases, seed=7)
        ),
        "paired delta, 10,000 cases (all distinct, one task) x 10,000 draws": lambda: (
            compare_paired(one_task, seed=7)
        ),
    }
    for name, work in rows.items():
        print(f"{name}: {best_of(args.repeat, work):.4f} s (best of {args.repeat})")


if __name__ == "__main__":
    main()
