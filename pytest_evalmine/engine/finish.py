"""Session finish, once per run (spec: "Run lifecycle" step 7): judge, calibrate, compare
and write every suite's reports, and decide the run's exit code."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from ..adapters.registry import AdapterRegistry
from ..errors import EvalmineError
from ..exitcodes import (
    BATCH_PENDING,
    CALIBRATION_GATE_FAILED,
    REGRESSION_FAILED,
    RELEASE_GATE_BLOCKED,
    RELEASE_GATE_INVESTIGATE,
    REPLAY_MISSED,
    STOPPED_OVER_BUDGET,
)
from ..judging.binary import BinaryJudging, binary_from_verdicts
from ..judging.criteria import judge_criteria
from ..judging.gate import BLOCK, INVESTIGATE
from ..judging.headline import Headline, run_headline
from ..options import gate_from_spec
from ..options import report_root as checked_report_root
from ..reports.case_groups import CaseGroups, case_fields, group_cases
from ..reports.compare import compare as compare_reports
from ..reports.compare import find_previous, other_suite
from ..reports.compare import load as load_report
from ..reports.compare import resolve as resolve_compare
from ..reports.cross_run import recorded_builds
from ..reports.files import write_run
from ..reports.summary import RunSummary, summarize
from ..run.dispatch import Dispatcher, Progress
from ..run.endpoints import base_urls_from, base_urls_line
from ..run.records import AnswerRecord
from ..suite.canonical import sha256_hex
from ..suite.content import task_content_hashes
from ..suite.loader import Suite
from .session import EvalSession, has_criteria, models_hash, relative_to
from .stored import case_changes, compare_run_folders

T = TypeVar("T")

# pytest's "internal error" (exitcodes.MEANINGS[3]), ours too when a suite's reports could not
# be written: the run's results are lost, so it must not pass (spec: "Exit codes").
REPORTS_NOT_WRITTEN = 3


@dataclass(frozen=True)
class FinishedSuite:
    summary: RunSummary
    # None when the run folder could not be written (``not_written`` says why).
    run_dir: Path | None
    fail_on_ineligible: bool
    # Why some of this suite's files (run folder, latest.json, recording) were not written.
    not_written: str | None = None


def finish_run(
    session: EvalSession,
    *,
    command: str,
    report_root: Path,
    judge_registry: AdapterRegistry | None,
    on_progress: Callable[[Progress], None] | None = None,
    on_interrupt: Callable[[int, float], None] | None = None,
    stopped: str | None = None,
    pytest_html: Path | None = None,
) -> list[FinishedSuite]:
    """Session finish, once per run: judge, calibrate, compare and write every suite's
    reports. Provider trouble while judging becomes a note in the report, never an exception.
    ``stopped`` (why the run did not run every item: Ctrl-C, -x) writes partial reports
    without spending on the judge. Every answer the run dispatched is reported, whether its
    item ran or not. A suite whose files cannot be written (compared, written, recorded) is
    still finished, with ``not_written`` saying why, so its summary is shown all the same.
    ``pytest_html``: the page pytest-html writes for this run, which report.html links to."""

    def judge_dispatcher() -> Dispatcher:
        return session.dispatcher(
            judge_registry or session.default_registry(),
            on_progress=on_progress,
            on_interrupt=on_interrupt,
        )

    by_suite: dict[str, list[AnswerRecord]] = {}
    for record in session.all_records():
        by_suite.setdefault(record.suite_file, []).append(record)
    for path in session.plan.shard_empty:  # this shard ran, with none of the suite's items
        by_suite.setdefault(relative_to(path, session.rootdir), [])
    session.release_outcomes()
    shard = session.base.shard
    finished = []
    for suite_file, records in sorted(by_suite.items()):
        suite = session.load(session.rootdir / suite_file)
        models = session.models_for(suite)
        if stopped:
            headline, note = None, f"not judged: {stopped}"
            binary = None
            binary_note = f"not judged: {stopped}" if has_criteria(suite) else None
        else:
            # Judges (pairwise and binary) see each case's first answers (repeat 0) only.
            first = [r for r in records if r.repeat == 0]
            headline, note = _judge_suite(session, suite, first, models, judge_dispatcher)
            binary, binary_note = _judge_criteria(session, suite, first, models, judge_dispatcher)
            if session.interrupted:
                stopped = "interrupted (Ctrl-C) while judging"
        summary = summarize(
            run_id=session.run_id(suite),
            records=records,
            models=models,
            models_hash=models_hash(models),
            suite_name=suite.name,
            suite_file=relative_to(suite.path, session.rootdir),
            suite_hash=suite.hash,
            cap_usd=session.resolve_cap(),
            cap_source=session.cap_source,
            estimate_usd=session.estimate.cost_usd if session.estimate else None,
            worst_case_usd=session.estimate.worst_case_usd if session.estimate else None,
            record_mode=session.record_mode,
            adapter_routing="fake (every model routed to the fake adapter)"
            if session.settings.fake
            else "; ".join(filter(None, ["by provider prefix", base_urls_line(base_urls_from())])),
            prices_pinned=session.prices.pinned,
            command=command,
            task_hashes={t["id"]: sha256_hex(t) for t in suite.document["tasks"]},
            task_content={t.id: task_content_hashes(t) for t in suite.tasks},
            model_builds=recorded_builds(
                models,
                session.default_registry().adapter_for,
                lambda entry, suite=suite: suite.contender(entry)[0],
            ),
            label_counts=dict(Counter(label.task for label in suite.labels)),
            headline=headline,
            judge_note=note,
            binary=binary,
            binary_note=binary_note,
            gate_config=gate_from_spec(session.settings.gate)
            if session.settings.gate
            else suite.gate,
            regression_tasks=tuple(t.id for t in suite.tasks if t.regression),
            scored_tasks=tuple(t.id for t in suite.tasks if t.checks),
            repeats=session.settings.repeat,
            concurrency=session.concurrency_used(),
            latency_widths=session.latency_widths(models),
            batches=session.batches_used(),
            score_only=len(models) == 1 or not any(t.judge for t in suite.tasks),
            stopped=stopped,
            run_name=session.base.run_name,
            shard=shard.to_dict() if shard is not None else None,
        )
        held_back = _why_latest_stays(session, suite, summary)
        finished.append(
            write_suite_run(
                dataclasses.replace(summary, latest_note=held_back),
                mover_threshold=suite.mover_threshold,
                report_root=report_root,
                rootdir=session.rootdir,
                compare=session.settings.compare,
                move_latest=held_back is None,
                fail_on_ineligible=session.settings.fail_under_calibration
                or suite.judge.on_below_floor == "fail",
                pytest_html=pytest_html,
                groups=compare_groups(session, suite),
                then=lambda suite=suite, records=records, headline=headline, binary=binary: (
                    _write_recording(session, suite, records, headline, binary)
                ),
            )
        )
    return finished


def write_suite_run(
    summary: RunSummary,
    *,
    mover_threshold: float,
    report_root: Path,
    rootdir: Path,
    compare: str | None,
    move_latest: bool,
    fail_on_ineligible: bool,
    pytest_html: Path | None = None,
    then: Callable[[], object] | None = None,
    groups: CaseGroups | None = None,
) -> FinishedSuite:
    """The end of one suite's run, for a pytest run and for ``evalmine merge`` alike: what
    changed since the run it compares with (``compare``, else latest.json's), the run folder
    written, latest.json moved when ``move_latest``, then ``then`` (the recording); ``groups``:
    ``--evalmine-compare-by``'s groups of the cases (the comparison per group). A failure
    to write is kept as ``not_written``: the summary is still shown, and the run fails
    (exit 3)."""
    run_dir: Path | None = None
    not_written = None
    try:
        report = summary.to_json()
        if pytest_html is not None:  # relative: the pages open from file://
            run_folder = report_root / summary.suite_name / summary.run_id
            report["pytest_html"] = os.path.relpath(pytest_html, run_folder)
        previous, unreadable = _previous_or_why_not(
            compare, summary.suite_name, report_root, rootdir
        )
        if unreadable:
            notes = (summary.latest_note, unreadable)
            summary = _replaced(summary, latest_note="; ".join(filter(None, notes)))
        if previous is not None:
            changes = compare_reports(report, previous, mover_threshold)
            changes["cases"], changes["cases_note"] = case_changes(
                report, summary.records, previous, report_root, rootdir, compare, groups
            )
            summary = _replaced(summary, changes=changes)
            report["changes"] = changes  # what summary.to_json() would give now, unbuilt
        run_dir = write_run(
            summary,
            report_root,
            move_latest=move_latest,
            report=report,
            compare_runs=compare_run_folders,
        )
        if then is not None:
            then()
    except Exception as exc:  # the summary is still shown, and the run fails (exit 3)
        not_written = f"{type(exc).__name__}: {exc}"
    return FinishedSuite(summary, run_dir, fail_on_ineligible, not_written)


def _replaced(summary: RunSummary, **changes: Any) -> RunSummary:
    """``dataclasses.replace`` keeping every cached figure report.json already built (the
    ranking's bootstrap, the power's posterior draws, the label suggestions), so the sections
    read them instead of drawing them again. Only for fields none of them reads: the notes
    and changes replaced here."""
    copy = dataclasses.replace(summary, **changes)
    for name, attribute in vars(RunSummary).items():
        if isinstance(attribute, cached_property) and name in summary.__dict__:
            copy.__dict__[name] = summary.__dict__[name]
    return copy


def _why_latest_stays(session: EvalSession, suite: Suite, summary: RunSummary) -> str | None:
    """Why this run must not become the one the next run compares with (a fragment), or
    None when it may. ``--evalmine-update-latest`` moves it anyway."""
    shard = session.base.shard
    if shard is not None:  # never the whole run, even with --evalmine-update-latest
        return (
            f"latest.json not moved: this run is shard {shard} of run {session.base.run_name}; "
            f"`evalmine merge {session.base.run_name}` builds the whole run, which moves it"
        )
    if session.settings.update_latest:
        return None
    if suite.path in session.subsets:
        reason = "this run selected a subset of the suite's items"
    elif summary.partial:
        reason = f"this run is partial ({summary.partial_reason})"
    elif summary.replay_misses:
        reason = f"this replay missed {summary.replay_misses} answer(s) or verdict(s)"
    else:
        return None
    return (
        f"latest.json not moved: {reason}; the next run compares with the last complete "
        "run (--evalmine-update-latest moves it anyway)"
    )


def _write_recording(
    session: EvalSession,
    suite: Suite,
    records: list[AnswerRecord],
    headline: Headline | None,
    binary: BinaryJudging | None,
) -> None:
    """After a run that may call: the answers and judge verdicts this suite used, from the
    cache database, into its recording (merged when only part of the suite was selected)."""
    path = session.recording_for(suite)
    if path is None or session.record_mode == "none":
        return
    from .recording import write_recording

    # key -> what uses it, so a reviewer reads which case's answer or verdict changed
    uses: dict[str, set[str]] = {}
    for record in records:
        if record.key:
            uses.setdefault(record.key, set()).add(
                f"{record.task}/{record.case} {record.shown_model}"
            )
    models = {r.model for r in records}
    if headline is not None:
        for pair in headline.all_pairs:
            for judged in pair.calls:
                if judged.key:
                    uses.setdefault(judged.key, set()).add(
                        f"{pair.task}/{pair.case} judge {pair.candidate} vs {pair.baseline}, "
                        f"{judged.order}"
                    )
        models.update(headline.judge.models)
    if binary is not None:
        for verdict in binary.verdicts:
            if verdict.key:
                uses.setdefault(verdict.key, set()).add(
                    f"{verdict.task}/{verdict.case} {verdict.model} criterion {verdict.criterion}"
                )
        models.add(binary.judge["model"])
    # adapter_state is kept under the adapter's name: the provider prefix of a model string
    adapters = {model.split("/", 1)[0] for model in models}
    selected_all = len(records) == len(session.specs_for(suite))
    write_recording(session.store, path, uses, adapters, merge=not selected_all)


def exit_code(finished: Sequence[FinishedSuite]) -> int | None:
    """Our exit code for the run, or None to keep pytest's: reports not written first (the
    run's results are lost), then a budget stop, then a replay miss, then the release gate's
    Block, then a failed regression task, then the gate's Investigate, then the calibration
    gate where the suite or the option asks for it."""
    if any(f.not_written for f in finished):
        return REPORTS_NOT_WRITTEN
    if any(f.summary.budget_stopped for f in finished):
        return STOPPED_OVER_BUDGET
    if any(f.summary.batch_waiting for f in finished):
        return BATCH_PENDING
    if any(f.summary.replay_misses for f in finished):
        return REPLAY_MISSED
    verdicts = {f.summary.gate.verdict for f in finished if f.summary.gate is not None}
    if BLOCK in verdicts:
        return RELEASE_GATE_BLOCKED
    if any(f.summary.regression_failures for f in finished):
        return REGRESSION_FAILED
    if INVESTIGATE in verdicts:
        return RELEASE_GATE_INVESTIGATE
    for item in finished:
        headline = item.summary.headline
        if item.fail_on_ineligible and headline is not None and not headline.headline_eligible:
            return CALIBRATION_GATE_FAILED
    return None


def _judge_suite(
    session: EvalSession,
    suite: Suite,
    records: list[AnswerRecord],
    models: list[str],
    judge_dispatcher: Callable[[], Dispatcher],
) -> tuple[Headline | None, str | None]:
    judge_model = session.judge_model_for(suite)
    if judge_model is None:
        return None, "no judge configured (set judge.model in the suite or --evalmine-judge)"
    if len(models) < 2:
        return None, "one model only: there is no candidate to compare with the baseline"
    return _judging(
        session,
        judge_dispatcher,
        lambda dispatcher: run_headline(
            suite,
            records,
            models,
            judge_model,
            dispatcher,
            gate_on=session.settings.kappa_gate,
            jurors=session.jurors_for(suite),
        ),
        "judging failed",
    )


def _judge_criteria(
    session: EvalSession,
    suite: Suite,
    records: list[AnswerRecord],
    models: list[str],
    judge_dispatcher: Callable[[], Dispatcher],
) -> tuple[BinaryJudging | None, str | None]:
    """The binary judges of a suite whose tasks have some, on every answer that arrived
    (one model is enough); a note instead when they cannot run."""
    if not has_criteria(suite):
        return None, None
    judge_model = session.judge_model_for(suite)
    if judge_model is None:
        return None, (
            "binary judges not run: no judge model (set judge.model in the suite or "
            "--evalmine-judge)"
        )
    if session.interrupted:
        return None, "not judged: interrupted (Ctrl-C) while judging"
    verdicts, note = _judging(
        session,
        judge_dispatcher,
        lambda dispatcher: judge_criteria(suite, records, judge_model, dispatcher),
        "binary judging failed",
    )
    if verdicts is None:
        return None, note
    return binary_from_verdicts(suite, verdicts, models, judge_model), None


def _judging(
    session: EvalSession,
    judge_dispatcher: Callable[[], Dispatcher],
    judge: Callable[[Dispatcher], T],
    failed: str,
) -> tuple[T | None, str | None]:
    """One judging phase on a fresh judge dispatcher: its result, or a note saying why it
    failed. A Ctrl-C while it ran marks the session interrupted."""
    try:
        dispatcher = judge_dispatcher()
        result = judge(dispatcher)
        session.interrupted = session.interrupted or dispatcher.interrupted
    except Exception as exc:  # judging must never turn the run into a traceback
        return None, f"{failed}: {type(exc).__name__}: {exc}"
    return result, None


def previous_report(session: EvalSession, suite: Suite, report_root: Path) -> dict[str, Any] | None:
    """The report.json this run of ``suite`` is compared with, read: the one
    ``--evalmine-compare`` names (``EvalmineError`` when it names no readable run report of
    this suite: ``check_compare`` asks before any call), else what latest.json points at."""
    return _previous_or_why_not(session.settings.compare, suite.name, report_root, session.rootdir)[
        0
    ]


def _named_report(
    reference: str, suite_name: str, report_root: Path, rootdir: Path
) -> dict[str, Any]:
    """The run report ``--evalmine-compare`` names (``EvalmineError`` when it is none)."""
    path = resolve_compare(reference, report_root, suite_name, rootdir)
    try:
        report = load_report(path)
    except EvalmineError:  # not JSON, or unreadable
        report = None
    if not _is_run_report(report):
        raise EvalmineError(f"--evalmine-compare={reference}: {path} is not a run's report.json")
    theirs = report["suite"].get("name") if report else None
    if theirs != suite_name:
        raise EvalmineError(other_suite(reference, theirs, suite_name))
    return report  # type: ignore[return-value]


def _previous_or_why_not(
    compare: str | None, suite_name: str, report_root: Path, rootdir: Path
) -> tuple[dict[str, Any] | None, str | None]:
    """The report this run compares with, or why there is none to compare with. A previous run
    that latest.json names but that cannot be read (a crash mid-write, a hand edit) is not
    this run's failure: it is said and skipped, and this run becomes the latest, so one broken
    file never fails every later run. A run named by ``--evalmine-compare`` (``compare``) was
    checked before any call."""
    if compare:
        return _named_report(compare, suite_name, report_root, rootdir), None
    path = find_previous(report_root, suite_name)
    if path is None:
        return None, None
    try:
        report = load_report(path)
    except EvalmineError:
        report = None
    if not _is_run_report(report):
        why = "not JSON" if report is None else "not a run's report"
        return None, f"previous run {path.parent.name} not compared: its report.json is {why}"
    return report, None


def _is_run_report(report: Any) -> bool:
    """What ``compare`` reads of a report.json is there (any JSON file would load)."""
    return (
        isinstance(report, dict)
        and "run_id" in report
        and isinstance(report.get("suite"), dict)
        and "hash" in report["suite"]
    )


def check_compare(session: EvalSession, suites: Iterable[Suite]) -> None:
    """Once the run's suites are known and before any call: ``--evalmine-compare`` names a
    readable run report for each and ``--evalmine-compare-by`` a field of each one's cases
    (``EvalmineError`` otherwise), so a run is never paid for only to lose its reports at
    session finish."""
    for suite in suites:
        if session.settings.compare:
            previous_report(session, suite, report_root_of(session))
        compare_groups(session, suite)


def compare_groups(session: EvalSession, suite: Suite) -> CaseGroups | None:
    """``--evalmine-compare-by``'s groups of ``suite``'s cases (``EvalmineError`` naming the
    fields there are for a field no case has); None without the option."""
    field = session.settings.values.get("compare_by")
    if not field:
        return None
    return group_cases(
        field, case_fields(suite.tasks), f"suite {suite.name!r}", "--evalmine-compare-by"
    )


def report_root_of(session: EvalSession) -> Path:
    """Where the run's reports go: the report folder, inside the rootdir (checked at
    start-up; ``EvalmineError`` here for a session built without that check)."""
    try:
        return checked_report_root(session.rootdir, session.settings.report_dir)
    except ValueError as exc:
        raise EvalmineError(str(exc)) from None
