"""A change report never silent (issue 31; spec: "Compare"): a variant edit, an edited case, a
contender on one side only, another suite, the same run twice and the cases on one side only
are each named in "What changed", in one vocabulary, on real runs of the fake adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evalmine.commands.cli import main

from .conftest import SMALL_SUITE, latest_report

FAKE = ("--evalmine-fake", "-p", "no:cacheprovider")
TERSE = 'variants:\n  terse: {system: "Be terse."}\ntasks:\n'


def runs(root: Path, suite: str = "small") -> list[Path]:
    return sorted((root / "reports" / suite).glob("2*"))


def text(result: pytest.RunResult) -> str:
    return " ".join(result.stdout.str().split())


def compare_out(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["compare", "--rootdir", str(root), *args])
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), err


def test_a_suite_variant_edit_names_the_variant_and_what_changed(
    pytester: pytest.Pytester,
) -> None:
    suite = pytester.makefile(".eval.yaml", small=SMALL_SUITE.replace("tasks:\n", TERSE, 1))
    contender = ("--evalmine-models=fake/alpha@terse",)
    pytester.runpytest(*FAKE, *contender).assert_outcomes(passed=3)
    suite.write_text(SMALL_SUITE.replace("tasks:\n", TERSE.replace("Be terse.", "Be short."), 1))
    result = pytester.runpytest(*FAKE, *contender)
    result.assert_outcomes(passed=3)
    changes = latest_report(pytester.path)["changes"]
    assert changes["suite_changes"]["variants_changed"] == ["terse"]
    changed = changes["cases"]["tasks"]["changed"]
    assert changed == [
        {"task": "polite", "fields": [], "variants": {"terse": ["system"]}},
        {"task": "triage", "fields": [], "variants": {"terse": ["system"]}},
    ]
    out = text(result)
    assert "tasks changed: polite (variant terse: system), triage (variant terse: system)" in out
    assert "variants changed: terse" in out
    assert "modified: none" not in out and "tasks changed: none" not in out


def test_a_task_variant_edit_and_an_edited_case_in_one_vocabulary(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    formal = '    variants: {formal: {prompt: "Rewrite formally: {{ text }}"}}\n    cases:\n'
    with_variant = SMALL_SUITE.replace(
        '    prompt: "Rewrite politely: {{ text }}"\n    cases:\n',
        '    prompt: "Rewrite politely: {{ text }}"\n' + formal,
    )
    suite = pytester.makefile(".eval.yaml", small=with_variant)
    pytester.runpytest(*FAKE).assert_outcomes(passed=6)
    edited = with_variant.replace("formally", "very formally").replace(
        "The login page loops", "The login page loops forever"
    )
    suite.write_text(edited)
    result = pytester.runpytest(*FAKE)
    result.assert_outcomes(passed=6)
    out = text(result)
    assert "tasks changed: polite (variant formal: prompt), triage (cases)" in out
    # the suite line no longer names the tasks in other words ("modified: ...")
    assert "modified:" not in out and "tasks changed: none" not in out
    first, second = runs(pytester.path)
    code, cli, _ = compare_out(pytester.path, capsys, first.name, second.name)
    assert code == 0
    assert "tasks changed: polite (variant formal: prompt), triage (cases)" in cli


def test_a_contender_and_cases_on_one_side_only_are_named(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest(*FAKE).assert_outcomes(passed=6)
    suite.write_text(SMALL_SUITE.replace(
        '      - {id: login-loop, vars: {message: "The login page loops"}}\n', ""
    ))  # fmt: skip
    result = pytester.runpytest(*FAKE, "--evalmine-models=fake/alpha")
    result.assert_outcomes(passed=2)
    out = text(result)
    assert "contenders only in A: fake/beta; only in B: none (not compared)" in out
    # the terminal names the first cases on one side, as the CLI does
    assert "cases only in A: 1 (triage/login-loop); only in B: 0" in out
    cases = latest_report(pytester.path)["changes"]["cases"]
    assert (cases["models_only_in_a"], cases["models_only_in_b"]) == (["fake/beta"], [])
    first, second = runs(pytester.path)
    code, cli, _ = compare_out(pytester.path, capsys, second.name, first.name)
    assert code == 0
    assert "contenders only in A: none; only in B: fake/beta (not compared)" in cli
    assert "cases only in A: 0; only in B: 1 (triage/login-loop)" in cli


def test_two_suites_are_said_plainly_and_paired_only_when_asked(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makefile(".eval.yaml", mini=SMALL_SUITE.replace("suite: small", "suite: mini"))
    pytester.runpytest(*FAKE, "mini.eval.yaml").assert_outcomes(passed=6)
    pytester.makefile(".eval.yaml", other=SMALL_SUITE.replace("suite: small", "suite: other"))
    pytester.runpytest(*FAKE, "other.eval.yaml").assert_outcomes(passed=6)
    (mini,), (other,) = runs(pytester.path, "mini"), runs(pytester.path, "other")
    code, _, err = compare_out(pytester.path, capsys, mini.name, other.name)
    assert code == 4
    assert f"run A ({mini.name}) is of suite 'mini', run B ({other.name}) of suite 'other'" in err
    assert "--allow-other-suite" in err
    code, out, _ = compare_out(pytester.path, capsys, mini.name, other.name, "--allow-other-suite")
    assert code == 0
    assert "the suites differ: A is a run of suite 'mini', B of suite 'other'" in out
    assert "the suites differ: 'mini' before, 'other' now" in out
    code, out, _ = compare_out(
        pytester.path, capsys, mini.name, other.name, "--allow-other-suite", "--json"
    )
    assert json.loads(out)["cases"]["suites"] == {"a": "mini", "b": "other", "same": False}
    # --evalmine-compare: a run id of another suite and its folder are refused alike
    for reference in (other.name, f"reports/other/{other.name}"):
        refused = pytester.runpytest(*FAKE, "mini.eval.yaml", f"--evalmine-compare={reference}")
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        said = " ".join((refused.stdout.str() + refused.stderr.str()).split())
        assert f"--evalmine-compare={reference}: that run is of suite 'other', not 'mini'" in said
    assert len(runs(pytester.path, "mini")) == 1  # refused before any run was written


def test_a_run_compared_with_itself_says_so(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest(*FAKE).assert_outcomes(passed=6)
    (only,) = runs(pytester.path)
    code, out, _ = compare_out(pytester.path, capsys, only.name, only.name)
    assert code == 0
    assert f"A and B are the same run ({only.name}): nothing can have changed" in out


# --- damaged and partial runs ---------------------------------------------------------------


def two_runs(pytester: pytest.Pytester) -> tuple[Path, Path]:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    for _ in range(2):
        pytester.runpytest(*FAKE, "--evalmine-repeat=2").assert_outcomes(passed=12)
    first, second = runs(pytester.path)
    return first, second


def test_answers_cut_mid_line_are_read_around_and_the_line_named(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = two_runs(pytester)
    answers = first / "answers.jsonl"
    lines = answers.read_text().splitlines(keepends=True)
    assert len(lines) == 12
    answers.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2] + "\n")
    code, out, err = compare_out(pytester.path, capsys, first.name, second.name)
    assert code == 0, err
    assert f"partial comparison: {answers}: line 3: cannot read: " in out
    assert f"run {first.name} is incomplete: its answers.jsonl holds 2 of the 12 answers" in out
    code, out, _ = compare_out(pytester.path, capsys, first.name, second.name, "--json")
    partial = json.loads(out)["cases"]["partial"]
    assert partial[0].startswith(f"{answers}: line 3: cannot read: ")
    assert "line 1 column" not in partial[0]  # json's own count is of the one row
    # the plugin reads the same way: this run against the damaged one
    result = pytester.runpytest(*FAKE, "--evalmine-repeat=2", f"--evalmine-compare={first.name}")
    assert f"partial comparison: {answers}: line 3" in text(result)
    assert latest_report(pytester.path)["changes"]["cases"]["partial"][0] == partial[0]


def test_an_incomplete_run_is_said_and_the_floor_stays_within_the_scale(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    flaky = "--evalmine-fake-fault=schema_violation,model=fake/alpha,count=1"
    pytester.runpytest(*FAKE, "--evalmine-repeat=2", flaky)
    pytester.runpytest(*FAKE, "--evalmine-repeat=2")
    first, second = runs(pytester.path)
    answers = second / "answers.jsonl"
    lines = answers.read_text().splitlines(keepends=True)
    answers.write_text("".join(lines[:5]))  # cut at a line boundary: 5 of 12 rows left
    code, out, _ = compare_out(pytester.path, capsys, first.name, second.name, "--json")
    assert code == 0
    cases = json.loads(out)["cases"]
    assert cases["partial"] == [
        f"run {second.name} is incomplete: its answers.jsonl holds 5 of the 12 answers its "
        "report.json counts, so its missing cases are not removed cases"
    ]
    floors = [m["noise_floor"]["floor"] for p in cases["models"] for m in p["metrics"]]
    assert floors and all(f is not None and 0 <= f <= 1 for f in floors)
    assert any(f > 0 for f in floors)  # alpha's one flaky case of few: capped at the scale
    code, out, _ = compare_out(pytester.path, capsys, first.name, second.name)
    assert f"partial comparison: run {second.name} is incomplete" in out
    assert all(float(x) <= 100 for x in __import__("re").findall(r"noise floor ([\d.]+) pts", out))


# --- verdicts on everything printed ----------------------------------------------------------

MANY = """\
version: 1
suite: many
models: [fake/alpha]
tasks:
  - id: triage
    kind: classify
    prompt: "Classify: {{ text }}"
    schema:
      type: object
      properties: {category: {enum: [billing]}}
      required: [category]
      additionalProperties: false
    cases:
""" + "".join(f'      - {{id: c{i}, vars: {{text: "message {i}"}}}}\n' for i in range(12))


def test_changed_answers_get_a_verdict_against_the_repeats_churn(
    pytester: pytest.Pytester,
) -> None:
    suite = pytester.makefile(".eval.yaml", many=MANY)
    pytester.runpytest(*FAKE, "--evalmine-repeat=2").assert_outcomes(passed=24)
    # one answer per schema, the same in every repeat: the answers change, the scores cannot
    suite.write_text(MANY.replace("[billing]", "[refund]"))
    result = pytester.runpytest(*FAKE, "--evalmine-repeat=2")
    pair = latest_report(pytester.path, "many")["changes"]["cases"]["models"][0]
    assert pair["changed_answers"]["rate"] == 1.0
    assert pair["changed_between_repeats"]["a"]["rate"] == 0.0
    excess = pair["changed_beyond_repeats"]["a"]
    assert excess["value"] == 1.0 and excess["cases"] == 12 and excess["interval"]["low"] > 0
    # the scores did not move (both schemas pass): the answers' verdict is its own
    assert pair["metrics"][0]["delta"] == 0.0
    out = text(result)
    assert (
        "answers: the answers changed on 100.0% of cases against A 0.0%, B 0.0% between "
        "repeats: beyond repeat noise, the scores did not" in out
    )


def test_an_example_shows_the_repeat_that_changed_quoted_once() -> None:
    from pytest_evalmine.reports.cross_run import RunSide, cross_run
    from pytest_evalmine.reports.cross_run_text import cross_run_lines

    from .test_cross_run import rec, report

    a = [rec("t1", "c1", 0, "passed", "access"), rec("t1", "c1", 1, "failed", "acess")]
    b = [rec("t1", "c1", 0, "passed", "access"), rec("t1", "c1", 1, "passed", "access")]
    data = cross_run(RunSide(report("A", "p"), a), RunSide(report("B", "p"), b))
    (example,) = data["models"][0]["metrics"][0]["better_examples"]
    assert (example["a_answer"], example["b_answer"]) == ("acess", "access")  # repeat 1
    _, detail = cross_run_lines(data)
    assert 'better (all_pass): t1/c1: "acess" -> "access"' in detail
