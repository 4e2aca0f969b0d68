"""pairs.py and winrate.py: slot mapping, the score table, exclusions, pair planning, win
rates, flip rate, position bias and headline eligibility (spec sections 15 and 16)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from pytest_evalmine.judging.calibration import BELOW_FLOOR, OK, Calibration
from pytest_evalmine.judging.pairs import (
    BASELINE_FIRST,
    CANDIDATE_FIRST,
    JudgePass,
    Pair,
    exclusion_reason,
    plan_pairs,
)
from pytest_evalmine.judging.winrate import exclusions, position_bias, win_rate, win_rates
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.stats.estimators import Interval, Kappa

from .floats import assert_same_interval

BASE, CAND, OTHER = "fake/base", "fake/cand", "fake/other"


def pair(
    bf_slot: str | None,
    cf_slot: str | None,
    *,
    task: str = "t",
    case: str = "c",
    candidate: str = CAND,
    excluded: str | None = None,
) -> Pair:
    """A pair with literal winner slots for the baseline_first and candidate_first passes."""
    result = Pair("s", task, case, BASE, candidate, excluded=excluded)
    result.passes = [JudgePass(BASELINE_FIRST, bf_slot), JudgePass(CANDIDATE_FIRST, cf_slot)]
    return result


# Slots that give the candidate each verdict: it sits in slot 2 when the baseline goes first
# and in slot 1 when it goes first itself.
WIN_BF, LOSS_BF, WIN_CF, LOSS_CF = "2", "1", "1", "2"


def record(
    task: str,
    case: str,
    model: str,
    outcome: str = "passed",
    checks: Sequence[tuple[str, bool]] = (("answer", True),),
    text: str | None = "an answer",
) -> AnswerRecord:
    return AnswerRecord(
        suite="s",
        suite_file="s.eval.yaml",
        task=task,
        kind="answer",
        case=case,
        model=model,
        outcome=outcome,
        text=text,
        checks=[{"name": n, "passed": p, "message": ""} for n, p in checks],
    )


def each(cal: Calibration) -> dict[str, Calibration]:
    """The same calibration for every candidate of these tests."""
    return {CAND: cal, OTHER: cal}


def calibration(status: str = OK, value: float = 0.8) -> Calibration:
    return Calibration(
        status=status,
        kappa=Kappa(20, ((5, 0, 1), (0, 5, 0), (1, 0, 8)), 0.9, 0.35, value),
        interval=Interval(value - 0.1, min(1.0, value + 0.1)),
        min_kappa=0.4,
        min_labels=10,
        gate_on="point",
        labels_total=20,
    )


# --- candidate's verdict and the score table -----------------------------------------------


@pytest.mark.parametrize(
    ("order", "slot", "verdict"),
    [
        (BASELINE_FIRST, "2", "win"),
        (BASELINE_FIRST, "1", "loss"),
        (BASELINE_FIRST, "tie", "tie"),
        (CANDIDATE_FIRST, "1", "win"),
        (CANDIDATE_FIRST, "2", "loss"),
        (CANDIDATE_FIRST, "tie", "tie"),
        (BASELINE_FIRST, None, None),
        (CANDIDATE_FIRST, None, None),
    ],
)
def test_candidate_verdict_maps_slots_to_the_candidate(
    order: str, slot: str | None, verdict: str | None
) -> None:
    assert JudgePass(order, slot).candidate_verdict == verdict


@pytest.mark.parametrize(
    ("bf_slot", "cf_slot", "score", "outcome", "category", "flip"),
    [
        (WIN_BF, WIN_CF, 1.0, "win", "candidate", False),
        (LOSS_BF, LOSS_CF, 0.0, "loss", "baseline", False),
        ("tie", "tie", 0.5, "tie", "tie", False),
        (WIN_BF, "tie", 0.75, "soft_win", "candidate", False),
        ("tie", WIN_CF, 0.75, "soft_win", "candidate", False),
        (LOSS_BF, "tie", 0.25, "soft_loss", "baseline", False),
        ("tie", LOSS_CF, 0.25, "soft_loss", "baseline", False),
        (WIN_BF, LOSS_CF, 0.5, "flip", "tie", True),  # slot 2 both times
        (LOSS_BF, WIN_CF, 0.5, "flip", "tie", True),  # slot 1 both times
    ],
)
def test_score_table(
    bf_slot: str, cf_slot: str, score: float, outcome: str, category: str, flip: bool
) -> None:
    judged = pair(bf_slot, cf_slot)
    assert judged.judged
    assert judged.score == score
    assert judged.outcome == outcome
    assert judged.category == category
    assert judged.flip is flip
    # The order in which the passes were recorded does not matter.
    judged.passes.reverse()
    assert (judged.score, judged.outcome, judged.category) == (score, outcome, category)


def test_a_judge_that_always_answers_slot_1_flips_every_pair() -> None:
    pairs = [pair("1", "1", case=f"c{i}") for i in range(6)]
    assert all(p.flip and p.outcome == "flip" and p.score == 0.5 for p in pairs)
    assert all(p.category == "tie" for p in pairs)
    rate = win_rate(pairs, CAND, None, "seed")
    assert rate.flip_rate == 1.0
    assert rate.win_rate == 0.5
    bias = position_bias(pairs)
    assert (bias.decisive_passes, bias.slot_1_wins, bias.slot_1_share) == (12, 12, 1.0)


def test_unjudged_pairs_have_no_score() -> None:
    for unjudged in (
        pair(WIN_BF, WIN_CF, excluded="judge_error"),
        pair(WIN_BF, None),  # one usable verdict only
        Pair("s", "t", "c", BASE, CAND),  # no passes
    ):
        assert not unjudged.judged
        assert unjudged.score is None
        assert unjudged.category is None
        assert unjudged.outcome is None
        assert unjudged.flip is False


def test_pair_to_dict_is_json_with_candidate_verdict_per_pass() -> None:
    judged = pair(WIN_BF, "tie")
    judged.passes[0].key = "k1"
    judged.passes[0].reason = "answer 2 is complete"
    data = json.loads(json.dumps(judged.to_dict()))
    assert set(data) == {
        "suite",
        "task",
        "case",
        "baseline",
        "candidate",
        "excluded",
        "passes",
        "asked_again",
        "score",
        "judge_score",
        "check_override",
        "category",
        "flip",
        "outcome",
        "prompt",
        "baseline_text",
        "candidate_text",
        "baseline_checks",
        "candidate_checks",
        "label",
        "audit",
    }
    assert [p["candidate_verdict"] for p in data["passes"]] == ["win", "tie"]
    assert [p["order"] for p in data["passes"]] == [BASELINE_FIRST, CANDIDATE_FIRST]
    assert set(data["passes"][0]) == {
        "order",
        "winner_slot",
        "candidate_verdict",
        "reason",
        "key",
        "cached",
        "cost_usd",
        "cost_if_uncached_usd",
        "possibly_billed_usd",
        "attempts",
        "error",
        "error_kind",
        "redactions",
        # its tries that reached a server and that may be billed (spec section 11)
        "sent_tries",
        "billed_tries",
        # the provider's prompt cache (spec section 14)
        "cached_input_tokens",
        "cache_write_tokens",
        "usage_anomaly",
        # a cached call's cost as it was paid, beside today's price (spec section 8)
        "recorded_cost_usd",
    }
    assert data["passes"][0]["key"] == "k1"
    assert (data["score"], data["category"], data["flip"], data["outcome"]) == (
        0.75,
        "candidate",
        False,
        "soft_win",
    )
    assert (data["baseline"], data["candidate"], data["excluded"]) == (BASE, CAND, None)
    excluded = json.loads(json.dumps(Pair("s", "t", "c", BASE, CAND, "not_run").to_dict()))
    assert excluded["excluded"] == "not_run" and excluded["score"] is None


# --- exclusions and planning ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "checks", "reason"),
    [
        ("error", (), "provider_error"),
        ("not_run_budget", (), "not_run"),
        ("replay_miss", (), "not_run"),
        ("failed", (("answer", False),), "empty_answer"),
        ("failed", (("answer", True), ("parse", False)), "parse_fail"),
        ("failed", (("answer", True), ("parse", True), ("schema", False)), "schema_fail"),
        ("passed", (("answer", True),), None),
        ("passed", (("answer", True), ("parse", True), ("schema", True)), None),
    ],
)
def test_exclusion_reason(outcome: str, checks: tuple[tuple[str, bool], ...], reason: str) -> None:
    assert exclusion_reason(record("t", "c", BASE, outcome, checks)) == reason


def test_exclusion_reason_of_a_missing_record() -> None:
    assert exclusion_reason(None) == "missing_answer"


def planning_records() -> list[AnswerRecord]:
    failed_empty = (("answer", False),)
    schema_fail = (("answer", True), ("parse", True), ("schema", False))
    return [
        # judged task, case a: baseline fine; cand fine; other errored
        record("judged", "a", BASE),
        record("judged", "a", CAND),
        record("judged", "a", OTHER, "error", ()),
        # case b: baseline empty, cand errored (earlier in the reason list), other missing
        record("judged", "b", BASE, "failed", failed_empty, text=""),
        record("judged", "b", CAND, "error", ()),
        # case c: baseline missing; cand fine; other failed its schema
        record("judged", "c", CAND),
        record("judged", "c", OTHER, "failed", schema_fail),
        # a task with judge: false is never paired
        record("unjudged", "a", BASE),
        record("unjudged", "a", CAND),
    ]


def test_plan_pairs_decides_exclusions_baseline_side_first() -> None:
    pairs = plan_pairs(planning_records(), [BASE, CAND, OTHER], {"judged"})
    got = [(p.task, p.case, p.candidate, p.excluded) for p in pairs]
    assert got == [
        ("judged", "a", CAND, None),
        ("judged", "a", OTHER, "provider_error"),
        # The baseline's empty answer wins over the candidate's provider error.
        ("judged", "b", CAND, "empty_answer"),
        ("judged", "b", OTHER, "empty_answer"),
        ("judged", "c", CAND, "missing_answer"),
        ("judged", "c", OTHER, "missing_answer"),
    ]
    assert all(p.baseline == BASE and p.suite == "s" and p.passes == [] for p in pairs)


def test_plan_pairs_order_is_deterministic_and_skips_unjudged_tasks() -> None:
    records = planning_records()
    expected = [p.to_dict() for p in plan_pairs(records, [BASE, CAND, OTHER], {"judged"})]
    for seed in range(5):
        shuffled = records[:]
        random.Random(seed).shuffle(shuffled)
        pairs = plan_pairs(shuffled, [BASE, CAND, OTHER], {"judged"})
        assert [p.to_dict() for p in pairs] == expected
    both = plan_pairs(records, [BASE, CAND, OTHER], {"judged", "unjudged"})
    assert [(p.task, p.case, p.candidate) for p in both if p.task == "unjudged"] == [
        ("unjudged", "a", CAND),
        ("unjudged", "a", OTHER),
    ]
    assert plan_pairs(records, [BASE, CAND, OTHER], set()) == []


def test_plan_pairs_with_the_models_reordered_uses_the_new_baseline() -> None:
    records = [record("t", "c", BASE), record("t", "c", CAND, "error", ())]
    (swapped,) = plan_pairs(records, [CAND, BASE], {"t"})
    assert (swapped.baseline, swapped.candidate, swapped.excluded) == (
        CAND,
        BASE,
        "provider_error",
    )


# --- win rate ------------------------------------------------------------------------------


def hand_pairs() -> list[Pair]:
    return [
        pair(WIN_BF, WIN_CF, case="c1"),  # win      1
        pair(WIN_BF, "tie", case="c2"),  # soft_win 0.75
        pair("tie", "tie", case="c3"),  # tie      0.5
        pair("1", "1", case="c4"),  # flip     0.5
        pair(LOSS_BF, LOSS_CF, case="c5"),  # loss     0
        pair(WIN_BF, WIN_CF, case="c6", excluded="schema_fail"),  # not counted
        pair(LOSS_BF, LOSS_CF, case="c7", candidate=OTHER),  # another candidate
    ]


def reference_interval(scores: list[float], seed_text: str, candidate: str, task: str) -> Any:
    seed = int(
        hashlib.sha256(f"{seed_text}\x1fwin_rate\x1f{candidate}\x1f{task}".encode()).hexdigest()[
            :16
        ],
        16,
    )
    # The documented draw, written out: one stratum whose distinct scores (ascending) get
    # Dirichlet parameters equal to their counts, then half a pseudo-pair at 0 and at 1; the
    # gammas drawn one distinct parameter at a time, ascending.
    values = sorted(set(scores))
    alpha = np.array([scores.count(v) for v in values] + [0.5, 0.5], dtype=float)
    rng = np.random.default_rng(seed)
    gammas = np.zeros((10_000, len(alpha)))
    for shape in sorted(set(alpha)):
        gammas[:, alpha == shape] = rng.standard_gamma(shape, size=(10_000, (alpha == shape).sum()))
    weights = gammas / gammas.sum(axis=1, keepdims=True)
    means = weights @ np.array([*values, 0.0, 1.0])
    return np.quantile(means, [0.025, 0.975], method="linear")


def test_win_rate_by_hand() -> None:
    rate = win_rate(hand_pairs(), CAND, None, "suitehash")
    # scores 1, 0.75, 0.5, 0.5, 0 -> mean 2.75 / 5 = 0.55
    assert rate.n == 5
    assert rate.win_rate == pytest.approx(0.55)
    assert rate.outcomes == {
        "win": 1,
        "loss": 1,
        "tie": 1,
        "soft_win": 1,
        "soft_loss": 0,
        "flip": 1,
    }
    assert rate.flip_rate == pytest.approx(1 / 5)
    assert rate.title() == "over schema-passing pairs only, n=5"
    assert rate.interval is not None
    assert rate.interval.low <= 0.55 <= rate.interval.high
    expected = reference_interval([1.0, 0.75, 0.5, 0.5, 0.0], "suitehash", CAND, "")
    assert (rate.interval.low, rate.interval.high) == pytest.approx(tuple(expected), rel=1e-12)

    other = win_rate(hand_pairs(), OTHER, None, "suitehash")
    assert (other.n, other.win_rate, other.flip_rate) == (1, 0.0, 0.0)
    # One loss: the interval starts at 0 but is not the point [0, 0].
    assert other.interval is not None
    assert other.interval.low == pytest.approx(0.0, abs=1e-3) and other.interval.high > 0.5


def test_win_rate_per_task_and_with_no_judged_pairs() -> None:
    pairs = [
        pair(WIN_BF, WIN_CF, task="a", case="1"),
        pair(WIN_BF, "tie", task="a", case="2"),
        pair(LOSS_BF, "tie", task="b", case="1"),
    ]
    rate_a = win_rate(pairs, CAND, "a", "h")
    assert (rate_a.task, rate_a.n) == ("a", 2)
    assert rate_a.win_rate == pytest.approx((1 + 0.75) / 2)
    expected = reference_interval([1.0, 0.75], "h", CAND, "a")
    assert rate_a.interval is not None
    assert (rate_a.interval.low, rate_a.interval.high) == pytest.approx(tuple(expected))
    rate_b = win_rate(pairs, CAND, "b", "h")
    assert (rate_b.n, rate_b.win_rate) == (1, 0.25)
    none = win_rate(pairs, CAND, "missing", "h")
    assert (none.n, none.win_rate, none.interval, none.flip_rate) == (0, None, None, None)
    assert set(none.outcomes.values()) == {0}


def test_win_rate_interval_is_reproducible_and_seeded_by_the_suite_hash() -> None:
    rng = random.Random(8)
    pairs = [
        pair(rng.choice(["1", "2", "tie"]), rng.choice(["1", "2", "tie"]), case=f"c{i}")
        for i in range(40)
    ]
    first = win_rate(pairs, CAND, None, "hash-1").interval
    assert first is not None
    assert_same_interval(win_rate(pairs, CAND, None, "hash-1").interval, first)
    assert win_rate(pairs, CAND, None, "hash-2").interval != first


def test_position_bias_by_hand() -> None:
    pairs = [
        pair("2", "1"),  # decisive 2, slot 1 once
        pair("tie", "1"),  # decisive 1, slot 1 once
        pair("tie", "tie"),  # no decisive pass
        pair(None, "2"),  # decisive 1 (slot 2), the other pass had no verdict
    ]
    bias = position_bias(pairs)
    # decisive passes: 2 + 1 + 0 + 1 = 4; slot 1 won 2 of them -> 1/2
    assert (bias.decisive_passes, bias.slot_1_wins) == (4, 2)
    assert bias.slot_1_share == pytest.approx(0.5)
    data = bias.to_dict()
    assert data["decisive_passes"] == 4 and data["slot_1_wins"] == 2
    assert data["slot_1_share"] == 0.5 and data["flagged"] is False
    assert data["interval"]["low"] < 0.5 < data["interval"]["high"]
    ties = position_bias([pair("tie", "tie")])
    assert (ties.decisive_passes, ties.slot_1_share) == (0, None)


# --- eligibility ---------------------------------------------------------------------------


def flips_pairs(total: int, flips: int, candidate: str = CAND) -> list[Pair]:
    return [
        pair("1", "1", case=f"c{i:03}", candidate=candidate)
        if i < flips
        else pair(WIN_BF, WIN_CF, case=f"c{i:03}", candidate=candidate)
        for i in range(total)
    ]


def test_flip_rate_at_the_limit_is_eligible() -> None:
    pairs = flips_pairs(10, 3)  # 3 / 10 = 0.30, "at most 0.30"
    overall, per_task = win_rates(pairs, [CAND], each(calibration()), "h")
    assert overall[0].flip_rate == pytest.approx(0.30)
    assert overall[0].headline_eligible
    assert overall[0].ineligible_reasons == []
    assert per_task[0].headline_eligible
    assert overall[0].to_dict()["flag"] is None


def test_flip_rate_above_the_limit_is_not_eligible() -> None:
    pairs = flips_pairs(100, 31) + flips_pairs(10, 0, candidate=OTHER)  # 31 / 100 = 0.31
    overall, per_task = win_rates(pairs, [CAND, OTHER], each(calibration()), "h")
    cand, other = overall
    assert cand.flip_rate == pytest.approx(0.31)
    assert not cand.headline_eligible
    assert "0.31" in cand.ineligible_reasons[0]
    assert "presentation order" in cand.ineligible_reasons[0]
    # Flips here all land in slot 1: 62 + 69 of 200 decisive passes, Wilson [59%, 72%].
    assert cand.ineligible_reasons[1].startswith("position bias: slot 1 won 65.5%")
    assert len(cand.ineligible_reasons) == 2
    data = cand.to_dict()
    assert data["flag"] == "UNCALIBRATED" and data["headline_eligible"] is False
    # The other candidate is unaffected.
    assert [r.headline_eligible for r in per_task if r.candidate == CAND] == [False]
    assert other.headline_eligible
    assert [r.headline_eligible for r in per_task if r.candidate == OTHER] == [True]


@pytest.mark.parametrize("status", [BELOW_FLOOR, "no_labels", "insufficient_labels", "undefined"])
def test_failing_calibration_makes_every_rate_ineligible(status: str) -> None:
    cal = calibration(status, value=0.1)
    pairs = flips_pairs(10, 0) + flips_pairs(4, 0, candidate=OTHER)
    overall, per_task = win_rates(pairs, [CAND, OTHER], each(cal), "h")
    for rate in overall + per_task:
        assert not rate.headline_eligible
        assert rate.ineligible_reasons[0].startswith(f"{status}: ")
        assert cal.reason() in rate.ineligible_reasons[0]
        assert rate.to_dict()["flag"] == "UNCALIBRATED"


def test_a_candidate_without_judged_pairs_is_not_eligible() -> None:
    pairs = [pair(WIN_BF, WIN_CF, excluded="provider_error")]
    (rate,), per_task = win_rates(pairs, [CAND], each(calibration()), "h")
    assert rate.n == 0 and rate.win_rate is None
    assert not rate.headline_eligible
    assert rate.ineligible_reasons == ["no judged pairs"]
    assert [r.task for r in per_task] == ["t"]


def test_per_task_rates_are_listed_worst_first_with_no_pairs_last() -> None:
    pairs = [
        pair(WIN_BF, WIN_CF, task="alpha", case="1"),  # CAND alpha: 1.0
        pair(LOSS_BF, "tie", task="beta", case="1"),  # CAND beta: 0.25
        pair("tie", "tie", task="gamma", case="1"),  # CAND gamma: 0.5
        pair(WIN_BF, WIN_CF, task="zeta", case="1", excluded="not_run"),  # CAND zeta: none
        pair(LOSS_BF, LOSS_CF, task="alpha", case="1", candidate=OTHER),  # OTHER alpha: 0.0
        pair("tie", WIN_CF, task="beta", case="1", candidate=OTHER),  # OTHER beta: 0.75
    ]
    _, per_task = win_rates(pairs, [CAND, OTHER], each(calibration()), "h")
    assert [(r.candidate, r.task, r.win_rate) for r in per_task] == [
        (OTHER, "alpha", 0.0),
        (CAND, "beta", 0.25),
        (CAND, "gamma", 0.5),
        (OTHER, "beta", 0.75),
        (CAND, "alpha", 1.0),
        (CAND, "zeta", None),
    ]
    assert per_task[-1].ineligible_reasons == ["no judged pairs"]


def test_exclusions_are_counted_by_reason_per_candidate() -> None:
    pairs = [
        pair(None, None, case="1", excluded="schema_fail"),
        pair(None, None, case="2", excluded="schema_fail"),
        pair(None, None, case="3", excluded="judge_error"),
        pair(WIN_BF, WIN_CF, case="4"),
        pair(None, None, case="1", candidate=OTHER, excluded="missing_answer"),
    ]
    assert exclusions(pairs) == {
        CAND: {"judge_error": 1, "schema_fail": 2},
        OTHER: {"missing_answer": 1},
    }
    assert list(exclusions(pairs)[CAND]) == ["judge_error", "schema_fail"]
    assert exclusions([pair(WIN_BF, WIN_CF)]) == {}
