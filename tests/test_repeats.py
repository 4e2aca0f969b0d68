"""Repeats and the noise floor (spec: "Options", "Collection and selection", "Paired
comparison"): the floor by hand and against a simulation of the runs it predicts, the
"beyond noise" rule, the verdict's words, and --evalmine-repeat end to end on the fake
adapter (distinct requests per repeat, cache hits on rerun, estimate = N x calls, the cap)."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

from pytest_evalmine import exitcodes
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.scoring.paired import ALL_PASS, ModelComparison, compare_models
from pytest_evalmine.stats.estimators import Interval
from pytest_evalmine.stats.paired import (
    PairedCase,
    PairedComparison,
    compare_paired,
    drift_half_width,
    noise_floor,
)

from .conftest import SMALL_SUITE, call_count, latest_answers, latest_report

Z = 1.959963984540054


def t975(degrees: float) -> float:
    """Student's 97.5 % quantile, from scipy: the floor's multiplier (spec: "Paired
    comparison"); with one flaky case of n >= 2 its degrees of freedom are 2, of one case 1."""
    return float(student_t.ppf(0.975, degrees))


# --- the floor ---------------------------------------------------------------------------------


def test_noise_floor_by_hand_with_two_repeats() -> None:
    # One case of four flips between the repeats: d = (1, 0, 0, 0), t sqrt(mean(d^2) / n) at
    # 2 degrees of freedom (one case carries the noise)
    repeats = [(1.0, 0.0), (1.0, 1.0), (0.0, 0.0), (1.0, 1.0)]
    assert drift_half_width(repeats) == pytest.approx(t975(2) * math.sqrt(0.25 / 4), abs=1e-12)
    # 1.076: past the scale, so the floor is the scale (two means in [0, 1] drift at most 1)
    assert noise_floor(repeats) == 1.0
    assert noise_floor([(1.0, 0.0)] + [(1.0, 1.0)] * 39) == pytest.approx(
        t975(2) * math.sqrt((1 / 40) / 40), abs=1e-12
    )


def test_noise_floor_by_hand_with_three_repeats() -> None:
    # (1, 0, 0): mean 1/3, sample variance (4/9 + 1/9 + 1/9) / 2 = 1/3
    # (0.5, 0.5, 1): mean 2/3, sample variance (1/36 + 1/36 + 4/36) / 2 = 1/12
    # W = (1/3 + 1/12) / 2 = 5/24; floor = t sqrt(2 W / 2) = t sqrt(5/24); degrees of
    # freedom min(pooled 2 + 2, 2 W^2 / (((1/3 - 1/12)^2 / 2) / 2) = 50/9) = 4
    floor = drift_half_width([(1.0, 0.0, 0.0), (0.5, 0.5, 1.0)])
    assert floor == pytest.approx(t975(4) * math.sqrt(5 / 24), abs=1e-12)  # 1.267
    assert noise_floor([(1.0, 0.0, 0.0), (0.5, 0.5, 1.0)]) == 1.0  # capped at the scale


def test_noise_floor_needs_two_repeats_and_ignores_single_ones() -> None:
    assert noise_floor([(1.0,), (0.0,)]) is None
    assert noise_floor([]) is None
    assert drift_half_width([(1.0,), (1.0, 0.0)]) == pytest.approx(t975(1) * math.sqrt(2 * 0.5))
    assert noise_floor([(0.5, 0.5), (1.0, 1.0)]) == 0.0  # a deterministic model


def test_noise_floor_predicts_how_far_two_runs_of_one_model_drift() -> None:
    """Independently, by simulation: a model answering case i right with probability p_i;
    the floor estimated from 5 repeats is close to the 95th percentile of |mean(run 1) -
    mean(run 2)| over many pairs of fresh single runs of the same model."""
    rng = np.random.default_rng(5)
    p = rng.uniform(0.6, 1.0, size=400)
    repeats = (rng.random((5, 400)) < p).astype(float)
    floor = noise_floor([tuple(repeats[:, i]) for i in range(400)])
    runs = (rng.random((4000, 2, 400)) < p).astype(float).mean(axis=2)
    drift = np.quantile(np.abs(runs[:, 0] - runs[:, 1]), 0.95)
    assert floor is not None
    assert floor == pytest.approx(drift, rel=0.1)


def test_the_paired_comparison_carries_each_sides_floor() -> None:
    cases = [
        PairedCase("t", "1", (1.0, 0.0), (1.0, 1.0)),
        PairedCase("t", "2", (1.0, 1.0), (1.0, 1.0)),
        PairedCase("t", "3", (0.0, 0.0), (1.0, 0.0)),
        PairedCase("t", "4", (1.0, 1.0), (0.0, 1.0)),
    ]
    result = compare_paired(cases, seed=1)
    assert result.floor_a == 1.0  # one flaky case: t975(2) x 0.25 = 1.076, capped at 1
    assert result.floor_b == pytest.approx(t975(4) * math.sqrt(0.5 / 4))  # two: min(4, 6)
    # the larger: A's one flip rests on fewer degrees of freedom than B's two
    assert result.noise_floor == result.floor_a > result.floor_b
    data = result.to_dict()["noise_floor"]
    assert data == {"baseline": result.floor_a, "candidate": result.floor_b, "floor": data["floor"]}


# --- beyond noise and the verdict ----------------------------------------------------------------


def comparison(
    delta: float, low: float, high: float, floor_a: float | None, floor_b: float | None = None
) -> ModelComparison:
    paired = PairedComparison(
        cases=100,
        observations=300,
        mean_a=0.5,
        mean_b=0.5 + delta,
        delta=delta,
        interval=Interval(low, high),
        worse=(),
        better=(),
        mcnemar=None,
        floor_a=floor_a,
        floor_b=floor_b,
    )
    return ModelComparison("A", "B", ALL_PASS, paired, excluded=0)


@pytest.mark.parametrize(
    ("delta", "low", "high", "floor", "beyond"),
    [
        (0.041, 0.020, 0.070, 0.015, True),  # the interval lies above the floor
        (0.041, 0.012, 0.070, 0.015, False),  # delta past the floor, the interval's low not
        (0.041, 0.041, 0.070, 0.041, False),  # exactly the floor is not beyond it
        (0.010, 0.002, 0.020, 0.015, False),  # certain, but smaller than the floor
        (0.041, -0.002, 0.070, 0.015, False),  # the interval reaches 0
        (-0.041, -0.070, -0.020, 0.015, True),  # worse, beyond noise
        (-0.041, -0.070, -0.012, 0.015, False),  # worse, the interval reaches into the floor
        (0.041, 0.012, 0.070, None, None),  # no repeats: unknown
    ],
)
def test_beyond_noise(
    delta: float, low: float, high: float, floor: float | None, beyond: bool | None
) -> None:
    assert comparison(delta, low, high, floor).comparison.beyond_noise is beyond


def test_verdict_words() -> None:
    assert comparison(0.041, 0.020, 0.070, 0.015, 0.01).verdict == (
        "B is better than A on all checks pass by 4.1 points [2.0, 7.0], beyond the noise "
        "floor of 1.5 points by 2.6 points [0.5, 5.5]"
    )
    assert comparison(-0.041, -0.070, -0.020, 0.015).verdict == (
        "B is worse than A on all checks pass by 4.1 points [2.0, 7.0], beyond the noise "
        "floor of 1.5 points by 2.6 points [0.5, 5.5]"
    )
    # delta 4.1 past the floor of 1.5, but the excess's interval reaches below 0
    assert comparison(0.041, 0.012, 0.070, 0.015).verdict == (
        "B is better than A on all checks pass by 4.1 points [1.2, 7.0], not beyond the noise "
        "floor of 1.5 points: excess +2.6 points [-0.3, +5.5], an interval that does not lie "
        "above 0"
    )
    assert comparison(0.010, 0.002, 0.020, 0.015).verdict == (
        "B is better than A on all checks pass by 1.0 points [0.2, 2.0], not beyond the noise "
        "floor of 1.5 points: excess -0.5 points [-1.3, +0.5], an interval that does not lie "
        "above 0"
    )
    assert comparison(0.008, -0.021, 0.035, 0.015).verdict == (
        "B cannot be told apart from A on all checks pass: +0.8 points [-2.1, +3.5], an "
        "interval that includes 0; not beyond the noise floor of 1.5 points: excess -0.7 "
        "points [-3.6, +2.0], an interval that does not lie above 0"
    )
    unknown = "the noise floor is unknown: no case has two repeats of both models"
    assert unknown in comparison(0.041, 0.012, 0.070, None).verdict
    assert unknown in comparison(0.008, -0.021, 0.035, None).verdict


def rec(case: str, model: str, repeat: int, outcome: str) -> AnswerRecord:
    return AnswerRecord("s", "s.eval.yaml", "t", "k", case, model, outcome, repeat=repeat)


def test_records_are_paired_by_repeat_and_clustered_by_case() -> None:
    records = [
        rec("1", "a", 0, "passed"),
        rec("1", "a", 1, "failed"),
        rec("1", "b", 0, "passed"),
        rec("1", "b", 1, "passed"),
        rec("2", "a", 0, "passed"),
        rec("2", "a", 1, "passed"),
        rec("2", "b", 0, "error"),  # this repeat is left out of case 2
        rec("2", "b", 1, "failed"),
        rec("3", "a", 0, "passed"),
        rec("3", "b", 0, "error"),  # no repeat left: case 3 excluded
    ]
    (result,) = compare_models(records, ["a", "b"], "hash")
    p = result.comparison
    assert result.excluded == 1
    assert (p.cases, p.observations) == (2, 3)
    # case 1: B - A = 0 and +1 over its two repeats; case 2: -1 over its one usable repeat
    assert p.delta == pytest.approx(0.0)
    assert [c.delta for c in p.better] == [0.5] and [c.delta for c in p.worse] == [-1.0]
    assert p.floor_a == 1.0  # only case 1 has two: t975(1) sqrt(2 x 0.5) = 12.7, capped
    assert p.floor_b == 0.0
    # McNemar: passed in every repeat; a: case 2 only, b: case 1 only
    assert p.mcnemar is not None and (p.mcnemar.a_only, p.mcnemar.b_only) == (1, 1)


# --- end to end ----------------------------------------------------------------------------------


def run_estimate(report: dict[str, object]) -> float:
    return report["cost"]["estimate_usd"]  # type: ignore[index]


def test_repeats_are_distinct_items_requests_and_cache_entries(
    pytester: pytest.Pytester, counting: Path
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    collected = pytester.runpytest("--evalmine-repeat=3", "--collect-only", "-q")
    ids = [line for line in collected.stdout.lines if "::" in line]
    assert len(ids) == 3 * 2 * 3  # cases x models x repeats
    assert "small.eval.yaml::polite::refund-no[fake/alpha]" in ids
    assert "small.eval.yaml::polite::refund-no[fake/alpha#r1]" in ids
    assert "small.eval.yaml::polite::refund-no[fake/beta#r2]" in ids

    result = pytester.runpytest("--evalmine-repeat=3")
    assert result.ret == 0
    assert call_count(counting) == 18
    with sqlite3.connect(pytester.path / ".evalmine" / "cache.sqlite") as db:
        assert db.execute("SELECT count(*) FROM answers").fetchone()[0] == 18
    answers = latest_answers(pytester.path)
    assert sorted({(a["model"], a["repeat"]) for a in answers}) == [
        (m, r) for m in ("fake/alpha", "fake/beta") for r in range(3)
    ]
    assert len({a["key"] for a in answers}) == 18
    prose = [a["text"] for a in answers if a["task"] == "polite" and a["model"] == "fake/alpha"]
    assert len(set(prose)) == 3  # the fake answers each repeat anew
    report = latest_report(pytester.path)
    assert report["repeats"] == 3
    assert report["calls"] == {"made": 18, "cached": 0}
    all_pass = report["paired"][0]
    assert all_pass["observations"] == 9 and all_pass["cases"] == 3
    assert all_pass["noise_floor"]["floor"] == 0.0  # the fake passes every repeat
    assert "verdict: fake/beta cannot be told apart from fake/alpha" in result.stdout.str()

    again = pytester.runpytest("--evalmine-repeat=3")
    assert again.ret == 0 and call_count(counting) == 18  # every repeat from the cache
    assert latest_report(pytester.path)["calls"] == {"made": 0, "cached": 18}


def test_the_estimate_counts_every_repeat_and_the_cap_refuses_with_them(
    pytester: pytest.Pytester, counting: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    assert pytester.runpytest().ret == 0
    once = run_estimate(latest_report(pytester.path))
    assert call_count(counting) == 6
    # Repeat 0 is the request of a run without repeats: cached. Repeats 1 and 2 are new.
    assert pytester.runpytest("--evalmine-repeat=3").ret == 0
    report = latest_report(pytester.path)
    assert report["calls"] == {"made": 12, "cached": 6}
    assert run_estimate(report) == pytest.approx(2 * once, rel=1e-12)
    assert call_count(counting) == 18

    # On an empty cache: 3 x the calls, 3 x the estimate; a cap of twice one run's refuses.
    monkeypatch.setenv("EVALMINE_HOME", str(pytester.path / "fresh"))
    cap = f"--evalmine-max-cost={2 * once}"
    refused = pytester.runpytest("--evalmine-repeat=3", cap)
    assert refused.ret == exitcodes.REFUSED_BEFORE_SPENDING
    refused.stdout.fnmatch_lines(["*refused before spending: 18 uncached answer call(s)*"])
    assert call_count(counting) == 18  # no call made
    assert pytester.runpytest("--evalmine-repeat=3", "--evalmine-max-cost=1").ret == 0
    assert run_estimate(latest_report(pytester.path)) == pytest.approx(3 * once, rel=1e-12)


def test_repeats_that_disagree_give_a_floor_and_the_judge_sees_repeat_0_only(
    pytester: pytest.Pytester,
) -> None:
    suite = SMALL_SUITE.replace("tasks:\n", "judge: {model: fake/judge}\ntasks:\n", 1)
    pytester.makefile(".eval.yaml", small=suite)
    # One of beta's schema answers fails: one repeat of one triage case.
    result = pytester.runpytest(
        "--evalmine-fake",
        "--evalmine-repeat=2",
        "--evalmine-fake-fault=schema_violation,model=fake/beta,count=1",
    )
    report = latest_report(pytester.path)
    floor = report["paired"][0]["noise_floor"]
    assert floor["baseline"] == 0.0
    # One of three cases flips between beta's two repeats: t sqrt(mean(d^2) / n), 2 df
    assert t975(2) * math.sqrt((1 / 3) / 3) > 1  # 143.4 points: the scale caps it
    assert floor["candidate"] == 1.0
    assert floor["floor"] == floor["candidate"]
    pairs = [
        json.loads(line)
        for line in (Path(report_dir(pytester)) / "pairs.jsonl").read_text().splitlines()
    ]
    assert len(pairs) == 3  # one per case and candidate, not per repeat
    assert "noise floor of 100.0 points" in result.stdout.str().replace("\n    ", " ")


def report_dir(pytester: pytest.Pytester) -> Path:
    return max((pytester.path / "reports" / "small").glob("*/report.json")).parent


@pytest.mark.parametrize("bad", ["0", "21", "1.5", "x"])
def test_repeat_is_bounded(pytester: pytest.Pytester, bad: str) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    result = pytester.runpytest(f"--evalmine-repeat={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--evalmine-repeat" in result.stderr.str() + result.stdout.str()


def test_repeat_from_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.makeini("[pytest]\nevalmine_repeat = 2\n")
    collected = pytester.runpytest("--collect-only", "-q")
    assert sum("::" in line for line in collected.stdout.lines) == 12


def test_binary_judges_see_repeat_0_only(pytester: pytest.Pytester) -> None:
    from .test_binary_judges import BINARY_SUITE

    pytester.makefile(".eval.yaml", binary=BINARY_SUITE)
    refused = pytester.runpytest(
        "--evalmine-fake", "--evalmine-repeat=3", "--evalmine-max-cost=0.000001"
    )
    assert refused.ret == exitcodes.REFUSED_BEFORE_SPENDING
    # 8 cases x 3 repeats answered; 8 first answers x 2 criteria judged
    refused.stdout.fnmatch_lines(["*24 uncached answer call(s) and 16 judge call(s)*"])
    assert pytester.runpytest("--evalmine-fake", "--evalmine-repeat=3").ret == 0
    report = latest_report(pytester.path, "binary")
    assert report["calls"] == {"made": 24, "cached": 0}
    assert report["binary_judges"]["calls"] == {"made": 16, "cached": 0}


def test_one_model_with_repeats_shows_its_noise_floor(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    result = pytester.runpytest(
        "--evalmine-fake",
        "--evalmine-models=fake/alpha",
        "--evalmine-repeat=2",
        "--evalmine-fake-fault=schema_violation,count=1",
    )
    rows = {row["task"]: row for row in latest_report(pytester.path)["scores"]}
    # One triage case scores 0 and 1 over its repeats, every other case 1 and 1.
    # one flaky case in each: 2 degrees of freedom
    # (t975(2) sqrt(2 (0.5 / 2) / 2) = 215.1 and sqrt(2 (0.5 / 3) / 3) 143.4 points, past the
    # scale: each is the scale)
    assert rows["triage"]["noise_floor"] == 1.0
    assert rows[None]["noise_floor"] == 1.0
    assert rows["polite"]["noise_floor"] == 0.0
    out = result.stdout.str()
    assert "noise floor" in out and "100.0 pts" in out and "215.1" not in out
