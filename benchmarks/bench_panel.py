"""Time of a judge panel's pair properties and its report on 10,000 pairs x 3 jurors (each
juror's view of a pair is rebuilt on access). Numbers for closing notes, never thresholds.

    python benchmarks/bench_panel.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import random

from common import best_of

from pytest_evalmine.judging.pairs import (
    BASELINE_FIRST,
    CANDIDATE_FIRST,
    JudgePass,
    JurorVerdicts,
    Pair,
)

JURORS = ("fake/j1", "fake/j2", "fake/j3")


def panel_pairs(count: int, seed: int = 1) -> list[Pair]:
    rng = random.Random(seed)
    pairs = []
    for n in range(count):
        pair = Pair("s", f"t{n % 10}", f"c{n}", "fake/a", "fake/b")
        for juror in JURORS:
            passes = [
                JudgePass(order=order, winner_slot=rng.choice(["1", "2", "tie"]))
                for order in (BASELINE_FIRST, CANDIDATE_FIRST)
            ]
            pair.jurors[juror] = JurorVerdicts(passes=passes)
        pairs.append(pair)
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pairs = panel_pairs(10_000)
    rows = {
        "score of every pair": lambda: [p.score for p in pairs],
        "judged + score + outcome + flip of every pair": lambda: [
            (p.judged, p.score, p.outcome, p.flip) for p in pairs
        ],
        "bias passes of every pair": lambda: [p.bias_passes for p in pairs],
        "to_dict of every pair": lambda: [p.to_dict() for p in pairs],
    }
    for name, work in rows.items():
        print(f"{name}, 10,000 pairs x 3 jurors: {best_of(args.repeat, work):.4f} s")


if __name__ == "__main__":
    main()
