"""Issue 20 section 3: the files a suite names (cases, labels, schemas and the files their
``$ref``s name) are read only from inside the project, never a FIFO or a device.

Before: ``cases_path: ../outside.jsonl``, ``/etc/passwd`` and ``/proc/self/environ`` were
opened and parsed (a parse error quoted their first line), a symlink led anywhere, and a
directory, FIFO or device was "file not found". One rule (``suite.reading.resolve_file``)
now serves every such file: it must resolve, symlinks followed, inside the rootdir, the
suite's folder or a folder the ini key ``evalmine_data_roots`` names (the ``$ref`` files:
inside the suite's folder), and be a regular file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_evalmine.commands.cli import main as cli_main
from pytest_evalmine.errors import SuiteError
from pytest_evalmine.options import ini_data_roots, project_folders
from pytest_evalmine.suite.loader import load_suite

CASE = json.dumps({"id": "c1", "vars": {"q": "hello"}}) + "\n"


def suite_text(cases_path: str, labels_path: str | None = None, schema_path: str = "") -> str:
    text = f"""\
        version: 1
        suite: s
        models: [fake/a]
        tasks:
          - id: t
            kind: answer
            prompt: "Say {{{{ q }}}}"
            cases_path: {json.dumps(cases_path)}
        """
    if schema_path:
        text += f"    schema_path: {json.dumps(schema_path)}\n"
    if labels_path:
        text += f"labels_path: {json.dumps(labels_path)}\n"
    return textwrap.dedent(text)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``tmp_path/project`` (the rootdir, with data/cases.jsonl) beside
    ``tmp_path/outside.jsonl`` and ``tmp_path/shared/cases.jsonl``."""
    root = tmp_path / "project"
    (root / "data").mkdir(parents=True)
    (root / "data" / "cases.jsonl").write_text(CASE)
    (tmp_path / "outside.jsonl").write_text(CASE)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "cases.jsonl").write_text(CASE)
    return root


def load(root: Path, text: str, data_roots: tuple[str, ...] = (), name: str = "s.eval.yaml"):  # type: ignore[no-untyped-def]
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return load_suite(path, shown=name, roots=project_folders(root, data_roots))


def refused(root: Path, text: str, data_roots: tuple[str, ...] = ()) -> SuiteError:
    with pytest.raises(SuiteError) as info:
        load(root, text, data_roots)
    assert "\n" not in str(info.value)
    return info.value


OUTSIDE = "points outside the rootdir and the suite's folder"


@pytest.mark.parametrize(
    "where",
    ["../outside.jsonl", "/etc/passwd", "/proc/self/environ", "data/../../outside.jsonl"],
)
def test_a_cases_file_outside_the_project_is_refused_unread(project: Path, where: str) -> None:
    error = refused(project, suite_text(where))
    assert error.path == "$.tasks[0].cases_path"
    assert f"{where} {OUTSIDE} (the ini key evalmine_data_roots names more)" in error.problem
    # Nothing of the file reached the message (before: "line 1: not JSON ... 'root:x:0:0...")
    assert "root:" not in str(error) and "line 1" not in str(error)


@pytest.mark.parametrize("key", ["labels_path", "schema_path"])
def test_labels_and_schema_files_follow_the_same_rule(project: Path, key: str) -> None:
    text = suite_text("data/cases.jsonl", **{key: "/etc/passwd"})
    error = refused(project, text)
    assert error.path == ("$.labels_path" if key == "labels_path" else "$.tasks[0].schema_path")
    assert OUTSIDE in error.problem


def test_a_symlink_is_judged_by_where_it_leads(project: Path, tmp_path: Path) -> None:
    (project / "data" / "escape.jsonl").symlink_to(tmp_path / "outside.jsonl")
    (project / "data" / "alias.jsonl").symlink_to(project / "data" / "cases.jsonl")
    (project / "linked").symlink_to(tmp_path / "shared", target_is_directory=True)
    assert OUTSIDE in refused(project, suite_text("data/escape.jsonl")).problem
    assert OUTSIDE in refused(project, suite_text("linked/cases.jsonl")).problem
    suite = load(project, suite_text("data/alias.jsonl"))
    assert [case.id for case in suite.tasks[0].cases] == ["c1"]


def test_a_suite_below_the_rootdir_reads_files_anywhere_in_it(project: Path) -> None:
    suite = load(project, suite_text("../data/cases.jsonl"), name="suites/s.eval.yaml")
    assert [case.id for case in suite.tasks[0].cases] == ["c1"]


def test_a_suite_outside_the_rootdir_reads_files_beside_it(tmp_path: Path) -> None:
    """A built-in suite is written under $EVALMINE_HOME, which may lie anywhere: the suite's
    own folder is always allowed."""
    home = tmp_path / "home" / "suite"
    home.mkdir(parents=True)
    (home / "cases.jsonl").write_text(CASE)
    (home / "s.eval.yaml").write_text(suite_text("cases.jsonl"))
    suite = load_suite(home / "s.eval.yaml", roots=project_folders(tmp_path / "project", ()))
    assert len(suite.tasks[0].cases) == 1


def test_a_data_root_lets_a_monorepo_share_a_folder(project: Path) -> None:
    text = suite_text("../shared/cases.jsonl")
    assert OUTSIDE in refused(project, text).problem
    suite = load(project, text, data_roots=("../shared",))
    assert [case.id for case in suite.tasks[0].cases] == ["c1"]
    error = refused(project, suite_text("../outside.jsonl"), data_roots=("../shared",))
    assert (
        "points outside the rootdir, the suite's folder and the folders evalmine_data_roots "
        "names" in error.problem
    )


def test_a_directory_is_named_as_such(project: Path) -> None:
    error = refused(project, suite_text("data"))
    assert error.problem == "data: a directory, not a file"  # before: "data: file not found"


def test_a_fifo_is_named_as_such_and_never_opened(project: Path) -> None:
    """Opened, a FIFO with no writer blocks forever: the load runs in a child process with a
    timeout, so a regression fails here instead of hanging the test run."""
    os.mkfifo(project / "data" / "pipe.jsonl")
    (project / "s.eval.yaml").write_text(suite_text("data/pipe.jsonl"))
    code = (
        "import sys; from pytest_evalmine.suite.loader import load_suite\n"
        "from pytest_evalmine.errors import SuiteError\n"
        "try:\n    load_suite(sys.argv[1], shown='s.eval.yaml', roots=[sys.argv[2]])\n"
        "except SuiteError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(project / "s.eval.yaml"), str(project)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == (
        "s.eval.yaml: $.tasks[0].cases_path: data/pipe.jsonl: a named pipe (FIFO), not a file "
        "(not opened)"
    ), done.stderr


def test_a_device_is_named_as_such_and_never_read(project: Path) -> None:
    """``/dev/zero`` inside a data root: its size says 0 and it never ends (before: outside
    any data root it was "file not found"; read, it would have filled the memory)."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    error = refused(project, suite_text("/dev/zero"), data_roots=("/dev",))
    assert error.problem == "/dev/zero: a device, not a file (not opened)"


def test_a_file_swapped_for_a_fifo_after_the_check_is_refused_not_read(tmp_path: Path) -> None:
    """The reader checks what it opened (without blocking): the FIFO that replaced a file
    between the check and the read is refused."""
    os.mkfifo(tmp_path / "pipe")
    code = (
        "import sys; from pathlib import Path\n"
        "from pytest_evalmine.suite.reading import read_text\n"
        "from pytest_evalmine.errors import SuiteError\n"
        "try:\n    read_text(Path(sys.argv[1]), 'pipe')\n"
        "except SuiteError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "pipe")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "pipe: a named pipe (FIFO), not a file", done.stderr


def test_a_ref_outside_the_suites_folder_is_still_refused(project: Path) -> None:
    (project / "defs.json").write_text(json.dumps({"type": "object"}))
    (project / "sub").mkdir()
    text = suite_text("../data/cases.jsonl").replace(
        "    cases_path:", "    schema: {$ref: '../defs.json'}\n    cases_path:"
    )
    path = project / "sub" / "s.eval.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path, shown="sub/s.eval.yaml", roots=project_folders(project, ()))
    assert "$ref '../defs.json' points outside the suite's folder" in str(info.value)


# --- the ini key, under pytest and for the evalmine command --------------------------------


def test_pytest_reads_the_data_roots_ini_key(pytester: pytest.Pytester) -> None:
    shared = pytester.path.parent / f"{pytester.path.name}-shared"
    shared.mkdir()
    (shared / "cases.jsonl").write_text(CASE)
    pytester.makefile(".eval.yaml", s=suite_text(f"../{shared.name}/cases.jsonl"))
    pytester.makeini("[pytest]\n")
    refused_run = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    assert refused_run.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    refused_run.stdout.fnmatch_lines([f"*.cases_path: ../*{OUTSIDE}*"])
    pytester.makeini(f"[pytest]\nevalmine_data_roots =\n    ../{shared.name}\n")
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pytest.ini", "[pytest]\nevalmine_data_roots =\n    ../shared\n    /opt/x\n"),
        ("pyproject.toml", '[tool.pytest.ini_options]\nevalmine_data_roots = ["../shared"]\n'),
        ("tox.ini", "[pytest]\nevalmine_data_roots = ../shared\n"),
        ("setup.cfg", "[tool:pytest]\nevalmine_data_roots = ../shared\n"),
    ],
)
def test_the_command_reads_the_key_from_the_rootdirs_pytest_configuration(
    project: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    (project / "s.eval.yaml").write_text(suite_text("../shared/cases.jsonl"))
    argv = ["validate", "--rootdir", str(project), "--models=fake/a", "s.eval.yaml"]
    assert cli_main(argv) == 2
    assert OUTSIDE in capsys.readouterr().err
    (project / name).write_text(text)
    assert ini_data_roots(project)[0] == "../shared"
    assert cli_main(argv) == 0, capsys.readouterr().err
    assert "ok s.eval.yaml: suite s, 1 item" in capsys.readouterr().out


def test_pytest_ini_wins_over_the_other_files_as_pytest_has_it(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tox.ini").write_text("[pytest]\nevalmine_data_roots = ../shared\n")
    assert ini_data_roots(tmp_path) == []
    (tmp_path / "pytest.ini").unlink()
    (tmp_path / "pyproject.toml").write_text("[tool.black]\n")  # no pytest table: skipped
    assert ini_data_roots(tmp_path) == ["../shared"]
