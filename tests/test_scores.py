"""Single-model and score-only runs: pass rate (Wilson) and mean score (bootstrap) per task
and overall, with n (spec: "Scores"); the scorecard's per-task score column."""

from __future__ import annotations

import itertools
import math

import pytest

from pytest_evalmine.reports.scorecard import task_scores
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.stats.proportions import normal_quantile, wilson_interval

from .conftest import SCRIPTED_CONFTEST, latest_report
from .floats import assert_same_interval


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # by hand: centre (p + z^2/2n)/(1 + z^2/n), half z/(1 + z^2/n) sqrt(p(1-p)/n + z^2/4n^2)
        (5, 10, 0.2365930905, 0.7634069095),
        (0, 10, 0.0, 0.2775327999),
        (10, 10, 0.7224672001, 1.0),
        (81, 263, 0.2552885199, 0.3662095770),
        (1, 1, 0.2065493143, 1.0),
    ],
)
def test_wilson_by_hand(k: int, n: int, low: float, high: float) -> None:
    interval = wilson_interval(k, n)
    assert interval is not None
    assert interval.low == pytest.approx(low, abs=1e-9)
    assert interval.high == pytest.approx(high, abs=1e-9)


@pytest.mark.parametrize(("k", "n"), [(3, 7), (1, 50), (49, 50), (120, 160)])
def test_wilson_endpoints_solve_the_score_test(k: int, n: int) -> None:
    """Independently: the endpoints are the p where |k/n - p| = z sqrt(p(1 - p)/n)."""
    interval = wilson_interval(k, n)
    assert interval is not None
    for p in (interval.low, interval.high):
        assert abs(k / n - p) == pytest.approx(
            normal_quantile() * math.sqrt(p * (1 - p) / n), abs=1e-12
        )


def test_wilson_without_items() -> None:
    assert wilson_interval(0, 0) is None


# Distinct case ids: answers of one case are repeats, whose intervals are clustered.
CASE_NUMBERS = itertools.count()


def rec(model: str, task: str, outcome: str, score: float | None) -> AnswerRecord:
    return AnswerRecord(
        suite="s", suite_file="s", task=task, kind="answer", case=f"c{next(CASE_NUMBERS)}",
        model=model, outcome=outcome, score=score,
    )  # fmt: skip


def test_task_scores_by_hand() -> None:
    records = [
        rec("a", "math", "passed", 1.0),
        rec("a", "math", "failed", 0.5),
        rec("a", "math", "failed", 0.0),
        rec("a", "words", "passed", 1.0),
        rec("a", "words", "error", None),
    ]
    rows = {(r.model, r.task): r for r in task_scores(records, ["a"], "hash")}
    math_row = rows[("a", "math")]
    assert (math_row.n, math_row.passed, math_row.mean_score) == (3, 1, 0.5)
    assert math_row.pass_interval == wilson_interval(1, 3)
    assert math_row.score_interval is not None
    assert 0.0 <= math_row.score_interval.low <= 0.5 <= math_row.score_interval.high <= 1.0
    words = rows[("a", "words")]
    assert (words.n, words.passed, words.not_scored) == (1, 1, 1)
    overall = rows[("a", None)]
    assert (overall.n, overall.passed, overall.not_scored) == (4, 2, 1)
    assert overall.mean_score == pytest.approx(2.5 / 4)
    again = {(r.model, r.task): r for r in task_scores(records, ["a"], "hash")}
    assert_same_interval(again[("a", None)].score_interval, overall.score_interval)


SUITE = """\
version: 1
suite: scored
models: [fake/a]
tasks:
  - id: math
    kind: answer
    prompt: "Q {{ n }}"
    judge: false
    checks: [number, {max_words: {max: 2}}]
    cases:
      - {id: one, vars: {n: 1, reply: "Answer: 18"}, gold: 18}
      - {id: two, vars: {n: 2, reply: "The answer: 18"}, gold: 18}
      - {id: three, vars: {n: 3, reply: "Answer: 17"}, gold: 18}
      - {id: four, vars: {n: 4, reply: "Answer: 18"}, gold: 18}
"""


def test_a_single_model_run_shows_scores_and_no_judge_section(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SCRIPTED_CONFTEST)
    pytester.makefile(".eval.yaml", scored=SUITE)
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=2)
    low, high = wilson_interval(2, 4).low, wilson_interval(2, 4).high  # type: ignore[union-attr]
    rate = f"50.0% ?{100 * low:.1f}%, {100 * high:.1f}%?"
    result.stdout.fnmatch_lines(
        [
            "-- Scores (95 % intervals: Wilson for the pass rate, bootstrap for the mean) --",
            "model   task         n  pass rate*mean score",
            "*",
            # fnmatch reads [...] as a set: ? stands for each bracket
            f"fake/a  math         4  {rate}  0.75 ?*",
            f"fake/a  (all tasks)  4  {rate}  0.75 ?*",
            "-- Scorecard --",
        ]
    )
    assert "-- Judge --" not in result.stdout.str()
    scores = latest_report(pytester.path, "scored")["scores"]
    assert scores[0]["task"] == "math" and scores[1]["task"] is None
    assert scores[1]["n"] == 4 and scores[1]["passed"] == 2
    assert scores[1]["mean_score"] == 0.75  # (1 + 0.5 + 0.5 + 1) / 4


def test_two_models_get_a_per_task_score_column(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SCRIPTED_CONFTEST)
    suite = SUITE.replace("    judge: false\n", "").replace("[fake/a]", "[fake/a, fake/b]")
    pytester.makefile(".eval.yaml", scored=suite)
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(
        [
            "-- Judge --",
            "-- Scorecard --",
            "fake/a (baseline): passed 2/4;*",
            "*math score 0.75 (2/4 passed)",
            "fake/b: passed 2/4;*",
            "*math score 0.75 (2/4 passed)",
        ]
    )
    assert "-- Scores" not in result.stdout.str()
