"""Coverage of the Bradley-Terry strengths' intervals (the table in docs/spec.md, "Ranking
and cost"): models in a star around the baseline (one judged pair per candidate and case,
the default pairs), true strengths (log-odds, summing to 0) from ``--gaps``, a share of
ties, 20, 50 and 200 cases. Columns: the coverage of every model's true strength pooled
over the models, by the product's expanded percentile interval and by the plain percentile
interval it replaced, and the Monte Carlo standard error. Seeded; a simulation for people,
never a threshold.

    python benchmarks/sim_ranking.py [--models 2] [--runs 1000] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from pytest_evalmine.stats.ranking import Comparison, bradley_terry

GAPS = {2: ((0.0, 0.5), (0.0, 1.5)), 3: ((0.0, 0.4, 0.8), (0.0, 1.0, -0.5))}
CASES = (20, 50, 200)


def cell(gaps: tuple[float, ...], cases: int, ties: float, args: argparse.Namespace, seed: int):
    rng = np.random.default_rng(seed)
    strengths = np.array(gaps) - np.mean(gaps)
    # With ties (half a win each way) the fit estimates the strengths of the expected win
    # share, (1 - ties) P + ties / 2, not of P: that is the truth each interval should cover.
    shares = [
        (1 - ties) / (1 + math.exp(strengths[0] - strengths[j])) + ties / 2
        for j in range(1, len(gaps))
    ]
    relative = np.array([0.0] + [math.log(s / (1 - s)) for s in shares])
    truth = relative - relative.mean()
    names = [f"m{i}" for i in range(len(gaps))]
    covered = {"expanded": 0, "percentile": 0}
    for run in range(args.runs):
        comparisons = []
        for case in range(cases):
            for j in range(1, len(gaps)):
                win = 1 / (1 + math.exp(strengths[0] - strengths[j]))
                # a tie takes ``ties`` of the pairs, half a win each way
                share = 0.5 if rng.random() < ties else float(rng.random() < win)
                comparisons.append(Comparison(f"t/c{case}", names[j], names[0], share))
        for method in covered:
            ranked = bradley_terry(
                comparisons, names, seed=run, resamples=args.resamples,
                expanded=method == "expanded",
            )  # fmt: skip
            for row in ranked:
                true = truth[names.index(row.model)]
                assert row.interval is not None
                covered[method] += row.interval.low <= true <= row.interval.high
    total = args.runs * len(gaps)
    return {m: c / total for m, c in covered.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=2, choices=sorted(GAPS))
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--cases", default=",".join(map(str, CASES)))
    args = parser.parse_args()
    se = math.sqrt(0.95 * 0.05 / args.runs)
    print(f"{args.models} models, {args.runs} runs per cell (MC se {se:.3f} per model at 0.95)")
    print("strengths        ties  cases  expanded  percentile")
    seed = 20261234
    for gaps in GAPS[args.models]:
        for ties in (0.0, 0.2):
            for cases in map(int, args.cases.split(",")):
                seed += 1
                row = cell(gaps, cases, ties, args, seed)
                label = "/".join(f"{g:g}" for g in gaps)
                print(
                    f"{label:<16} {ties:4.1f}  {cases:5d}  {row['expanded']:8.3f}"
                    f"  {row['percentile']:10.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
