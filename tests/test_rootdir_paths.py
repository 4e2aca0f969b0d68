"""Report paths and pytest's rootdir rule (spec: "Terminal summary", "Command line"): the
report folder the terminal names opens from where the user stands, and ``evalmine`` finds
the runs ``pytest SUITE`` wrote by the rootdir pytest picked, wherever the suite file lies;
when it finds none, it says where it looked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_evalmine.commands.cli import main
from pytest_evalmine.commands.rootdir import pytest_rootdir

from .conftest import SMALL_SUITE

PYTEST_TABLE = "[tool.pytest.ini_options]\naddopts = ''\n"


def printed_report_folder(lines: list[str]) -> str:
    """The run folder of the summary's ``report:`` line (``report: FOLDER/report.html``, a
    long path on a line of its own)."""
    [start] = [n for n, line in enumerate(lines) if line.startswith("report:")]
    parts = []
    for line in lines[start:]:
        if "report.md" in line:
            break
        parts.append(line.removeprefix("report:").strip())
    path = "".join(parts)
    for page in ("/report.html", "/report.md"):
        path = path.removesuffix(page)
    return path.rstrip("/")


def evalmine(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command as typed from the working directory: no --rootdir."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_suite_file_outside_the_project(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = pytester.mkdir("project")
    (project / "pyproject.toml").write_text(PYTEST_TABLE)
    outside = pytester.mkdir("outside")
    (outside / "small.eval.yaml").write_text(SMALL_SUITE)
    monkeypatch.chdir(project)
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider", "../outside")
    result.assert_outcomes(passed=6)
    # pytest's rootdir is not the project: the reports are not under the project's folder.
    rootdir = pytest_rootdir(["../outside"], project)
    assert not rootdir.is_relative_to(project)
    assert f"rootdir: {rootdir}" in result.stdout.str()
    folder = printed_report_folder(result.outlines)
    # Outside the working directory: absolute, so it opens from here.
    assert Path(folder).is_absolute(), folder
    assert (Path(folder) / "report.md").is_file()
    assert Path(folder).parent == rootdir / "reports" / "small"
    capsys.readouterr()

    # The suite file given: its runs are found where pytest put them.
    code, out, err = evalmine(capsys, "runs", "../outside/small.eval.yaml")
    assert code == 0, err
    assert Path(folder).name in out
    code, out, err = evalmine(capsys, "last", "../outside/small.eval.yaml")
    assert code == 0, err and out.startswith("#")
    # By name alone the command cannot know: it says where it looked and what to give.
    code, out, err = evalmine(capsys, "runs", "small")
    assert code == 4 and out == ""
    assert f"under {project / 'reports'} (the rootdir pytest picks from {project}" in err
    assert "name the suite file, or give --rootdir" in err
    code, _, err = evalmine(capsys, "compare", "nosuch", "nosuch2")
    assert code == 4 and "name the suite file, or give --rootdir" in err


def test_a_project_run_read_from_a_subfolder(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pytest run from a subfolder roots at the project's configuration file; the printed
    path opens from the folder the user stands in, and ``evalmine`` from there reads the
    project's reports (not ``sub/reports``)."""
    pytester.makefile(".toml", pyproject=PYTEST_TABLE)
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    sub = pytester.mkdir("sub")
    monkeypatch.chdir(sub)
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider", "..")
    result.assert_outcomes(passed=6)
    folder = printed_report_folder(result.outlines)
    # Not under the working folder: absolute (relative to the rootdir, it would not open).
    assert folder.startswith(str(pytester.path / "reports" / "small")), folder
    assert (sub / folder / "report.md").is_file()
    capsys.readouterr()
    code, out, err = evalmine(capsys, "runs", "small")
    assert code == 0, err
    assert Path(folder).name in out
    code, out, err = evalmine(capsys, "compare", Path(folder).name, Path(folder).name)
    assert code == 0, err
    # A path given is from the working directory, as pytest's arguments are.
    code, out, err = evalmine(capsys, "validate", "--models=fake/alpha", "../small.eval.yaml")
    assert code == 0, err
    assert "ok small.eval.yaml: suite small" in out


def test_the_rule_is_pytests(pytester: pytest.Pytester) -> None:
    """The command's rootdir is the one pytest prints, for the layouts a project has: an
    ini file above, a setup.py above, none (the common ancestor with the working folder)."""
    layouts = {
        "ini": ("a/pytest.ini", "a/b/c/s.eval.yaml", "a/b"),
        "setup": ("d/setup.py", "d/e/s.eval.yaml", "d/e"),
        "none": (None, "f/g/s.eval.yaml", "f"),
    }
    for marker, suite, _ in layouts.values():
        if marker:
            (pytester.path / marker).parent.mkdir(parents=True, exist_ok=True)
            (pytester.path / marker).write_text("[pytest]\n" if marker.endswith("ini") else "")
        (pytester.path / suite).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / suite).write_text("")
    for name, (_, suite, cwd) in layouts.items():
        here = pytester.path / cwd
        args = [str(Path(suite).parent.relative_to(cwd))]
        assert pytest_rootdir(args, here) == _pytest_rootdir_printed(here, args), name
    # No path given: the working folder's own.
    here = pytester.path / "a" / "b"
    assert pytest_rootdir([], here) == _pytest_rootdir_printed(here, []) == pytester.path / "a"


def _pytest_rootdir_printed(here: Path, args: list[str]) -> Path:
    """The rootdir a real pytest run from ``here`` prints in its header."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-p", "no:cacheprovider", *args],
        cwd=here,
        capture_output=True,
        text=True,
        timeout=120,
    )
    [line] = [line for line in done.stdout.splitlines() if line.startswith("rootdir: ")]
    return Path(line.removeprefix("rootdir: ").split(",")[0])
