"""Options are checked before anything runs (spec: "Options", "Exit codes"): a bad value is
one line and exit 4 before any call, and a run whose reports could not be written still
prints its summary and never exits 0. ``--collect-only`` says that nothing ran."""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from pytest_evalmine.options import report_root

from .conftest import SMALL_SUITE, call_count, latest_report, newest_run_dir

FAKE = "--evalmine-fake"
USAGE_ERROR = pytest.ExitCode.USAGE_ERROR
NOT_WRITTEN = pytest.ExitCode.INTERNAL_ERROR  # 3, with the reason on the last line


def cached_answers(root: Path) -> int:
    database = root / ".evalmine" / "cache.sqlite"
    if not database.exists():
        return 0
    with sqlite3.connect(database) as db:
        return db.execute("SELECT count(*) FROM answers").fetchone()[0]


def session_finish_module() -> ModuleType:
    """The module session finish will use: the one in ``sys.modules`` (imported now if an
    earlier in-process run dropped it), not a stale attribute of its package."""
    return importlib.import_module("pytest_evalmine.engine.finish")


def assert_refused_before_anything(
    result: pytest.RunResult, root: Path, calls: Path, option: str, why: str
) -> None:
    """Exit 4, one line naming the option, no call, no answer cached, no run folder under
    the rootdir."""
    assert result.ret == USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"ERROR: {option}"), errors
    assert why in errors[0], errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert call_count(calls) == 0
    assert cached_answers(root) == 0
    assert not list(root.glob("**/report.json")), "no run folder may be written"


# --evalmine-compare ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reference", "why"),
    [
        ("NO-SUCH-RUN", "no such run of 'small'"),
        ("notes.txt", "notes.txt is not a run's report.json"),  # a file, not JSON
        ("package.json", "package.json is not a run's report.json"),  # JSON, not a report
        ("empty-folder", "no such run of 'small'"),
    ],
)
def test_a_compare_reference_that_names_no_run_is_refused_before_any_call(
    pytester: pytest.Pytester, small_suite: Path, counting: Path, reference: str, why: str
) -> None:
    (pytester.path / "notes.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (pytester.path / "package.json").write_text('{"name": "web", "version": "1.0.0"}\n')
    (pytester.path / "empty-folder").mkdir()
    result = pytester.runpytest(FAKE, f"--evalmine-compare={reference}")
    assert_refused_before_anything(
        result, pytester.path, counting, f"--evalmine-compare={reference}", why
    )


def test_a_compare_path_outside_the_project_is_checked_too(
    pytester: pytest.Pytester, small_suite: Path, counting: Path, tmp_path: Path
) -> None:
    # The issue's `--evalmine-compare=/etc/passwd`, with a file of the same kind this test owns.
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    result = pytester.runpytest(FAKE, f"--evalmine-compare={passwd}")
    assert_refused_before_anything(
        result, pytester.path, counting, f"--evalmine-compare={passwd}", "is not a run's"
    )


def test_a_run_id_of_another_suite_is_not_a_run_of_this_one(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    other = pytester.mkdir("other")
    (other / "other.eval.yaml").write_text(SMALL_SUITE.replace("suite: small", "suite: other"))
    pytester.runpytest(FAKE, "other").assert_outcomes(passed=6)
    other_run = latest_report(pytester.path, "other")["run_id"]
    calls = call_count(counting)
    result = pytester.runpytest(FAKE, "small.eval.yaml", f"--evalmine-compare={other_run}")
    assert result.ret == USAGE_ERROR
    # One rule for a run id and a run folder (issue 31): the other suite is named.
    result.stderr.fnmatch_lines(
        [f"ERROR: --evalmine-compare={other_run}: that run is of suite 'other', not 'small'*"]
    )
    assert call_count(counting) == calls
    assert not (pytester.path / "reports" / "small").exists()


def test_a_compare_reference_to_a_run_id_or_folder_is_used(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    first = newest_run_dir(pytester.path)
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    for reference in (first.name, str(first.relative_to(pytester.path))):
        result = pytester.runpytest(FAKE, f"--evalmine-compare={reference}")
        assert result.ret == 0
        assert latest_report(pytester.path)["changes"]["previous_run_id"] == first.name


def test_a_compare_reference_is_checked_on_the_xdist_controller(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    pytest.importorskip("xdist")
    result = pytester.runpytest_subprocess(FAKE, "-n", "2", "--evalmine-compare=NO-SUCH-RUN")
    assert result.ret == USAGE_ERROR
    result.stdout.fnmatch_lines(["*evalmine: --evalmine-compare=NO-SUCH-RUN: no such run*"])
    assert call_count(counting) == 0
    assert not (pytester.path / "reports").exists()


# --evalmine-report-dir ------------------------------------------------------------------------
@pytest.mark.parametrize("report_dir", ["/", "../../x", "../escaped", ".", "reports/.."])
def test_a_report_dir_outside_the_rootdir_is_refused(
    pytester: pytest.Pytester, small_suite: Path, counting: Path, report_dir: str
) -> None:
    result = pytester.runpytest(FAKE, f"--evalmine-report-dir={report_dir}")
    assert_refused_before_anything(
        result,
        pytester.path,
        counting,
        f"--evalmine-report-dir={report_dir}",
        "is not a folder inside the rootdir",
    )
    # Nor where the option pointed, outside the rootdir.
    assert not (pytester.path / report_dir / "small").resolve().exists()


def test_a_report_dir_inside_the_rootdir_is_kept_relative_or_absolute(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    inside = pytester.path / "out" / "evals"
    for report_dir in ("out/evals", str(inside), "out/../out/evals"):
        result = pytester.runpytest(FAKE, f"--evalmine-report-dir={report_dir}")
        assert result.ret == 0, report_dir
    assert len(list((inside / "small").glob("*/report.json"))) == 3
    assert not (pytester.path / "reports").exists()


def test_the_report_dir_rule(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    assert report_root(root, "reports") == root / "reports"
    assert report_root(root, str(root / "a" / "b")) == root / "a" / "b"
    assert report_root(root, "a/../b") == root / "b"
    for outside in ("/", "..", "../project-reports", str(tmp_path), ".", ""):
        with pytest.raises(ValueError, match="--evalmine-report-dir="):
            report_root(root, outside)
    # A folder reached through a symlink to the rootdir counts as inside it (resolved).
    (tmp_path / "link").symlink_to(root)
    assert report_root(root, str(tmp_path / "link" / "reports")) == tmp_path / "link" / "reports"


# the other options ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("option", "why"),
    [
        ("--evalmine-fake-fault=timeout,count=-1", "count: -1 is below the minimum of 1"),
        ("--evalmine-fake-fault=timeout,count=0", "count: 0 is below the minimum of 1"),
        ("--evalmine-fake-fault=timeout,count=many", "count: 'many' is not a whole number"),
        ("--evalmine-endpoint=x=ftp://h", "base_url: 'ftp://h' is not an http:// or https://"),
        ("--evalmine-endpoint=x=http://", "base_url: 'http://' is not an http:// or https://"),
        ("--evalmine-endpoint=x=http://127.0.0.1:9,input=1", "missing required key 'output'"),
        ("--evalmine-endpoint=x=http://127.0.0.1:9,key_env=1X", "api_key_env: '1X' does not"),
        ("--evalmine-models=", "empty value"),
        ("--evalmine-models= ", "empty value"),
        ("--evalmine-judge=", "empty value"),
        ("--evalmine-report-dir=", "empty value"),
        ("--evalmine-endpoint=", "empty value"),
    ],
)
def test_a_bad_option_value_is_one_line_and_exit_4_before_any_call(
    pytester: pytest.Pytester, small_suite: Path, counting: Path, option: str, why: str
) -> None:
    result = pytester.runpytest(FAKE, option)
    flag = option.split("=", 1)[0]
    assert_refused_before_anything(result, pytester.path, counting, flag, why)


def test_a_url_refused_in_a_suite_is_refused_on_the_command_line(
    pytester: pytest.Pytester, counting: Path
) -> None:
    """One check serves both: the suite schema's rules for an endpoint entry."""
    suite = SMALL_SUITE + "endpoints:\n  x: {base_url: 'ftp://h', cost: free}\n"
    pytester.makefile(".eval.yaml", small=suite)
    in_suite = pytester.runpytest(FAKE)
    assert in_suite.ret == pytest.ExitCode.INTERRUPTED  # a suite that does not load
    in_suite.stdout.fnmatch_lines(
        ["*$.endpoints.x.base_url: 'ftp://h' is not an http:// or https:// URL with a host*"]
    )
    (pytester.path / "small.eval.yaml").write_text(SMALL_SUITE)
    on_command_line = pytester.runpytest(FAKE, "--evalmine-endpoint=x=ftp://h,free")
    assert on_command_line.ret == USAGE_ERROR
    on_command_line.stderr.fnmatch_lines(
        ["ERROR: --evalmine-endpoint=x=ftp://h,free: base_url: 'ftp://h' is not an http://*"]
    )
    assert call_count(counting) == 0


def test_an_empty_ini_value_is_still_the_default(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    pytester.makeini("[pytest]\nevalmine_models =\nevalmine_report_dir =\n")
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    assert latest_report(pytester.path)["models"] == ["fake/alpha", "fake/beta"]


# --collect-only -------------------------------------------------------------------------------
def test_collect_only_says_nothing_ran(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    result = pytester.runpytest(FAKE, "--collect-only", "-q")
    assert result.ret == 0
    last = result.stdout.str().rstrip().splitlines()[-1]
    assert last == "evalmine: exit 0: collected 6 items, nothing run (--collect-only)"
    assert "all items passed" not in result.stdout.str()
    assert call_count(counting) == 0
    assert not (pytester.path / "reports").exists()


# reports that cannot be written -------------------------------------------------------------
def test_a_report_folder_that_cannot_be_written_keeps_the_summary_and_exits_3(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    # A report folder that is a file is refused at start (nothing spent); a file where the
    # suite's folder goes inside it is found only when the run folder is made.
    (pytester.path / "blocked").mkdir()
    (pytester.path / "blocked" / "small").write_text("a file where the suite's folder goes\n")
    result = pytester.runpytest(FAKE, "--evalmine-report-dir=blocked")
    assert result.ret == NOT_WRITTEN
    result.assert_outcomes(passed=6)
    out = result.stdout.str()
    # The summary is printed all the same: the run's results are on the terminal.
    result.stdout.fnmatch_lines(
        [
            "*= evalmine =*",
            "suite small (sha256 *",
            "-- Scorecard --",
            "REPORTS NOT WRITTEN: NotADirectoryError: *",
        ]
    )
    assert "report: blocked" not in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("evalmine: exit 3: reports not written: small: NotADirectoryError")


def test_a_writer_that_raises_keeps_the_summary_and_never_exits_0(
    pytester: pytest.Pytester, small_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finish = session_finish_module()

    def broken_writer(*args: object, **kwargs: object) -> Path:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(finish, "write_run", broken_writer)
    result = pytester.runpytest(FAKE)
    assert result.ret == NOT_WRITTEN
    result.stdout.fnmatch_lines(
        ["suite small (sha256 *", "REPORTS NOT WRITTEN: RuntimeError: disk on fire"]
    )
    last = result.stdout.str().rstrip().splitlines()[-1]
    assert last == "evalmine: exit 3: reports not written: small: RuntimeError: disk on fire"
    assert not (pytester.path / "reports").exists()


def test_a_failure_before_any_summary_still_says_so_and_exits_3(
    pytester: pytest.Pytester, small_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finish = session_finish_module()

    def broken_summary(*args: object, **kwargs: object) -> None:
        raise KeyError("scorecard")

    monkeypatch.setattr(finish, "summarize", broken_summary)
    result = pytester.runpytest(FAKE)
    assert result.ret == NOT_WRITTEN
    result.stdout.fnmatch_lines(["evalmine: could not write reports: KeyError: 'scorecard'"])
    assert result.stdout.str().rstrip().splitlines()[-1] == (
        "evalmine: exit 3: reports not written: KeyError: 'scorecard'"
    )


def test_a_failed_run_whose_reports_were_not_written_exits_3_not_1(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    (pytester.path / "blocked").mkdir()
    (pytester.path / "blocked" / "small").write_text("")
    result = pytester.runpytest(
        FAKE,
        "--evalmine-report-dir=blocked",
        "--evalmine-fake-fault=schema_violation,model=fake/beta,count=9",
    )
    result.assert_outcomes(passed=4, failed=2)
    assert result.ret == NOT_WRITTEN
    assert not list(pytester.path.glob("**/report.json"))


@pytest.mark.parametrize("damage", ["{not json", '{"run_id": "x"}'])
def test_an_unreadable_previous_run_is_said_and_skipped_not_a_failure_of_every_later_run(
    pytester: pytest.Pytester, small_suite: Path, damage: str
) -> None:
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    broken = newest_run_dir(pytester.path) / "report.json"
    broken.write_text(damage, encoding="utf-8")

    second = pytester.runpytest(FAKE)
    assert second.ret == 0, second.outlines[-3:]
    said = " ".join(second.stdout.str().split())  # the summary wraps at 80 columns
    assert f"previous run {broken.parent.name} not compared: its report.json is not" in said
    assert latest_report(pytester.path)["changes"] is None
    # This run is the latest now, so the next one compares with it again.
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    assert latest_report(pytester.path)["changes"] is not None
