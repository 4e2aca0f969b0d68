"""Coverage of the paired-delta interval with repeats (the numbers in docs/spec.md, "Paired
comparison"): cases drawn from a population, each model's per-case success probability
p_a ~ U(0.3, 0.9) and p_b = clip(p_a + N(0.05, 0.1)), scores per repeat either 0/1 (all-pass)
or the share of four fields right (Binomial(4, p) / 4), two tasks. A simulation for people,
never a threshold.

    python benchmarks/sim_paired_repeats.py [--samples 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_evalmine.stats.paired import PairedCase, compare_paired


def population(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    pa = rng.uniform(0.3, 0.9, n)
    return pa, np.clip(pa + rng.normal(0.05, 0.1, n), 0, 1)


def sample(rng: np.random.Generator, n: int, repeats: int, kind: str) -> list[PairedCase]:
    pa, pb = population(rng, n)
    if kind == "all_pass":
        a = (rng.random((n, repeats)) < pa[:, None]).astype(float)
        b = (rng.random((n, repeats)) < pb[:, None]).astype(float)
    else:
        a = rng.binomial(4, np.repeat(pa[:, None], repeats, 1)) / 4
        b = rng.binomial(4, np.repeat(pb[:, None], repeats, 1)) / 4
    return [PairedCase(f"t{i % 2}", str(i), tuple(a[i]), tuple(b[i])) for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    pa, pb = population(np.random.default_rng(0), 2_000_000)
    truth = float((pb - pa).mean())
    print(f"true delta {truth:.4f}; {args.repeats} repeats; {args.samples} samples per cell")
    for kind in ("all_pass", "fraction"):
        for n in (20, 50, 200):
            rng = np.random.default_rng(n + (7 if kind == "fraction" else 0))
            covered = 0
            for seed in range(args.samples):
                cases = sample(rng, n, args.repeats, kind)
                interval = compare_paired(cases, seed=seed, with_mcnemar=False).interval
                assert interval is not None
                covered += interval.low <= truth <= interval.high
            print(f"{kind:9} n={n:<4} coverage {covered / args.samples:.3f}")


if __name__ == "__main__":
    main()
