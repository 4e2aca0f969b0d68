"""Report files' permissions (spec: "Report files"): those any other file of the user gets,
and the process-wide umask never touched to learn them (issue 28)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_evalmine.reports.files import atomic_write


@pytest.fixture
def umask() -> Iterator[None]:
    before = os.umask(0o022)
    yield
    os.umask(before)


@pytest.mark.parametrize(
    ("mask", "mode"),
    [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)],
    ids=["022", "027", "077"],
)
def test_a_report_file_gets_the_mode_the_umask_gives_when_it_is_written(
    tmp_path: Path, umask: None, mask: int, mode: int
) -> None:
    # The umask of the moment of writing, not the one seen when the module was imported.
    os.umask(mask)
    atomic_write(tmp_path / "report.md", "# a report\n")
    assert stat.S_IMODE((tmp_path / "report.md").stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"], "no temporary file left"


def test_importing_and_writing_reports_never_sets_the_umask(tmp_path: Path) -> None:
    # The preload thread imports reports/files.py during dispatch: a umask set to 0 for a
    # moment gave files other threads created meanwhile wide permissions.
    script = f"""
import os
calls = []
real = os.umask
def recording(mask):
    calls.append(mask)
    return real(mask)
os.umask = recording
from pathlib import Path
from pytest_evalmine.reports.files import atomic_write
atomic_write(Path({str(tmp_path)!r}) / "report.json", "{{}}\\n")
print(calls)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert (tmp_path / "report.json").read_text() == "{}\n"
