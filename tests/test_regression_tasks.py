"""Regression tasks (A4): every model must pass every case; a failure is listed first and
exits 14 (spec: "Exit codes")."""

from __future__ import annotations

import pytest

from pytest_evalmine import exitcodes

from .conftest import latest_report

SUITE = """\
version: 1
suite: guarded
models: [fake/old, fake/new]
tasks:
  - id: refunds
    kind: answer
    prompt: "Q {{ n }}"
    regression: true
    judge: false
    checks: [{contains: {value: refund}}]
    cases:
      - {id: one, vars: {n: 1, reply: "You get a refund."}}
      - {id: two, vars: {n: 2, reply_old: "A refund is due.", reply_new: "Sorry, no."}}
  - id: free
    kind: answer
    prompt: "F {{ n }}"
    judge: false
    checks: [{contains: {value: sure}}]
    cases:
      - {id: one, vars: {n: 1, reply: "no"}}
"""


def test_a_failed_regression_case_exits_14_and_is_listed_first(scripted: pytest.Pytester) -> None:
    scripted.makefile(".eval.yaml", guarded=SUITE)
    result = scripted.runpytest()
    assert result.ret == exitcodes.REGRESSION_FAILED == 14
    result.assert_outcomes(passed=3, failed=3)
    lines = result.stdout.lines
    start = lines.index("-- REGRESSIONS FAILED: 1 item(s) of regression tasks --")
    assert lines[start - 1].startswith("models: ")  # right after the header lines
    assert "refunds  two   fake/new  failed   contains: missing 'refund'" in lines[start + 4]
    report = latest_report(scripted.path, "guarded")
    assert report["regressions"] == {
        "tasks": ["refunds"],
        "failed": [
            {
                "task": "refunds",
                "case": "two",
                "model": "fake/new",
                "outcome": "failed",
                "reason": "contains: missing 'refund'",
            }
        ],
    }
    run_dir = scripted.path / "reports/guarded" / report["run_id"]
    markdown = (run_dir / "report.md").read_text()
    assert markdown.index("## REGRESSIONS FAILED") < markdown.index("## Scorecard")


def test_passing_regression_tasks_keep_pytests_exit_code(scripted: pytest.Pytester) -> None:
    scripted.makefile(".eval.yaml", guarded=SUITE.replace('"Sorry, no."', '"No refund."'))
    result = scripted.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the non-regression task failed
    assert "REGRESSIONS" not in result.stdout.str()
    assert latest_report(scripted.path, "guarded")["regressions"]["failed"] == []


def test_a_failed_regression_case_makes_the_release_gate_block(scripted: pytest.Pytester) -> None:
    # With a gate the failure is a Block (exit 13), whatever the candidate's delta says.
    scripted.makefile(".eval.yaml", guarded=SUITE)
    result = scripted.runpytest("--evalmine-gate=all_pass")
    assert result.ret == exitcodes.RELEASE_GATE_BLOCKED == 13
    gate = latest_report(scripted.path, "guarded")["gate"]
    assert gate["verdict"] == "block" and gate["regression_failures"] == 1
    assert gate["candidates"][0]["reason"].startswith("1 item(s) of regression tasks did not pass")
    assert "Release gate: BLOCK" in result.stdout.str()
