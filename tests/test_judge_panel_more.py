"""The judge panel's figures the first panel tests left out (spec: "Judge panel", "Reference
answers"): the pre-run estimate's call count, kappa with and without reference answers in a
run, and the cheapest passing choice under ``--evalmine-kappa-gate=lower``."""

from __future__ import annotations

import json

import pytest

from pytest_evalmine.judging.calibration import Calibration
from pytest_evalmine.judging.pairs import (
    BASELINE_FIRST,
    CANDIDATE_FIRST,
    JudgePass,
    JurorVerdicts,
    Pair,
)
from pytest_evalmine.judging.panel import cheapest_passing
from pytest_evalmine.stats.estimators import cohen_kappa

from .conftest import latest_report, newest_run_dir
from .test_judge_panel import PANEL_SUITE, hand_kappa, longer_answer_labels


def test_estimate_counts_jurors_times_pairs_times_two_orders(pytester: pytest.Pytester) -> None:
    suite = PANEL_SUITE.replace(
        "models: [fake/alpha, fake/beta]", "models: [fake/alpha, fake/beta, fake/gamma]"
    ).replace("  vote: majority\n", "  vote: majority\n  pairs: all\n")
    pytester.makefile(".eval.yaml", panel=suite)
    result = pytester.runpytest("--evalmine-fake", "--evalmine-max-cost=0.000001")
    text = result.stdout.str()
    # by hand: 16 cases x 3 models answered; 3 jurors x (16 cases x 3 model pairs) x 2 orders
    answers, judge_calls = 16 * 3, 3 * (16 * 3) * 2
    assert f"{answers} uncached answer call(s) and {judge_calls} judge call(s)" in text, text


def test_kappa_with_and_without_reference_answers_in_a_run(pytester: pytest.Pytester) -> None:
    with_refs = PANEL_SUITE
    for n in range(6):
        with_refs = with_refs.replace(
            f"{{id: case-{n:02d}, vars:", f'{{id: case-{n:02d}, reference: "Say sorry {n}.", vars:'
        )
    prefer = ["candidate", "baseline", "tie", "candidate"]
    labels = "\n".join(
        f"  - {{task: polite, case: case-{n:02d}, baseline: fake/alpha, candidate: fake/beta, "
        f"prefer: {prefer[n % 4]}}}"
        for n in range(16)
    )
    pytester.makefile(".eval.yaml", panel=with_refs + "labels:\n" + labels + "\n")
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == 0, result.stdout.str()
    headline = latest_report(pytester.path, "panel")["headline"]
    split = headline["calibration_by_reference"]
    lines = (newest_run_dir(pytester.path, "panel") / "pairs.jsonl").read_text().splitlines()
    verdict = {p["case"]: p["panel"]["verdict"] for p in map(json.loads, lines)}
    by_hand = {"with_reference": [], "without_reference": []}
    for n in range(16):
        if verdict[f"case-{n:02d}"] is not None:
            key = "with_reference" if n < 6 else "without_reference"
            by_hand[key].append((prefer[n % 4], verdict[f"case-{n:02d}"]))
    for key, ratings in by_hand.items():
        assert split[key]["n"] == len(ratings) > 0
        kappa = split[key]["kappa"]
        categories = {c for pair in ratings for c in pair}
        if len(categories) > 1 and kappa is not None:
            assert kappa == pytest.approx(hand_kappa(ratings), abs=1e-9)
        assert split[key]["kappa_interval"] is not None


def _pair(case: int, label: str, votes: dict[str, str]) -> Pair:
    """A labelled panel pair whose jurors gave ``votes`` (candidate / baseline) both ways."""
    pair = Pair("s", "t", f"c{case}", "fake/a", "fake/b", label=label)
    for juror, vote in votes.items():
        slot = {"candidate": ("2", "1"), "baseline": ("1", "2")}[vote]
        pair.jurors[juror] = JurorVerdicts(
            passes=[
                JudgePass(order=BASELINE_FIRST, winner_slot=slot[0]),
                JudgePass(order=CANDIDATE_FIRST, winner_slot=slot[1]),
            ]
        )
    return pair


def _floor(gate_on: str) -> Calibration:
    return Calibration(
        status="ok",
        kappa=cohen_kappa([]),
        interval=None,
        min_kappa=0.4,
        min_labels=10,
        gate_on=gate_on,
        labels_total=0,
    )


def test_cheapest_choice_under_the_lower_bound_gate() -> None:
    # "cheap" agrees on 17 of 20 labels (kappa 0.7, its interval's low end under 0.4 on 20
    # labels); "dear" agrees on all of them. On the point gate the cheap juror passes alone;
    # on the lower gate only choices whose interval clears 0.4 pass.
    pairs = []
    for n in range(20):
        label = "candidate" if n % 2 else "baseline"
        wrong = "baseline" if label == "candidate" else "candidate"
        cheap = wrong if n < 3 else label
        pairs.append(_pair(n, label, {"cheap": cheap, "dear": label, "other": wrong}))
    costs = {"cheap": 0.001, "dear": 0.01, "other": 0.0001}
    ratings = [(p.label, p.votes["cheap"]) for p in pairs]
    assert hand_kappa(ratings) == pytest.approx(0.7, abs=1e-9)
    point = cheapest_passing(
        pairs, ["cheap", "dear", "other"], costs, _floor("point"), seed_text="x"
    )
    assert point is not None and point.jurors == ("cheap",)
    assert point.kappa == pytest.approx(0.7, abs=1e-9)
    lower = cheapest_passing(
        pairs, ["cheap", "dear", "other"], costs, _floor("lower"), seed_text="x"
    )
    from pytest_evalmine.stats.resample import kappa_interval

    low = kappa_interval(ratings, seed=0).low
    if low >= 0.4:  # pragma: no cover - the labels above are chosen to put it lower
        pytest.fail(f"the cheap juror's interval starts at {low}: the test needs it under 0.4")
    assert lower is not None and lower.jurors == ("dear",)
    assert lower.kappa == pytest.approx(1.0)
    # nobody passes on too few labels
    assert (
        cheapest_passing(pairs[:5], ["cheap", "dear"], costs, _floor("lower"), seed_text="x")
        is None
    )


def test_plan_suggests_the_cheapest_passing_juror_on_the_labels_given(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_evalmine.commands.cli import main

    suite = pytester.makefile(".eval.yaml", panel=PANEL_SUITE)
    assert pytester.runpytest("--evalmine-fake").ret == 0
    lines = (newest_run_dir(pytester.path, "panel") / "pairs.jsonl").read_text().splitlines()
    # labelled after the run: plan measures the run's jurors on them, with no new run
    suite.write_text(PANEL_SUITE + longer_answer_labels(map(json.loads, lines)))
    capsys.readouterr()
    code = main(["plan", "--rootdir", str(pytester.path), "panel.eval.yaml", "--json"])
    figures = json.loads(capsys.readouterr().out)
    assert code == 0
    assert figures["panel"]["cheapest_passing"]["jurors"] == ["fake/judge-longer"]
    assert figures["panel"]["cheapest_passing"]["kappa"] == pytest.approx(1.0)
    assert figures["panel"]["gate_on"] == "point"
    code = main(
        ["plan", "--rootdir", str(pytester.path), "panel.eval.yaml", "--kappa-gate", "lower"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "judge panel: cheapest that passes the floor on these labels: juror fake/judge-longer alone"
        in out
    )
