"""The tools' results: typed records of numbers, flags and node ids, never an answer's text
(the SDK turns them into each tool's output schema). A refusal is a record too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ...engine.catalog import SuiteInfo
from ...engine.stored import RunDigest


@dataclass
class Refusal:
    status: Literal["refused"]
    code: (
        str  # path_outside_root, over_ceiling, bad_request, suite_error, not_found, merge_refused,
    )
    # refused_before_spending
    reason: str


def refusal(code: str, reason: str) -> Refusal:
    return Refusal("refused", code, reason)


@dataclass
class PairedDigest:
    """One paired comparison of report.json's ``paired`` (spec: "Paired comparison"), in
    points (x 100) as the terminal prints them; never its example answers."""

    candidate: str
    baseline: str
    metric: str  # all_pass or score
    verdict: str  # the plain-words line the terminal and report.md print
    cases: int  # cases answered by both (n)
    observations: int  # paired repeats
    excluded_cases: int
    delta_points: float | None
    interval_points: list[float] | None
    noise_floor_points: float | None  # None: unknown (no case has two repeats)
    beyond_noise: bool | None
    worse: int
    better: int
    same: int


@dataclass
class GateRowDigest:
    candidate: str
    verdict: str  # ship, hold, investigate or block
    delta_points: float | None
    interval_points: list[float] | None
    trusted: bool
    reason: str


@dataclass
class GateDigest:
    """The release gate (spec: "Release gate"): the run's verdict, the most severe over its
    candidates, or ``not_applicable`` (no gate, no run, or no candidate to gate) with why."""

    verdict: Literal["ship", "hold", "investigate", "block", "not_applicable"]
    note: str | None  # why not applicable; None when the gate gave a verdict
    metric: str | None = None
    indifference_points: float | None = None
    minor_regression_points: float | None = None
    regression_failures: int = 0
    candidates: list[GateRowDigest] = field(default_factory=list)


NO_GATE_NOTE = "no release gate: the suite has no gate: and the run had no --evalmine-gate"


def no_gate(why: str = NO_GATE_NOTE) -> GateDigest:
    return GateDigest("not_applicable", why)


@dataclass
class RunSuiteResult:
    status: Literal["completed", "failed"]
    exit_code: int
    exit_meaning: str
    max_cost_usd: float
    run: RunDigest | None  # None when pytest ended without writing a report
    paired: list[PairedDigest] = field(default_factory=list)
    gate: GateDigest = field(default_factory=no_gate)


@dataclass
class RunBrief:
    run_id: str
    created_utc: str
    models: list[str]
    items: int
    outcomes: dict[str, int]
    spent_usd: float
    partial: bool
    headline_eligible: bool | None
    # --evalmine-run-name, or None: reachable as NAME (the latest) or NAME~K.
    run_name: str | None = None


@dataclass
class RunList:
    status: Literal["ok"]
    suite: str
    runs: list[RunBrief] = field(default_factory=list)


@dataclass
class SuiteList:
    status: Literal["ok"]
    folder: str
    suites: list[SuiteInfo] = field(default_factory=list)


@dataclass
class RunView:
    status: Literal["ok"]
    run: RunDigest
    paired: list[PairedDigest] = field(default_factory=list)
    gate: GateDigest = field(default_factory=no_gate)


@dataclass
class MergeResult:
    """``merge_run``: the merged run of each suite, and the exit code a pytest run over the
    same items would have had."""

    status: Literal["completed", "failed"]
    exit_code: int
    exit_meaning: str
    merged_from: list[str] = field(default_factory=list)  # the partial runs' ids
    runs: list[RunView] = field(default_factory=list)


@dataclass
class CaseGroupDigest:
    """One group of cases of a ``by`` comparison: its paired delta in points."""

    value: str | None  # the field's value; None: the cases without it
    cases: int
    a_mean: float | None
    b_mean: float | None
    delta_points: float | None
    interval_points: list[float] | None
    worse: int
    better: int
    same: int


@dataclass
class CrossRunMetricDigest:
    """One metric of one model pair, run B against run A (spec: "Compare"), in points and
    shares as ``evalmine compare`` prints them; the worse and better cases by id, never their
    answers."""

    metric: str  # all_pass or score
    verdict: str  # the plain-words line
    cases: int  # cases both runs answered (n)
    observations: int  # paired repeats
    a_mean: float | None  # all_pass: a share; score: the mean checker score
    a_interval: list[float] | None
    b_mean: float | None
    b_interval: list[float] | None
    delta_points: float | None
    interval_points: list[float] | None
    worse: int
    better: int
    same: int
    noise_floor_points: float | None  # None: unknown (neither run has two repeats of a case)
    noise_floor_a_points: float | None
    noise_floor_b_points: float | None
    excess_points: float | None  # |delta| - floor; None without a floor
    excess_interval_points: list[float] | None
    beyond_noise: bool | None
    excluded_cases: int
    worse_cases: list[str] = field(default_factory=list)  # task/case, up to five
    better_cases: list[str] = field(default_factory=list)
    groups: list[CaseGroupDigest] | None = None  # per group of cases with ``by``, else None


@dataclass
class CrossRunModelDigest:
    model_a: str
    model_b: str
    digest_a: str | None  # the build run A recorded for its model (an Ollama digest)
    digest_b: str | None
    changed_answers: int  # cases whose parsed answer differs between the runs
    changed_answers_of: int
    changed_answers_share: float | None
    changed_answers_interval: list[float] | None
    excluded: dict[str, int]  # reason -> cases left out
    metrics: list[CrossRunMetricDigest] = field(default_factory=list)


@dataclass
class TaskChange:
    task: str
    fields: list[str] | None  # prompt, system, params, checks, schema; None: not recorded


@dataclass
class WinRatesSideBySide:
    baseline: str
    candidate: str
    a_win_rate: float | None
    a_interval: list[float] | None
    a_headline_eligible: bool
    b_win_rate: float | None
    b_interval: list[float] | None
    b_headline_eligible: bool


@dataclass
class CrossRunDigest:
    """Run B against run A case by case (report.json ``changes.cases``), without answers."""

    run_a: str
    run_b: str
    tasks_changed: list[TaskChange]
    tasks_only_in_a: list[str]
    tasks_only_in_b: list[str]
    cases_only_in_a: int
    cases_only_in_b: int
    models: list[CrossRunModelDigest]
    win_rates: list[WinRatesSideBySide]
    note: str | None  # why no model pair was compared


@dataclass
class Comparison:
    status: Literal["ok"]
    run_a: str
    run_b: str
    changes: dict[str, Any]  # spec "Compare": what changed from run_a to run_b
    cases: CrossRunDigest | None = None  # each model of both runs, case by case
