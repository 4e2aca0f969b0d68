"""What changed between two runs of a suite (spec: "Compare"). Works on report.json
documents, so any two stored runs can be compared without rerunning anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import EvalmineError
from .cross_run import variant_changes

# report.json's ``adapter_routing`` of a ``--evalmine-fake`` run starts with this.
FAKE_ROUTING = "fake"


def find_previous(report_root: Path, suite_name: str) -> Path | None:
    """The report.json that ``latest.json`` points at, read before this run replaces it."""
    pointer = report_root / suite_name / "latest.json"
    if not pointer.is_file():
        return None
    try:
        target = report_root / suite_name / json.loads(pointer.read_text("utf-8"))["path"]
    except (ValueError, KeyError, OSError):
        return None
    return target if target.is_file() else None


def resolve(reference: str, report_root: Path, suite_name: str, rootdir: Path) -> Path:
    """A run id of this suite, a run folder, a report.json path, or a run name of this suite
    (``NAME``, ``NAME~K``: spec "Report files", named runs). A run id of another suite is
    refused as that suite's folder or report.json is (``other_suite``): one rule for both."""
    from .run_names import find_named

    for candidate in (
        report_root / suite_name / reference / "report.json",
        rootdir / reference / "report.json",
        rootdir / reference,
        Path(reference) / "report.json",
        Path(reference),
    ):
        if candidate.is_file():
            return candidate
    try:
        named = find_named(reference, report_root, suite_name)
    except EvalmineError as exc:
        raise EvalmineError(f"--evalmine-compare={reference}: {exc}") from None
    if named is not None:
        return named / "report.json"
    if "/" not in reference and report_root.is_dir():
        for suite_dir in sorted(report_root.iterdir()):
            if (suite_dir / reference / "report.json").is_file():
                raise EvalmineError(other_suite(reference, suite_dir.name, suite_name))
    raise EvalmineError(f"--evalmine-compare={reference}: no such run of {suite_name!r}")


def other_suite(reference: str, theirs: Any, ours: str) -> str:
    """Why ``--evalmine-compare`` refuses a run of another suite, however it was named."""
    return (
        f"--evalmine-compare={reference}: that run is of suite {theirs!r}, not {ours!r}: "
        "compare with a run of this suite (`evalmine compare RUN_A RUN_B --allow-other-suite` "
        "pairs runs of two suites by task and case ids)"
    )


def load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise EvalmineError(f"{path}: cannot read report: {exc}") from None


def compare(
    current: dict[str, Any], previous: dict[str, Any], mover_threshold: float = 0.15
) -> dict[str, Any]:
    """Deltas when the suite hash matches; otherwise what changed in the suite itself.
    ``mover_threshold`` (the suite's ``report.mover_threshold``): how large a per-task
    win-rate change must be for the task to count as a mover."""
    same_suite = current["suite"]["hash"] == previous["suite"]["hash"]
    result: dict[str, Any] = {
        "previous_run_id": previous.get("run_id"),
        "same_suite": same_suite,
        # A run that was not judged (stopped, no judge) says nothing about the judge.
        "judge_changed": _judge(current) is not None and _judge(current) != _judge(previous),
        "models_changed": current.get("models") != previous.get("models"),
        # A fake-routed run's answers are the fake adapter's, whatever the model names say.
        "adapter_routing": {
            "now": current.get("adapter_routing"),
            "before": previous.get("adapter_routing"),
            "fake_now": _fake_routed(current),
            "fake_before": _fake_routed(previous),
        },
        "cost": {
            "spent_usd": _delta(current, previous, "cost", "spent_usd"),
            "if_uncached_usd": _delta(current, previous, "cost", "if_uncached_usd"),
        },
        "latency": _latency(current, previous),
        "calibration": _calibration(current, previous),
    }
    if same_suite:
        moves = _movements(current, previous)
        result["win_rate_movements"] = moves
        result["mover_threshold"] = mover_threshold
        result["movers"] = [m for m in moves if abs(m["change"]) >= mover_threshold]
    else:
        result["suite_changes"] = _suite_changes(current, previous)
    return result


def _fake_routed(report: dict[str, Any]) -> bool:
    return str(report.get("adapter_routing") or "").startswith(FAKE_ROUTING)


def routing_note(changes: dict[str, Any]) -> str | None:
    """What "What changed" must say first when either run was fake-routed: the fake
    adapter's answers compared with the models' (or with the fake's again) are not a change
    of the models. None when neither was (and for ``changes`` from before the key)."""
    routing = changes.get("adapter_routing") or {}
    now, before = routing.get("fake_now"), routing.get("fake_before")
    if now and before:
        return (
            "both this run and the previous run were fake-routed (every model "
            "answered by the fake adapter): these changes are the fake adapter's, not the models'"
        )
    if before:
        return (
            "the previous run was fake-routed (every model answered by the fake "
            "adapter): these changes compare the models' answers with fake ones; compare with "
            "a real run (--evalmine-compare=RUN)"
        )
    if now:
        return (
            "this run is fake-routed (every model answered by the fake adapter) and the "
            "previous run was not: these changes compare fake answers with the "
            "models' own"
        )
    return None


def _judge(report: dict[str, Any]) -> Any:
    return (report.get("headline") or {}).get("judge")


def _delta(current: dict[str, Any], previous: dict[str, Any], *path: str) -> dict[str, Any]:
    now, before = current, previous
    for part in path:
        now = (now or {}).get(part)
        before = (before or {}).get(part)
    change = (
        now - before if isinstance(now, (int, float)) and isinstance(before, (int, float)) else None
    )
    return {"now": now, "before": before, "change": change}


def _latency(current: dict[str, Any], previous: dict[str, Any]) -> list[dict[str, Any]]:
    before = {row["model"]: row for row in previous.get("scorecard", [])}
    rows = []
    for row in current.get("scorecard", []):
        old = before.get(row["model"])
        if old is None:
            continue
        rows.append(
            {
                "model": row["model"],
                "p50_change_s": _minus(row.get("latency_p50_s"), old.get("latency_p50_s")),
                "p95_change_s": _minus(row.get("latency_p95_s"), old.get("latency_p95_s")),
            }
        )
    return rows


def _minus(a: Any, b: Any) -> float | None:
    return a - b if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None


def _calibration(current: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    now = (current.get("headline") or {}).get("calibration") or {}
    before = (previous.get("headline") or {}).get("calibration") or {}
    return {
        "status_now": now.get("status"),
        "status_before": before.get("status"),
        "kappa_now": now.get("kappa"),
        "kappa_before": before.get("kappa"),
        "kappa_change": _minus(now.get("kappa"), before.get("kappa")),
    }


def _movements(current: dict[str, Any], previous: dict[str, Any]) -> list[dict[str, Any]]:
    def rates(report: dict[str, Any]) -> dict[tuple[str, str], float | None]:
        rows = (report.get("headline") or {}).get("win_rates_per_task") or []
        return {(r["candidate"], r["task"]): r["win_rate"] for r in rows}

    now, before = rates(current), rates(previous)
    moves = []
    for key in sorted(set(now) & set(before)):
        change = _minus(now[key], before[key])
        if change is not None:
            moves.append(
                {
                    "candidate": key[0],
                    "task": key[1],
                    "now": now[key],
                    "before": before[key],
                    "change": change,
                }
            )
    moves.sort(key=lambda m: (m["change"], m["candidate"], m["task"]))
    return moves


def _suite_changes(current: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    now = current["suite"].get("task_hashes", {})
    before = previous["suite"].get("task_hashes", {})
    labels_now = current["suite"].get("label_counts", {})
    labels_before = previous["suite"].get("label_counts", {})
    content_now = current["suite"].get("task_content", {})
    content_before = previous["suite"].get("task_content", {})
    variants_changed = sorted(
        {
            name
            for task in set(content_now) & set(content_before)
            for name, fields in variant_changes(
                content_before[task].get("variants"), content_now[task].get("variants")
            ).items()
            if fields
        }
    )
    return {
        "suites": {"now": current["suite"].get("name"), "before": previous["suite"].get("name")},
        "tasks_added": sorted(set(now) - set(before)),
        "tasks_removed": sorted(set(before) - set(now)),
        # by the whole task's hash: what it asks, checks and its cases (its own variants too)
        "tasks_modified": sorted(t for t in set(now) & set(before) if now[t] != before[t]),
        # a suite variant applies to every task: edited once, it changes what each asks
        "variants_changed": variants_changed,
        "label_count_changes": {
            task: {"now": labels_now.get(task, 0), "before": labels_before.get(task, 0)}
            for task in sorted(set(labels_now) | set(labels_before))
            if labels_now.get(task, 0) != labels_before.get(task, 0)
        },
    }
