"""``evalmine merge NAME`` (spec: "Shards", "Merge"): the one run of a named run built from
the partial runs its shards wrote, every figure computed over the union of their answers,
judge pairs and verdicts, as one process over the same answers would have computed it.

No call is made and no cent spent: the shards judged their own pairs. The merged run is
written, compared and gated as a pytest run's (``finish.write_suite_run``), and moves
latest.json; its exit code is a pytest run's (``merged_exit_code``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EvalmineError
from ..exitcodes import MERGE_REFUSED
from ..run.concurrency import merged_concurrency
from ..run.records import PASSED
from ..run.runtoken import new_run_token
from .finish import FinishedSuite, exit_code, write_suite_run
from .stored import StoredRun, list_runs, suite_of_run, summary_from_stored

# pytest's "some items failed": a merged run with an item that did not pass ends as the
# shard that ran it did.
TESTS_FAILED = 1


class MergeRefused(EvalmineError):
    """The partial runs cannot make one run yet (a shard missing) or at all (they disagree)."""

    code = MERGE_REFUSED


@dataclass(frozen=True)
class Partial:
    """One shard's partial run of one suite."""

    run: StoredRun
    report: dict[str, Any]

    @property
    def index(self) -> int:
        return int(self.report["shard"]["index"])

    @property
    def count(self) -> int:
        return int(self.report["shard"]["count"])


# What every partial of a named run must share, by what a refusal calls it.
AGREEING: tuple[tuple[str, Callable[[dict[str, Any]], Any]], ...] = (
    ("suite hash", lambda report: report["suite"]["hash"]),
    ("models", lambda report: report["models"]),
    ("models_hash", lambda report: report["models_hash"]),
    ("repeat", lambda report: report.get("repeats", 1)),
    ("record mode", lambda report: report["record_mode"]),
    ("cap", lambda report: report["cost"]["cap_usd"]),
    ("gate", lambda report: report.get("gate", {}) and _gate_setting(report["gate"])),
    ("shard count", lambda report: report["shard"]["count"]),
)


def _gate_setting(gate: dict[str, Any]) -> tuple[Any, ...]:
    return (
        gate.get("metric"),
        gate.get("indifference_points"),
        gate.get("minor_regression_points"),
    )


def judge_model(report: dict[str, Any]) -> str | None:
    """The judge a partial ran (pairwise, else binary), or None when none ran."""
    for key in ("headline", "binary_judges"):
        if report.get(key):
            return str(report[key]["judge"]["model"])
    return None


def partial_runs(report_root: Path, name: str) -> dict[str, list[Partial]]:
    """Every suite's partial runs of run ``name`` (report.json ``run_name`` NAME with a
    ``shard``), oldest first."""
    found: dict[str, list[Partial]] = {}
    if not report_root.is_dir():
        return found
    for suite_dir in sorted(p for p in report_root.iterdir() if p.is_dir()):
        for run in list_runs(report_root, suite_dir.name):
            try:
                report = run.report()
            except EvalmineError:
                continue  # not this merge's to judge: a hand-edited file of another run
            if report.get("run_name") == name and report.get("shard"):
                found.setdefault(suite_dir.name, []).append(Partial(run, report))
    return found


def chosen_partials(suite: str, partials: Sequence[Partial], name: str) -> list[Partial]:
    """One partial per shard, the newest of each (a shard rerun replaces its earlier
    partial), in shard order; ``MergeRefused`` naming the missing shards while one is absent,
    or what differs when two partials disagree."""
    counts = sorted({p.count for p in partials})
    if len(counts) > 1:
        shown = ", ".join(f"{p.run.run_id} says {p.index}/{p.count}" for p in partials)
        raise MergeRefused(
            f"run {name}, suite {suite}: the partial runs disagree on the shard count ({shown})"
        )
    count = counts[0]
    newest: dict[int, Partial] = {}
    for partial in sorted(partials, key=lambda p: p.run.run_id):
        newest[partial.index] = partial
    missing = [index for index in range(1, count + 1) if index not in newest]
    if missing:
        shards = ", ".join(f"{index}/{count}" for index in missing)
        raise MergeRefused(
            f"run {name}, suite {suite}: missing shard(s) {shards} (found "
            f"{', '.join(f'{i}/{count}' for i in sorted(newest)) or 'none'}); run "
            f"--evalmine-shard={missing[0]}/{count} --evalmine-run-name={name}, then merge again"
        )
    chosen = [newest[index] for index in range(1, count + 1)]
    _check_agreement(suite, chosen, name)
    for partial in chosen:
        reason = partial.report.get("partial_reason") or ""
        if reason.endswith("not judged"):
            raise MergeRefused(
                f"run {name}, suite {suite}: shard {partial.index}/{count} (run "
                f"{partial.run.run_id}) did not finish ({reason}); rerun that shard"
            )
    return chosen


def _check_agreement(suite: str, chosen: Sequence[Partial], name: str) -> None:
    first = chosen[0]
    for what, value in AGREEING:
        for other in chosen[1:]:
            if value(other.report) != value(first.report):
                raise MergeRefused(_differs(suite, name, what, first, other, value))
    judged = [p for p in chosen if judge_model(p.report) is not None]
    for other in judged[1:]:
        if judge_model(other.report) != judge_model(judged[0].report):
            raise MergeRefused(_differs(suite, name, "judge model", judged[0], other, judge_model))


def _differs(
    suite: str,
    name: str,
    what: str,
    one: Partial,
    other: Partial,
    value: Callable[[dict[str, Any]], Any],
) -> str:
    return (
        f"run {name}, suite {suite}: the partial runs differ in {what}: shard "
        f"{one.index}/{one.count} ({one.run.run_id}) has {value(one.report)!r}, shard "
        f"{other.index}/{other.count} ({other.run.run_id}) has {value(other.report)!r}; "
        "rerun the shards with the same suite and options"
    )


def merge_run(
    name: str, report_root: Path, rootdir: Path, *, fail_under_calibration: bool = False
) -> list[FinishedSuite]:
    """Merge every suite of run ``name`` (``MergeRefused`` before anything is written when
    one cannot be merged). ``fail_under_calibration``: as the shards' option, for the exit
    code."""
    by_suite = partial_runs(report_root, name)
    if not by_suite:
        raise MergeRefused(
            f"no partial run named {name!r} under {report_root}: run the shards with "
            f"--evalmine-run-name={name} --evalmine-shard=K/N first"
        )
    chosen = {suite: chosen_partials(suite, partials, name) for suite, partials in by_suite.items()}
    return [
        _merge_suite(name, partials, report_root, rootdir, fail_under_calibration)
        for _, partials in sorted(chosen.items())
    ]


def _merge_suite(
    name: str,
    partials: list[Partial],
    report_root: Path,
    rootdir: Path,
    fail_under_calibration: bool,
) -> FinishedSuite:
    # The settings come from a partial that judged (an empty shard judged nothing).
    base = next((p.report for p in partials if judge_model(p.report)), partials[0].report)
    suite = suite_of_run(partials[0].run.run_id, base, rootdir)
    order = {(task.id, case.id): i for task in suite.tasks for i, case in enumerate(task.cases)}
    tasks = {task.id: i for i, task in enumerate(suite.tasks)}
    # In the order one process would have them: pairs by (task, case) as ``plan_pairs``
    # sorts them, verdicts in item order (task and case in file order).
    pairs = sorted(
        (pair for p in partials for pair in p.run.pairs()), key=lambda pair: (pair.task, pair.case)
    )
    verdicts = sorted(
        (verdict for p in partials for verdict in p.run.verdicts()),
        key=lambda v: (tasks.get(v.task, 0), order.get((v.task, v.case), 0)),
    )
    records = [record for p in partials for record in p.run.records()]
    reports = [p.report for p in partials]
    summary = summary_from_stored(
        base,
        records,
        pairs,
        verdicts,
        rootdir,
        run_id=f"{new_run_token()}-{base['suite']['hash'][:8]}-{base['models_hash'][:8]}",
        command=f"evalmine merge {name}",
        estimate_usd=_total(r["cost"]["estimate_usd"] for r in reports),
        worst_case_usd=_total(r["cost"].get("worst_case_usd") for r in reports),
        concurrency=merged_concurrency(r.get("concurrency") or {} for r in reports),
        latency_widths=_narrowest_widths(reports),
        batches=_merged_batches(reports),
        model_builds={k: v for r in reports for k, v in (r.get("model_builds") or {}).items()},
        changes=None,
        latest_note=None,
        run_name=name,
        shard=None,
        merged_from=[p.run.run_id for p in partials],
    )
    held_back = _why_latest_stays(summary)
    return write_suite_run(
        summary if held_back is None else _with_note(summary, held_back),
        mover_threshold=suite.mover_threshold,
        report_root=report_root,
        rootdir=rootdir,
        compare=None,
        move_latest=held_back is None,
        fail_on_ineligible=fail_under_calibration or suite.judge.on_below_floor == "fail",
    )


def _with_note(summary: Any, note: str) -> Any:
    import dataclasses

    return dataclasses.replace(summary, latest_note=note)


def _why_latest_stays(summary: Any) -> str | None:
    """As a pytest run's: a partial or a replay that missed does not become the latest."""
    if summary.partial:
        reason = f"this run is partial ({summary.partial_reason})"
    elif summary.replay_misses:
        reason = f"this replay missed {summary.replay_misses} answer(s) or verdict(s)"
    else:
        return None
    return f"latest.json not moved: {reason}; the next run compares with the last complete run"


def _total(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _narrowest_widths(reports: Sequence[dict[str, Any]]) -> dict[str, int]:
    widths: dict[str, int] = {}
    for report in reports:
        for row in report.get("scorecard", ()):
            width = row.get("latency_width")
            if width is not None:
                widths[row["model"]] = min(width, widths.get(row["model"], width))
    return widths


def _merged_batches(reports: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The first shard's batch settings with every shard's batches still waited for."""
    used = [r["batches"] for r in reports if r.get("batches")]
    if not used:
        return None
    merged = dict(used[0])
    merged["waiting"] = [entry for one in used for entry in one.get("waiting", [])]
    return merged


def merged_exit_code(finished: Sequence[FinishedSuite]) -> int:
    """The exit code a pytest run over the same items would end with: ours
    (``finish.exit_code``), else 1 when an item did not pass, else 0."""
    code = exit_code(finished)
    if code is not None:
        return code
    failed = any(r.outcome != PASSED for f in finished for r in f.summary.records)
    return TESTS_FAILED if failed else 0
