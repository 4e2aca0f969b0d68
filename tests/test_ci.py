"""What CI reads (spec: "CI"): --junitxml properties of items and of the run, and progress
lines in a log that is not a terminal."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_evalmine import plugin

from .conftest import SMALL_SUITE
from .test_judge_run import JUDGED_SUITE

FLAGGED_SUITE = JUDGED_SUITE.replace("min_labels: 3", "min_labels: 30")


def properties(element: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in element.iter("property")}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_junit_items_carry_model_cost_latency_cache_and_checks(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makefile(".eval.yaml", small=FLAGGED_SUITE)
    result = pytester.runpytest("--evalmine-fake", "--junitxml=junit.xml", *workers)
    result.assert_outcomes(passed=6)
    root = ET.parse(pytester.path / "junit.xml").getroot()
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert len(cases) == 6
    case = properties(cases["charged-twice[fake/beta]"])
    assert case["evalmine_model"] == "fake/beta"
    assert case["evalmine_outcome"] == "passed"
    assert case["evalmine_cached"] == "false"
    assert float(case["evalmine_cost_usd"]) > 0
    assert float(case["evalmine_latency_s"]) >= 0
    assert case["evalmine_checks"] == "answer:pass,parse:pass,schema:pass"
    assert properties(cases["refund-no[fake/alpha]"])["evalmine_checks"] == "answer:pass"

    suite = properties(root.find("testsuite"))
    assert suite["evalmine.small.headline_eligible"] == "false"
    assert suite["evalmine.small.calibration"].startswith("insufficient_labels: only 3 matched")
    assert suite["evalmine.small.win_rate.fake/beta"].endswith("† UNCALIBRATED")
    assert (
        suite["evalmine.small.run_id"]
        == (pytester.path / "reports" / "small")
        .joinpath("latest.json")
        .read_text()
        .split('"run_id": "')[1]
        .split('"')[0]
    )


def test_junit_without_a_judge_says_why(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake", "--junitxml=junit.xml").assert_outcomes(passed=6)
    suite = properties(ET.parse(pytester.path / "junit.xml").getroot().find("testsuite"))
    assert suite["evalmine.small.judge_note"].startswith("no judge configured")
    assert "evalmine.small.calibration" not in suite


def test_a_log_gets_a_progress_line_every_interval(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    monkeypatch.setitem(plugin.PROGRESS_EVERY_S, False, 0.0)
    pytester.makefile(".eval.yaml", small=SMALL_SUITE + "judge: {model: fake/judge}\n")
    result = pytester.runpytest("--evalmine-fake", "--evalmine-concurrency=1")
    lines = [line for line in result.outlines if "judge verdicts," in line]
    assert [line.split()[1] for line in lines] == [f"{n}/6" for n in range(1, 7)]
    assert all(line.startswith("evalmine: ") for line in lines)
    # The answers stream while their items run (the items' own output is their progress):
    # one line gives their total.
    answers = [line for line in result.outlines if "answers," in line]
    assert [line.split()[1] for line in answers] == ["6/6"]


def test_the_interval_is_a_few_seconds_off_a_terminal() -> None:
    assert plugin.PROGRESS_EVERY_S == {True: 0.1, False: 5.0}


def test_suite_properties_only_with_junitxml(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake").assert_outcomes(passed=6)
    assert not list(Path(pytester.path).glob("*.xml"))


def test_the_watcher_reports_calls_settled_by_any_process(tmp_path: Path) -> None:
    from pytest_evalmine.adapters.base import Response, Usage
    from pytest_evalmine.run.store import CLAIMED, HELD, Store
    from pytest_evalmine.run.watch import CallWatcher

    store = Store(tmp_path / "cache.sqlite")
    written: list[str] = []
    watcher = CallWatcher(store.path, "run-1", write=written.append, every_s=60)
    watcher.tick()
    for key in ("a", "b", "c"):
        assert store.claim("run-1", key, "host:1") == CLAIMED
    # Another run on the same cache waits for run-1's call: it makes no call of its own.
    assert store.claim("run-2", "a", "host:2") == HELD
    store.finish_claim("b", status="error", error="boom")
    reservation = store.reserve("run-1", "a", 0.5, cap=1.0)
    store.record_paid_answer(
        key="a",
        provider="fake",
        model="fake/a",
        response=Response(text="x", usage=Usage(1, 1), latency_s=0.1),
        cost_usd=0.25,
        reservation=reservation,
    )
    watcher.tick()
    watcher.tick()  # nothing changed: no line
    watcher.tick(final=True)
    store.close()
    assert written == [
        "evalmine: 0 calls made by workers, $0.0000 spent",
        "evalmine: 2 calls made by workers, $0.2500 spent",
        "evalmine: 2 calls made by workers, $0.2500 spent",
    ]


def test_under_xdist_the_controller_prints_the_workers_calls(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    result = pytester.runpytest("--evalmine-fake", "-n", "2")
    result.assert_outcomes(passed=6)
    lines = [line for line in result.outlines if "calls made by workers" in line]
    assert lines and lines[-1].startswith("evalmine: 6 calls made by workers, $0.0")
    rerun = pytester.runpytest("--evalmine-fake", "-n", "2")
    assert not [line for line in rerun.outlines if "calls made by workers" in line], "all cached"
