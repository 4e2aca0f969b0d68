"""The Bradley-Terry ranking and the Pareto front (stats/ranking.py): by hand, and against an
independent fit (Zermelo's iteration, written here)."""

from __future__ import annotations

import math
import random

import pytest

from pytest_evalmine.stats.ranking import (
    PSEUDO_WINS,
    Comparison,
    CostQuality,
    bradley_terry,
    fit_strengths,
    pareto_front,
)

np = pytest.importorskip("numpy")
pytest.importorskip("scipy")


def zermelo(wins: list[list[float]], rounds: int = 20_000) -> list[float]:
    """The MM iteration p_i <- W_i / sum_j n_ij / (p_i + p_j) (Zermelo 1929, Hunter 2004),
    log-strengths centred to sum 0: an independent route to the same maximum."""
    k = len(wins)
    p = [1.0] * k
    for _ in range(rounds):
        for i in range(k):
            total = sum(wins[i][j] for j in range(k) if j != i)
            denominator = sum((wins[i][j] + wins[j][i]) / (p[i] + p[j]) for j in range(k) if j != i)
            p[i] = total / denominator
        scale = math.exp(sum(math.log(x) for x in p) / k)
        p = [x / scale for x in p]
    return [math.log(x) for x in p]


def test_two_models_strength_difference_is_the_logit_of_the_win_share():
    # 7 wins, 2 losses and a tie for b: 7.5 of 10, plus half a win each way
    shares = [1.0] * 7 + [0.0] * 2 + [0.5]
    comparisons = [Comparison(f"t/c{i}", "b", "a", s) for i, s in enumerate(shares)]
    ranked = bradley_terry(comparisons, ["a", "b"], seed=1, resamples=200)
    assert [r.model for r in ranked] == ["b", "a"]
    expected = math.log((7.5 + PSEUDO_WINS) / (2.5 + PSEUDO_WINS))
    assert ranked[0].strength - ranked[1].strength == pytest.approx(expected, abs=1e-6)
    assert ranked[0].strength + ranked[1].strength == pytest.approx(0.0, abs=1e-9)
    assert ranked[0].interval.low < ranked[0].strength < ranked[0].interval.high
    # 10 pairs: the intervals overlap, the two are not told apart
    assert ranked[0].tied_with == ["a"] and ranked[1].tied_with == ["b"]


def test_all_wins_give_a_finite_strength():
    comparisons = [Comparison(f"t/c{i}", "b", "a", 1.0) for i in range(5)]
    ranked = bradley_terry(comparisons, ["a", "b"], seed=1, resamples=100)
    assert ranked[0].strength - ranked[1].strength == pytest.approx(math.log(5.5 / 0.5), abs=1e-6)


def test_fit_matches_zermelo_on_three_models():
    wins = [[0.0, 6.0, 9.5], [4.0, 0.0, 7.0], [2.5, 3.0, 0.0]]
    padded = [
        [w + (PSEUDO_WINS if i != j else 0.0) for j, w in enumerate(row)]
        for i, row in enumerate(wins)
    ]
    expected = zermelo(padded)
    fitted = fit_strengths(np.array(wins))
    assert list(fitted) == pytest.approx(expected, abs=1e-5)
    # the same matrix in a stack of draws fits the same
    stacked = fit_strengths(np.array([wins, wins, np.array(wins).T]))
    assert list(stacked[0]) == pytest.approx(expected, abs=1e-5)
    assert list(stacked[2]) == pytest.approx(
        zermelo([list(r) for r in np.array(padded).T]), abs=1e-5
    )


def test_star_graph_ranks_candidates_through_the_baseline():
    # only candidate-vs-baseline pairs: c beats the baseline, b loses to it
    rng = random.Random(3)
    comparisons = []
    for i in range(300):
        comparisons.append(Comparison(f"t/c{i}", "b", "base", float(rng.random() < 0.3)))
        comparisons.append(Comparison(f"t/c{i}", "c", "base", float(rng.random() < 0.85)))
    ranked = bradley_terry(comparisons, ["base", "b", "c"], seed=7, resamples=500)
    assert [r.model for r in ranked] == ["c", "base", "b"]
    # each well apart from the next at 300 cases
    assert all(r.tied_with == [] for r in ranked)
    by_model = {r.model: r for r in ranked}
    assert by_model["base"].pairs == 600


def test_bootstrap_is_clustered_by_case_and_seeded():
    # each case carries two pairs that agree: clustering must see 40 cases, not 80 pairs
    rng = random.Random(5)
    per_case = []
    for i in range(40):
        share = float(rng.random() < 0.6)
        per_case += [Comparison(f"t/c{i}", "b", "a", share), Comparison(f"t/c{i}", "b", "a", share)]
    split = [Comparison(f"{c.cluster}/{n}", c.a, c.b, c.a_share) for n, c in enumerate(per_case)]
    clustered = bradley_terry(per_case, ["a", "b"], seed=11, resamples=1000)
    independent = bradley_terry(split, ["a", "b"], seed=11, resamples=1000)
    assert clustered[0].strength == pytest.approx(independent[0].strength)
    width = clustered[0].interval.high - clustered[0].interval.low
    narrower = independent[0].interval.high - independent[0].interval.low
    # twice the pairs per unit: about sqrt(2) wider
    assert width / narrower == pytest.approx(math.sqrt(2), rel=0.15)
    again = bradley_terry(per_case, ["a", "b"], seed=11, resamples=1000)
    assert again[0].interval == clustered[0].interval


def test_fewer_than_two_models_give_no_ranking():
    assert bradley_terry([], ["a", "b"], seed=1) == []


def test_pareto_front_by_hand():
    points = [
        CostQuality("cheap", 0.50, 0.001),
        CostQuality("best", 0.70, 0.010),
        CostQuality("dominated", 0.55, 0.012),  # worse and dearer than best
        CostQuality("middle", 0.60, 0.004),
        CostQuality("same_as_middle_but_dearer", 0.60, 0.005),
        CostQuality("unpriced", 0.90, None),
    ]
    assert pareto_front(points) == ["cheap", "best", "middle"]


def test_pareto_front_keeps_exact_equals():
    # neither is strictly better in either: both on the front
    points = [CostQuality("a", 0.5, 0.01), CostQuality("b", 0.5, 0.01)]
    assert pareto_front(points) == ["a", "b"]
