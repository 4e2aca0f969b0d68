"""The scorecard: percentiles and per-model counts, rates, latency and cost."""

from __future__ import annotations

import itertools
import json
import random
import statistics
from typing import Any

import pytest

from pytest_evalmine.reports.scorecard import ModelScore, Rate, percentile, score_models
from pytest_evalmine.run.records import (
    ERROR,
    FAILED,
    NOT_RUN_BUDGET,
    PASSED,
    REPLAY_MISS,
    AnswerRecord,
)

BASE = "fake/base"
CAND = "fake/cand"

# --- percentile ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1, 2, 3, 4], 0.5, 2.5),
        ([1, 2, 3, 4], 0.95, 3.85),
        ([4, 1, 3, 2], 0.95, 3.85),
        ([1, 2, 3, 4], 0.0, 1.0),
        ([1, 2, 3, 4], 1.0, 4.0),
        ([1, 2, 3, 4], 0.25, 1.75),
        ([10, 20, 30], 0.5, 20.0),
        ([10, 20], 0.1, 11.0),
        ([0.2, 0.4, 0.4, 1.0], 0.5, 0.4),
        ([7.5], 0.5, 7.5),
        ([7.5], 0.95, 7.5),
        ([7.5], 0.0, 7.5),
    ],
)
def test_percentile_by_hand(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected, rel=1e-12)


def test_percentile_of_nothing_is_none() -> None:
    assert percentile([], 0.5) is None
    assert percentile((), 0.95) is None


def test_percentile_does_not_reorder_its_input() -> None:
    values = [3.0, 1.0, 2.0]
    assert percentile(values, 0.5) == 2.0
    assert values == [3.0, 1.0, 2.0]


def test_percentile_matches_statistics_quantiles_inclusive() -> None:
    rng = random.Random(20261130)
    for trial in range(200):
        size = rng.randint(2, 60)
        if trial % 3 == 0:
            data = [rng.randint(0, 10) for _ in range(size)]  # many ties
        else:
            data = [rng.uniform(-5.0, 500.0) for _ in range(size)]
        cuts = statistics.quantiles(data, n=100, method="inclusive")
        for percent in range(1, 100):
            assert percentile(data, percent / 100) == pytest.approx(
                cuts[percent - 1], rel=1e-9, abs=1e-9
            ), (data, percent)


def test_percentile_is_monotonic_and_bounded() -> None:
    rng = random.Random(7)
    for _ in range(100):
        data = [rng.expovariate(1.0) for _ in range(rng.randint(1, 30))]
        results = [percentile(data, p / 20) for p in range(21)]
        assert results[0] == min(data)
        assert results[-1] == max(data)
        assert all(a <= b for a, b in itertools.pairwise(results))


# --- score_models ----------------------------------------------------------------------------


def checks(**passed: bool) -> list[dict[str, Any]]:
    return [{"name": name, "passed": ok, "message": ""} for name, ok in passed.items()]


def record(
    model: str,
    outcome: str,
    case: str,
    *,
    schema_mode: str | None = None,
    checks: list[dict[str, Any]] | None = None,
    latency_s: float | None = None,
    cost_usd: float = 0.0,
    cost_if_uncached_usd: float = 0.0,
    cached: bool = False,
) -> AnswerRecord:
    return AnswerRecord(
        suite="s",
        suite_file="s.eval.yaml",
        task="t",
        kind="classify",
        case=case,
        model=model,
        outcome=outcome,
        checks=checks or [],
        schema_mode=schema_mode,
        latency_s=latency_s,
        cost_usd=cost_usd,
        cost_if_uncached_usd=cost_if_uncached_usd,
        cached=cached,
    )


def base_records() -> list[AnswerRecord]:
    return [
        # native schema answers: 2 pass, 1 schema fail, 1 parse fail -> 2 / 4
        record(
            BASE,
            PASSED,
            "n1",
            schema_mode="native",
            checks=checks(answer=True, parse=True, schema=True),
            latency_s=1.0,
            cost_usd=0.01,
            cost_if_uncached_usd=0.01,
        ),
        record(
            BASE,
            PASSED,
            "n2",
            schema_mode="native",
            checks=checks(answer=True, parse=True, schema=True),
            latency_s=2.0,
            cost_usd=0.0,
            cost_if_uncached_usd=0.02,
            cached=True,
        ),
        record(
            BASE,
            FAILED,
            "n3",
            schema_mode="native",
            checks=checks(answer=True, parse=True, schema=False),
            latency_s=3.0,
            cost_usd=0.03,
            cost_if_uncached_usd=0.03,
        ),
        record(
            BASE,
            FAILED,
            "n4",
            schema_mode="native",
            checks=checks(answer=True, parse=False),
            latency_s=4.0,
            cost_usd=0.04,
            cost_if_uncached_usd=0.04,
        ),
        # prose answer, no schema: excluded from schema rates, counted in latency
        record(
            BASE,
            PASSED,
            "p1",
            checks=checks(answer=True),
            latency_s=5.0,
            cost_usd=0.05,
            cost_if_uncached_usd=0.05,
        ),
        # no answer: counted by outcome, never in latency or schema rates
        record(
            BASE,
            ERROR,
            "e1",
            schema_mode="native",
            latency_s=100.0,
            cost_usd=0.0,
            cost_if_uncached_usd=0.0,
        ),
        record(BASE, NOT_RUN_BUDGET, "b1", schema_mode="native"),
    ]


def cand_records() -> list[AnswerRecord]:
    return [
        # prompted schema answers: 1 pass, 1 parse fail, 1 schema fail, 1 empty -> 1 / 4
        record(
            CAND,
            PASSED,
            "n1",
            schema_mode="prompted",
            checks=checks(answer=True, parse=True, schema=True),
            latency_s=0.5,
            cost_usd=0.10,
            cost_if_uncached_usd=0.10,
        ),
        record(
            CAND,
            FAILED,
            "n2",
            schema_mode="prompted",
            checks=checks(answer=True, parse=False),
            latency_s=None,
            cost_usd=0.20,
            cost_if_uncached_usd=0.20,
        ),
        record(
            CAND,
            FAILED,
            "n3",
            schema_mode="prompted",
            checks=checks(answer=True, parse=True, schema=False),
            latency_s=1.5,
            cost_usd=0.0,
            cost_if_uncached_usd=0.30,
            cached=True,
        ),
        # an empty answer to a schema task arrived but never parsed: a schema failure
        record(
            CAND,
            FAILED,
            "n4",
            schema_mode="prompted",
            checks=checks(answer=False),
            latency_s=2.5,
            cost_usd=0.0,
            cost_if_uncached_usd=0.40,
            cached=True,
        ),
        record(CAND, REPLAY_MISS, "p1"),
        record(CAND, REPLAY_MISS, "e1", schema_mode="prompted"),
        record(CAND, ERROR, "b1", cost_usd=0.01, cost_if_uncached_usd=0.01),
    ]


def scores() -> dict[str, ModelScore]:
    # Interleave the models and add another model's records: only `models` are scored.
    records = [r for pair in zip(base_records(), cand_records(), strict=True) for r in pair]
    records.append(record("fake/other", PASSED, "x", latency_s=9.0, cost_usd=9.0))
    result = score_models(records, [BASE, CAND])
    assert [s.model for s in result] == [BASE, CAND]
    return {s.model: s for s in result}


def test_outcome_counts() -> None:
    base, cand = scores().values()
    assert (base.items, base.passed, base.failed, base.errors) == (7, 3, 2, 1)
    assert (base.not_run_budget, base.replay_miss) == (1, 0)
    assert (cand.items, cand.passed, cand.failed, cand.errors) == (7, 1, 3, 1)
    assert (cand.not_run_budget, cand.replay_miss) == (0, 2)


def test_baseline_is_the_first_model() -> None:
    result = scores()
    assert result[BASE].baseline is True
    assert result[CAND].baseline is False
    swapped = score_models(base_records() + cand_records(), [CAND, BASE])
    assert [(s.model, s.baseline) for s in swapped] == [(CAND, True), (BASE, False)]


def test_schema_rates_split_native_and_prompted() -> None:
    base, cand = scores().values()
    assert (base.schema_native.passed, base.schema_native.n) == (2, 4)
    assert (base.schema_prompted.passed, base.schema_prompted.n) == (0, 0)
    assert base.schema_native.value == pytest.approx(0.5)
    assert base.schema_prompted.value is None
    assert (cand.schema_native.passed, cand.schema_native.n) == (0, 0)
    assert (cand.schema_prompted.passed, cand.schema_prompted.n) == (1, 4)
    assert cand.schema_prompted.value == pytest.approx(0.25)
    assert (base.schema_all.passed, base.schema_all.n) == (2, 4)
    assert (cand.schema_all.passed, cand.schema_all.n) == (1, 4)


def test_schema_all_adds_both_modes() -> None:
    records = [
        record(BASE, PASSED, "a", schema_mode="native", checks=checks(schema=True)),
        record(BASE, FAILED, "b", schema_mode="prompted", checks=checks(schema=False)),
        record(BASE, PASSED, "c", schema_mode="prompted", checks=checks(schema=True)),
    ]
    (score,) = score_models(records, [BASE])
    assert (score.schema_native.passed, score.schema_native.n) == (1, 1)
    assert (score.schema_prompted.passed, score.schema_prompted.n) == (1, 2)
    assert (score.schema_all.passed, score.schema_all.n) == (2, 3)


def test_latency_only_over_answered_records() -> None:
    base, cand = scores().values()
    # base answered latencies: 1, 2, 3, 4, 5 (the error's 100 s is left out)
    assert base.latency_n == 5
    assert base.latency_p50_s == pytest.approx(3.0)
    assert base.latency_p95_s == pytest.approx(4.8)  # 4 + (5 - 4) * 0.8
    # cand: 0.5, 1.5, 2.5 (a missing latency is skipped)
    assert cand.latency_n == 3
    assert cand.latency_p50_s == pytest.approx(1.5)
    assert cand.latency_p95_s == pytest.approx(2.4)  # 1.5 + (2.5 - 1.5) * 0.9


def test_costs_and_cached_count() -> None:
    base, cand = scores().values()
    assert base.cost_usd == pytest.approx(0.01 + 0.03 + 0.04 + 0.05)
    assert base.cost_if_uncached_usd == pytest.approx(0.01 + 0.02 + 0.03 + 0.04 + 0.05)
    assert base.cached == 1
    assert cand.cost_usd == pytest.approx(0.10 + 0.20 + 0.01)
    assert cand.cost_if_uncached_usd == pytest.approx(0.10 + 0.20 + 0.30 + 0.40 + 0.01)
    assert cand.cached == 2


def test_model_without_records() -> None:
    (score,) = score_models(base_records(), ["fake/absent"])
    assert score.baseline is True
    assert (score.items, score.passed, score.failed, score.errors) == (0, 0, 0, 0)
    assert score.latency_p50_s is None
    assert score.latency_p95_s is None
    assert score.latency_n == 0
    assert score.schema_native.value is None
    assert score.cost_usd == 0
    assert score.cached == 0


def test_no_models_no_rows() -> None:
    assert score_models(base_records(), []) == []


def test_to_dict_is_json_serializable() -> None:
    for score in scores().values():
        data = score.to_dict()
        round_tripped = json.loads(json.dumps(data))
        assert round_tripped == data
        assert data["model"] == score.model
        assert data["baseline"] == score.baseline
        assert data["latency_p95_s"] == score.latency_p95_s
        for key in ("schema_native", "schema_prompted", "schema_all", "all_pass"):
            assert set(data[key]) == {"passed", "n", "rate", "interval"}
    base = scores()[BASE].to_dict()
    # Wilson for 2 of 4 (statsmodels-checked in test_intervals.py): [0.15004, 0.84996]
    wilson = {"low": pytest.approx(0.15004, abs=1e-5), "high": pytest.approx(0.84996, abs=1e-5)}
    assert base["schema_native"] == {"passed": 2, "n": 4, "rate": 0.5, "interval": wilson}
    assert base["schema_prompted"] == {"passed": 0, "n": 0, "rate": None, "interval": None}
    assert base["schema_all"] == {"passed": 2, "n": 4, "rate": 0.5, "interval": wilson}
    assert base["items"] == 7


def test_to_dict_round_trips_records_from_json() -> None:
    # Scores from records read back from answers.jsonl equal scores from the originals.
    original = base_records() + cand_records()
    reread = [AnswerRecord.from_dict(json.loads(json.dumps(r.to_dict()))) for r in original]
    assert score_models(reread, [BASE, CAND]) == score_models(original, [BASE, CAND])


def test_rate_value_and_dict() -> None:
    assert Rate(3, 4).value == 0.75
    assert Rate(0, 0).value is None
    data = Rate(1, 2).to_dict()
    assert (data["passed"], data["n"], data["rate"]) == (1, 2, 0.5)
    # Wilson for 1 of 2: centre 1/2, half = z / (1 + z^2/2) sqrt(1/8 + z^2/16) = 0.40547
    assert data["interval"] == {
        "low": pytest.approx(0.09453, abs=1e-5),
        "high": pytest.approx(0.90547, abs=1e-5),
    }


def test_all_pass_and_per_check_rates_by_hand() -> None:
    base, cand = scores().values()
    # base answered n1 n2 p1 (passed) and n3 n4 (failed): 3 of 5 pass every check
    assert (base.all_pass.passed, base.all_pass.n) == (3, 5)
    # answer ran on all 5; parse on n1-n4 (n4 failed); schema on n1-n3 (n3 failed)
    assert {k: (r.passed, r.n) for k, r in base.checks.items()} == {
        "answer": (5, 5),
        "parse": (3, 4),
        "schema": (2, 3),
    }
    # cand answered n1 (passed), n2 n3 n4 (failed): n4 empty, n2 unparsed, n3 off-schema
    assert (cand.all_pass.passed, cand.all_pass.n) == (1, 4)
    assert {k: (r.passed, r.n) for k, r in cand.checks.items()} == {
        "answer": (3, 4),
        "parse": (2, 3),
        "schema": (1, 2),
    }
    data = base.to_dict()
    assert data["all_pass"]["interval"]["low"] < 0.6 < data["all_pass"]["interval"]["high"]
    assert data["checks"]["parse"]["rate"] == 0.75
