"""What a newcomer trips on (issue 31): a closed pipe, the command's own flags and exit codes,
a report folder that is a file, a candidate's labels for other pairs, and the comparison text
without a raw None or a "-0 ms"."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_evalmine.commands.cli import main
from pytest_evalmine.reports.sections import changes_section

from .conftest import SMALL_SUITE

# Imported with the module: the stdio client binds sys.stderr when it is imported.
with contextlib.suppress(ImportError):
    import mcp.client.stdio  # noqa: F401
from .test_judge_run import JUDGED_SUITE

PROJECT = Path(__file__).resolve().parents[1]
FAKE = ("--evalmine-fake", "-p", "no:cacheprovider")


def cli(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    code = main([args[0], "--rootdir", str(root), *args[1:]])
    out, err = capsys.readouterr()
    return code, out, err


def evalmine_into_closed_pipe(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The command as `evalmine ARGS | head -0` runs it: its standard output a pipe whose
    reader is gone before the command writes a byte (Python starts in far longer than the
    close takes), so every write meets a closed pipe."""
    read, write = os.pipe()
    os.close(read)
    env = os.environ | {"PYTHONPATH": str(PROJECT)}
    try:
        return subprocess.run(
            [sys.executable, "-m", "pytest_evalmine.commands.cli", *args],
            cwd=root,
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write)


@pytest.fixture
def two_runs(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> Path:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    for _ in range(2):
        pytester.runpytest(*FAKE).assert_outcomes(passed=6)
    capsys.readouterr()
    return pytester.path


def test_no_command_ends_in_a_broken_pipe_traceback(two_runs: Path) -> None:
    first, second = (p.name for p in sorted((two_runs / "reports" / "small").glob("2*")))
    for args in (
        ("runs", "small"),
        ("compare", first, second),
        ("compare", first, second, "--json"),
        ("last", "small"),
        ("report", second),
        ("validate", "small.eval.yaml"),
        ("prices",),
        ("suites",),
        ("plan", "small.eval.yaml"),
        ("batches", "--all"),
    ):
        done = evalmine_into_closed_pipe(two_runs, *args)
        stderr = done.stderr.decode()
        assert "Traceback" not in stderr and "BrokenPipe" not in stderr, (args, stderr)
        assert done.returncode == 0, (args, stderr)


def test_validate_names_the_commands_own_flag_and_a_missing_file_is_exit_4(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "none.eval.yaml").write_text(
        "version: 1\nsuite: n\ntasks:\n- {id: t, kind: answer, prompt: p, cases: [{id: c}]}\n"
    )
    code, _, err = cli(capsys, tmp_path, "validate", "none.eval.yaml")
    assert code == 4
    assert "give --models or a 'models' list" in err and "--evalmine-models" not in err
    code, _, err = cli(capsys, tmp_path, "validate", "/nonexistent.yaml")
    assert (code, err) == (4, "evalmine: /nonexistent.yaml: no such suite file\n")
    for args in (("runs", "nope.eval.yaml"), ("plan", "nope.eval.yaml")):
        code, _, err = cli(capsys, tmp_path, *args)
        assert (code, err) == (4, "evalmine: nope.eval.yaml: no such suite file\n"), args


def test_a_report_dir_that_is_a_file_is_refused_before_any_call(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    (pytester.path / "out").write_text("a file\n")
    for given in ("out", "out/reports"):
        result = pytester.runpytest(*FAKE, f"--evalmine-report-dir={given}")
        assert result.ret == 4, given
        result.stderr.fnmatch_lines(
            [f"*--evalmine-report-dir={given}: *out is a file, not a folder*"]
        )
        assert "passed" not in result.stdout.str()  # refused at start: nothing was spent
        assert (pytester.path / "out").read_text() == "a file\n"


def test_a_candidate_without_labels_of_its_pair_is_told_the_other_pairs_have_some(
    pytester: pytest.Pytester,
) -> None:
    three = JUDGED_SUITE.replace(
        "models: [fake/alpha, fake/beta]", "models: [fake/alpha, fake/beta, fake/gamma]"
    )
    pytester.makefile(".eval.yaml", judged=three)
    result = pytester.runpytest(*FAKE)
    result.assert_outcomes(passed=9)
    (run,) = (pytester.path / "reports" / "small").glob("2*")
    report = json.loads((run / "report.json").read_text())
    # The suite's 3 labels are all for alpha and beta: gamma's own calibration has none.
    gamma = report["headline"]["calibration_per_candidate"]["fake/gamma"]
    assert gamma["status"] == "no_labels"
    assert gamma["reason"] == (
        "no label matches a judged pair: 0 labels for this pair (3 for other pairs)"
    )
    assert "(0 labels in the suite)" not in result.stdout.str()


def test_the_comparison_text_has_no_raw_none_and_no_minus_zero_milliseconds() -> None:
    changes = {
        "previous_run_id": "R0",
        "judge_changed": False,
        "same_suite": True,
        "adapter_routing": {},
        "calibration": {
            "status_before": None,
            "status_now": "no_labels",
            "kappa_before": None,
            "kappa_now": None,
            "kappa_change": None,
        },
        "cost": {"if_uncached_usd": {"now": 0.0, "before": 0.0, "change": 0.0}},
        "latency": [{"model": "fake/a", "p50_change_s": -0.0002, "p95_change_s": None}],
        "win_rate_movements": [],
        "movers": [],
    }
    section = changes_section(changes)
    text = "\n".join([*section.lines, *section.detail_lines])
    assert "calibration: not judged -> no_labels" in text
    assert "None" not in text and "-0 ms" not in text
    assert "fake/a: p50 +0 ms, p95 -" in text


def test_mcp_run_suite_says_why_the_models_cannot_run(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the MCP tests need the mcp extra (pip install .[mcp])")
    from .test_mcp_server import over_stdio

    (tmp_path / "small.eval.yaml").write_text(SMALL_SUITE)
    asked = [
        {"suite": "small.eval.yaml", "fake": True, "models": ["fake/alpha"], "baseline": "fake/x"},
        {"suite": "small.eval.yaml", "fake": True, "models": ["fake/alpha", "fake/alpha"]},
        {"suite": "small.eval.yaml", "fake": True, "models": []},
    ]
    _, results = over_stdio(
        tmp_path,
        [("run_suite", arguments) for arguments in asked] + [("list_runs", {"suite": "small"})],
    )
    baseline, twice, empty, listed = results
    for refused in (baseline, twice, empty):
        assert (refused["status"], refused["code"]) == ("refused", "bad_request"), refused
    assert baseline["reason"] == "baseline 'fake/x' is not among the models ['fake/alpha']"
    assert "fake/alpha is named more than once" in twice["reason"]
    assert empty["reason"] == (
        "models: [] names no model; leave models out to run the suite's (fake/alpha, fake/beta)"
    )
    # Nothing ran, so no run of the suite is stored: list_runs says so.
    assert (listed["status"], listed["code"]) == ("refused", "not_found")
    assert listed["reason"] == "no run of suite 'small' under reports/"
