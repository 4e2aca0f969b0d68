"""A rerun from the cache reproduces the run's figures (docs/spec.md, section 26, "Generator and
seeds"): every printed figure exactly, every stored number to the rerun tolerance. Only what
this run paid and what it found cached may differ."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import latest_report
from .floats import RERUN_TOLERANCE

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# What the spec lets differ between a run and its cached rerun.
# "changes" (what changed since the previous run) too: only the rerun has a previous run;
# "concurrency" (the widths the calls ran at): a rerun from the cache sends none.
RUN_OWN_KEYS = {
    "run_id",
    "started",
    "finished",
    "duration_s",
    "calls",
    "judge_calls",
    "cached",
    "changes",
    "concurrency",
}
RUN_OWN_LINES = re.compile(r"^(evalmine: \d+/\d+ (answers|judge verdicts)|cost:|calls:)")
RUN_ID = re.compile(r"\d{8}T\d{6}\.\d{3}Z_[0-9a-f]{6}-[0-9a-f]{8}-[0-9a-f]{8}")


def summary_lines(outlines: list[str]) -> list[str]:
    """The evalmine summary without the lines about this run's own spending and without
    "What changed" (only a rerun has a previous run to compare with)."""
    start = next(i for i, line in enumerate(outlines) if "= evalmine =" in line)
    kept: list[str] = []
    in_changes = False
    for line in outlines[start + 1 :]:
        if line.startswith("="):  # pytest's next section: the evalmine summary is over
            break
        if line.startswith(("-- ", "report:")):  # a section starts, or the closing line
            in_changes = line.startswith("-- What changed")
        if in_changes or RUN_OWN_LINES.match(line):
            continue
        line = RUN_ID.sub("<run id>", line)
        # The scorecard's "cost run" is what this run paid: $0 when cached.
        kept.append(re.sub(r"cost run \$\d+\.\d{4}", "cost run $<paid>", line))
    return kept


def numbers(value: Any, path: str = "") -> dict[str, float]:
    """Every numeric leaf of report.json by its path, minus the run's own bookkeeping."""
    found: dict[str, float] = {}
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in RUN_OWN_KEYS or "cost" in key or "spent" in key:
                continue
            found |= numbers(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found |= numbers(inner, f"{path}[{index}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        found[path] = float(value)
    return found


def test_a_cached_rerun_prints_the_same_figures_and_stores_the_same_numbers(
    pytester: pytest.Pytester,
) -> None:
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    first = pytester.runpytest("examples", "--evalmine-fake", "-p", "no:cacheprovider")
    assert first.ret == 0, first.outlines[-5:]
    first_report = latest_report(pytester.path, "support-desk")
    second = pytester.runpytest("examples", "--evalmine-fake", "-p", "no:cacheprovider")
    assert second.ret == 0, second.outlines[-5:]
    second_report = latest_report(pytester.path, "support-desk")

    assert second_report["calls"]["made"] == 0, "the rerun must come from the cache"
    assert second_report["run_id"] != first_report["run_id"]
    assert summary_lines(second.outlines) == summary_lines(first.outlines)

    want, got = numbers(first_report), numbers(second_report)
    assert set(got) == set(want)
    assert len(want) > 50, "report.json holds the run's statistics"
    for path, value in want.items():
        assert got[path] == pytest.approx(value, rel=RERUN_TOLERANCE, abs=1e-12), path
