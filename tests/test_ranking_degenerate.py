"""The ranking never contradicts the paired comparison (issue 31; spec: "Ranking and cost"): a
judge that flips on every pair (it always picks the first slot) gives no ranking, and says
why; so do intervals of zero width; the Pareto front over the checks reads the paired
comparison's interval, not the all-pass rates' points."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_evalmine.reports.ranking_section import ranking_lines, summary_ranking
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.scoring.paired import compare_models
from pytest_evalmine.stats.ranking import Comparison, bradley_terry, not_ranked

from .conftest import latest_report
from .test_judge_run import JUDGED_SUITE, JUDGES_CONFTEST


def test_a_judge_that_flips_on_every_pair_gives_no_ranking(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reproduced on main: `1. fake/alpha: strength +0.00 [+0.00, +0.00]` and both models on
    the strength front, from 3 pairs that were each a flip."""
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)
    pytester.makeconftest(JUDGES_CONFTEST)
    monkeypatch.setenv("TEST_JUDGE", "first")
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    report = latest_report(pytester.path, "small")
    assert report["headline"]["win_rates"][0]["flip_rate"] == 1.0
    ranking = report["ranking"]
    assert ranking["strengths"] == []
    assert ranking["not_ranked"] == (
        "every one of the 3 judged pairs is a tie or a flip (the judge preferred neither "
        "answer once the order was swapped): nothing to rank by"
    )
    assert ranking["pareto_front"]["strength"] == []
    assert all(row["strength"] is None for row in ranking["cost_quality"])
    out = " ".join(result.stdout.str().split())
    assert "no ranking: every one of the 3 judged pairs is a tie or a flip" in out
    assert "[+0.00, +0.00]" not in out and "strength +0.00" not in out


def test_zero_width_intervals_are_no_ranking() -> None:
    # one judged case: every bootstrap draw weighs it alone and fits the same strengths
    comparisons = [Comparison("t/c1", "b", "a", 1.0), Comparison("t/c1", "b", "a", 0.75)]
    ranked = bradley_terry(comparisons, ["a", "b"], seed=1)
    assert all(r.interval is not None for r in ranked)
    assert ranked[0].interval.high - ranked[0].interval.low == pytest.approx(0.0, abs=1e-9)
    assert not_ranked(comparisons, ranked) == (
        "the strengths' intervals have zero width (b, a): every bootstrap draw fitted the same "
        "strengths, so they measure no uncertainty"
    )
    assert not_ranked(comparisons, []) == "no judged pairs"
    # two cases, one decisive: a ranking
    spread = [*comparisons, Comparison("t/c2", "b", "a", 0.0)]
    assert not_ranked(spread, bradley_terry(spread, ["a", "b"], seed=1)) is None


def record(model: str, case: int, passed: bool) -> AnswerRecord:
    outcome = "passed" if passed else "failed"
    return AnswerRecord(
        "s", "s.eval.yaml", "t", "answer", f"c{case}", model, outcome,
        text=f"{model} {case}", score=float(passed),
    )  # fmt: skip


def run_of(passes: dict[str, int], costs: dict[str, float], cases: int = 18) -> Any:
    """The parts of a RunSummary ``summary_ranking`` reads: no judge; each model passing its
    first ``passes[model]`` of ``cases`` cases; its answers' cost."""
    models = list(passes)
    records = [record(m, i, i < passes[m]) for m in models for i in range(cases)]
    scores = [
        SimpleNamespace(
            model=m,
            cost_if_uncached_usd=costs[m] * cases,
            cost_lower_bound=False,
            all_pass=SimpleNamespace(value=passes[m] / cases),
        )
        for m in models
    ]
    return SimpleNamespace(
        models=models,
        headline=None,
        scores=scores,
        records=records,
        suite_hash="h",
        paired=compare_models(records, models, "h"),
    )


def test_the_checks_front_reads_the_paired_interval() -> None:
    # 18 of 18 against 8 of 18 (55.6 points worse, the paired interval below 0), same cost:
    # the candidate is dominated, as the paired comparison says it is worse
    worse = summary_ranking(run_of({"a": 18, "b": 8}, {"a": 1e-4, "b": 1e-4}))
    assert worse["pareto_front"]["all_pass"] == ["a"]
    rows = {r["model"]: r for r in worse["cost_quality"]}
    assert rows["b"]["dominated_by"]["all_pass"] == ["a"]
    lines = ranking_lines(worse)
    assert any(
        line.startswith("b: ") and "dominated (all checks pass by a)" in line for line in lines
    )
    assert any("no ranking: no judged pairs" in line for line in lines)
    # 18 against 17 of 18, same cost: a point ahead within the noise dominates nothing (the
    # points alone put b off the front)
    close = summary_ranking(run_of({"a": 18, "b": 17}, {"a": 1e-4, "b": 1e-4}))
    assert close["pareto_front"]["all_pass"] == ["a", "b"]
    # b far worse but cheaper: on the front, as it costs less
    cheaper = summary_ranking(run_of({"a": 18, "b": 8}, {"a": 2e-4, "b": 1e-4}))
    assert cheaper["pareto_front"]["all_pass"] == ["a", "b"]
    # b as good and cheaper: a is dominated
    same = summary_ranking(run_of({"a": 18, "b": 18}, {"a": 2e-4, "b": 1e-4}))
    assert same["pareto_front"]["all_pass"] == ["b"]
