"""Two simulations for the numbers in docs/spec.md, "Paired comparison". A simulation for
people, never a threshold (tests/test_intervals.py checks both at a smaller size).

Coverage of the paired-delta interval with repeats: cases drawn from a population, each
model's per-case success probability p_a ~ U(0.3, 0.9) and p_b = clip(p_a + N(0.05, 0.1)),
scores per repeat either 0/1 (all-pass) or the share of four fields right (Binomial(4, p) / 4),
two tasks.

The noise floor (--floor): one model, per-case chances p from a population; a run of R repeats
measures the floor, then two further single runs of the same model on the same cases: how often
do their mean scores drift apart by more than the floor (promised: at most 5 %)? For each
population, cases x repeats and score kind: the floor with the normal quantile z (before
issue 20) and the floor as stats.paired.noise_floor computes it (Student's t at the
Satterthwaite-capped degrees of freedom).

    python benchmarks/sim_paired_repeats.py [--samples 1000] [--repeats 3]
    python benchmarks/sim_paired_repeats.py --floor [--samples 10000]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from pytest_evalmine.stats.paired import PairedCase, compare_paired, noise_floor
from pytest_evalmine.stats.proportions import normal_quantile

# Per-case chances of one model: flaky everywhere; mostly right, a few flaky; most cases
# settled (always right or always wrong, the shape of many LLM suites) and a few not.
POPULATIONS: dict[str, Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]] = {
    "U(0.3, 0.9)": lambda rng, shape: rng.uniform(0.3, 0.9, shape),
    "U(0.8, 1)": lambda rng, shape: rng.uniform(0.8, 1.0, shape),
    "Beta(1/4, 1/4)": lambda rng, shape: rng.beta(0.25, 0.25, shape),
}
FLOOR_CELLS = ((20, 2), (50, 2), (20, 3), (200, 2))


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


def scores(rng: np.random.Generator, chances: np.ndarray, runs: int, kind: str) -> np.ndarray:
    """samples x runs x cases scores of one model with these per-case chances."""
    shape = (chances.shape[0], runs, chances.shape[1])
    if kind == "all_pass":
        return (rng.random(shape) < chances[:, None, :]).astype(float)
    return rng.binomial(4, np.broadcast_to(chances[:, None, :], shape)) / 4


def floor_drift(
    rng: np.random.Generator, chances: np.ndarray, repeats: int, kind: str
) -> tuple[float, float]:
    """The share of samples whose two further single runs drift beyond the floor: with the
    normal quantile (the formula before issue 20, written out here) and with noise_floor."""
    samples, n = chances.shape
    measured = scores(rng, chances, repeats, kind)  # samples x repeats x cases
    drift = np.abs(np.diff(scores(rng, chances, 2, kind).mean(axis=2), axis=1))[:, 0]
    before = normal_quantile() * np.sqrt(2 * measured.var(axis=1, ddof=1).mean(axis=1) / n)
    # noise_floor depends on the cases' scores, not on the order of the cases or of a case's
    # repeats: each distinct sample (its cases' sorted scores, as base-5 codes of the quarter
    # points, sorted) is computed once.
    quarters = np.rint(4 * np.sort(measured, axis=1)).astype(np.int64)
    codes = np.sort((quarters * 5 ** np.arange(repeats)[None, :, None]).sum(axis=1), axis=1)
    _, which = np.unique(codes, axis=0, return_inverse=True)
    floors: dict[int, float] = {}
    after = np.empty(samples)
    for i, row in enumerate(which.reshape(-1).tolist()):
        if row not in floors:
            floor = noise_floor([tuple(case) for case in measured[i].T.tolist()])
            assert floor is not None
            floors[row] = floor
        after[i] = floors[row]
    return float((drift > before).mean()), float((drift > after).mean())


def coverage(samples: int, repeats: int) -> None:
    pa, pb = population(np.random.default_rng(0), 2_000_000)
    truth = float((pb - pa).mean())
    print(f"true delta {truth:.4f}; {repeats} repeats; {samples} samples per cell")
    for kind in ("all_pass", "fraction"):
        for n in (20, 50, 200):
            rng = np.random.default_rng(n + (7 if kind == "fraction" else 0))
            covered = 0
            for seed in range(samples):
                cases = sample(rng, n, repeats, kind)
                interval = compare_paired(cases, seed=seed, with_mcnemar=False).interval
                assert interval is not None
                covered += interval.low <= truth <= interval.high
            print(f"{kind:9} n={n:<4} coverage {covered / samples:.3f}")


def floor(samples: int) -> None:
    error = math.sqrt(0.05 * 0.95 / samples)
    print(f"drift beyond the floor, {samples} samples per cell (standard error {error:.4f})")
    print(f"{'population':15} {'kind':9} {'cases x repeats':16} {'z (before)':>10} {'now':>7}")
    for name, chances_of in POPULATIONS.items():
        for kind in ("all_pass", "fraction"):
            for n, repeats in FLOOR_CELLS:
                rng = np.random.default_rng([n, repeats, len(name), len(kind)])
                chances = chances_of(rng, (samples, n))
                before, after = floor_drift(rng, chances, repeats, kind)
                cell = f"{n} x {repeats}"
                print(f"{name:15} {kind:9} {cell:16} {before:10.3f} {after:7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="the noise floor's drift")
    args = parser.parse_args()
    if args.floor:
        floor(args.samples or 10_000)
    else:
        coverage(args.samples or 1000, args.repeats)


if __name__ == "__main__":
    main()
