"""The `evalmine` command (spec: "Command line"): each subcommand in process, exit codes,
help, and one run of the installed entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_evalmine import exitcodes
from pytest_evalmine.commands.cli import build_parser, main

from .conftest import SMALL_SUITE
from .test_judge_run import JUDGED_SUITE

EXAMPLE = Path(__file__).resolve().parents[1] / "examples"


def run(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    code = main([args[0], "--rootdir", str(root), *args[1:]])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def stored(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> Path:
    """Two runs of a judged suite, stored by the plugin."""
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)
    for _ in range(2):
        pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider").assert_outcomes(passed=6)
    capsys.readouterr()  # pytester's own output
    return pytester.path


def run_ids(root: Path) -> list[str]:
    return [p.name for p in sorted((root / "reports" / "small").glob("2*"))]


def test_validate_a_good_suite(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "examples")
    code, out, err = run(capsys, tmp_path, "validate", "examples/support-desk.eval.yaml")
    assert (code, err) == (0, "")
    assert out == (
        "ok examples/support-desk.eval.yaml: suite support-desk, 56 items, "
        "anthropic/claude-haiku-4-5, google/gemini-2.5-flash; judge anthropic/claude-haiku-4-5; "
        "variants concise\n"
    )


def test_validate_reports_the_loaders_line_and_the_worst_code(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "small.eval.yaml").write_text(SMALL_SUITE)
    (tmp_path / "bad.eval.yaml").write_text(SMALL_SUITE.replace("prompt:", "promt:", 1))
    code, out, err = run(capsys, tmp_path, "validate", "small.eval.yaml", "bad.eval.yaml")
    assert code == 2
    assert out.startswith("ok small.eval.yaml: suite small, 6 items")
    # Both problems of the misspelt key, one line each.
    assert err.splitlines() == [
        "bad.eval.yaml: $.tasks[0]: missing required key 'prompt'",
        err.splitlines()[1],
    ]
    assert err.splitlines()[1].startswith("bad.eval.yaml: $.tasks[0]: unknown key 'promt'")
    assert "Traceback" not in err


def test_validate_refuses_an_unpriced_model_like_a_run_would(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "small.eval.yaml").write_text(SMALL_SUITE)
    code, _, err = run(
        capsys, tmp_path, "validate", "small.eval.yaml", "--models", "fake/a,acme/unknown"
    )
    assert code == exitcodes.REFUSED_BEFORE_SPENDING
    assert "no price for model 'acme/unknown'" in err
    judged = JUDGED_SUITE.replace("model: fake/judge", "model: acme/judge")
    (tmp_path / "judged.eval.yaml").write_text(judged)
    code, _, err = run(capsys, tmp_path, "validate", "judged.eval.yaml")
    assert code == exitcodes.REFUSED_BEFORE_SPENDING and "'acme/judge'" in err


def test_validate_never_touches_the_network(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("validate opened a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    shutil.copytree(EXAMPLE, tmp_path / "examples")
    assert run(capsys, tmp_path, "validate", "examples/support-desk.eval.yaml")[0] == 0


def test_prices_whole_table_and_for_one_suite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, tmp_path, "prices")
    assert code == 0 and out.startswith("prices pinned ")
    assert "fake/*" in out and "anthropic/claude-haiku-4-5" in out
    shutil.copytree(EXAMPLE, tmp_path / "examples")
    code, out, _ = run(capsys, tmp_path, "prices", "--for", "examples/support-desk.eval.yaml")
    rows = out.splitlines()[3:]
    assert [row.split()[0] for row in rows] == [
        "anthropic/claude-haiku-4-5",
        "google/gemini-2.5-flash",
    ]
    (tmp_path / "small.eval.yaml").write_text(SMALL_SUITE)
    _, out, _ = run(capsys, tmp_path, "prices", "--for", "small.eval.yaml")
    assert "fake/alpha (row fake/*)" in out


def test_suites_lists_each_suite_under_a_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "examples")
    (tmp_path / "bad.eval.yaml").write_text("version: 2\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.eval.yaml").write_text(SMALL_SUITE)
    code, out, _ = run(capsys, tmp_path, "suites")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 5
    assert lines[0].startswith("bad.eval.yaml: does not load: ")
    assert lines[1].startswith(
        "examples/support-desk.eval.yaml: suite support-desk, 9 tasks, 28 cases, 18 labels"
    )
    # the built-in suites come from their one registry, without touching their data
    assert lines[2].startswith("built-in gsm8k-160 (--evalmine-suite=gsm8k-160): The first 160 ")
    assert lines[3].startswith("built-in e2e-extract-150 (--evalmine-suite=e2e-extract-150): ")
    assert lines[4].startswith("built-in mmlu-hs-160 (--evalmine-suite=mmlu-hs-160): The first 40 ")


def test_runs_and_last(capsys: pytest.CaptureFixture[str], stored: Path) -> None:
    first, second = run_ids(stored)
    code, out, _ = run(capsys, stored, "runs", "small")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[2:]] == [first, second]
    # The headline column is the stored run's: eligible, or flagged UNCALIBRATED.
    report = json.loads((stored / "reports" / "small" / second / "report.json").read_text())
    status = "eligible" if report["headline"]["headline_eligible"] else "UNCALIBRATED"
    assert "6/6" in out and status in out
    assert run(capsys, stored, "runs", "judged.eval.yaml")[1] == out
    code, out, _ = run(capsys, stored, "last", "small")
    assert out == (stored / "reports" / "small" / second / "report.md").read_text()
    code, out, _ = run(capsys, stored, "last", "small", "--json")
    assert out == (stored / "reports" / "small" / second / "report.json").read_text()
    code, _, err = run(capsys, stored, "runs", "nosuch")
    assert code == 4 and err == f"evalmine: no run of suite 'nosuch' under {stored}/reports\n"


def test_report_renders_the_same_markdown_and_page_again(
    capsys: pytest.CaptureFixture[str], stored: Path
) -> None:
    first = run_ids(stored)[0]
    markdown = stored / "reports" / "small" / first / "report.md"
    page = markdown.with_name("report.html")
    original, original_page = markdown.read_text(), page.read_text()
    markdown.write_text("stale")
    page.write_text("stale")
    code, out, _ = run(capsys, stored, "report", first)
    assert (code, out) == (0, f"wrote {markdown}\nwrote {page}\n")
    assert markdown.read_text() == original
    assert page.read_text() == original_page
    # by folder, and by report.json
    assert run(capsys, stored, "report", f"reports/small/{first}")[0] == 0
    assert run(capsys, stored, "report", f"reports/small/{first}/report.json")[0] == 0
    assert markdown.read_text() == original


def test_report_refuses_when_the_suite_changed(
    capsys: pytest.CaptureFixture[str], stored: Path
) -> None:
    suite = stored / "judged.eval.yaml"
    suite.write_text(suite.read_text().replace("Classify:", "Classify this:"))
    code, _, err = run(capsys, stored, "report", run_ids(stored)[0])
    assert code == 4 and "the suite changed since run" in err


def test_compare_two_runs(capsys: pytest.CaptureFixture[str], stored: Path) -> None:
    first, second = run_ids(stored)
    code, out, _ = run(capsys, stored, "compare", first, second)
    assert code == 0
    assert out.splitlines()[:2] == [
        f"{first} -> {second}",
        f"-- What changed since {first} --",
    ]
    assert "+0.0 pts" in out
    code, out, _ = run(capsys, stored, "compare", first, second, "--json")
    import json

    assert json.loads(out)["previous_run_id"] == first


def test_every_subcommand_has_complete_help() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    assert set(subparsers) == {
        "validate",
        "prices",
        "suites",
        "runs",
        "last",
        "report",
        "compare",
        "plan",
        "batches",
        "merge",
    }
    for name, sub in subparsers.items():
        assert sub.description, name
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}"


def test_usage_errors_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["runs"])
    assert stopped.value.code == 4
    with pytest.raises(SystemExit) as stopped:
        main(["frobnicate"])
    assert stopped.value.code == 4


def test_the_installed_command_runs_without_the_mcp_sdk_loaded(tmp_path: Path) -> None:
    (tmp_path / "small.eval.yaml").write_text(SMALL_SUITE)
    code = (
        "import sys\n"
        "from pytest_evalmine.commands.cli import main\n"
        "status = main(['validate', 'small.eval.yaml'])\n"
        "assert 'mcp' not in sys.modules\n"
        "sys.exit(status)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok small.eval.yaml")
