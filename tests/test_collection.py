"""Collection, node ids, selection and the plugin's silence outside suites (pytester)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SMALL_SUITE, latest_report

FAKE = "--evalmine-fake"


def test_items_are_task_case_model_with_stable_ids(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    result = pytester.runpytest("--collect-only", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert ids == [
        "small.eval.yaml::triage::charged-twice[fake/alpha]",
        "small.eval.yaml::triage::charged-twice[fake/beta]",
        "small.eval.yaml::triage::login-loop[fake/alpha]",
        "small.eval.yaml::triage::login-loop[fake/beta]",
        "small.eval.yaml::polite::refund-no[fake/alpha]",
        "small.eval.yaml::polite::refund-no[fake/beta]",
    ]
    # Collection alone never calls a model or writes a report.
    assert not (pytester.path / "reports").exists()
    assert not (pytester.path / ".evalmine" / "cache.sqlite").exists()


def test_models_option_overrides_suite_and_baseline_moves_first(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    result = pytester.runpytest(
        "--collect-only", "-q", "--evalmine-models=fake/x,fake/y", "--evalmine-baseline=fake/y"
    )
    ids = [line for line in result.outlines if "::" in line]
    assert ids[:2] == [
        "small.eval.yaml::triage::charged-twice[fake/y]",
        "small.eval.yaml::triage::charged-twice[fake/x]",
    ]


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (["-m", "evalmine(model='fake/beta')"], 3),
        (["-m", "evalmine(kind='rewrite')"], 2),
        (["-m", "evalmine(task='triage') and evalmine(model='fake/alpha')"], 2),
        (["-k", "login"], 2),
        (["-k", "polite and alpha"], 1),
        (["--deselect", "small.eval.yaml::polite::refund-no[fake/beta]"], 5),
        (["small.eval.yaml::triage"], 4),
    ],
)
def test_selection(
    pytester: pytest.Pytester, small_suite: Path, selection: list[str], expected: int
) -> None:
    result = pytester.runpytest(FAKE, *selection)
    result.assert_outcomes(passed=expected)
    report = latest_report(pytester.path)
    assert report["items"] == expected
    assert report["calls"]["made"] == expected


def test_last_failed_reruns_only_failures(pytester: pytest.Pytester, small_suite: Path) -> None:
    fault = "--evalmine-fake-fault=empty_answer,model=fake/beta,prompt=loops"
    pytester.runpytest(FAKE, fault).assert_outcomes(passed=5, failed=1)
    result = pytester.runpytest(FAKE, "--lf", "--evalmine-no-cache")
    result.assert_outcomes(passed=1, deselected=5)


def test_strict_markers_accept_the_evalmine_marker(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    result = pytester.runpytest(FAKE, "--strict-markers", "-m", "evalmine")
    result.assert_outcomes(passed=6)


def test_glob_is_configurable_and_explicit_yaml_is_collected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", plain=SMALL_SUITE)
    pytester.runpytest("--collect-only", "-q").assert_outcomes()
    assert pytester.runpytest(FAKE, "plain.yaml").ret == 0
    pytester.makeini("[pytest]\nevalmine_glob = pl*.yaml\n")
    pytester.runpytest(FAKE).assert_outcomes(passed=6)


def test_suite_error_is_one_line_without_traceback(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", bad=SMALL_SUITE.replace("kind: rewrite", "knd: rewrite"))
    result = pytester.runpytest(FAKE)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "\nbad.eval.yaml: $.tasks[1]: unknown key 'knd' (allowed: " in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
    assert "suite.py" not in result.stdout.str()


def test_every_suite_problem_is_one_line_sorted_without_traceback(
    pytester: pytest.Pytester,
) -> None:
    broken = SMALL_SUITE.replace("kind: rewrite", "knd: rewrite").replace(
        "fake/alpha", "nomodel", 1
    )
    pytester.makefile(".eval.yaml", bad=broken + "judge: {model: fake/j, rubric: [a]}\n")
    result = pytester.runpytest(FAKE)
    output = result.stdout.str()
    lines = [line for line in output.splitlines() if line.startswith("bad.eval.yaml: ")]
    assert [line.split(": ")[1] for line in lines] == [
        "$.judge.rubric",
        "$.models[0]",
        "$.tasks[1]",
        "$.tasks[1]",
    ], output
    assert "['a'] is not of type 'string'" in lines[0]
    assert "Traceback" not in output


@pytest.mark.parametrize("model", ["nomodel", "fake/", "/beta"])
def test_model_option_format_is_checked_before_prices(
    pytester: pytest.Pytester, small_suite: Path, model: str
) -> None:
    result = pytester.runpytest(FAKE, f"--evalmine-models=fake/a,{model}", "--collect-only")
    result.stdout.fnmatch_lines([f"*--evalmine-models: model '{model}' is not 'provider/model'*"])
    assert "no price" not in result.stdout.str()


def test_plain_test_runs_are_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    assert True\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "=== evalmine ===" not in result.stdout.str()
    assert not (pytester.path / "reports").exists()
    assert not (pytester.path / ".evalmine").exists()


def test_plugin_import_is_light() -> None:
    code = (
        "import sys, pytest_evalmine.plugin\n"
        "heavy = [m for m in ('httpx', 'jsonschema', 'numpy', 'scipy', 'mcp', 'yaml', 'sqlite3')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--evalmine-no-cache", "--evalmine-record=none"], "*contradicts*"),
        (["--evalmine-fake-fault=meteor_strike"], "*unknown fault 'meteor_strike'*"),
        (["--evalmine-record=sometimes"], "*invalid choice*"),
    ],
)
def test_bad_options_are_usage_errors(
    pytester: pytest.Pytester, small_suite: Path, options: list[str], message: str
) -> None:
    result = pytester.runpytest(FAKE, *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_every_missing_key_is_named_once_in_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    pytester.makefile(
        ".eval.yaml",
        keys=SMALL_SUITE.replace(
            "models: [fake/alpha, fake/beta]",
            "models: [openai/gpt-5-mini, anthropic/claude-haiku-4-5]\n"
            "judge: {model: google/gemini-2.5-flash}",
        ),
    )
    result = pytester.runpytest()
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 10
    [line] = [
        line
        for line in output.splitlines()
        if "refused before spending: openai" in line and not line.startswith("evalmine: exit")
    ]
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        assert line.count(variable) == 1, line
    assert "openai: openai:" not in output
    assert "_pytest.outcomes.Exit" not in output
    assert "! evalmine: refused before spending" in output
    # the closing line states this reason, not the generic "unknown model or over the cap"
    assert result.outlines[-1].startswith("evalmine: exit 10: refused before spending: openai")
    assert "OPENAI_API_KEY" in result.outlines[-1]
