"""Rates over repeats (spec: "Statistics", clustered Wilson interval): the answers of one case
are correlated, so a rate's interval uses the effective sample size n / deff."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_evalmine.reports.scorecard import score_models
from pytest_evalmine.run.records import FAILED, PASSED, AnswerRecord
from pytest_evalmine.stats.proportions import (
    Proportion,
    clustered_wilson_interval,
    effective_sample_size,
    normal_quantile,
    wilson_interval,
)

Z = normal_quantile()


def wilson_at(p: float, n: float) -> tuple[float, float]:
    """The Wilson formula written out again, for a fractional n."""
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return centre - half, centre + half


def test_effective_sample_size_by_hand() -> None:
    # p = 1/2 over 4 cases x 3 repeats. Every case all-or-nothing: spread 4 x 1.5^2 = 9,
    # variance 4/3 x 9 / 144 = 1/12, n_eff = (1/4) / (1/12) = 3, clamped up to the 4 cases.
    assert effective_sample_size([(3, 3), (0, 3), (3, 3), (0, 3)]) == 4
    assert clustered_wilson_interval([(3, 3), (0, 3), (3, 3), (0, 3)]) == wilson_interval(2, 4)
    # Repeats that vary as much as independent answers would: clamped down to n = 12.
    assert effective_sample_size([(2, 3), (1, 3), (2, 3), (1, 3)]) == 12
    # In between: spread 2.25 + 0.25 + 0.25 + 2.25 = 5, variance 4/3 x 5/144 = 5/108,
    # n_eff = (1/4) / (5/108) = 5.4.
    assert effective_sample_size([(3, 3), (1, 3), (2, 3), (0, 3)]) == pytest.approx(5.4)
    interval = clustered_wilson_interval([(3, 3), (1, 3), (2, 3), (0, 3)])
    assert interval is not None
    assert (interval.low, interval.high) == pytest.approx(wilson_at(0.5, 5.4), abs=1e-12)
    # All passed: nothing shows how alike the repeats are, so the cases count.
    assert clustered_wilson_interval([(3, 3)] * 5) == wilson_interval(5, 5)


def test_the_design_effect_is_statsmodels_cluster_robust_variance() -> None:
    import statsmodels.api as sm

    rng = np.random.default_rng(7)
    for _ in range(25):
        k = int(rng.integers(3, 40))
        trials = rng.integers(1, 6, size=k)
        successes = rng.binomial(trials, rng.beta(0.7, 0.7, size=k))
        if successes.sum() in (0, trials.sum()):
            continue
        groups = np.repeat(np.arange(k), trials)
        pairs = zip(successes, trials, strict=True)
        outcomes = np.concatenate([[1] * s + [0] * (t - s) for s, t in pairs])
        fit = sm.OLS(outcomes, np.ones((len(outcomes), 1))).fit(
            cov_type="cluster", cov_kwds={"groups": groups}
        )
        n, p = trials.sum(), successes.sum() / trials.sum()
        expected = min(n, max(k, p * (1 - p) / fit.bse[0] ** 2))
        clusters = list(zip(successes.tolist(), trials.tolist(), strict=True))
        assert effective_sample_size(clusters) == pytest.approx(expected, rel=1e-9)


def test_correlated_repeats_are_covered_where_plain_wilson_is_not() -> None:
    """Seeded simulation: 50 cases x 3 repeats, each case's own pass chance drawn from
    Beta(0.25, 0.25) around 0.5 (repeats strongly alike)."""
    rng = np.random.default_rng(20261201)
    truth, runs = 0.5, 600
    clustered = plain = 0
    for _ in range(runs):
        chances = rng.beta(0.25, 0.25, size=50)
        passed = rng.binomial(3, chances)
        interval = Proportion(int(passed.sum()), 150, tuple((int(p), 3) for p in passed)).interval
        assert interval is not None
        clustered += interval.low <= truth <= interval.high
        naive = wilson_interval(int(passed.sum()), 150)
        assert naive is not None
        plain += naive.low <= truth <= naive.high
    assert 0.93 <= clustered / runs <= 0.97
    assert plain / runs < 0.85  # what the reports showed before


def record(case: str, outcome: str) -> AnswerRecord:
    return AnswerRecord(
        suite="s", suite_file="s", task="t", kind="answer", case=case, model="m",
        outcome=outcome, score=1.0 if outcome == PASSED else 0.0,
    )  # fmt: skip


def test_the_scorecard_clusters_a_cases_repeats() -> None:
    records = [record(case, outcome) for case in "abcd" for outcome in (PASSED,) * 3] + [
        record(case, FAILED) for case in "efgh" for _ in range(3)
    ]
    (score,) = score_models(records, ["m"])
    shown = score.all_pass.to_dict()
    assert (shown["passed"], shown["n"], shown["effective_n"]) == (12, 24, 8)
    assert shown["interval"] == wilson_interval(4, 8).to_dict()  # type: ignore[union-attr]
    single = score_models([record(c, PASSED) for c in "abcd"], ["m"])[0].all_pass.to_dict()
    assert "effective_n" not in single  # one answer per case: the plain Wilson interval
    assert single["interval"] == wilson_interval(4, 4).to_dict()  # type: ignore[union-attr]
