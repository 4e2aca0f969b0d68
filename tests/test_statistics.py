"""stats/estimators.py: Cohen's kappa, Landis-Koch bands, type-7 percentiles and seeds,
checked against arithmetic done by hand and against independent implementations (scikit-learn
for kappa, numpy for quantiles). The resampling intervals: test_intervals.py."""

from __future__ import annotations

import hashlib
import math
import random
import warnings
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion_matrix

from pytest_evalmine.stats.estimators import (
    CATEGORIES,
    cohen_kappa,
    confusion_matrix,
    landis_koch_band,
    mean,
    percentile,
    seed_from,
)

B, T, C = "baseline", "tie", "candidate"


def ratings(matrix: Sequence[Sequence[int]]) -> list[tuple[str, str]]:
    """(human, judge) pairs realising a confusion matrix (rows human, columns judge)."""
    pairs: list[tuple[str, str]] = []
    for h, row in enumerate(matrix):
        for j, count in enumerate(row):
            pairs += [(CATEGORIES[h], CATEGORIES[j])] * count
    return pairs


def exact_kappa(matrix: Sequence[Sequence[int]]) -> Fraction:
    """The textbook formula in exact arithmetic, for expectations."""
    n = sum(map(sum, matrix))
    size = len(matrix)
    p_o = Fraction(sum(matrix[i][i] for i in range(size)), n)
    rows = [sum(matrix[i]) for i in range(size)]
    cols = [sum(matrix[r][i] for r in range(size)) for i in range(size)]
    p_e = Fraction(sum(rows[i] * cols[i] for i in range(size)), n * n)
    return (p_o - p_e) / (1 - p_e)


# --- Cohen's kappa by hand -------------------------------------------------------------------


def test_perfect_agreement_is_kappa_one() -> None:
    # matrix diag(1, 1, 2): p_o = 4/4 = 1; rows = cols = (1, 1, 2);
    # p_e = (1*1 + 1*1 + 2*2) / 16 = 6/16 = 3/8; kappa = (1 - 3/8) / (1 - 3/8) = 1
    kappa = cohen_kappa([(B, B), (T, T), (C, C), (C, C)])
    assert kappa.n == 4
    assert kappa.confusion == ((1, 0, 0), (0, 1, 0), (0, 0, 2))
    assert kappa.observed_agreement == 1.0
    assert kappa.chance_agreement == pytest.approx(3 / 8)
    assert kappa.value == pytest.approx(1.0)
    assert kappa.band == "almost perfect"


def test_kappa_of_a_table_using_two_of_three_categories() -> None:
    # human baseline: judge baseline 15, candidate 5; human candidate: judge baseline 5,
    # candidate 25; nobody said tie.  n = 50
    matrix = ((15, 0, 5), (0, 0, 0), (5, 0, 25))
    # p_o = (15 + 25) / 50 = 4/5
    # rows = (20, 0, 30), cols = (20, 0, 30)
    # p_e = (20*20 + 0*0 + 30*30) / 50^2 = 1300/2500 = 13/25
    # kappa = (4/5 - 13/25) / (1 - 13/25) = (7/25) / (12/25) = 7/12
    p_o, p_e, expected = Fraction(4, 5), Fraction(13, 25), Fraction(7, 12)
    assert (p_o - p_e) / (1 - p_e) == expected == exact_kappa(matrix)
    kappa = cohen_kappa(ratings(matrix))
    assert kappa.n == 50
    assert kappa.confusion == matrix
    assert kappa.observed_agreement == pytest.approx(float(p_o))
    assert kappa.chance_agreement == pytest.approx(float(p_e))
    assert kappa.value == pytest.approx(float(expected))
    assert kappa.band == "moderate"  # 0.583 is in (0.40, 0.60]


def test_negative_kappa() -> None:
    # human baseline: judge baseline 1, candidate 3; human candidate: judge baseline 2,
    # candidate 1.  n = 7
    matrix = ((1, 0, 3), (0, 0, 0), (2, 0, 1))
    # p_o = 2/7; rows = (4, 0, 3); cols = (3, 0, 4); p_e = (4*3 + 3*4) / 49 = 24/49
    # kappa = (14/49 - 24/49) / (25/49) = -10/25 = -2/5
    assert exact_kappa(matrix) == Fraction(-2, 5)
    kappa = cohen_kappa(ratings(matrix))
    assert kappa.observed_agreement == pytest.approx(2 / 7)
    assert kappa.chance_agreement == pytest.approx(24 / 49)
    assert kappa.value == pytest.approx(-0.4)
    assert kappa.band == "poor"


def test_total_disagreement_is_minus_one() -> None:
    # p_o = 0; rows = (1, 0, 1), cols = (1, 0, 1); p_e = 2/4 = 1/2; kappa = -1/2 / 1/2 = -1
    kappa = cohen_kappa([(B, C), (C, B)])
    assert kappa.value == pytest.approx(-1.0)


def test_kappa_is_undefined_when_every_rating_is_in_one_shared_category() -> None:
    # rows = cols = (0, 3, 0): p_e = 9/9 = 1, so (p_o - p_e) / (1 - p_e) = 0/0
    kappa = cohen_kappa([(T, T)] * 3)
    assert kappa.n == 3
    assert kappa.value is None
    assert kappa.chance_agreement == 1.0
    assert kappa.observed_agreement == 1.0
    assert kappa.band is None
    assert cohen_kappa([(C, C)]).value is None  # one rating is always undefined


def test_one_sided_constant_rater_gives_kappa_zero_not_undefined() -> None:
    # human always baseline, judge split: rows = (2, 0, 0), cols = (1, 0, 1)
    # p_o = 1/2, p_e = (2*1) / 4 = 1/2, kappa = 0 / (1/2) = 0 -- defined, band "slight"
    kappa = cohen_kappa([(B, B), (B, C)])
    assert kappa.chance_agreement == pytest.approx(0.5)
    assert kappa.value == 0.0
    assert kappa.band == "slight"


def test_empty_input() -> None:
    kappa = cohen_kappa([])
    assert kappa.n == 0
    assert kappa.confusion == ((0, 0, 0), (0, 0, 0), (0, 0, 0))
    assert kappa.observed_agreement is None
    assert kappa.chance_agreement is None
    assert kappa.value is None
    assert kappa.band is None


def test_confusion_matrix_rows_are_human_columns_judge_in_category_order() -> None:
    assert CATEGORIES == ("baseline", "tie", "candidate")
    matrix = confusion_matrix([(B, C), (T, B), (T, B), (C, T)])
    assert matrix == (
        (0, 0, 1),  # human baseline: judge said candidate once
        (2, 0, 0),  # human tie: judge said baseline twice
        (0, 1, 0),  # human candidate: judge said tie once
    )
    # Swapping the raters transposes the matrix.
    swapped = confusion_matrix([(j, h) for h, j in [(B, C), (T, B), (T, B), (C, T)]])
    assert swapped == tuple(zip(*matrix, strict=True))


def test_kappa_agrees_with_scikit_learn_on_random_ratings() -> None:
    rng = random.Random(20240601)
    labels = list(CATEGORIES)
    undefined = defined = 0
    for case in range(200):
        size = rng.choice([1, 2, 3, 5, 8, 13, 40, 120]) if case % 4 else rng.randint(1, 6)
        # Skewed marginals: sometimes one category dominates, sometimes all are even.
        weights = [rng.random() ** rng.choice([1, 4, 12]) for _ in CATEGORIES]
        agreement = rng.random()
        human = rng.choices(labels, weights=weights, k=size)
        judge = [h if rng.random() < agreement else rng.choice(labels) for h in human]
        ours = cohen_kappa(list(zip(human, judge, strict=True)))
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            theirs = cohen_kappa_score(human, judge, labels=labels)
        assert ours.confusion == tuple(
            tuple(int(x) for x in row) for row in sk_confusion_matrix(human, judge, labels=labels)
        )
        agree = sum(h == j for h, j in zip(human, judge, strict=True))
        assert ours.observed_agreement == pytest.approx(agree / size)
        if math.isnan(theirs):
            undefined += 1
            assert ours.value is None, (human, judge)
        else:
            defined += 1
            assert ours.value == pytest.approx(float(theirs), abs=1e-12), (human, judge)
    # The comparison exercised both branches.
    assert undefined >= 5 and defined >= 100


# --- Landis-Koch bands ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "band"),
    [
        (-1.0, "poor"),
        (-0.01, "poor"),
        (0.0, "slight"),  # spec: "< 0 poor, <= 0.20 slight"
        (0.2, "slight"),
        (0.21, "fair"),
        (0.4, "fair"),
        (0.41, "moderate"),
        (0.6, "moderate"),
        (0.61, "substantial"),
        (0.8, "substantial"),
        (0.81, "almost perfect"),
        (1.0, "almost perfect"),
    ],
)
def test_landis_koch_band_boundaries(value: float, band: str) -> None:
    assert landis_koch_band(value) == band


@pytest.mark.parametrize(
    ("matrix", "exact", "band"),
    [
        # n = 10: p_o = 6/10, rows (5, 0, 5), cols (1, 0, 9), p_e = (5 + 45) / 100 = 1/2,
        # kappa = (6/10 - 5/10) / (1/2) = 1/5
        (((1, 0, 4), (0, 0, 0), (0, 0, 5)), Fraction(1, 5), "slight"),
        # n = 3: p_o = 2/3, rows (1, 0, 2), cols (2, 0, 1), p_e = 4/9,
        # kappa = (6/9 - 4/9) / (5/9) = 2/5
        (((1, 0, 0), (0, 0, 0), (1, 0, 1)), Fraction(2, 5), "fair"),
        # n = 10: p_o = 8/10, rows = cols = (5, 0, 5), p_e = 1/2, kappa = 3/10 / 1/2 = 3/5
        (((4, 0, 1), (0, 0, 0), (1, 0, 4)), Fraction(3, 5), "moderate"),
        # n = 12: p_o = 11/12, rows (4, 0, 8), cols (3, 0, 9), p_e = 84/144,
        # kappa = (132 - 84) / (144 - 84) = 48/60 = 4/5
        (((3, 0, 1), (0, 0, 0), (0, 0, 8)), Fraction(4, 5), "substantial"),
    ],
)
def test_band_of_a_kappa_exactly_on_a_boundary(
    matrix: tuple[tuple[int, ...], ...], exact: Fraction, band: str
) -> None:
    """A kappa that is exactly 0.2/0.4/0.6/0.8 belongs to the lower band ("<= 0.20 slight",
    ...). Floating-point rounding of (p_o - p_e) / (1 - p_e) must not move it across."""
    assert exact_kappa(matrix) == exact
    kappa = cohen_kappa(ratings(matrix))
    assert kappa.value == pytest.approx(float(exact))
    assert kappa.band == band, f"kappa {exact} computed as {kappa.value!r}"


# --- percentiles, means, seeds -------------------------------------------------------------


def test_percentile_type_7_by_hand() -> None:
    values = [4.0, 1.0, 3.0, 2.0]  # sorted: 1, 2, 3, 4
    # q = 0.25: h = (4 - 1) * 0.25 = 0.75 -> 1 + 0.75 * (2 - 1) = 1.75
    assert percentile(values, 0.25) == pytest.approx(1.75)
    # q = 0.975: h = 2.925 -> 3 + 0.925 * (4 - 3) = 3.925
    assert percentile(values, 0.975) == pytest.approx(3.925)
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 1.0) == 4.0
    assert percentile([7.0], 0.025) == 7.0
    assert percentile([], 0.5) is None
    rng = random.Random(3)
    for _ in range(50):
        sample = [rng.uniform(-5, 5) for _ in range(rng.randint(1, 30))]
        q = rng.random()
        assert percentile(sample, q) == pytest.approx(float(np.quantile(sample, q)))


def test_mean() -> None:
    assert mean([1.0, 0.5, 0.0, 0.75]) == pytest.approx(2.25 / 4)
    assert mean([]) is None


def test_seed_from_is_stable() -> None:
    expected = int(hashlib.sha256(b"abc123\x1fkappa").hexdigest()[:16], 16)
    assert seed_from("abc123", "kappa") == expected == 0x4A77C8CDF435D278
    digest = hashlib.sha256(b"abc123\x1fwin_rate\x1ffake/beta\x1f").hexdigest()
    assert seed_from("abc123", "win_rate", "fake/beta", "") == int(digest[:16], 16)
    assert seed_from("abc123", "win_rate", "fake/beta", "") == 0xB810D1E27B54A7DB
    assert seed_from("abc123", "kappa") != seed_from("abc124", "kappa")
    assert 0 <= seed_from("x") < 2**64
