"""The paired comparison on the fractional checker score (spec: "Paired comparison"): which
tasks count, a missing score, McNemar kept on pass/fail only, the score gate metric; the
interval against scipy's bootstrap; unchanged cases decided exactly (Hypothesis: the order and
split of a case's repeat scores never make it worse or better); end to end through
report.json, report.md and the terminal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import bootstrap as scipy_bootstrap

from pytest_evalmine.judging.gate import HOLD, INVESTIGATE, evaluate_gate
from pytest_evalmine.options import GateConfig
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.scoring.paired import ALL_PASS, SCORE, compare_models
from pytest_evalmine.stats.paired import PairedCase, compare_paired

from .conftest import SCRIPTED_CONFTEST, latest_report


def rec(task: str, case: str, model: str, outcome: str, score: float | None) -> AnswerRecord:
    return AnswerRecord("s", "s.eval.yaml", task, "extract", case, model, outcome, score=score)


RECORDS = [
    # task "fields" has checks: fractional scores
    rec("fields", "1", "a", "failed", 0.5),
    rec("fields", "1", "b", "failed", 0.75),  # +0.25
    rec("fields", "2", "a", "passed", 1.0),
    rec("fields", "2", "b", "failed", 0.25),  # -0.75
    rec("fields", "3", "a", "failed", 0.0),
    rec("fields", "3", "b", "failed", 0.75),  # +0.75
    rec("fields", "4", "a", "passed", 1.0),
    rec("fields", "4", "b", "error", None),  # no answer: left out of both
    rec("fields", "5", "a", "failed", None),  # stored before item scores: out of score only
    rec("fields", "5", "b", "passed", 1.0),
    # task "prose" has no checks: all-pass only
    rec("prose", "1", "a", "passed", 1.0),
    rec("prose", "1", "b", "passed", 1.0),
]


def test_score_comparison_by_hand() -> None:
    all_pass, score = compare_models(RECORDS, ["a", "b"], "hash", scored_tasks=["fields"])
    assert (all_pass.metric, score.metric) == (ALL_PASS, SCORE)
    # all-pass over fields 1, 2, 3, 5 and prose 1: A 1 0 ... by hand
    p = all_pass.comparison
    assert all_pass.excluded == 1 and p.cases == 5
    assert (p.mean_a, p.mean_b) == (pytest.approx(2 / 5), pytest.approx(2 / 5))
    assert p.mcnemar is not None and (p.mcnemar.a_only, p.mcnemar.b_only) == (1, 1)
    # score over fields 1, 2, 3 only: 4 and 5 lack a score on one side; prose has no checks
    s = score.comparison
    assert score.excluded == 2 and s.cases == 3
    assert s.mean_a == pytest.approx(1.5 / 3)
    assert s.mean_b == pytest.approx(1.75 / 3)
    assert s.delta == pytest.approx((0.25 - 0.75 + 0.75) / 3)
    assert s.mcnemar is None  # McNemar is a test of pass/fail
    assert [e.case for e in score.worse] == ["2"]
    assert [e.case for e in score.better] == ["3", "1"]  # largest gain first
    assert s.interval is not None and s.interval.low < s.delta < s.interval.high
    data = score.to_dict()
    assert data["mcnemar"] is None and data["metric"] == "score"


def test_no_task_with_checks_gives_no_score_comparison() -> None:
    comparisons = compare_models(RECORDS, ["a", "b"], "hash", scored_tasks=[])
    assert [c.metric for c in comparisons] == [ALL_PASS]
    gate = evaluate_gate(GateConfig("score"), None, comparisons)
    assert gate.verdict == INVESTIGATE
    assert "no task has checks" in gate.rows[0].reason


def test_the_score_gate_reads_the_score_comparison() -> None:
    comparisons = compare_models(RECORDS, ["a", "b"], "hash", scored_tasks=["fields"])
    gate = evaluate_gate(GateConfig("score"), None, comparisons)
    (row,) = gate.rows
    assert row.measurement.delta == pytest.approx(100 * 0.25 / 3)
    assert row.measurement.trusted and row.verdict == HOLD  # 3 cases cannot tell
    all_pass = evaluate_gate(GateConfig("all_pass"), None, comparisons).rows[0]
    assert all_pass.measurement.delta == pytest.approx(0.0)


def test_fractional_delta_interval_agrees_with_scipy_bootstrap() -> None:
    """Independently: scipy's percentile bootstrap of the mean per-case difference over 400
    all-distinct continuous scores in one task."""
    rng = np.random.default_rng(11)
    a = rng.random(400)
    b = np.clip(a + rng.normal(0.05, 0.2, 400), 0, 1)
    cases = [PairedCase("t", str(i), (x,), (y,)) for i, (x, y) in enumerate(zip(a, b, strict=True))]
    ours = compare_paired(cases, seed=3, with_mcnemar=False).interval
    theirs = scipy_bootstrap(
        (b - a,), np.mean, n_resamples=10_000, method="percentile", rng=rng
    ).confidence_interval
    assert ours is not None
    width = theirs.high - theirs.low
    assert ours.low == pytest.approx(theirs.low, abs=0.06 * width)
    assert ours.high == pytest.approx(theirs.high, abs=0.06 * width)


# --- unchanged cases, decided exactly (issue 20 section 5) -----------------------------------


def changes(cases: list[PairedCase]) -> tuple[int, int, int]:
    # worse, better and same do not depend on the interval's draws: few of them, for speed
    data = compare_paired(cases, seed=1, resamples=100, with_mcnemar=False).to_dict()
    return data["worse"], data["better"], data["same"]


def test_the_same_scores_in_another_order_or_split_are_unchanged() -> None:
    # Float sums: 0.1 + 0.1 + 1.0 = 1.2000000000000002 but 1.0 + 0.1 + 0.1 = 1.2, a delta of
    # 1.1e-16 that counted as better; 0.1 + 0.2 = 0.30000000000000004 against 0.3 + 0.0 as
    # worse. Both are the same fractions, so both cases are the same.
    order = PairedCase("t", "order", (0.1, 0.1, 1.0), (1.0, 0.1, 0.1))
    split = PairedCase("t", "split", (0.1, 0.2), (0.3, 0.0))
    thirds = PairedCase("t", "thirds", (1 / 3, 1 / 3, 1 / 3), (1.0, 0.0, 0.0))
    assert (order.delta, split.delta, thirds.delta) == (0.0, 0.0, 0.0)
    result = compare_paired([order, split, thirds], seed=1, with_mcnemar=False)
    assert (len(result.worse), len(result.better), result.delta) == (0, 0, 0.0)


def test_a_small_real_change_still_counts() -> None:
    up = PairedCase("t", "up", (2 / 3, 0.5), (2 / 3, 0.5 + 1e-10))
    down = PairedCase("t", "down", (0.25,), (0.2499999,))
    assert up.delta == pytest.approx(0.5e-10, rel=1e-3)
    assert down.delta == pytest.approx(-1e-7, rel=1e-6)
    assert changes([up, down]) == (1, 1, 0)


# A score as checks compute it: k of m fields right, in floats, or a mean of a few such shares.
shares = st.integers(1, 12).flatmap(lambda m: st.integers(0, m).map(lambda k: k / m))
item_scores = st.lists(shares, min_size=1, max_size=4).map(lambda s: sum(s) / len(s))
any_scores = st.one_of(item_scores, st.floats(0, 1), st.sampled_from([0.0, 1.0]))


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(1, 6))
def test_permuting_a_cases_repeat_scores_never_changes_its_verdict(
    data: st.DataObject, repeats: int
) -> None:
    a = data.draw(st.lists(any_scores, min_size=repeats, max_size=repeats))
    b = data.draw(
        st.one_of(st.permutations(a), st.lists(any_scores, min_size=repeats, max_size=repeats))
    )
    a2, b2 = data.draw(st.permutations(a)), data.draw(st.permutations(b))
    case, shuffled = (
        PairedCase("t", "c", tuple(a), tuple(b)),
        PairedCase("t", "c", tuple(a2), tuple(b2)),
    )
    assert shuffled.delta == case.delta
    assert changes([shuffled]) == changes([case])
    if sorted(a) == sorted(b):
        assert case.delta == 0.0 and changes([case]) == (0, 0, 1)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(1, 12), st.integers(2, 6))
def test_scores_with_the_same_total_as_fractions_are_unchanged(
    data: st.DataObject, denominator: int, repeats: int
) -> None:
    """B moves part of one repeat's score to another: the same total as fractions, whatever
    the floats' sums say."""
    counts = data.draw(st.lists(st.integers(0, denominator), min_size=repeats, max_size=repeats))
    i, j = data.draw(st.permutations(range(repeats)))[:2]
    moved = data.draw(st.integers(0, min(counts[i], denominator - counts[j])))
    moved_counts = list(counts)
    moved_counts[i] -= moved
    moved_counts[j] += moved
    a = tuple(k / denominator for k in counts)
    b = tuple(k / denominator for k in moved_counts)
    case = PairedCase("t", "c", a, b)
    assert case.delta == 0.0
    assert changes([case]) == (0, 0, 1)
    # and one field more on any repeat is a change, however small the float difference
    if counts[i] < denominator:
        up = list(counts)
        up[i] += 1
        assert changes([PairedCase("t", "c", a, tuple(k / denominator for k in up))]) == (0, 1, 0)


SUITE = """\
version: 1
suite: small
models: [fake/alpha, fake/beta]
tasks:
  - id: colours
    kind: extract
    prompt: "Name colours {{ x }}"
    judge: false
    checks:
      - contains: {value: [red, green, blue, white]}
    cases:
      - {id: c1, vars: {x: "1", reply_alpha: "red green", reply_beta: "red green blue"}}
      - {id: c2, vars: {x: "2", reply_alpha: "red green blue white", reply_beta: "red"}}
      - {id: c3, vars: {x: "3", reply_alpha: "nothing", reply_beta: "blue white green"}}
  - id: plain
    kind: rewrite
    prompt: "Hello {{ x }}"
    judge: false
    cases:
      - {id: p1, vars: {x: "1", reply: "hi"}}
"""


def test_a_run_reports_both_comparisons(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SCRIPTED_CONFTEST)
    pytester.makefile(".eval.yaml", small=SUITE)
    result = pytester.runpytest("--evalmine-gate=score", "-p", "no:cacheprovider")
    report = latest_report(pytester.path, "small")
    assert report["scored_tasks"] == ["colours"]
    by_metric = {entry["metric"]: entry for entry in report["paired"]}
    score = by_metric["score"]
    # c1 0.5 -> 0.75, c2 1 -> 0.25, c3 0 -> 0.75
    assert score["cases"] == 3 and score["delta"] == pytest.approx(0.25 / 3)
    assert score["mcnemar"] is None
    all_pass = by_metric["all_pass"]  # c2 passes for alpha only; p1 passes for both
    assert all_pass["cases"] == 4 and all_pass["delta"] == pytest.approx(-1 / 4)
    assert all_pass["mcnemar"]["a_only"] == 1
    assert report["gate"]["metric"] == "score"
    assert report["gate"]["candidates"][0]["delta_points"] == pytest.approx(100 * 0.25 / 3)
    out = result.stdout.str()
    assert "fake/beta vs fake/alpha, checker score (tasks with checks): 58.3% vs 50.0%" in out
    assert "delta +8.3 pts" in out
    assert "fake/beta vs fake/alpha, all checks pass: 25.0% vs 50.0%" in out
