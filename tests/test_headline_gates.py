"""Headline gates per row (spec: "Win rate", "Calibration"): calibration per candidate, each
row's own flip rate, a minimum number of pairs, position bias gated by its interval; and the
degenerate judges (always tie, always slot 1, random, always the candidate), each refused a
headline for every candidate."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from pytest_evalmine.judging.calibration import calibrate, calibrate_per_candidate
from pytest_evalmine.judging.pairs import BASELINE_FIRST, CANDIDATE_FIRST, JudgePass, Pair
from pytest_evalmine.judging.winrate import WinRate, win_rates
from pytest_evalmine.suite.loader import DEFAULT_MIN_PAIRS, Label

BASE, ONE, TWO = "fake/base", "fake/one", "fake/two"
# (baseline_first slot, candidate_first slot) for the judge's category of the pair
SLOTS = {"candidate": ("2", "1"), "baseline": ("1", "2"), "tie": ("tie", "tie")}
HUMAN = ("baseline", "tie", "candidate")


def judged(candidate: str, task: str, case: str, first: str, second: str) -> Pair:
    pair = Pair("s", task, case, BASE, candidate)
    pair.passes = [JudgePass(BASELINE_FIRST, first), JudgePass(CANDIDATE_FIRST, second)]
    return pair


def headline(
    pairs: Sequence[Pair], labels: Sequence[Label], candidates: Sequence[str]
) -> tuple[list[WinRate], list[WinRate]]:
    pooled = calibrate(
        labels, pairs, min_kappa=0.4, min_labels=10, gate_on="point", seed_text="hash"
    )
    calibrations = calibrate_per_candidate(labels, pairs, candidates, pooled, seed_text="hash")
    return win_rates(pairs, candidates, calibrations, "hash")


def agreeing(candidate: str, tasks: Sequence[str], per_task: int) -> tuple[list[Pair], list[Label]]:
    """A judge that agrees with every label: pairs and labels in all three categories."""
    pairs, labels = [], []
    for task in tasks:
        for i in range(per_task):
            category = HUMAN[i % 3]
            pairs.append(judged(candidate, task, f"c{i}", *SLOTS[category]))
            labels.append(Label(task, f"c{i}", BASE, candidate, category))
    return pairs, labels


def test_a_calibrated_candidate_is_eligible() -> None:
    pairs, labels = agreeing(ONE, ["t"], 30)
    (rate,), (row,) = headline(pairs, labels, [ONE])
    assert rate.headline_eligible, rate.ineligible_reasons
    assert row.headline_eligible
    assert rate.calibration_labels == 30


def test_a_second_candidate_without_labels_is_not_eligible() -> None:
    """Reproduced on main: calibration was pooled, so a candidate with no labels, judged by a
    judge that always prefers it, was eligible at win rate 1.00."""
    pairs, labels = agreeing(ONE, ["t"], 30)
    pairs += [judged(TWO, "t", f"c{i}", *SLOTS["candidate"]) for i in range(30)]
    (one, two), _ = headline(pairs, labels, [ONE, TWO])
    assert one.headline_eligible, one.ineligible_reasons
    assert two.win_rate == 1.0
    assert not two.headline_eligible
    assert two.calibration_labels == 0
    assert two.ineligible_reasons[0].startswith("no_labels: ")
    assert two.ineligible_reasons[0].endswith(f"(labels for {TWO})")


def test_labels_of_one_candidate_do_not_calibrate_another() -> None:
    # TWO has labels, but the judge disagrees with all of them; ONE's agreeing labels must
    # not lift it over the floor.
    pairs, labels = agreeing(ONE, ["t"], 30)
    for i in range(30):
        human = HUMAN[i % 3]
        wrong = HUMAN[(i + 1) % 3]
        pairs.append(judged(TWO, "t", f"c{i}", *SLOTS[wrong]))
        labels.append(
            Label(
                "t",
                f"c{i}",
                TWO,
                BASE,
                {"baseline": "candidate", "candidate": "baseline", "tie": "tie"}[human],
            )
        )
    (one, two), _ = headline(pairs, labels, [ONE, TWO])
    assert one.headline_eligible
    assert not two.headline_eligible
    assert two.calibration_labels == 30  # its labels, given with the models swapped
    assert two.ineligible_reasons[0].startswith("below_floor: ")


def test_a_task_made_only_of_flips_is_gated_on_its_own_flip_rate() -> None:
    """Reproduced on main: per-task rows used the candidate's overall flip rate, so a task
    made only of flips showed as eligible 0.50 [0.50, 0.50]."""
    pairs, labels = agreeing(ONE, ["good"], 60)
    pairs += [
        judged(ONE, "flips", f"f{i}", *(("1", "1") if i % 2 else ("2", "2"))) for i in range(12)
    ]
    (overall,), per_task = headline(pairs, labels, [ONE])
    assert overall.flip_rate == pytest.approx(12 / 72)
    assert overall.headline_eligible
    flips = next(r for r in per_task if r.task == "flips")
    assert (flips.win_rate, flips.flip_rate) == (0.5, 1.0)
    assert not flips.headline_eligible
    assert flips.ineligible_reasons == [
        "flip rate 1.00 > 0.30: the verdicts follow the presentation order, not quality"
    ]
    assert flips.interval is not None and flips.interval.high - flips.interval.low > 0.1
    assert next(r for r in per_task if r.task == "good").headline_eligible


def test_rows_below_the_minimum_pairs_are_shown_but_never_eligible() -> None:
    """Reproduced on main: a per-task win rate over one pair was eligible with a point
    interval."""
    assert DEFAULT_MIN_PAIRS == 10
    pairs, labels = agreeing(ONE, ["big"], 30)
    small, _ = agreeing(ONE, ["small"], 1)
    edge, _ = agreeing(ONE, ["edge"], DEFAULT_MIN_PAIRS)
    (overall,), per_task = headline(pairs + small + edge, labels, [ONE])
    rows = {r.task: r for r in per_task}
    assert overall.headline_eligible
    assert rows["small"].win_rate is not None and rows["small"].interval is not None
    assert rows["small"].interval.high - rows["small"].interval.low > 0.5
    assert rows["small"].ineligible_reasons == ["only 1 judged pairs; a headline needs at least 10"]
    assert rows["edge"].headline_eligible
    assert rows["big"].headline_eligible


def test_position_bias_is_gated_by_its_interval() -> None:
    # Soft wins whose decisive pass is always slot 1: 40 pairs, 40 decisive passes, all slot
    # 1 (Wilson [91%, 100%]); no flips, labels agree.
    pairs, labels = [], []
    for i in range(40):
        pairs.append(judged(ONE, "t", f"c{i}", "tie", "1"))  # candidate first, wins slot 1
        labels.append(Label("t", f"c{i}", BASE, ONE, "candidate" if i % 2 else "tie"))
    pairs += [judged(ONE, "t", f"d{i}", "tie", "tie") for i in range(20)]
    labels += [Label("t", f"d{i}", BASE, ONE, "tie") for i in range(20)]
    (rate,), _ = headline(pairs, labels, [ONE])
    assert rate.flip_rate == 0.0
    assert any(r.startswith("position bias: slot 1 won 100.0%") for r in rate.ineligible_reasons)
    assert not rate.headline_eligible


# --- degenerate judges, per candidate --------------------------------------------------------


def always_tie(rng: random.Random) -> tuple[str, str]:
    return ("tie", "tie")


def always_slot_1(rng: random.Random) -> tuple[str, str]:
    return ("1", "1")


def random_judge(rng: random.Random) -> tuple[str, str]:
    return (rng.choice(["1", "2", "tie"]), rng.choice(["1", "2", "tie"]))


def always_candidate(rng: random.Random) -> tuple[str, str]:
    return SLOTS["candidate"]


@pytest.mark.parametrize("judge", [always_tie, always_slot_1, random_judge, always_candidate])
def test_degenerate_judges_are_refused_a_headline_for_every_candidate(
    judge: Callable[[random.Random], tuple[str, str]],
) -> None:
    """Two candidates, 60 pairs each on two tasks; labels (a realistic human mix) for the
    first candidate only. No degenerate judge may give either candidate a headline, overall
    or per task."""
    rng = random.Random(judge.__name__)
    pairs, labels = [], []
    for candidate in (ONE, TWO):
        for i in range(60):
            task = f"t{i % 2}"
            pairs.append(judged(candidate, task, f"c{i}", *judge(rng)))
            if candidate == ONE:
                labels.append(Label(task, f"c{i}", BASE, ONE, rng.choice(HUMAN)))
    overall, per_task = headline(pairs, labels, [ONE, TWO])
    for rate in overall + per_task:
        assert not rate.headline_eligible, (judge.__name__, rate.candidate, rate.task)
        assert rate.ineligible_reasons
