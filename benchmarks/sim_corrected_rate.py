"""Coverage of the Rogan-Gladen corrected pass rate's interval (the numbers in docs/spec.md,
"Binary judges"): the product's interval (variances at Agresti-Coull proportions) against the
same delta method with the raw proportions, over a grid of true rates and judge recalls.
A simulation for people, never a threshold.

    python benchmarks/sim_corrected_rate.py [--runs 2000] [--answers 200] [--labels 20]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from pytest_evalmine.stats.misclassification import rogan_gladen
from pytest_evalmine.stats.proportions import normal_quantile

TRUE_RATES = (0.1, 0.5, 0.9)
RECALLS = ((0.8, 0.8), (0.95, 0.9), (1.0, 0.95), (1.0, 1.0))


def raw_interval(passed: int, n: int, tp: int, n_p: int, tn: int, n_f: int) -> tuple[float, float]:
    """The textbook delta method on the raw proportions (what the product did before)."""
    q, r, s = passed / n, tp / n_p, tn / n_f
    youden = r + s - 1
    p = (q + s - 1) / youden
    weight = min(1.0, max(0.0, p))
    variance = (
        q * (1 - q) / n + weight**2 * r * (1 - r) / n_p + (1 - weight) ** 2 * s * (1 - s) / n_f
    ) / youden**2
    half = normal_quantile() * math.sqrt(variance)
    return max(0.0, p - half), min(1.0, p + half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--labels", type=int, default=20, help="PASS labels and FAIL labels")
    args = parser.parse_args()
    rng = np.random.default_rng(20261201)
    print("true rate  PASS recall  FAIL recall  raw     product")
    for truth in TRUE_RATES:
        for r, s in RECALLS:
            covered = {"raw": 0, "product": 0}
            runs = 0
            for _ in range(args.runs):
                q = truth * r + (1 - truth) * (1 - s)
                counts = (
                    int(rng.binomial(args.answers, q)), args.answers,
                    int(rng.binomial(args.labels, r)), args.labels,
                    int(rng.binomial(args.labels, s)), args.labels,
                )  # fmt: skip
                rate = rogan_gladen(*counts)
                if rate is None:
                    continue
                runs += 1
                low, high = raw_interval(*counts)
                covered["raw"] += low <= truth <= high
                covered["product"] += rate.interval.low <= truth <= rate.interval.high
            print(
                f"{truth:9.2f}  {r:11.2f}  {s:11.2f}  {covered['raw'] / runs:.3f}   "
                f"{covered['product'] / runs:.3f}"
            )


if __name__ == "__main__":
    main()
