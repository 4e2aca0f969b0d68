"""The release gate (spec: "Release gate"): the decision table at every corner, trust, the
run's verdict, exit codes 13 and 15, the option and suite key; the paired all-pass
comparison from answer records."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from pytest_evalmine import exitcodes
from pytest_evalmine.judging.gate import (
    BLOCK,
    HOLD,
    INVESTIGATE,
    NOT_APPLICABLE,
    SHIP,
    GateResult,
    Measurement,
    decide,
    evaluate_gate,
)
from pytest_evalmine.options import GateConfig, gate_from_spec
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.scoring.paired import compare_models
from pytest_evalmine.stats.estimators import Interval

from .conftest import SMALL_SUITE, latest_report

CONFIG = GateConfig("all_pass")  # indifference 1, minor regression 2


def verdict(low: float, high: float, trusted: bool = True) -> str:
    return decide(Measurement("c", (low + high) / 2, Interval(low, high), trusted), CONFIG).verdict


# (low, high) in points -> verdict, with i = 1, m = 2; every boundary on both sides.
TABLE = [
    # Ship: low >= -i
    ((3.0, 8.0), SHIP),
    ((-1.0, 4.0), SHIP),  # low exactly -i
    ((-0.5, 0.5), SHIP),  # equivalent within the window
    ((-1.0, -1.0), SHIP),  # a point on -i (degenerate, still low >= -i)
    # Hold: low < -i <= high
    ((-1.01, 4.0), HOLD),
    ((-30.0, 30.0), HOLD),  # wide: cannot tell
    ((-5.0, -1.0), HOLD),  # high exactly -i
    # Investigate: high < -i and low >= -m
    ((-2.0, -1.01), INVESTIGATE),  # low exactly -m
    ((-1.9, -1.1), INVESTIGATE),
    # Block: high < -i and low < -m
    ((-2.01, -1.01), BLOCK),
    ((-9.0, -3.0), BLOCK),
    ((-50.0, -1.5), BLOCK),
]


@pytest.mark.parametrize(("interval", "expected"), TABLE)
def test_decision_table(interval: tuple[float, float], expected: str) -> None:
    assert verdict(*interval) == expected


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        ((3.0, 8.0), INVESTIGATE),  # would Ship: an uncalibrated judge cannot Ship
        ((-30.0, 30.0), INVESTIGATE),  # would Hold
        ((-2.0, -1.01), INVESTIGATE),
        ((-9.0, -3.0), BLOCK),  # Block stands whatever the trust
    ],
)
def test_an_untrusted_measurement_cannot_ship_or_hold(
    interval: tuple[float, float], expected: str
) -> None:
    row = decide(Measurement("c", 0.0, Interval(*interval), False, "below_floor"), CONFIG)
    assert row.verdict == expected
    if expected == INVESTIGATE:
        assert "not trusted (below_floor)" in row.reason


def test_no_measurement_is_investigate() -> None:
    row = decide(Measurement("c", None, None, True), CONFIG)
    assert row.verdict == INVESTIGATE and row.reason.startswith("no measurement")


def test_windows_are_configurable() -> None:
    wide = GateConfig("all_pass", indifference=5.0, minor_regression=10.0)
    measurement = Measurement("c", -3.0, Interval(-4.0, -2.0), True)
    assert decide(measurement, wide).verdict == SHIP
    assert decide(measurement, CONFIG).verdict == BLOCK


def test_the_run_verdict_is_the_most_severe() -> None:
    rows = tuple(
        decide(Measurement(c, 0.0, Interval(*i), True), CONFIG)
        for c, i in (("a", (1.0, 2.0)), ("b", (-5.0, 5.0)), ("c", (-1.9, -1.1)))
    )
    assert GateResult(CONFIG, rows).verdict == INVESTIGATE
    assert GateResult(CONFIG, rows[:2]).verdict == HOLD
    assert GateResult(CONFIG, ()).verdict == NOT_APPLICABLE  # no candidate: nothing to gate
    assert GateResult(CONFIG, rows).to_dict()["candidates"][2]["verdict"] == INVESTIGATE


def test_gate_spec_and_config_validation() -> None:
    assert gate_from_spec("win_rate") == GateConfig("win_rate", 1.0, 2.0)
    assert gate_from_spec("all_pass,indifference=0.5,minor=3") == GateConfig("all_pass", 0.5, 3)
    for bad, message in (
        ("accuracy", "not one of win_rate, all_pass"),
        ("all_pass,minor=0.5", "indifference (1) <= minor regression (0.5)"),
        ("all_pass,window=2", "not indifference=POINTS or minor=POINTS"),
        ("all_pass,minor=-1", "minimum"),
    ):
        with pytest.raises(ValueError, match="--evalmine-gate") as caught:
            gate_from_spec(bad)
        assert message in str(caught.value)


def record(task: str, case: str, model: str, outcome: str, parsed: object = None) -> AnswerRecord:
    return AnswerRecord("s", "s.eval.yaml", task, "classify", case, model, outcome, parsed=parsed)


def test_paired_all_pass_comparison_from_records() -> None:
    records = [
        record("t", "1", "a", "passed", {"x": 1}),
        record("t", "1", "b", "failed", {"x": 2}),  # worse
        record("t", "2", "a", "failed"),
        record("t", "2", "b", "passed"),  # better
        record("t", "3", "a", "passed"),
        record("t", "3", "b", "passed"),
        record("u", "1", "a", "passed"),
        record("u", "1", "b", "error"),  # left out: no answer
    ]
    (result,) = compare_models(records, ["a", "b"], "hash")
    assert result.excluded == 1
    p = result.comparison
    assert (p.cases, p.mean_a, p.mean_b, p.delta) == (3, 2 / 3, 2 / 3, 0.0)
    assert [(e.task, e.case, e.baseline_answer, e.candidate_answer) for e in result.worse] == [
        ("t", "1", {"x": 1}, {"x": 2})
    ]
    assert [e.case for e in result.better] == ["2"]
    assert p.mcnemar is not None and (p.mcnemar.a_only, p.mcnemar.b_only) == (1, 1)
    gate = evaluate_gate(CONFIG, None, [result])
    assert gate.rows[0].measurement.delta == 0.0
    assert gate.verdict == HOLD  # 3 cases cannot tell a change from none
    data = json.loads(json.dumps(result.to_dict()))
    assert data["excluded_cases"] == 1 and data["worse"] == 1 and data["better"] == 1


def test_win_rate_gate_without_a_judge_is_investigate() -> None:
    records = [record("t", "1", "a", "passed"), record("t", "1", "b", "passed")]
    comparisons = compare_models(records, ["a", "b"], "hash")
    gate = evaluate_gate(GateConfig("win_rate"), None, comparisons)
    assert gate.verdict == INVESTIGATE
    assert "no judge ran" in gate.rows[0].reason


# --- end to end ------------------------------------------------------------------------------


# SMALL_SUITE's triage task with 12 more cases: 14 schema cases and 1 prose case.
MORE_CASES = "".join(
    f'      - {{id: extra-{i}, vars: {{message: "Ticket number {i}"}}}}\n' for i in range(12)
)
LARGER_SUITE = SMALL_SUITE.replace(
    '      - {id: login-loop, vars: {message: "The login page loops"}}\n',
    '      - {id: login-loop, vars: {message: "The login page loops"}}\n' + MORE_CASES,
)


def test_a_regression_blocks_the_run_with_exit_13(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=LARGER_SUITE)
    # The candidate's schema answers all fail: 14 of 15 cases drop from pass to fail.
    result = pytester.runpytest(
        "--evalmine-fake",
        "--evalmine-gate=all_pass",
        "--evalmine-fake-fault=schema_violation,model=fake/beta,count=100",
    )
    assert result.ret == exitcodes.RELEASE_GATE_BLOCKED == 13
    out = result.stdout.str()
    assert "Release gate: BLOCK (all_pass delta" in out
    report = latest_report(pytester.path, "small")
    assert report["gate"]["verdict"] == BLOCK
    row = report["gate"]["candidates"][0]
    assert row["delta_points"] == pytest.approx(-1400 / 15)
    assert row["interval_points"]["high"] < -1.0
    paired = report["paired"][0]
    assert (paired["worse"], paired["better"], paired["same"]) == (14, 0, 1)
    assert len(paired["worse_examples"]) == 3  # the first three, by task and case
    assert paired["mcnemar"]["a_only"] == 14 and paired["mcnemar"]["p_value"] < 0.001
    # The page says what the terminal says, from report.json alone (also for a stored run).
    page = html.unescape(
        (pytester.path / "reports" / "small" / report["run_id"] / "report.html").read_text()
    )
    (heading,) = [line for line in out.splitlines() if line.startswith("-- Release gate: ")]
    assert f'<section id="gate"><h2>{heading.strip("- ")}</h2>' in page
    assert f"verdict: {paired['verdict']}</p>" in page
    assert "worse (all_pass): " in page  # the examples


def test_three_cases_cannot_tell_and_keep_pytests_exit_code(
    pytester: pytest.Pytester,
) -> None:
    suite = SMALL_SUITE + "gate: {metric: all_pass, indifference: 1, minor_regression: 2}\n"
    pytester.makefile(".eval.yaml", small=suite)
    # 2 of 3 cases drop, but 3 cases cannot tell that from no change: Hold, pytest's exit 1.
    result = pytester.runpytest(
        "--evalmine-fake", "--evalmine-fake-fault=schema_violation,model=fake/beta,count=100"
    )
    assert result.ret == 1
    report = latest_report(pytester.path, "small")
    assert report["gate"]["verdict"] == HOLD
    assert "Release gate: HOLD" in result.stdout.str()


def test_an_uncalibrated_win_rate_gate_exits_15(pytester: pytest.Pytester) -> None:
    judged = SMALL_SUITE.replace("tasks:", "judge: {model: fake/judge}\ntasks:")
    pytester.makefile(".eval.yaml", small=judged)
    result = pytester.runpytest("--evalmine-fake", "--evalmine-gate=win_rate")
    assert result.ret == exitcodes.RELEASE_GATE_INVESTIGATE == 15
    report = latest_report(pytester.path, "small")
    assert report["gate"]["verdict"] == INVESTIGATE
    assert "not trusted" in report["gate"]["candidates"][0]["reason"]


def test_a_bad_gate_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    result = pytester.runpytest("--evalmine-fake", "--evalmine-gate=accuracy")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--evalmine-gate*not one of win_rate, all_pass*"])


def test_a_bad_gate_key_names_its_path(tmp_path: Path) -> None:
    from pytest_evalmine.errors import SuiteError
    from pytest_evalmine.suite.loader import load_suite

    path = tmp_path / "g.eval.yaml"
    path.write_text(
        SMALL_SUITE + "gate: {metric: all_pass, indifference: 3, minor_regression: 2}\n"
    )
    with pytest.raises(SuiteError, match=r"\$\.gate.*indifference \(3\) <= minor regression"):
        load_suite(path)
    path.write_text(SMALL_SUITE + "gate: {metric: all_pass}\n")
    with_gate = load_suite(path)
    assert with_gate.gate == GateConfig("all_pass")
    path.write_text(SMALL_SUITE)
    # The gate is a choice of the run: adding it does not change the suite hash.
    assert load_suite(path).hash == with_gate.hash


def test_a_failed_regression_task_is_block_before_every_other_row() -> None:
    ship = Measurement("c", 5.0, Interval(3.0, 8.0), True)
    assert decide(ship, CONFIG, regression_failures=2).verdict == BLOCK
    assert decide(Measurement("c", None, None, False), CONFIG, 1).verdict == BLOCK
    # one model only: no candidate row, and still Block
    assert evaluate_gate(CONFIG, None, [], regression_failures=1).verdict == BLOCK
    assert evaluate_gate(CONFIG, None, []).verdict == NOT_APPLICABLE


@pytest.mark.parametrize("metric", ["all_pass", "score", "win_rate"])
def test_one_model_has_no_candidate_so_the_gate_does_not_apply(metric: str) -> None:
    records = [record("t", "1", "a", "passed"), record("t", "2", "a", "failed")]
    gate = evaluate_gate(GateConfig(metric), None, compare_models(records, ["a"], "hash"))
    assert gate.rows == () and gate.verdict == NOT_APPLICABLE
    data = gate.to_dict()
    assert data["verdict"] == "not_applicable" and "one model only" in data["note"]
    # Two models: a verdict, and no note.
    two = [*records, record("t", "1", "b", "passed"), record("t", "2", "b", "passed")]
    gated = evaluate_gate(GateConfig("all_pass"), None, compare_models(two, ["a", "b"], "hash"))
    assert gated.verdict in (SHIP, HOLD) and gated.to_dict()["note"] is None


def test_a_one_model_run_with_a_gate_keeps_pytests_exit_code(pytester: pytest.Pytester) -> None:
    suite = SMALL_SUITE + "gate: {metric: all_pass}\n"
    pytester.makefile(".eval.yaml", small=suite)
    result = pytester.runpytest("--evalmine-fake", "--evalmine-models=fake/alpha")
    assert result.ret == pytest.ExitCode.OK  # was 15: Investigate, "no interval"
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "-- Release gate: NOT APPLICABLE (all_pass delta*",
            "the gate does not apply: one model only: there is no candidate to compare with*",
        ]
    )
    assert out.rstrip().splitlines()[-1].startswith("evalmine: exit 0: all items passed")
    report = latest_report(pytester.path, "small")
    assert report["gate"]["verdict"] == NOT_APPLICABLE and report["gate"]["candidates"] == []
    page = (pytester.path / "reports" / "small" / report["run_id"] / "report.html").read_text()
    assert "Release gate: NOT APPLICABLE" in html.unescape(page)


def test_a_one_model_run_still_blocks_on_a_failed_regression_task(
    pytester: pytest.Pytester,
) -> None:
    suite = SMALL_SUITE.replace(
        "    kind: classify\n", "    kind: classify\n    regression: true\n"
    )
    pytester.makefile(".eval.yaml", small=suite + "gate: {metric: all_pass}\n")
    result = pytester.runpytest(
        "--evalmine-fake",
        "--evalmine-models=fake/alpha",
        "--evalmine-fake-fault=schema_violation,model=fake/alpha,count=1",
    )
    assert result.ret == exitcodes.RELEASE_GATE_BLOCKED
    assert latest_report(pytester.path, "small")["gate"]["verdict"] == BLOCK
