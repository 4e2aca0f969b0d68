"""stats/proportions.py, stats/resample.py, stats/paired.py: Wilson intervals, the Bayesian
bootstrap of a stratified clustered mean, kappa's posterior interval, paired comparisons and
exact McNemar, against hand-computed values and independent implementations (statsmodels,
scipy, scikit-learn); and the coverage of every 95 % interval in a seeded simulation."""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import beta, binom, binomtest
from scipy.stats import bootstrap as scipy_bootstrap
from scipy.stats import t as student_t
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.proportion import proportion_confint

from pytest_evalmine.stats.estimators import CATEGORIES, Interval
from pytest_evalmine.stats.paired import (
    PairedCase,
    compare_paired,
    drift_half_width,
    floor_degrees_of_freedom,
    mcnemar_exact,
    noise_floor,
    t_quantile,
)
from pytest_evalmine.stats.proportions import Proportion, normal_quantile, wilson_interval
from pytest_evalmine.stats.resample import Cluster, kappa_interval, mean_interval

from .floats import assert_same_interval

Z = 1.959963984540054


# --- Wilson ----------------------------------------------------------------------------------


def test_wilson_by_hand_at_the_edges() -> None:
    assert normal_quantile() == pytest.approx(Z, abs=1e-15)
    # 0 of 10: centre = (z^2/20) / (1 + z^2/10), half the same, so [0, z^2 / (10 + z^2)].
    zero = wilson_interval(0, 10)
    assert zero is not None
    assert zero.low == 0.0
    assert zero.high == pytest.approx(Z**2 / (10 + Z**2), abs=1e-12)  # 0.27753...
    # 10 of 10: the mirror image, [10 / (10 + z^2), 1] = [0.72247..., 1]: never zero width.
    full = wilson_interval(10, 10)
    assert full is not None
    assert full.low == pytest.approx(10 / (10 + Z**2), abs=1e-12)
    assert full.high == 1.0
    # 1 of 1: [1 / (1 + z^2), 1] = [0.2066, 1].
    one = wilson_interval(1, 1)
    assert one is not None and one.low == pytest.approx(1 / (1 + Z**2), abs=1e-12)
    assert wilson_interval(0, 0) is None


def test_wilson_by_hand_in_the_middle() -> None:
    # 6 of 20: p = 0.3, z^2/n = 0.19207; centre = (0.3 + 0.096036) / 1.19207 = 0.33223;
    # half = z / 1.19207 * sqrt(0.21/20 + 0.19207/80) = 1.64417 * 0.113591 = 0.18676
    interval = wilson_interval(6, 20)
    assert interval is not None
    z2n = Z * Z / 20
    centre = (0.3 + z2n / 2) / (1 + z2n)
    half = Z / (1 + z2n) * math.sqrt(0.3 * 0.7 / 20 + z2n / 80)
    assert (interval.low, interval.high) == pytest.approx((centre - half, centre + half))
    assert (interval.low, interval.high) == pytest.approx((0.14548, 0.51897), abs=1e-5)


def test_wilson_equals_statsmodels_to_1e_9_on_random_counts() -> None:
    rng = random.Random(12)
    for _ in range(2000):
        n = rng.choice([1, 2, 3, 7, 20, 50, 200, 1000, 12345])
        successes = rng.choice([0, n, rng.randint(0, n)])
        confidence = rng.choice([0.95, 0.95, 0.9, 0.99, 0.5])
        ours = wilson_interval(successes, n, confidence)
        low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
        assert ours is not None
        assert ours.low == pytest.approx(low, abs=1e-9)
        assert ours.high == pytest.approx(high, abs=1e-9)


def test_proportion_to_dict() -> None:
    data = Proportion(3, 4).to_dict()
    assert data["successes"] == 3 and data["n"] == 4 and data["rate"] == 0.75
    low, high = proportion_confint(3, 4, method="wilson")
    assert data["interval"] == {"low": pytest.approx(low), "high": pytest.approx(high)}
    assert Proportion(0, 0).to_dict()["interval"] is None


# --- the Bayesian bootstrap of a mean ------------------------------------------------------


def units(values: list[float], stratum: str = "") -> list[Cluster]:
    return [Cluster(stratum, v, 1) for v in values]


@pytest.mark.parametrize(("successes", "n"), [(0, 1), (1, 1), (5, 5), (30, 30), (7, 20), (0, 40)])
def test_on_zero_one_data_the_mean_interval_is_the_jeffreys_interval(
    successes: int, n: int
) -> None:
    """One stratum of 0/1 values plus half a pseudo-value at 0 and at 1: by the Dirichlet's
    aggregation property the mean is Beta(x + 1/2, n - x + 1/2), whose quantiles are the
    Jeffreys interval (scipy's beta, statsmodels' "jeffreys"). 10,000 draws: the quantiles'
    Monte Carlo error is at most 0.006 (n = 1, where the density at the bound is lowest)."""
    values = [1.0] * successes + [0.0] * (n - successes)
    interval = mean_interval(units(values), low_end=0.0, high_end=1.0, seed=99)
    assert interval is not None
    expected = beta.ppf([0.025, 0.975], successes + 0.5, n - successes + 0.5)
    assert (interval.low, interval.high) == pytest.approx(tuple(expected), abs=0.02)
    if 0 < successes < n:  # statsmodels clips its Jeffreys interval at the edges
        low, high = proportion_confint(successes, n, method="jeffreys")
        assert (interval.low, interval.high) == pytest.approx((low, high), abs=0.02)
    # The edge cases are the point of it: all wins is not [1, 1].
    assert interval.high - interval.low > 0.03


def test_all_win_pairs_never_give_a_point_interval() -> None:
    """Reproduced on main: all-win pairs gave [1.00, 1.00] at n = 1, 3, 5, 10 and 30."""
    previous_low = 0.0
    for n in (1, 3, 5, 10, 30):
        interval = mean_interval(units([1.0] * n), low_end=0.0, high_end=1.0, seed=n)
        assert interval is not None
        assert interval.high > 0.999
        assert previous_low < interval.low < 1.0 - 0.01
        previous_low = interval.low


def test_mean_interval_agrees_with_scipy_bootstrap_on_larger_samples() -> None:
    rng = np.random.default_rng(3)
    for n in (200, 1000):
        values = list(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=n, p=[0.2, 0.1, 0.3, 0.1, 0.3]))
        ours = mean_interval(units(values), low_end=0.0, high_end=1.0, seed=5)
        theirs = scipy_bootstrap(
            (np.array(values),), np.mean, n_resamples=10_000, method="percentile", rng=rng
        ).confidence_interval
        assert ours is not None
        width = theirs.high - theirs.low
        # Same target; the Bayesian bootstrap and the pseudo-values move the ends by a few
        # percent of the width at these sizes.
        assert ours.low == pytest.approx(theirs.low, abs=0.06 * width)
        assert ours.high == pytest.approx(theirs.high, abs=0.06 * width)


def test_mean_interval_is_reproducible_from_its_seed() -> None:
    values = units([0.0, 0.25, 1.0, 1.0, 0.5, 0.75, 1.0])
    first = mean_interval(values, low_end=0.0, high_end=1.0, seed=1)
    assert first == mean_interval(values, low_end=0.0, high_end=1.0, seed=1)
    assert first != mean_interval(values, low_end=0.0, high_end=1.0, seed=2)
    # The order of the clusters does not matter: identical ones are drawn as one component.
    assert first == mean_interval(values[::-1], low_end=0.0, high_end=1.0, seed=1)
    assert mean_interval([], low_end=0.0, high_end=1.0, seed=1) is None


def test_the_documented_draw_written_independently() -> None:
    """Spec: per stratum (sorted by name), distinct (total, size) ascending with Dirichlet
    parameters = counts, then the two pseudo-clusters with 1/2 x the stratum's share; the
    gammas from numpy.random.default_rng(seed).standard_gamma one distinct parameter at a
    time (ascending; a draws x components block each), normalised, scaled by the share."""
    clusters = units([1.0, 0.0, 1.0], "b") + units([0.5, 0.5], "a")
    interval = mean_interval(clusters, low_end=0.0, high_end=1.0, seed=77, resamples=5000)
    rng = np.random.default_rng(77)
    numerator = np.zeros(5000)
    denominator = np.zeros(5000)
    for values, alpha, share in (
        ([0.5, 0.0, 1.0], [2, 0.2, 0.2], 2 / 5),  # stratum a: 0.5 x2, then the ends
        ([0.0, 1.0, 0.0, 1.0], [1, 2, 0.3, 0.3], 3 / 5),  # stratum b: 0 x1, 1 x2, ends
    ):
        alpha = np.array(alpha, dtype=float)
        g = np.zeros((5000, len(alpha)))
        for shape in sorted(set(alpha)):
            g[:, alpha == shape] = rng.standard_gamma(shape, size=(5000, (alpha == shape).sum()))
        w = g / g.sum(axis=1, keepdims=True) * share
        numerator += w @ np.array(values)
        denominator += w.sum(axis=1)
    expected = np.quantile(numerator / denominator, [0.025, 0.975])
    assert interval is not None
    assert (interval.low, interval.high) == pytest.approx(tuple(expected), rel=1e-12)


def test_strata_keep_their_sizes() -> None:
    """50 zeros in one task and 50 ones in another: resampling within tasks keeps the mean
    near 1/2; pooled, the split between zeros and ones varies and the interval is wider."""
    clusters = units([0.0] * 50, "a") + units([1.0] * 50, "b")
    stratified = mean_interval(clusters, low_end=0.0, high_end=1.0, seed=3)
    pooled = mean_interval(units([0.0] * 50 + [1.0] * 50), low_end=0.0, high_end=1.0, seed=3)
    assert stratified is not None and pooled is not None
    assert stratified.low < 0.5 < stratified.high
    assert stratified.high - stratified.low < 0.5 * (pooled.high - pooled.low)


def test_clusters_are_the_unit_of_resampling() -> None:
    """Three identical repeats per case carry one case's information: the clustered
    interval equals the one over the case means, and treating the 3n repeats as independent
    would be narrower (too narrow)."""
    rng = random.Random(4)
    means = [rng.choice([0.0, 0.5, 1.0]) for _ in range(30)]
    clustered = mean_interval(
        [Cluster("", 3 * m, 3) for m in means], low_end=0.0, high_end=1.0, seed=8
    )
    per_case = mean_interval(units(means), low_end=0.0, high_end=1.0, seed=8)
    naive = mean_interval(
        units([m for m in means for _ in range(3)]), low_end=0.0, high_end=1.0, seed=8
    )
    assert clustered is not None and per_case is not None and naive is not None
    assert (clustered.low, clustered.high) == pytest.approx((per_case.low, per_case.high))
    assert naive.high - naive.low < 0.75 * (clustered.high - clustered.low)


def test_ten_thousand_pairs_draw_as_few_components() -> None:
    # Not a timing test: the draw's size follows the distinct values (5), not the pairs.
    rng = random.Random(1)
    values = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(10_000)]
    interval = mean_interval(units(values), low_end=0.0, high_end=1.0, seed=1)
    assert interval is not None
    centre = sum(values) / len(values)
    assert interval.low < centre < interval.high
    assert interval.high - interval.low < 0.02


# --- kappa's interval ------------------------------------------------------------------------


def test_kappa_interval_is_reproducible_and_brackets_the_point() -> None:
    ratings = [("baseline", "baseline")] * 8 + [("candidate", "candidate")] * 9
    ratings += [("tie", "candidate"), ("baseline", "tie"), ("tie", "tie")]
    first = kappa_interval(ratings, seed=4)
    assert first is not None and first == kappa_interval(ratings, seed=4)
    assert first != kappa_interval(ratings, seed=5)
    assert first.low < 0.75 < first.high
    assert kappa_interval([], seed=1) is None


# --- paired comparison -----------------------------------------------------------------------


def test_mcnemar_by_hand() -> None:
    # 1 vs 6 discordant: P(X <= 1), X ~ Bin(7, 1/2) = (1 + 7) / 128 = 1/16; p = 2/16 = 0.125;
    # mid-p = 2 (P(X <= 1) - P(X = 1) / 2) = 2 (8 - 7/2) / 128 = 9/128 = 0.0703125
    test = mcnemar_exact(1, 6)
    assert test.p_value == pytest.approx(0.125, abs=1e-15)
    assert test.mid_p_value == pytest.approx(9 / 128, abs=1e-15)
    # 3 vs 3: p = min(1, 2 P(X <= 3)), X ~ Bin(6, 1/2): 2 * 42/64 > 1 -> 1;
    # mid-p = 2 (42/64 - 20/128) = 2 * 64/128 = 1: capped after the subtraction, not before
    even = mcnemar_exact(3, 3)
    assert (even.p_value, even.mid_p_value) == (1.0, 1.0)
    assert (mcnemar_exact(0, 0).p_value, mcnemar_exact(0, 0).mid_p_value) == (1.0, 1.0)


@pytest.mark.parametrize("k", [1, 2, 5, 20, 700])
def test_a_balanced_table_has_mid_p_one(k: int) -> None:
    # (1, 1): P(X <= 1) = 3/4, P(X = 1) = 1/2, mid-p = 2 (3/4 - 1/4) = 1 (was 0.5; (5, 5) was
    # 0.754, (20, 20) 0.875: the cap at 1 came before the half point mass was taken off).
    # P(X <= k) + P(X >= k) = 1 + P(X = k) for X ~ Bin(2k, 1/2), so it is 1 exactly.
    test = mcnemar_exact(k, k)
    assert (test.p_value, test.mid_p_value) == (1.0, 1.0)


def scipy_mid_p(a_only: int, b_only: int) -> float:
    """Fagerland, Lydersen & Laake (2013), from scipy's binomial: 2 [P(X <= k) - P(X = k)/2]
    for X ~ Bin(n, 1/2), k the smaller count, capped at 1."""
    n, k = a_only + b_only, min(a_only, b_only)
    return min(1.0, 2 * (binom.cdf(k, n, 0.5) - binom.pmf(k, n, 0.5) / 2))


def test_mcnemar_agrees_with_statsmodels_and_scipy_on_random_tables() -> None:
    rng = random.Random(6)
    for _ in range(300):
        a_only, b_only = rng.randint(0, 40), rng.randint(0, 40)
        ours = mcnemar_exact(a_only, b_only)
        table = [[rng.randint(0, 50), a_only], [b_only, rng.randint(0, 50)]]
        assert ours.p_value == pytest.approx(sm_mcnemar(table, exact=True).pvalue, abs=1e-12)
        if a_only + b_only:
            scipy_p = binomtest(b_only, a_only + b_only, 0.5).pvalue
            assert ours.p_value == pytest.approx(scipy_p, abs=1e-12)
            assert ours.mid_p_value == pytest.approx(scipy_mid_p(a_only, b_only), abs=1e-14)
            assert ours.mid_p_value <= ours.p_value  # the mid-p is never the more conservative


def test_mcnemar_agrees_with_scipy_on_large_tables() -> None:
    # Thousands of discordant cases: the exact integer tail against scipy's binomial, down to
    # p-values far below what a double's absolute error would show.
    for a_only, b_only in ((2400, 2600), (4990, 5010), (3000, 3700), (9000, 1), (700, 700)):
        ours = mcnemar_exact(a_only, b_only)
        smaller, n = min(a_only, b_only), a_only + b_only
        assert ours.p_value == pytest.approx(min(1.0, 2 * binom.cdf(smaller, n, 0.5)), rel=1e-9)
        mid = scipy_mid_p(a_only, b_only)
        assert ours.mid_p_value == pytest.approx(mid, rel=1e-9, abs=1e-300)


def case(task: str, name: str, a: float, b: float) -> PairedCase:
    return PairedCase(task, name, (a,), (b,))


def test_paired_comparison_by_hand() -> None:
    cases = [
        case("t1", "c1", 1.0, 1.0),
        case("t1", "c2", 1.0, 0.0),  # worse by 1
        case("t1", "c3", 0.0, 1.0),  # better by 1
        case("t2", "c1", 0.5, 1.0),  # better by 0.5
        case("t2", "c2", 0.0, 0.0),
        case("t2", "c3", 1.0, 0.75),  # worse by 0.25
    ]
    result = compare_paired(cases, seed=1)
    # A mean 3.5/6, B mean 3.75/6, delta 0.25/6
    assert result.mean_a == pytest.approx(3.5 / 6)
    assert result.mean_b == pytest.approx(3.75 / 6)
    assert result.delta == pytest.approx(0.25 / 6)
    assert [c.case for c in result.worse] == ["c2", "c3"]  # largest drop first
    assert [(c.stratum, c.case) for c in result.better] == [("t1", "c3"), ("t2", "c1")]
    # pass/fail (score 1): A-only c2 (t1) and c3 (t2); B-only c3 (t1) and c1 (t2)
    assert result.mcnemar is not None
    assert (result.mcnemar.a_only, result.mcnemar.b_only) == (2, 2)
    data = result.to_dict()
    assert (data["worse"], data["better"], data["same"], data["cases"]) == (2, 2, 2, 6)
    assert result.interval is not None
    assert result.interval.low < result.delta < result.interval.high


def test_paired_comparison_with_repeats_clusters_by_case() -> None:
    cases = [PairedCase("t", f"c{i}", (1.0, 1.0), (0.0, 1.0)) for i in range(10)]
    result = compare_paired(cases, seed=2)
    assert result.observations == 20 and result.cases == 10
    assert result.delta == pytest.approx(-0.5)
    assert len(result.worse) == 10
    # every case passed for A (both repeats) and failed for B (not every repeat)
    assert result.mcnemar is not None and result.mcnemar.a_only == 10
    with pytest.raises(ValueError, match="same number of scores"):
        PairedCase("t", "x", (1.0,), (1.0, 0.0))


def test_identical_versions_do_not_give_a_point_interval() -> None:
    result = compare_paired([case("t", f"c{i}", 1.0, 1.0) for i in range(20)], seed=3)
    assert result.delta == 0.0
    assert result.interval is not None
    assert result.interval.low < -0.005 and result.interval.high > 0.005


# --- coverage, seeded simulation -----------------------------------------------------------
#
# Each 95 % interval against a grid of truths for n in {20, 50, 200}. Wilson's coverage is
# computed exactly (a sum over the binomial); the resampling intervals are simulated, 400
# samples per cell, 1,000 draws per interval (the draws' count barely moves coverage), one
# seed per distinct sample. 400 samples estimate a coverage of 0.95 with a standard error of
# 0.011, so a cell is checked against [0.93, 0.97] widened by two standard errors; the mean
# over the grid against [0.93, 0.97] itself.

SAMPLES = 400
DRAWS = 1000
SIZES = (20, 50, 200)
ALLOWANCE = 2 * math.sqrt(0.95 * 0.05 / SAMPLES)


def seed_of(sample: tuple[int, ...]) -> int:
    return int(hashlib.sha256(repr(sample).encode()).hexdigest()[:16], 16)


def simulated_coverage(probabilities: np.ndarray, n: int, truth: float, interval_of, rng) -> float:  # type: ignore[no-untyped-def]
    cache: dict[tuple[int, ...], Interval] = {}
    covered = 0
    for counts in rng.multinomial(n, probabilities, size=SAMPLES):
        key = tuple(int(c) for c in counts)
        if key not in cache:
            cache[key] = interval_of(key)
        covered += cache[key].low <= truth <= cache[key].high
    return covered / SAMPLES


def check(table: dict[str, float]) -> None:
    outside = {k: v for k, v in table.items() if not 0.93 - ALLOWANCE <= v <= 0.97 + ALLOWANCE}
    assert not outside, (outside, table)
    average = sum(table.values()) / len(table)
    assert 0.93 <= average <= 0.97, table


def test_wilson_coverage_exactly() -> None:
    table = {}
    for n in SIZES:
        for p in (0.1, 0.2, 0.5, 0.8, 0.9):
            intervals = [wilson_interval(x, n) for x in range(n + 1)]
            table[f"n={n} p={p}"] = float(
                sum(binom.pmf(x, n, p) for x, i in enumerate(intervals) if i.low <= p <= i.high)
            )
    check(table)


SCORES = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


def score_distribution(win: float, tie: float) -> np.ndarray:
    """Each of a pair's two passes independently win / tie / loss for the candidate."""
    verdicts = {1.0: win, 0.5: tie, 0.0: 1 - win - tie}
    result = np.zeros(5)
    for (v1, p1), (v2, p2) in itertools.product(verdicts.items(), verdicts.items()):
        result[round((v1 + v2) * 2)] += p1 * p2
    return result


def test_win_rate_coverage() -> None:
    rng = np.random.default_rng(20261201)
    table = {}
    for n in SIZES:
        for mean, tie in ((0.5, 0.3), (0.7, 0.0), (0.7, 0.3), (0.85, 0.0), (0.95, 0.0)):
            probabilities = score_distribution(mean - tie / 2, tie)

            def interval_of(counts: tuple[int, ...]) -> Interval:
                values = [s for s, k in zip(SCORES, counts, strict=True) for _ in range(k)]
                result = mean_interval(
                    units(values), low_end=0, high_end=1, seed=seed_of(counts), resamples=DRAWS
                )
                assert result is not None
                return result

            truth = float(probabilities @ SCORES)
            table[f"n={n} mean={mean} tie={tie}"] = simulated_coverage(
                probabilities, n, truth, interval_of, rng
            )
    check(table)


def test_kappa_coverage() -> None:
    rng = np.random.default_rng(20261202)
    marginal = np.array([0.4, 0.2, 0.4])
    cells = [(h, j) for h in CATEGORIES for j in CATEGORIES]
    table = {}
    for n in SIZES:
        for kappa in (0.2, 0.5, 0.85):
            # The judge copies the human with probability kappa, else draws from the same
            # marginal independently: true kappa = kappa.
            probabilities = (
                kappa * np.diag(marginal) + (1 - kappa) * np.outer(marginal, marginal)
            ).ravel()

            def interval_of(counts: tuple[int, ...]) -> Interval:
                ratings = [cell for cell, k in zip(cells, counts, strict=True) for _ in range(k)]
                result = kappa_interval(ratings, seed=seed_of(counts), resamples=DRAWS)
                assert result is not None
                return result

            table[f"n={n} kappa={kappa}"] = simulated_coverage(
                probabilities, n, kappa, interval_of, rng
            )
    check(table)


def test_paired_delta_coverage() -> None:
    rng = np.random.default_rng(20261203)
    table = {}
    for n in SIZES:
        for pass_a, pass_b, overlap in ((0.5, 0.5, 0.5), (0.7, 0.8, 0.5), (0.85, 0.9, 0.7)):
            both = overlap * min(pass_a, pass_b) + (1 - overlap) * pass_a * pass_b
            # (A, B) pass/fail: both pass, A only, B only, neither
            probabilities = np.array(
                [both, pass_a - both, pass_b - both, 1 - pass_a - pass_b + both]
            )

            def interval_of(counts: tuple[int, ...]) -> Interval:
                outcomes = [(1.0, 1.0), (1.0, 0.0), (0.0, 1.0), (0.0, 0.0)]
                pairs = [o for o, k in zip(outcomes, counts, strict=True) for _ in range(k)]
                cases = [  # two tasks, alternating: the interval resamples within each
                    PairedCase(f"t{i % 2}", f"c{i}", (a,), (b,)) for i, (a, b) in enumerate(pairs)
                ]
                result = compare_paired(cases, seed=seed_of(counts), resamples=DRAWS).interval
                assert result is not None
                return result

            table[f"n={n} A={pass_a} B={pass_b}"] = simulated_coverage(
                probabilities, n, pass_b - pass_a, interval_of, rng
            )
    check(table)


# --- the noise floor at small n (issue 20 section 5) ----------------------------------------


def test_t_quantile_agrees_with_scipy() -> None:
    rng = random.Random(20)
    degrees = [0.5, 1, 2, 3, 4.5, 19, 20, 99.5, 499.9, 500, 1e4, 1e6, 1e9]
    degrees += [10 ** rng.uniform(-0.3, 7) for _ in range(200)]
    for confidence in (0.95, 0.9, 0.99, 0.5):
        for df in degrees:
            expected = student_t.ppf(1 - (1 - confidence) / 2, df)
            assert t_quantile(df, confidence) == pytest.approx(expected, rel=1e-12), df


def test_floor_degrees_of_freedom_by_hand() -> None:
    # Alike cases: the pooled sum(repeats - 1).
    assert floor_degrees_of_freedom([0.5, 0.5, 0.5], 3) == 3.0
    # One case of four carries the noise: W = 1/8, the variances' sample variance 1/16, over
    # n: 1/64; 2 W^2 / (1/64) = 2, under the pooled 4.
    assert floor_degrees_of_freedom([0.5, 0.0, 0.0, 0.0], 4) == pytest.approx(2.0)
    # Satterthwaite above the pooled count is capped at it: W = 3/8, 2 W^2 / (1/64) = 18 > 2
    assert floor_degrees_of_freedom([0.5, 0.25], 2) == 2.0
    assert floor_degrees_of_freedom([0.5], 1) == 1.0  # one case: its own repeats


def test_noise_floor_by_hand_at_few_degrees_of_freedom() -> None:
    # One of four cases flips between its two repeats: sqrt(2 W / n) = sqrt(mean(d^2) / n)
    # = sqrt(0.25 / 4) = 0.25, at 2 degrees of freedom (above): t = 4.3027, floor 1.0757
    # (z gave 0.49).
    floor = drift_half_width([(1.0, 0.0), (1.0, 1.0), (0.0, 0.0), (1.0, 1.0)])
    assert floor == pytest.approx(student_t.ppf(0.975, 2) * 0.25, rel=1e-12)
    # Every case flips once in three repeats: the cases are alike, 20 x 2 = 40 pooled degrees.
    alike = noise_floor([(1.0, 0.0, 0.0)] * 20)
    assert alike == pytest.approx(student_t.ppf(0.975, 40) * math.sqrt(2 * (1 / 3) / 20))
    assert noise_floor([(1.0, 1.0), (0.0, 0.0)]) == 0.0


# Per-case chances of one model: flaky everywhere; mostly right with a few flaky cases; most
# cases settled (always right or always wrong) and a few not, the shape of many LLM suites.
FLOOR_POPULATIONS = {
    "U(0.3, 0.9)": lambda rng, shape: rng.uniform(0.3, 0.9, shape),
    "U(0.8, 1)": lambda rng, shape: rng.uniform(0.8, 1.0, shape),
    "Beta(1/4, 1/4)": lambda rng, shape: rng.beta(0.25, 0.25, shape),
}
FLOOR_SAMPLES = 20_000
FLOOR_ALLOWANCE = 2 * math.sqrt(0.05 * 0.95 / FLOOR_SAMPLES)  # two standard errors: 0.0031


def drift_beyond_floor(name: str, cases: int, repeats: int, seed: int) -> tuple[float, float]:
    """One model with per-case chances from the population: a run of ``repeats`` repeats per
    case measures the floor; two further single runs drift apart by |mean - mean|. The share
    of samples where that passes the floor, for noise_floor and for the normal-quantile floor
    z sqrt(2 W / n) (before issue 20)."""
    rng = np.random.default_rng(seed)
    chances = FLOOR_POPULATIONS[name](rng, (FLOOR_SAMPLES, 1, cases))
    measured = (rng.random((FLOOR_SAMPLES, repeats, cases)) < chances).astype(float)
    runs = (rng.random((FLOOR_SAMPLES, 2, cases)) < chances).mean(axis=2)
    drift = np.abs(runs[:, 0] - runs[:, 1])
    within = measured.var(axis=1, ddof=1).mean(axis=1)
    normal = Z * np.sqrt(2 * within / cases)
    # A sample's floor depends on how many of its cases passed 0, 1, ... repeats times (0/1
    # scores; the order of cases and of repeats does not enter): each such tally once.
    passes = measured.sum(axis=1).astype(int)
    tallies = np.stack([(passes == k).sum(axis=1) for k in range(repeats + 1)], axis=1)
    distinct, which = np.unique(tallies, axis=0, return_inverse=True)
    floors = []
    for tally in distinct.tolist():
        sample = [tuple([1.0] * k + [0.0] * (repeats - k)) for k in range(repeats + 1)]
        scores = [s for s, count in zip(sample, tally, strict=True) for _ in range(count)]
        floors.append(noise_floor(scores))
    floor = np.array(floors, dtype=float)[which.reshape(-1)]
    return float((drift > floor).mean()), float((drift > normal).mean())


@pytest.mark.parametrize(
    ("population", "cases", "repeats"),
    [
        ("U(0.3, 0.9)", 20, 2),
        ("U(0.8, 1)", 20, 2),
        ("Beta(1/4, 1/4)", 20, 2),
        ("U(0.8, 1)", 50, 2),
        ("U(0.8, 1)", 20, 3),
    ],
)
def test_two_runs_drift_beyond_the_noise_floor_at_most_5_percent_of_the_time(
    population: str, cases: int, repeats: int
) -> None:
    """The spec's promise, by seeded simulation: 95 % of reruns of the same model move its
    score by less than the floor, from 20 cases x 2 repeats up. The normal-quantile floor
    broke it at 20 x 2 (6.1 %, 11.3 %, 11.1 % here; the issue measured 8.5 %); the floor is
    not so wide either that it never says anything (above 2.5 %)."""
    seed = cases * 10 + repeats + len(population)
    now, before = drift_beyond_floor(population, cases, repeats, seed)
    assert 0.025 <= now <= 0.05 + FLOOR_ALLOWANCE, (now, before)
    if (cases, repeats) == (20, 2):
        assert before > 0.05 + FLOOR_ALLOWANCE  # the simulation sees what was wrong


def test_importing_the_statistics_imports_neither_numpy_nor_scipy() -> None:
    code = (
        "import sys; import pytest_evalmine.stats.resample, pytest_evalmine.stats.paired, "
        "pytest_evalmine.stats.proportions, pytest_evalmine.judging.headline; "
        "print([m for m in ('numpy', 'scipy') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_drawing_in_blocks_does_not_change_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_evalmine.stats.resample as resample

    rng = random.Random(2)
    clusters = [Cluster(f"t{i % 3}", rng.random(), 1) for i in range(500)]
    whole = mean_interval(clusters, low_end=-1.0, high_end=1.0, seed=4, resamples=3000)
    monkeypatch.setattr(resample, "BLOCK_CELLS", 700)  # blocks of 4 draws
    blocks = mean_interval(clusters, low_end=-1.0, high_end=1.0, seed=4, resamples=3000)
    assert_same_interval(blocks, whole)
