"""calibration.py: matching labels to judged pairs, the kappa gate and its statuses, per-task
rows and the report dictionary (spec section 17)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from pytest_evalmine.judging.calibration import (
    BELOW_FLOOR,
    INSUFFICIENT,
    NO_LABELS,
    OK,
    PER_TASK_MIN_LABELS,
    UNDEFINED,
    Calibration,
    Rating,
    calibrate,
    match_labels,
)
from pytest_evalmine.judging.pairs import BASELINE_FIRST, CANDIDATE_FIRST, JudgePass, Pair
from pytest_evalmine.suite.loader import Label

from .floats import assert_same_interval

BASE, CAND = "fake/base", "fake/cand"
# Winner slots (baseline_first, candidate_first) that make the judge's category come out as
# the key: candidate wins both -> score 1; baseline wins both -> 0; tie both -> 0.5.
SLOTS = {"candidate": ("2", "1"), "baseline": ("1", "2"), "tie": ("tie", "tie")}


def judged(task: str, case: str, category: str, base: str = BASE, cand: str = CAND) -> Pair:
    pair = Pair("s", task, case, base, cand)
    first, second = SLOTS[category]
    pair.passes = [JudgePass(BASELINE_FIRST, first), JudgePass(CANDIDATE_FIRST, second)]
    assert pair.category == category
    return pair


def labelled(spec: Sequence[tuple[str, str]], task: str = "t") -> tuple[list[Label], list[Pair]]:
    """One judged pair and one matching label per (human, judge) entry."""
    labels, pairs = [], []
    for i, (human, judge) in enumerate(spec):
        pairs.append(judged(task, f"c{i}", judge))
        labels.append(Label(task, f"c{i}", BASE, CAND, human))
    return labels, pairs


def run(
    labels: Sequence[Label],
    pairs: Sequence[Pair],
    *,
    min_kappa: float = 0.4,
    min_labels: int = 1,
    gate_on: str = "point",
    seed_text: str = "suite-hash",
) -> Calibration:
    return calibrate(
        labels,
        pairs,
        min_kappa=min_kappa,
        min_labels=min_labels,
        gate_on=gate_on,
        seed_text=seed_text,
    )


def reference_kappa_interval(
    ratings: Sequence[tuple[str, str]], seed_text: str
) -> tuple[float, float]:
    """The documented interval written independently: seed from sha256("hash\\x1fkappa"),
    cell probabilities from Dirichlet(counts + 1/9) drawn as normalised standard gammas
    (cells human-major in the order baseline, tie, candidate), kappa per draw with
    scikit-learn on the nine cells weighted by their probabilities (first 300 draws checked
    against the textbook formula), numpy type-7 quantiles."""
    seed = int(hashlib.sha256(f"{seed_text}\x1fkappa".encode()).hexdigest()[:16], 16)
    cats = ["baseline", "tie", "candidate"]
    cells = [(h, j) for h in cats for j in cats]
    counts = np.array([sum(r == cell for r in ratings) for cell in cells], dtype=float)
    gammas = np.random.default_rng(seed).standard_gamma(counts + 1 / 9, size=(10_000, 9))
    probabilities = gammas / gammas.sum(axis=1, keepdims=True)
    values = []
    for row in probabilities:
        table = row.reshape(3, 3)
        p_o = sum(table[i][i] for i in range(3))
        p_e = sum(table[i].sum() * table[:, i].sum() for i in range(3))
        values.append((p_o - p_e) / (1 - p_e))
    humans, judges = zip(*cells, strict=True)
    for row, value in zip(probabilities[:300], values, strict=False):
        assert cohen_kappa_score(humans, judges, sample_weight=row) == pytest.approx(value)
    low, high = np.quantile(values, [0.025, 0.975], method="linear")
    return float(low), float(high)


# --- matching ------------------------------------------------------------------------------


def test_a_label_matches_its_judged_pair_exactly() -> None:
    pairs = [judged("t", "a", "baseline"), judged("t", "b", "tie")]
    labels = [Label("t", "a", BASE, CAND, "candidate"), Label("t", "b", BASE, CAND, "tie")]
    ratings, inverted, unmatched = match_labels(labels, pairs)
    assert ratings == [Rating("t", "a", "candidate", "baseline"), Rating("t", "b", "tie", "tie")]
    assert inverted == 0
    assert unmatched == {}


def test_a_label_with_the_models_swapped_is_inverted_and_counted() -> None:
    pairs = [judged("t", "a", "candidate"), judged("t", "b", "baseline"), judged("t", "c", "tie")]
    labels = [
        # Said of (baseline=CAND, candidate=BASE): "prefer baseline" means CAND is preferred.
        Label("t", "a", CAND, BASE, "baseline"),
        Label("t", "b", CAND, BASE, "candidate"),
        Label("t", "c", CAND, BASE, "tie"),
    ]
    ratings, inverted, unmatched = match_labels(labels, pairs)
    assert [(r.case, r.human, r.judge) for r in ratings] == [
        ("a", "candidate", "candidate"),
        ("b", "baseline", "baseline"),
        ("c", "tie", "tie"),
    ]
    assert inverted == 3
    assert unmatched == {}


def test_unmatched_labels_are_counted_by_reason() -> None:
    excluded = Pair("s", "t", "x", BASE, CAND, excluded="schema_fail")
    judge_failed = Pair("s", "t", "y", BASE, CAND, excluded="judge_unparseable")
    pairs = [judged("t", "a", "tie"), excluded, judge_failed]
    labels = [
        Label("t", "a", BASE, CAND, "tie"),  # matched
        Label("t", "zzz", BASE, CAND, "tie"),  # no such case in the run
        Label("t", "a", BASE, "fake/third", "tie"),  # model not in the run
        Label("t", "x", BASE, CAND, "candidate"),  # excluded pair
        Label("t", "y", BASE, CAND, "baseline"),  # excluded after judging
    ]
    ratings, inverted, unmatched = match_labels(labels, pairs)
    assert ratings == [Rating("t", "a", "tie", "tie")]
    assert inverted == 0
    assert unmatched == {
        "pair_excluded:judge_unparseable": 1,
        "pair_excluded:schema_fail": 1,
        "pair_not_in_run": 2,
    }
    assert list(unmatched) == sorted(unmatched)


# --- the gate ------------------------------------------------------------------------------


def test_status_no_labels() -> None:
    empty = run([], [judged("t", "a", "tie")])
    assert empty.status == NO_LABELS and not empty.passed
    assert empty.kappa.n == 0 and empty.interval is None
    assert "0 labels" in empty.reason()
    unmatched = run([Label("t", "other", BASE, CAND, "tie")] * 3, [judged("t", "a", "tie")])
    assert unmatched.status == NO_LABELS
    assert unmatched.labels_total == 3
    assert unmatched.unmatched == {"pair_not_in_run": 3}
    assert "3 labels" in unmatched.reason()


def test_status_undefined_comes_before_insufficient() -> None:
    # Every rating tie/tie: p_e = 1. Only 2 labels for min_labels 10, but undefined wins.
    labels, pairs = labelled([("tie", "tie")] * 2)
    result = run(labels, pairs, min_labels=10)
    assert result.status == UNDEFINED
    assert result.kappa.value is None and result.kappa.chance_agreement == 1.0
    assert "undefined" in result.reason()
    # The posterior's pseudo-label keeps the interval defined (and wide) even so.
    assert result.interval is not None and result.interval.high - result.interval.low > 0.5


def test_status_insufficient_labels() -> None:
    # 4 ratings, kappa 1 (defined), min_labels 5
    labels, pairs = labelled([("baseline", "baseline"), ("candidate", "candidate")] * 2)
    result = run(labels, pairs, min_labels=5, min_kappa=0.1)
    assert result.kappa.value == pytest.approx(1.0)
    assert result.status == INSUFFICIENT
    assert result.reason() == "only 4 matched labels; at least 5 are needed"
    # Exactly min_labels is enough.
    assert run(labels, pairs, min_labels=4, min_kappa=0.1).status == OK


def test_status_below_floor_on_the_point_estimate() -> None:
    # (b,b)x3 (b,c)x2 (c,b)x2 (c,c)x3: p_o = 6/10, rows = cols = (5, 0, 5), p_e = 50/100,
    # kappa = (6/10 - 1/2) / (1/2) = 1/5
    spec = [("baseline", "baseline")] * 3 + [("baseline", "candidate")] * 2
    spec += [("candidate", "baseline")] * 2 + [("candidate", "candidate")] * 3
    labels, pairs = labelled(spec)
    result = run(labels, pairs, min_kappa=0.4, min_labels=10)
    assert result.kappa.value == pytest.approx(float(Fraction(1, 5)))
    assert result.status == BELOW_FLOOR and not result.passed
    assert result.reason() == "kappa 0.20 is below the floor 0.40"


def twelve_ratings() -> list[tuple[str, str]]:
    # matrix rows human: baseline (5, 0, 1), tie (0, 1, 0), candidate (0, 0, 5); n = 12
    # p_o = 11/12; rows (6, 1, 5); cols (5, 1, 6); p_e = (30 + 1 + 30) / 144 = 61/144
    # kappa = (132/144 - 61/144) / (83/144) = 71/83 = 0.855...
    return (
        [("baseline", "baseline")] * 5
        + [("candidate", "candidate")] * 5
        + [("baseline", "candidate"), ("tie", "tie")]
    )


def test_status_ok_and_below_floor_when_gating_on_the_lower_bound() -> None:
    spec = twelve_ratings()
    labels, pairs = labelled(spec)
    point = run(labels, pairs, min_kappa=0.8, min_labels=10, gate_on="point")
    assert point.kappa.value == pytest.approx(float(Fraction(71, 83)))
    assert point.kappa.confusion == ((5, 0, 1), (0, 1, 0), (0, 0, 5))
    assert point.status == OK and point.passed
    assert point.reason() == "kappa 0.86 >= 0.80 on 12 labels"

    expected = reference_kappa_interval(spec, "suite-hash")
    assert point.interval is not None
    assert (point.interval.low, point.interval.high) == pytest.approx(expected, rel=1e-9)
    assert point.interval.low < 0.8  # the interval of 12 labels is wide

    lower = run(labels, pairs, min_kappa=0.8, min_labels=10, gate_on="lower")
    assert lower.status == BELOW_FLOOR
    assert lower.reason() == (
        f"the kappa interval's lower bound {point.interval.low:.2f} is below the floor 0.80"
    )
    # A floor under the lower bound passes either way.
    assert run(labels, pairs, min_kappa=0.3, gate_on="lower").status == OK


def test_a_kappa_exactly_at_the_floor_passes() -> None:
    """Spec: below_floor is "kappa < min_kappa". Three labels (b,b) (c,b) (c,c):
    p_o = 2/3, rows (1, 0, 2), cols (2, 0, 1), p_e = 4/9, kappa = (2/9) / (5/9) = 2/5 exactly,
    which is not below a floor of 0.40."""
    labels, pairs = labelled(
        [("baseline", "baseline"), ("candidate", "baseline"), ("candidate", "candidate")]
    )
    result = run(labels, pairs, min_kappa=0.40, min_labels=3)
    assert result.kappa.value == pytest.approx(0.4)
    assert result.status == OK, result.reason()


def test_perfect_agreement_on_sixteen_labels_has_an_interval_below_one() -> None:
    """Reproduced on the old percentile bootstrap: every resample of 16 agreeing labels has
    kappa 1, so the interval was [1.0, 1.0] and any lower-bound gate passed trivially."""
    spec = [("baseline", "baseline")] * 6 + [("candidate", "candidate")] * 6
    spec += [("tie", "tie")] * 4
    labels, pairs = labelled(spec)
    result = run(labels, pairs, min_kappa=0.9, min_labels=10, gate_on="lower")
    assert result.kappa.value == 1.0
    assert result.interval is not None
    assert result.interval.high == pytest.approx(1.0, abs=0.01)
    assert 0.5 < result.interval.low < 0.9
    assert result.status == BELOW_FLOOR
    expected = reference_kappa_interval(spec, "suite-hash")
    assert (result.interval.low, result.interval.high) == pytest.approx(expected, rel=1e-9)


def test_an_all_tie_table_still_has_an_interval() -> None:
    # kappa is undefined (p_e = 1), but the pseudo-label keeps every draw's p_e below 1.
    labels, pairs = labelled([("tie", "tie")] * 6)
    result = run(labels, pairs)
    assert result.status == UNDEFINED
    assert result.interval is not None
    assert -1.0 <= result.interval.low < result.interval.high <= 1.0


def test_interval_is_reproducible_and_depends_on_the_suite_hash() -> None:
    rng = random.Random(4)
    cats = ["baseline", "tie", "candidate"]
    spec = [(h, h if rng.random() < 0.6 else rng.choice(cats)) for h in rng.choices(cats, k=40)]
    labels, pairs = labelled(spec)
    first = run(labels, pairs, seed_text="h1").interval
    assert first is not None
    assert_same_interval(run(labels, pairs, seed_text="h1").interval, first)
    second = run(labels, pairs, seed_text="h2").interval
    assert second != first
    for seed_text, interval in (("h1", first), ("h2", second)):
        expected = reference_kappa_interval(spec, seed_text)
        assert interval is not None
        assert (interval.low, interval.high) == pytest.approx(expected, rel=1e-9)


# --- per task and the report ---------------------------------------------------------------


def test_per_task_kappa_is_suppressed_below_five_labels_but_agreement_is_shown() -> None:
    small_labels, small_pairs = labelled(
        [
            ("baseline", "baseline"),
            ("candidate", "candidate"),
            ("tie", "candidate"),
            ("tie", "tie"),
        ],
        task="a-small",
    )
    # task b: (b,b)x2 (c,c)x2 (b,c)x1: p_o = 4/5, rows (3, 0, 2), cols (2, 0, 3),
    # p_e = (6 + 6) / 25 = 12/25, kappa = (20/25 - 12/25) / (13/25) = 8/13
    big_labels, big_pairs = labelled(
        [("baseline", "baseline")] * 2
        + [("candidate", "candidate")] * 2
        + [("baseline", "candidate")],
        task="b-big",
    )
    result = run(small_labels + big_labels, small_pairs + big_pairs)
    assert PER_TASK_MIN_LABELS == 5
    rows = [row.to_dict() for row in result.per_task]
    assert [r["task"] for r in rows] == ["a-small", "b-big"]
    assert rows[0]["n"] == 4
    assert rows[0]["agreement"] == pytest.approx(3 / 4)
    assert rows[0]["kappa"] is None
    assert rows[1]["n"] == 5
    assert rows[1]["agreement"] == pytest.approx(4 / 5)
    assert rows[1]["kappa"] == pytest.approx(8 / 13)


def test_to_dict_is_json_and_its_confusion_matrix_matches() -> None:
    labels, pairs = labelled(twelve_ratings())
    labels.append(Label("t", "gone", BASE, CAND, "tie"))
    # Labelled with the models swapped, "prefer baseline" (= CAND): human candidate;
    # the judge preferred the baseline.
    pairs.append(judged("t", "c12", "baseline"))
    labels.append(Label("t", "c12", CAND, BASE, "baseline"))
    result = run(labels, pairs, min_kappa=0.5, min_labels=10)
    data = json.loads(json.dumps(result.to_dict()))
    for key in (
        "status",
        "reason",
        "n",
        "labels_total",
        "inverted_labels",
        "unmatched_labels",
        "kappa",
        "kappa_interval",
        "band",
        "observed_agreement",
        "chance_agreement",
        "confusion",
        "min_kappa",
        "min_labels",
        "gate_on",
        "per_task",
    ):
        assert key in data
    assert data["confusion"] == {
        "rows": "human",
        "columns": "judge",
        "categories": ["baseline", "tie", "candidate"],
        # the twelve ratings plus the inverted duplicate: human candidate, judge baseline
        "matrix": [[5, 0, 1], [0, 1, 0], [1, 0, 5]],
    }
    assert data["n"] == 13
    assert data["labels_total"] == 14
    assert data["inverted_labels"] == 1
    assert data["unmatched_labels"] == {"pair_not_in_run": 1}
    assert data["status"] == "ok"
    assert data["observed_agreement"] == pytest.approx(11 / 13)
    assert result.interval is not None
    assert data["kappa_interval"] == result.interval.to_dict()
    assert data["band"] == result.kappa.band
    assert (data["min_kappa"], data["min_labels"], data["gate_on"]) == (0.5, 10, "point")
    assert data["per_task"] == [
        {
            "task": "t",
            "n": 13,
            "agreement": pytest.approx(11 / 13),
            "agreement_interval": data["observed_agreement_interval"],
            "kappa": result.kappa.value,
        }
    ]
    # Wilson for 11 of 13: centre (11/13 + z^2/26) / (1 + z^2/13), statsmodels-checked
    # elsewhere; here only that it brackets the rate.
    interval = data["observed_agreement_interval"]
    assert interval["low"] < 11 / 13 < interval["high"]
