"""Coverage of the prediction-powered estimate's interval on a pass rate (0/1 labels and a
PASS/FAIL judge; the table in docs/spec.md, "Prediction-powered estimates", binary judges):
N answers judged, n of them labelled at random, true pass rates 0.05-0.95, judges of PASS
and FAIL recall (0.9, 0.9), (0.7, 0.7), (0.5, 0.5) (no information) and (1.0, 0.5) (biased
towards PASS). Columns: coverage of the product's interval, of the t interval it replaced
(``method="t"``), the product's median width, and the Monte Carlo standard error of a
coverage of 0.95 at this many runs. Seeded; a simulation for people, never a threshold.

    python benchmarks/sim_ppi_binary.py [--runs 1000] [--answers 200] [--methods wilson,t]
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

from pytest_evalmine.stats.ppi import ppi_mean

RATES = (0.05, 0.1, 0.2, 0.5, 0.8, 0.9, 0.95)
LABELS = (20, 30, 50, 100, 200)
JUDGES = {
    "0.9/0.9": (0.9, 0.9),
    "0.7/0.7": (0.7, 0.7),
    "0.5/0.5": (0.5, 0.5),
    "1.0/0.5": (1.0, 0.5),
}


def cell(
    rate: float,
    recalls: tuple[float, float],
    labels: int,
    answers: int,
    runs: int,
    seed: int,
    methods: list[str],
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    pass_recall, fail_recall = recalls
    covered = dict.fromkeys(methods, 0)
    widths: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(runs):
        human = (rng.random(answers) < rate).astype(float)
        says_pass = np.where(human == 1, rng.random(answers) < pass_recall,
                             rng.random(answers) >= fail_recall)  # fmt: skip
        judge = says_pass.astype(float)
        chosen = rng.choice(answers, size=labels, replace=False)
        labelled = [(float(human[i]), float(judge[i])) for i in chosen]
        judged = judge.tolist()
        for method in methods:
            found = ppi_mean(labelled, judged, method=method)
            assert found is not None
            covered[method] += found.interval.low <= rate <= found.interval.high
            widths[method].append(found.interval.high - found.interval.low)
    row = {m: covered[m] / runs for m in methods}
    row.update({f"width {m}": statistics.median(widths[m]) for m in methods})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--methods", default="wilson,t")
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--labels", default=",".join(map(str, LABELS)))
    parser.add_argument("--judges", default=",".join(JUDGES))
    args = parser.parse_args()
    methods = args.methods.split(",")
    se = math.sqrt(0.95 * 0.05 / args.runs)
    print(f"{args.runs} runs per cell (MC se {se:.3f} at 0.95), {args.answers} answers judged")
    print("rate  judge    labels  " + "  ".join(f"{m:>7}" for m in methods) + "  width")
    seed = 20261233
    for rate in map(float, args.rates.split(",")):
        for judge in args.judges.split(","):
            for labels in map(int, args.labels.split(",")):
                seed += 1
                if labels > args.answers:
                    continue
                row = cell(rate, JUDGES[judge], labels, args.answers, args.runs, seed, methods)
                print(
                    f"{rate:4.2f}  {judge:<8} {labels:>6}  "
                    + "  ".join(f"{row[m]:7.3f}" for m in methods)
                    + f"  {row[f'width {methods[0]}']:.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
