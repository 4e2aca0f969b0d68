"""Runs on disk (spec: "Report files", "Command line"): list a suite's runs, find one, digest
it for an agent or a person, and render its report again from what it stored, without a
call or a cent. The ``evalmine`` command and the MCP server read runs only through here."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvalmineError
from ..judging.binary import binary_from_verdicts
from ..judging.criteria import CriterionVerdict
from ..judging.headline import headline_from_pairs
from ..judging.pairs import Pair
from ..options import GateConfig, project_folders
from ..reports.case_groups import CaseGroups, case_fields, group_cases
from ..reports.compare import compare as compare_reports
from ..reports.compare import find_previous, resolve
from ..reports.compare import load as load_report
from ..reports.cross_run import RunSide, cross_run
from ..reports.files import atomic_write, render_markdown
from ..reports.html_page import render_run_dir
from ..reports.run_names import find_named
from ..reports.summary import RunSummary, summarize
from ..run.records import PASSED, AnswerRecord
from ..suite.loader import Suite, load_suite


@dataclass(frozen=True)
class StoredRun:
    """One run folder: ``<report root>/<suite>/<run id>/`` with its report.json."""

    run_dir: Path

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.json"

    def report(self) -> dict[str, Any]:
        return load_report(self.report_path)

    def records(self) -> list[AnswerRecord]:
        return _records(_read_jsonl(self.run_dir / "answers.jsonl"))

    def readable_records(self) -> tuple[list[AnswerRecord], list[str]]:
        """The answers that can be read, and each unreadable line of answers.jsonl named by
        file and line (a run cut short mid-write): a comparison reads what it can."""
        damaged: list[str] = []
        return _records(_read_jsonl(self.run_dir / "answers.jsonl", damaged)), damaged

    def side(self) -> RunSide:
        """This run as one side of a comparison: what is readable, and what is not."""
        records, damaged = self.readable_records()
        return RunSide(self.report(), records, tuple(damaged))

    def pairs(self) -> list[Pair]:
        return [Pair.from_dict(row) for row in _read_jsonl(self.run_dir / "pairs.jsonl")]

    def verdicts(self) -> list[CriterionVerdict]:
        rows = _read_jsonl(self.run_dir / "verdicts.jsonl")
        return [CriterionVerdict.from_dict(row) for row in rows]


def cases_between(
    before: StoredRun,
    after: StoredRun,
    models: Sequence[str] = (),
    allow_other_suite: bool = False,
    by: str | None = None,
    rootdir: Path | None = None,
) -> dict[str, Any]:
    """Run ``after`` (B) against run ``before`` (A), case by case (spec: "Compare");
    ``models``: the ``--model`` entries that pair the runs' models; runs of two suites are
    refused unless ``allow_other_suite``; ``by``: a case field to compare per group of
    (``--by``), read from the runs' suite file under ``rootdir``."""
    groups = stored_groups(by, (after, before), rootdir or Path.cwd()) if by else None
    return cross_run(before.side(), after.side(), models, allow_other_suite, groups)


def stored_groups(field: str, runs: Sequence[StoredRun], rootdir: Path) -> CaseGroups:
    """The cases grouped by ``field`` as the first of ``runs`` whose suite file can be read
    gives them (run B's, then run A's): answers.jsonl holds no vars, the suite file does. Said
    when the file changed since that run (its vars may differ from what the run asked)."""
    problems: list[str] = []
    for run in runs:
        suite_info = run.report().get("suite") or {}
        shown = str(suite_info.get("file"))
        try:
            suite = load_suite(rootdir / shown, shown=shown, roots=project_folders(rootdir))
        except (EvalmineError, OSError) as exc:
            problems.append(f"{shown}: {exc}")
            continue
        since = "" if suite.hash == suite_info.get("hash") else f", changed since run {run.run_id}"
        return group_cases(field, case_fields(suite.tasks), f"suite file {shown}{since}")
    raise EvalmineError(
        f"--by {field}: the cases' fields come from the runs' suite file, and it cannot be "
        f"read: {'; '.join(dict.fromkeys(problems))}"
    )


def comparison(
    before: StoredRun,
    after: StoredRun,
    models: Sequence[str] = (),
    allow_other_suite: bool = False,
    by: str | None = None,
    rootdir: Path | None = None,
) -> dict[str, Any]:
    """What ``evalmine compare BEFORE AFTER`` shows (spec: "Compare"): report.json's deltas
    and the case-by-case comparison (per group of ``by``), for the command and the suite's
    index alike."""
    changes = compare_reports(after.report(), before.report())
    changes["cases"] = cases_between(before, after, models, allow_other_suite, by, rootdir)
    changes["cases_note"] = None
    return changes


def compare_run_folders(before: Path, after: Path) -> dict[str, Any]:
    """``comparison`` of two run folders: what the suite's index shows between runs."""
    return comparison(StoredRun(before), StoredRun(after))


def case_changes(
    report: dict[str, Any],
    records: Sequence[AnswerRecord],
    previous: dict[str, Any],
    report_root: Path,
    rootdir: Path,
    reference: str | None,
    by: CaseGroups | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """This run (its report.json and records, not yet written) against the run "What
    changed" compares it with (``--evalmine-compare``'s ``reference``, else latest.json's):
    report.json's ``changes.cases`` and, when the other run's answers cannot be read, None
    and why. Never raises for a stored run it cannot read: the run's own reports come first.
    ``by``: ``--evalmine-compare-by``'s groups of the cases, from this run's suite."""
    suite = report["suite"]["name"]
    try:
        found = (
            resolve(reference, report_root, suite, rootdir)
            if reference
            else find_previous(report_root, suite)
        )
        if found is None or not (found.parent / "answers.jsonl").is_file():
            return None, f"run {previous.get('run_id')} has no answers.jsonl to compare cases with"
        before, damaged = StoredRun(found.parent).readable_records()
        sides = RunSide(previous, before, tuple(damaged)), RunSide(report, records)
        return cross_run(*sides, by=by), None
    except (EvalmineError, OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"the cases of run {previous.get('run_id')} cannot be read: {exc}"


# answers.jsonl's fields that hold a string of their own in every row: never shared.
_OWN_STRINGS = frozenset(("key", "text", "provider_request_id", "error"))


def _records(rows: Iterable[dict[str, Any]]) -> list[AnswerRecord]:
    """Records from answers.jsonl's rows, holding once each string that many rows repeat
    (names, outcomes, the checks' keys and messages): json gives every row copies of its
    own, and the answers of the run a 10,000-case rerun compares with weighed some 25 MB
    more so."""
    shared: dict[str, str] = {}

    def once(value: Any) -> Any:
        return shared.setdefault(value, value) if isinstance(value, str) else value

    records = []
    for row in rows:
        for name, value in row.items():
            if name in _OWN_STRINGS:
                continue
            if name == "checks" and isinstance(value, list):
                row[name] = [
                    {once(k): once(v) for k, v in check.items()}
                    if isinstance(check, dict)
                    else check
                    for check in value
                ]
            elif name == "tokens" and isinstance(value, dict):
                row[name] = {once(k): v for k, v in value.items()}
            else:
                row[name] = once(value)
        records.append(AnswerRecord.from_dict(row))
    return records


def _read_jsonl(path: Path, damaged: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of a jsonl file, read a line at a time: a caller that turns each into an
    object holds neither the file's text nor every row's dict at once (the answers of the run
    a 10,000-case rerun compares with were its largest thing in memory). A line that is not a
    JSON object is an error naming the file and its line, or, given ``damaged``, said there
    and skipped."""
    if not path.is_file():
        return
    try:
        with path.open(encoding="utf-8") as stream:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise ValueError(f"a {type(row).__name__}, not an object")
                except ValueError as exc:
                    why = f"{path}: line {number}: cannot read: {_without_position(exc)}"
                    if damaged is None:
                        raise EvalmineError(why) from None
                    damaged.append(why)
                    continue
                yield row
    except OSError as exc:
        raise EvalmineError(f"{path}: cannot read: {exc}") from None


def _without_position(exc: ValueError) -> str:
    """json's message with its column only: its "line 1" counts lines of the one row."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (column {exc.colno})"
    return str(exc)


def list_runs(report_root: Path, suite_name: str) -> list[StoredRun]:
    """A suite's runs, oldest first (run ids begin with their UTC time)."""
    suite_dir = report_root / suite_name
    if not suite_dir.is_dir():
        return []
    return [StoredRun(p) for p in sorted(suite_dir.iterdir()) if (p / "report.json").is_file()]


def latest_run(report_root: Path, suite_name: str) -> StoredRun:
    report = find_previous(report_root, suite_name)
    if report is None:
        raise EvalmineError(f"no run of suite {suite_name!r} under {report_root}")
    return StoredRun(report.parent)


def find_run(reference: str, report_root: Path, base: Path) -> StoredRun:
    """A run id (looked up under every suite of ``report_root``), a run folder or a
    report.json, relative to ``base``, or a run name: ``NAME``, the latest run of that name,
    ``NAME~K`` the K-th earlier (``EvalmineError`` naming the runs of that name past the
    oldest)."""
    path = base / reference
    if path.is_file() and path.name == "report.json":
        return StoredRun(path.parent)
    if (path / "report.json").is_file():
        return StoredRun(path)
    if "/" not in reference and report_root.is_dir():
        for suite_dir in sorted(report_root.iterdir()):
            if (suite_dir / reference / "report.json").is_file():
                return StoredRun(suite_dir / reference)
        named = find_named(reference, report_root)
        if named is not None:
            return StoredRun(named)
    raise EvalmineError(
        f"no run {reference!r} under {report_root}: give a run id, a run name (NAME, NAME~K), "
        "a run folder or a report.json"
    )


def rerender(run: StoredRun, rootdir: Path) -> list[Path]:
    """Write report.md and report.html again from report.json, answers.jsonl and pairs.jsonl;
    returns the files written. Calibration and win rates are recomputed from the stored
    verdicts (seeded, so identical); the suite file supplies the labels and must still have the
    run's hash."""
    target = run.run_dir / "report.md"
    atomic_write(target, render_markdown(stored_summary(run, rootdir)))
    page = run.run_dir / "report.html"
    atomic_write(page, render_run_dir(run.run_dir))
    return [target, page]


def suite_of_run(run_id: str, report: dict[str, Any], rootdir: Path) -> Suite:
    """The run's suite file, refused when it no longer has the run's hash (its labels would
    give another calibration)."""
    suite_file = rootdir / report["suite"]["file"]
    suite = load_suite(suite_file, shown=report["suite"]["file"], roots=project_folders(rootdir))
    if suite.hash != report["suite"]["hash"]:
        raise EvalmineError(
            f"{report['suite']['file']}: the suite changed since run {run_id} "
            f"(sha256 {suite.hash[:12]}, the run cites {report['suite']['hash'][:12]}): "
            "its labels cannot re-create that run's calibration"
        )
    return suite


def stored_summary(run: StoredRun, rootdir: Path) -> RunSummary:
    """A stored run's summary again, from its files (``evalmine report``)."""
    report = run.report()
    return summary_from_stored(
        report,
        run.records(),
        run.pairs() if report.get("headline") is not None else [],
        run.verdicts() if report.get("binary_judges") is not None else [],
        rootdir,
    )


def summary_from_stored(
    report: dict[str, Any],
    records: list[AnswerRecord],
    pairs: list[Pair],
    verdicts: list[CriterionVerdict],
    rootdir: Path,
    **replacing: Any,
) -> RunSummary:
    """The summary of answers, judge pairs and verdicts read from run folders, with the
    settings of ``report`` (a run's report.json), every figure recomputed from them: one
    stored run's again (``stored_summary``), or the union of a named run's shards
    (``engine.merge``), which ``replacing`` gives its own run id, estimate and sources."""
    headline = binary = None
    stored_headline = report.get("headline")
    stored_binary = report.get("binary_judges")
    suite = (
        suite_of_run(replacing.get("run_id", report["run_id"]), report, rootdir)
        if stored_headline is not None or stored_binary is not None
        else None
    )
    if stored_binary is not None and suite is not None:
        binary = binary_from_verdicts(
            suite, verdicts, report["models"], stored_binary["judge"]["model"]
        )
    if stored_headline is not None and suite is not None:
        headline = headline_from_pairs(
            suite,
            pairs,
            report["models"],
            stored_headline["judge"]["model"],
            gate_on=stored_headline["calibration"]["gate_on"],
            jurors=tuple(stored_headline["judge"].get("jurors", ())),
        )
    cost = report["cost"]
    context: dict[str, Any] = {
        "run_id": report["run_id"],
        "records": records,
        "models": report["models"],
        "models_hash": report["models_hash"],
        "suite_name": report["suite"]["name"],
        "suite_file": report["suite"]["file"],
        "suite_hash": report["suite"]["hash"],
        "cap_usd": cost["cap_usd"],
        "cap_source": cost["cap_source"],
        "estimate_usd": cost["estimate_usd"],
        "worst_case_usd": cost.get("worst_case_usd"),
        "record_mode": report["record_mode"],
        "adapter_routing": report["adapter_routing"],
        "prices_pinned": cost["prices_pinned"],
        "command": report["command"],
        "task_hashes": report["suite"].get("task_hashes", {}),
        "task_content": report["suite"].get("task_content", {}),
        "model_builds": report.get("model_builds", {}),
        "label_counts": report["suite"].get("label_counts", {}),
        "headline": headline,
        "judge_note": report.get("judge_note"),
        "binary": binary,
        "binary_note": report.get("binary_judges_note"),
        "changes": report.get("changes"),
        "gate_config": _gate_config(report.get("gate")),
        "regression_tasks": tuple(report.get("regressions", {}).get("tasks", ())),
        "scored_tasks": tuple(report.get("scored_tasks", ())),
        "repeats": int(report.get("repeats", 1)),
        "concurrency": report.get("concurrency", {}),
        "latency_widths": stored_latency_widths(report),
        "batches": report.get("batches"),
        "score_only": bool(report.get("score_only", False)),
        "latest_note": report.get("latest_note"),
        "run_name": report.get("run_name"),
        "shard": report.get("shard"),
        "merged_from": report.get("merged_from"),
    }
    return summarize(**(context | replacing))


def stored_latency_widths(report: dict[str, Any]) -> dict[str, int]:
    """The widths the scorecard's latencies were taken within, per model, as stored."""
    return {
        row["model"]: row["latency_width"]
        for row in report.get("scorecard", ())
        if row.get("latency_width") is not None
    }


# digests: what an agent (MCP) or the `evalmine runs` listing is told about a run -------------
@dataclass
class CalibrationDigest:
    status: str
    reason: str
    kappa: float | None
    band: str | None
    interval: list[float] | None
    labels_matched: int


@dataclass
class WinRateDigest:
    candidate: str
    win_rate: float | None
    interval: list[float] | None
    n: int
    headline_eligible: bool
    dagger: bool  # shown with a dagger and UNCALIBRATED wherever it is printed
    flag: str | None
    ineligible_reasons: list[str]


@dataclass
class ModelDigest:
    model: str
    baseline: bool
    passed: int
    items: int
    schema_pass_rate: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    cost_usd: float
    cost_if_uncached_usd: float


@dataclass
class RunDigest:
    """A run in numbers and flags. Never an answer's text."""

    run_id: str
    suite: str
    suite_file: str
    created_utc: str
    report_json: str
    report_md: str
    partial: bool
    items: int
    outcomes: dict[str, int]
    spent_usd: float
    if_uncached_usd: float
    cap_usd: float
    calls_made: int
    calls_cached: int
    headline_eligible: bool | None  # None: no judge ran (see judge_note)
    headline_reason: str
    judge_note: str | None
    calibration: CalibrationDigest | None
    win_rates: list[WinRateDigest] = field(default_factory=list)
    models: list[ModelDigest] = field(default_factory=list)
    failing_node_ids: list[str] = field(default_factory=list)


def digest(run: StoredRun, rootdir: Path) -> RunDigest:
    report = run.report()
    headline = report.get("headline")
    calibration = None
    rates: list[WinRateDigest] = []
    if headline is not None:
        cal = headline["calibration"]
        interval = cal.get("kappa_interval")
        calibration = CalibrationDigest(
            status=cal["status"],
            reason=cal["reason"],
            kappa=cal["kappa"],
            band=cal.get("band"),
            interval=[interval["low"], interval["high"]] if interval else None,
            labels_matched=cal["n"],
        )
        rates = [_win_rate_digest(rate) for rate in headline["win_rates"]]
    return RunDigest(
        run_id=report["run_id"],
        suite=report["suite"]["name"],
        suite_file=report["suite"]["file"],
        created_utc=report.get("created_utc", ""),
        report_json=_shown(run.report_path, rootdir),
        report_md=_shown(run.run_dir / "report.md", rootdir),
        partial=bool(report["partial"]),
        items=report["items"],
        outcomes=report["outcomes"],
        spent_usd=report["cost"]["spent_usd"],
        if_uncached_usd=report["cost"]["if_uncached_usd"],
        cap_usd=report["cost"]["cap_usd"],
        calls_made=report["calls"]["made"],
        calls_cached=report["calls"]["cached"],
        headline_eligible=None if headline is None else bool(headline["headline_eligible"]),
        headline_reason=_headline_reason(report),
        judge_note=report.get("judge_note"),
        calibration=calibration,
        win_rates=rates,
        models=[_model_digest(row) for row in report["scorecard"]],
        failing_node_ids=[
            f"{report['suite']['file']}::{r.task}::{r.case}[{r.shown_model}]"
            for r in run.records()
            if r.outcome != PASSED
        ],
    )


def _shown(path: Path, rootdir: Path) -> str:
    try:
        return str(path.resolve().relative_to(rootdir.resolve()))
    except ValueError:
        return str(path)


def _headline_reason(report: dict[str, Any]) -> str:
    headline = report.get("headline")
    if headline is None:
        return report.get("judge_note") or "no judge ran"
    if headline["headline_eligible"]:
        return headline["calibration"]["reason"]
    reasons = sorted({r for rate in headline["win_rates"] for r in rate["ineligible_reasons"]})
    return "; ".join(reasons) or headline["calibration"]["reason"]


def _win_rate_digest(rate: dict[str, Any]) -> WinRateDigest:
    interval = rate.get("interval")
    return WinRateDigest(
        candidate=rate["candidate"],
        win_rate=rate["win_rate"],
        interval=[interval["low"], interval["high"]] if interval else None,
        n=rate["n"],
        headline_eligible=rate["headline_eligible"],
        dagger=not rate["headline_eligible"],
        flag=rate.get("flag"),
        ineligible_reasons=list(rate["ineligible_reasons"]),
    )


def _model_digest(row: dict[str, Any]) -> ModelDigest:
    return ModelDigest(
        model=row["model"],
        baseline=bool(row["baseline"]),
        passed=row["passed"],
        items=row["items"],
        schema_pass_rate=(row.get("schema_all") or {}).get("rate"),
        latency_p50_s=row.get("latency_p50_s"),
        latency_p95_s=row.get("latency_p95_s"),
        cost_usd=row["cost_usd"],
        cost_if_uncached_usd=row["cost_if_uncached_usd"],
    )


def _gate_config(stored: dict[str, Any] | None) -> GateConfig | None:
    if stored is None:
        return None
    return GateConfig(
        stored["metric"], stored["indifference_points"], stored["minor_regression_points"]
    )
