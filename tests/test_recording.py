"""Reviewable recordings (spec: "Recordings"): written after a run, committed, and replayed
from a fresh checkout (no cache database) at $0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import SMALL_SUITE, latest_answers, latest_report
from .test_judge_run import JUDGED_SUITE

BESIDE = "--evalmine-recording=beside"


def entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def fresh_checkout(pytester: pytest.Pytester) -> None:
    shutil.rmtree(pytester.path / ".evalmine")


def test_a_recording_is_written_beside_the_suite_sorted_and_stable(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake", BESIDE).assert_outcomes(passed=6)
    recording = pytester.path / "small.eval.recording.jsonl"
    text = recording.read_text()
    rows = entries(recording)
    assert [row["key"] for row in rows] == sorted(a["key"] for a in latest_answers(pytester.path))
    assert {row["provider"] for row in rows} == {"fake"}
    assert all(
        set(row) == {"key", "provider", "model", "response", "cost_usd", "for"} for row in rows
    )
    uses = sorted(use for row in rows for use in row["for"])
    assert uses[0] == "polite/refund-no fake/alpha"
    assert len(uses) == 6 and "triage/charged-twice fake/beta" in uses
    # A rerun from the cache writes the same bytes: a diff shows only real changes.
    pytester.runpytest("--evalmine-fake", BESIDE).assert_outcomes(passed=6)
    assert recording.read_text() == text


def test_a_fresh_checkout_replays_the_recording_with_no_call(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=JUDGED_SUITE)
    pytester.runpytest("--evalmine-fake", BESIDE).assert_outcomes(passed=6)
    first = latest_report(pytester.path)
    recording = pytester.path / "small.eval.recording.jsonl"
    assert len(entries(recording)) == 6 + 6, "six answers and six judge verdicts"
    verdicts = [use for row in entries(recording) for use in row["for"] if " judge " in use]
    assert "triage/charged-twice judge fake/beta vs fake/alpha, baseline_first" in verdicts
    fresh_checkout(pytester)
    result = pytester.runpytest("--evalmine-fake", BESIDE, "--evalmine-record=none")
    result.assert_outcomes(passed=6)
    replay = latest_report(pytester.path)
    assert replay["calls"] == {"made": 0, "cached": 6}
    assert replay["headline"]["judge_calls"] == {"made": 0, "cached": 6}
    assert replay["cost"]["spent_usd"] == 0
    assert replay["headline"]["win_rates"] == first["headline"]["win_rates"]


def test_without_the_recording_a_fresh_checkout_misses(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake").assert_outcomes(passed=6)
    assert not list(pytester.path.glob("*.jsonl")), "no recording unless asked for"
    fresh_checkout(pytester)
    pytester.runpytest("--evalmine-fake", "--evalmine-record=none").assert_outcomes(failed=6)


def test_replay_writes_no_recording_and_a_partial_selection_merges(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake", BESIDE, "-k", "polite").assert_outcomes(passed=2)
    recording = pytester.path / "small.eval.recording.jsonl"
    assert len(entries(recording)) == 2
    pytester.runpytest("--evalmine-fake", BESIDE, "-k", "triage").assert_outcomes(passed=4)
    assert len(entries(recording)) == 6, "the polite answers stay"
    recording.unlink()
    pytester.runpytest("--evalmine-fake", BESIDE, "--evalmine-record=none").assert_outcomes(
        passed=6
    )
    assert not recording.exists()


def test_a_folder_setting_names_the_file_after_the_suite(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake", "--evalmine-recording=recordings").assert_outcomes(
        passed=6
    )
    assert len(entries(pytester.path / "recordings" / "small.recording.jsonl")) == 6


def test_a_malformed_recording_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    (pytester.path / "small.eval.recording.jsonl").write_text('{"key": "k"}\n')
    result = pytester.runpytest("--evalmine-fake", BESIDE)
    assert result.ret == 2
    result.stdout.fnmatch_lines(["*small.eval.recording.jsonl:1: not a recording entry*"])
    assert "Traceback" not in result.stdout.str()
