"""Coverage of the prediction-powered estimate's interval (the table in docs/spec.md,
"Prediction-powered estimates"): 200 judged pairs, 10, 20 or 50 of them labelled at random,
judges agreeing with the person 50-95 % of the time and one biased towards the candidate,
two true preference rates. Columns: the coverage of the product's interval (t quantile), of
the same interval with the normal quantile, and of the labels-only interval; the product's
median width over the labels-only one; its median effective n. A simulation for people,
never a threshold (tests/test_ppi.py runs a smaller one with thresholds).

    python benchmarks/sim_ppi.py [--runs 4000] [--pairs 200]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from pytest_evalmine.stats.ppi import ppi_mean

SCORES = np.array([0.0, 0.5, 1.0])  # baseline, tie, candidate
# (P(baseline), P(tie), P(candidate)) of the person's preference
HUMANS = {"even": (0.40, 0.15, 0.45), "baseline-heavy": (0.70, 0.10, 0.20)}
JUDGES = ("agree 0.50", "agree 0.70", "agree 0.85", "agree 0.95", "biased to candidate")


def judge_scores(judge: str, human: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The judge's both-order score of each pair, from the person's category (0, 1, 2).
    "agree a": the person's category with probability a, else one of the other two; a
    decisive verdict is soft (0.25 / 0.75: one pass a tie) a third of the time.
    "biased": every candidate preference kept, and half the others called for the candidate."""
    n = len(human)
    if judge.startswith("agree"):
        agree = float(judge.split()[1])
        other = (human + rng.integers(1, 3, n)) % 3
        category = np.where(rng.random(n) < agree, human, other)
    else:
        category = np.where(rng.random(n) < 0.5, 2, human)
    score = SCORES[category]
    soft = rng.random(n) < 1 / 3
    score = np.where(soft & (category == 2), 0.75, score)
    return np.where(soft & (category == 0), 0.25, score)


def cell(
    human_p: tuple[float, float, float], judge: str, labels: int, pairs: int, runs: int, seed: int
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    truth = float(np.dot(human_p, SCORES))
    covered = {"t": 0, "normal": 0, "labels": 0}
    ratios, effective = [], []
    for _ in range(runs):
        human = rng.choice(3, size=pairs, p=human_p)
        f = judge_scores(judge, human, rng)
        chosen = rng.choice(pairs, size=labels, replace=False)
        labelled = [(float(SCORES[human[i]]), float(f[i])) for i in chosen]
        judged = [float(x) for x in f]
        ours = ppi_mean(labelled, judged)
        normal = ppi_mean(labelled, judged, quantile="normal")
        assert ours is not None and normal is not None
        covered["t"] += ours.interval.low <= truth <= ours.interval.high
        covered["normal"] += normal.interval.low <= truth <= normal.interval.high
        alone = ours.labels_only_interval
        covered["labels"] += alone.low <= truth <= alone.high
        width_alone = alone.high - alone.low
        if width_alone > 0:
            ratios.append((ours.interval.high - ours.interval.low) / width_alone)
        if ours.effective_n is not None:
            effective.append(ours.effective_n)
    return {
        **{k: v / runs for k, v in covered.items()},
        "width_ratio": statistics.median(ratios),
        "effective_n": statistics.median(effective),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--pairs", type=int, default=200)
    args = parser.parse_args()
    print(f"{args.runs} runs per row, {args.pairs} judged pairs, 95 % intervals")
    print("human           judge                labels  t      normal labels-only width  eff.n")
    seed = 20261201
    for name, human_p in HUMANS.items():
        for judge in JUDGES:
            for labels in (10, 20, 50):
                seed += 1
                row = cell(human_p, judge, labels, args.pairs, args.runs, seed)
                print(
                    f"{name:<15} {judge:<20} {labels:>6}  {row['t']:.3f}  {row['normal']:.3f}"
                    f"  {row['labels']:.3f}       {row['width_ratio']:.2f}"
                    f"  {row['effective_n']:5.1f}"
                )


if __name__ == "__main__":
    main()
