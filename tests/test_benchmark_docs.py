"""docs/benchmarks.md: `tox -e bench` (benchmarks/report.py) rewrites its generated part and
keeps the sections written from the other benchmarks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def report(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import report

    yield report
    for name in ("report", "bench_loopback", "bench_scale", "common"):
        sys.modules.pop(name, None)


def test_a_rewrite_keeps_the_hand_written_sections(report) -> None:  # type: ignore[no-untyped-def]
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    assert docs.count(report.KEPT_BELOW) == 1
    below = docs.split(report.KEPT_BELOW)[1]
    kept = [line for line in below.splitlines() if line.startswith("## ")]
    assert len(kept) >= 5  # the warm rerun, adaptive, batches, the judge's prefix, report.html
    generated = "# Benchmarks\n\n## Goals\n\n| what | goal | before | now |\n"
    rewritten = report.with_kept_sections(generated, docs)
    assert rewritten.startswith(generated)
    assert [line for line in rewritten.splitlines() if line.startswith("## ")] == [
        "## Goals",
        *kept,
    ]
    assert report.with_kept_sections(generated, rewritten) == rewritten  # stable
    # A file without the line (a first run) gets the generated part and the line only.
    assert report.with_kept_sections(generated, "") == f"{generated}\n{report.KEPT_BELOW}\n"
