"""compare.py: what changed between two report.json documents, and finding the run to compare
with (spec section 18). Reports are built by hand with only the keys compare reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.reports.compare import compare, find_previous, load, resolve

JUDGE = {
    "model": "fake/judge",
    "rubric_hash": "r1",
    "prompt_template_version": "1",
    "verdict_schema_hash": "v1",
}


def report(
    run_id: str,
    suite_hash: str,
    *,
    per_task: Sequence[tuple[str, str, float | None]] = (),
    task_hashes: dict[str, str] | None = None,
    label_counts: dict[str, int] | None = None,
    judge: dict[str, str] | None = JUDGE,
    calibration: dict[str, Any] | None = None,
    models: list[str] | None = None,
    spent: float = 0.0,
    scorecard: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    headline = None
    if judge is not None:
        headline = {
            "judge": judge,
            "calibration": calibration or {"status": "ok", "kappa": 0.6},
            "win_rates_per_task": [
                {"candidate": c, "task": t, "win_rate": w} for c, t, w in per_task
            ],
        }
    return {
        "run_id": run_id,
        "suite": {
            "name": "small",
            "hash": suite_hash,
            "task_hashes": task_hashes or {},
            "label_counts": label_counts or {},
        },
        "models": models or ["fake/a", "fake/b", "fake/c"],
        "cost": {"spent_usd": spent, "if_uncached_usd": spent + 1.0},
        "scorecard": scorecard or [],
        "headline": headline,
    }


def test_same_suite_lists_win_rate_movements_worst_first() -> None:
    before = report(
        "run-1",
        "h",
        per_task=[
            ("fake/b", "alpha", 0.8),
            ("fake/b", "beta", 0.4),
            ("fake/c", "alpha", 0.5),
            ("fake/c", "gone", 0.9),  # not in the current run: no movement
            ("fake/c", "none", 0.5),
        ],
    )
    now = report(
        "run-2",
        "h",
        per_task=[
            ("fake/b", "alpha", 0.5),  # 0.5 - 0.8 = -0.3
            ("fake/b", "beta", 0.6),  # 0.6 - 0.4 = +0.2
            ("fake/c", "alpha", 0.4),  # 0.4 - 0.5 = -0.1
            ("fake/c", "new", 0.7),  # not in the previous run
            ("fake/c", "none", None),  # no judged pairs now: no delta
        ],
    )
    changes = compare(now, before)
    assert changes["same_suite"] is True
    assert changes["previous_run_id"] == "run-1"
    assert "suite_changes" not in changes
    moves = changes["win_rate_movements"]
    assert [(m["candidate"], m["task"]) for m in moves] == [
        ("fake/b", "alpha"),
        ("fake/c", "alpha"),
        ("fake/b", "beta"),
    ]
    assert [m["change"] for m in moves] == pytest.approx([-0.3, -0.1, 0.2])
    assert [(m["now"], m["before"]) for m in moves] == [(0.5, 0.8), (0.4, 0.5), (0.6, 0.4)]


def test_equal_changes_are_ordered_by_candidate_then_task() -> None:
    rows = [("fake/c", "b", 0.5), ("fake/b", "z", 0.5), ("fake/b", "a", 0.5)]
    before = report("r1", "h", per_task=rows)
    now = report("r2", "h", per_task=[(c, t, 0.25) for c, t, _ in rows])
    moves = compare(now, before)["win_rate_movements"]
    assert [(m["candidate"], m["task"], m["change"]) for m in moves] == [
        ("fake/b", "a", -0.25),
        ("fake/b", "z", -0.25),
        ("fake/c", "b", -0.25),
    ]


def test_different_suite_lists_suite_changes_and_no_movements() -> None:
    before = report(
        "run-1",
        "old-hash",
        per_task=[("fake/b", "alpha", 0.8)],
        task_hashes={"alpha": "a1", "beta": "b1", "gamma": "g1"},
        label_counts={"alpha": 3, "beta": 2, "gamma": 4},
    )
    now = report(
        "run-2",
        "new-hash",
        per_task=[("fake/b", "alpha", 0.1)],
        task_hashes={"alpha": "a1", "beta": "b2", "delta": "d1"},
        label_counts={"alpha": 3, "beta": 5, "delta": 1},
    )
    changes = compare(now, before)
    assert changes["same_suite"] is False
    assert "win_rate_movements" not in changes
    assert changes["suite_changes"] == {
        "suites": {"now": "small", "before": "small"},
        "tasks_added": ["delta"],
        "tasks_removed": ["gamma"],
        "tasks_modified": ["beta"],
        "variants_changed": [],
        "label_count_changes": {
            "beta": {"now": 5, "before": 2},
            "delta": {"now": 1, "before": 0},
            "gamma": {"now": 0, "before": 4},
        },
    }


def test_judge_changed() -> None:
    same = compare(report("b", "h"), report("a", "h"))
    assert same["judge_changed"] is False
    other_rubric = dict(JUDGE, rubric_hash="r2")
    assert compare(report("b", "h", judge=other_rubric), report("a", "h"))["judge_changed"]
    other_model = dict(JUDGE, model="fake/judge-2")
    assert compare(report("b", "h", judge=other_model), report("a", "h"))["judge_changed"]
    # No judge before (headline null), one now.
    assert compare(report("b", "h"), report("a", "h", judge=None))["judge_changed"] is True
    assert compare(report("b", "h", judge=None), report("a", "h", judge=None))["judge_changed"] is (
        False
    )


def test_models_cost_latency_and_calibration_changes() -> None:
    before = report(
        "a",
        "h",
        models=["fake/a", "fake/b"],
        spent=0.25,
        calibration={"status": "below_floor", "kappa": 0.25},
        scorecard=[
            {"model": "fake/a", "latency_p50_s": 1.0, "latency_p95_s": 3.0},
            {"model": "fake/gone", "latency_p50_s": 1.0, "latency_p95_s": 1.0},
        ],
    )
    now = report(
        "b",
        "h",
        models=["fake/a", "fake/c"],
        spent=0.75,
        calibration={"status": "ok", "kappa": 0.5},
        scorecard=[
            {"model": "fake/a", "latency_p50_s": 1.5, "latency_p95_s": None},
            {"model": "fake/c", "latency_p50_s": 2.0, "latency_p95_s": 2.0},
        ],
    )
    changes = compare(now, before)
    assert changes["models_changed"] is True
    assert changes["cost"]["spent_usd"] == {"now": 0.75, "before": 0.25, "change": 0.5}
    assert changes["cost"]["if_uncached_usd"] == {"now": 1.75, "before": 1.25, "change": 0.5}
    assert changes["latency"] == [
        {"model": "fake/a", "p50_change_s": 0.5, "p95_change_s": None},
    ]
    assert changes["calibration"] == {
        "status_now": "ok",
        "status_before": "below_floor",
        "kappa_now": 0.5,
        "kappa_before": 0.25,
        "kappa_change": 0.25,
    }
    assert compare(before, before)["models_changed"] is False


def test_calibration_change_without_a_previous_headline() -> None:
    changes = compare(report("b", "h"), report("a", "h", judge=None))
    assert changes["calibration"] == {
        "status_now": "ok",
        "status_before": None,
        "kappa_now": 0.6,
        "kappa_before": None,
        "kappa_change": None,
    }
    assert changes["win_rate_movements"] == []


# --- finding the run to compare with ------------------------------------------------------


def store_run(root: Path, run_id: str, suite: str = "small") -> Path:
    folder = root / "reports" / suite / run_id
    folder.mkdir(parents=True)
    path = folder / "report.json"
    path.write_text(json.dumps(report(run_id, "h")))
    return path


def test_resolve_by_id_folder_and_report_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "reports"
    path = store_run(tmp_path, "20250101T000000.000Z-aaaaaaaa-bbbbbbbb")
    other = store_run(tmp_path, "20250102T000000.000Z-cccccccc-dddddddd")
    monkeypatch.chdir(tmp_path / "reports")  # relative references are not resolved by cwd

    def find(reference: str) -> Path:
        return resolve(reference, root, "small", tmp_path)

    assert find("20250101T000000.000Z-aaaaaaaa-bbbbbbbb") == path
    assert find("20250102T000000.000Z-cccccccc-dddddddd") == other
    # A run folder: relative to the rootdir, or absolute.
    assert find("reports/small/20250101T000000.000Z-aaaaaaaa-bbbbbbbb") == path
    assert find(str(path.parent)).resolve() == path.resolve()
    # A report.json: relative to the rootdir, or absolute.
    assert find("reports/small/20250102T000000.000Z-cccccccc-dddddddd/report.json") == other
    assert find(str(other)) == other
    assert load(find(str(path.parent)))["run_id"] == "20250101T000000.000Z-aaaaaaaa-bbbbbbbb"


def test_resolve_refuses_an_unknown_reference(tmp_path: Path) -> None:
    store_run(tmp_path, "run-1")
    (tmp_path / "empty-folder").mkdir()
    for reference in ("no-such-run", "empty-folder", str(tmp_path / "missing" / "report.json")):
        with pytest.raises(EvalmineError, match=reference.replace("\\", "\\\\")) as raised:
            resolve(reference, tmp_path / "reports", "small", tmp_path)
        assert "'small'" in str(raised.value)
    # A run id of another suite is not a run of this one.
    store_run(tmp_path, "run-2", suite="other")
    with pytest.raises(EvalmineError):
        resolve("run-2", tmp_path / "reports", "small", tmp_path)


def test_find_previous_reads_latest_json(tmp_path: Path) -> None:
    root = tmp_path / "reports"
    assert find_previous(root, "small") is None  # first run
    path = store_run(tmp_path, "run-1")
    store_run(tmp_path, "run-2")
    pointer = root / "small" / "latest.json"
    pointer.write_text(json.dumps({"run_id": "run-1", "path": "run-1/report.json"}))
    assert find_previous(root, "small") == path  # the pointer, not the newest folder
    pointer.write_text(json.dumps({"run_id": "gone", "path": "gone/report.json"}))
    assert find_previous(root, "small") is None
    pointer.write_text("{not json")
    assert find_previous(root, "small") is None
    pointer.write_text(json.dumps({"run_id": "run-1"}))
    assert find_previous(root, "small") is None


def test_load_refuses_an_unreadable_report(tmp_path: Path) -> None:
    broken = tmp_path / "report.json"
    broken.write_text("{")
    with pytest.raises(EvalmineError, match="cannot read report"):
        load(broken)
    with pytest.raises(EvalmineError, match="cannot read report"):
        load(tmp_path / "missing.json")
