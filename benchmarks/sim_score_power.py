"""Power of the report's paired test (``compare_paired``: the Bayesian bootstrap with the
Jeffreys half observation at each end, section 27) at the checker-score plan's n (the table
in docs/spec.md, "Power and planning"): per cell a per-case score difference of sd ``sd``
and true mean ``delta`` (normal, clipped to [-1, 1]), the cases the normal formula planned
and the cases the plan now gives (``paired_continuous_cases``, the report's test), and the
share of samples whose interval clears 0 at each. Seeded; the Monte Carlo standard error
of a power of 0.80 is printed. A simulation for people, never a threshold.

    python benchmarks/sim_score_power.py [--runs 1000] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from pytest_evalmine.stats import power as pw
from pytest_evalmine.stats.paired import PairedCase, compare_paired

CELLS = ((0.15, 0.05), (0.20, 0.05), (0.30, 0.10), (0.40, 0.10))


def detection(sd: float, delta: float, cases: int, runs: int, resamples: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    detected = 0
    for run in range(runs):
        differences = np.clip(rng.normal(delta, sd, cases), -1.0, 1.0)
        # A at 0.5 - d/2 and B at 0.5 + d/2: both in [0, 1], B - A = d
        paired = [
            PairedCase("t", str(i), (0.5 - d / 2,), (0.5 + d / 2,))
            for i, d in enumerate(differences.tolist())
        ]
        comparison = compare_paired(paired, seed=run, resamples=resamples, with_mcnemar=False)
        assert comparison.interval is not None
        detected += comparison.interval.low > 0
    return detected / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    se = math.sqrt(0.8 * 0.2 / args.runs)
    print(f"{args.runs} samples per cell, {args.resamples} draws each (MC se {se:.3f} at 0.80)")
    print("sd    delta  normal n  power   plan n  power")
    for number, (sd, delta) in enumerate(CELLS):
        normal = pw.paired_continuous_cases_normal(delta, sd)
        planned = pw.paired_continuous_cases(delta, sd)
        assert normal is not None and planned is not None
        old = detection(sd, delta, normal, args.runs, args.resamples, 100 + number)
        new = detection(sd, delta, planned, args.runs, args.resamples, 200 + number)
        print(
            f"{sd:.2f}  {delta:.2f}   {normal:7d}  {old:.3f}  {planned:7d}  {new:.3f}", flush=True
        )


if __name__ == "__main__":
    main()
