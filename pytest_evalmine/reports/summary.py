"""``RunSummary``: everything report.json holds for one suite in one run, built once and
rendered by every report (report.md, the terminal, pytest-html)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .. import __version__
from ..judging.binary import BinaryJudging
from ..judging.criteria import CriterionVerdict
from ..judging.gate import GateResult, evaluate_gate
from ..judging.headline import Headline
from ..options import GateConfig
from ..run.outcome import CAP_REFUSED_RETRY
from ..run.records import AnswerRecord
from ..scoring.paired import ModelComparison, compare_models
from ..scoring.sandbox import BUBBLEWRAP, RESOURCE_LIMITS
from .labelling import Suggestion, label_next
from .power_section import summary_power
from .ranking_section import summary_ranking
from .scorecard import ModelScore, TaskScore, score_models, task_scores

REPORT_SCHEMA_VERSION = 1
# How a call's error begins when it was still in a provider batch (``run/batch.py``).
IN_BATCH_ERROR = "in_batch:"


@dataclass(frozen=True)
class RunSummary:
    """Everything report.json holds for one suite in one run."""

    run_id: str
    suite_name: str
    suite_file: str
    suite_hash: str
    models: list[str]
    models_hash: str
    records: list[AnswerRecord]
    scores: list[ModelScore]
    cap_usd: float
    cap_source: str
    estimate_usd: float | None
    record_mode: str
    adapter_routing: str
    prices_pinned: str
    command: str
    task_hashes: dict[str, str]
    label_counts: dict[str, int]
    headline: Headline | None = None
    judge_note: str | None = None
    changes: dict[str, Any] | None = None
    worst_case_usd: float | None = None
    # Why the run stopped before every selected item ran and was judged (Ctrl-C, -x), or None.
    stopped: str | None = None
    # Why latest.json was left where it was, or None when this run moved it.
    latest_note: str | None = None
    gate_config: GateConfig | None = None
    regression_tasks: tuple[str, ...] = ()
    # Tasks with checks: the ones the paired comparison of checker scores covers.
    scored_tasks: tuple[str, ...] = ()
    # --evalmine-repeat: answers asked per task x case x model.
    repeats: int = 1
    # Per provider: the concurrency widths used (min, max, final), mode and back-offs.
    concurrency: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Provider batches (spec "Batch"): calls by way per provider, the batches, those still
    # waited for; None when the run did not batch.
    batches: dict[str, Any] | None = None
    # One model, or no judged task: the Scores section stands where the judge's would.
    score_only: bool = False
    task_scores: list[TaskScore] = field(default_factory=list)
    # The binary judges' verdicts and numbers, or why they did not run (None: no criteria).
    binary: BinaryJudging | None = None
    binary_note: str | None = None
    # Each candidate against the baseline on the deterministic checks (all-pass, then the
    # checker score when some task has checks), and the release gate's decision: computed
    # once by ``summarize``, so a copy made with ``dataclasses.replace`` keeps them.
    paired: list[ModelComparison] = field(default_factory=list)
    gate: GateResult | None = None
    # Per task, the content hashes of what it asks and checks (``suite.task_content_hashes``),
    # so a later run can say which tasks changed and in what.
    task_content: dict[str, dict[str, str]] = field(default_factory=dict)
    # The weights behind each model string where the adapter recorded them (an Ollama
    # model's digest): model -> {adapter, digest}; two builds of one model are told apart.
    model_builds: dict[str, dict[str, str]] = field(default_factory=dict)
    # --evalmine-run-name: the name this run shares with others, read back as NAME or NAME~K
    # (spec "Report files"), and the name every shard of a run shares (spec "Shards").
    run_name: str | None = None
    # This run is shard K of N of its run name: {"index": K, "count": N}; None otherwise.
    shard: dict[str, int] | None = None
    # A run ``evalmine merge`` built: the run ids of the partial runs it was built from.
    merged_from: list[str] | None = None

    @cached_property
    def ranking(self) -> dict[str, Any] | None:
        """report.json's ``ranking``, built once: its bootstrap fits every draw, and report.json
        and the sections both read it."""
        return summary_ranking(self)

    @cached_property
    def label_suggestions(self) -> list[Suggestion]:
        """The judged pairs worth a label (``label_next``), built once: report.md, the
        terminal and report.html all list them."""
        if self.headline is None:
            return []
        return label_next(self.headline.pair_dicts, self.headline.calibration.min_labels)

    @cached_property
    def power(self) -> dict[str, Any]:
        """report.json's ``power``, built once: its kappa intervals draw their posteriors,
        and report.json, report.md and the terminal's sections all read it."""
        return summary_power(self)

    @property
    def builds(self) -> str | None:
        """``MODEL digest D, ...`` for the models whose adapter recorded the weights
        behind the name (``model_builds``), so two builds of one model are told apart."""
        if not self.model_builds:
            return None
        shown = [
            f"{model} digest {self.model_builds[model]['digest'][:19]}"
            for model in self.models
            if model in self.model_builds
        ]
        return ", ".join(shown)

    @property
    def exec_sandbox(self) -> str | None:
        """The sandbox the execution checks ran in (spec: "Execution checks"): the weaker
        when both ran; None when none ran (a stored run of an older version records none)."""
        kinds = {
            run.get("sandbox")
            for record in self.records
            for check in record.checks
            if check["name"] == "exec"
            for run in check.get("runs") or ()
        }
        if RESOURCE_LIMITS in kinds:
            return RESOURCE_LIMITS
        return BUBBLEWRAP if BUBBLEWRAP in kinds else None

    @property
    def regression_failures(self) -> list[AnswerRecord]:
        """Items of regression tasks that did not pass, for any reason (A4: every model must
        pass every case)."""
        return [
            r for r in self.records if r.task in self.regression_tasks and r.outcome != "passed"
        ]

    @property
    def answers_spent_usd(self) -> float:
        return sum(r.cost_usd for r in self.records)

    @property
    def judge_spent_usd(self) -> float:
        """Pairwise and binary judges together."""
        binary = self.binary.cost_usd if self.binary else 0.0
        return (self.headline.judge_cost_usd if self.headline else 0.0) + binary

    @property
    def spent_usd(self) -> float:
        return self.answers_spent_usd + self.judge_spent_usd

    @property
    def possibly_billed_usd(self) -> float:
        """Worst case of calls sent that failed (answers and judge): the provider may bill
        them, so the cap counted them; not part of ``spent_usd``."""
        judge = self.headline.judge_possibly_billed_usd if self.headline else 0.0
        judge += self.binary.possibly_billed_usd if self.binary else 0.0
        return sum(r.possibly_billed_usd for r in self.records) + judge

    @property
    def tries_possibly_billed(self) -> int:
        """Tries sent that failed (answers and judge), each counted: a call retried after
        two lost tries is two."""
        calls: list[Any] = list(self.records) + list(self._verdicts)
        if self.headline:
            calls += [j for p in self.headline.all_pairs for j in p.calls]
        return sum(call.tries_possibly_billed for call in calls)

    @property
    def calls_possibly_billed(self) -> int:
        judge = (
            sum(1 for p in self.headline.all_pairs for j in p.calls if j.possibly_billed_usd)
            if self.headline
            else 0
        )
        judge += sum(1 for v in self._verdicts if v.possibly_billed_usd)
        return sum(1 for r in self.records if r.possibly_billed_usd) + judge

    @property
    def answers_in_batch(self) -> list[AnswerRecord]:
        """Answers still in a provider batch when the run stopped waiting: sent, not failed;
        billed when the batch completes, and collected by a rerun (spec: "Batch")."""
        return [r for r in self.records if (r.error or "").startswith(IN_BATCH_ERROR)]

    @property
    def usage_anomalies(self) -> list[dict[str, str]]:
        """Calls whose usage the dispatcher clamped: the answers', then the pairwise judge's
        (``model`` the judge), then the binary judges'."""
        rows = [
            {
                "task": r.task,
                "case": r.case,
                "model": r.model,
                "call": "answer",
                "anomaly": r.usage_anomaly,
            }
            for r in self.records
            if r.usage_anomaly
        ]
        if self.headline:
            judge = self.headline.judge.model
            rows += [
                {"task": p.task, "case": p.case, "model": judge, "call": "judge", "anomaly": a}
                for p in self.headline.all_pairs
                for j in p.calls
                if (a := j.usage_anomaly)
            ]
        if self.binary:
            judge = self.binary.judge["model"]
            rows += [
                {"task": v.task, "case": v.case, "model": judge, "call": "criterion", "anomaly": a}
                for v in self._verdicts
                if (a := v.usage_anomaly)
            ]
        return rows

    @property
    def if_uncached_usd(self) -> float:
        judge = self.headline.judge_cost_if_uncached_usd if self.headline else 0.0
        judge += self.binary.cost_if_uncached_usd if self.binary else 0.0
        return sum(r.cost_if_uncached_usd for r in self.records) + judge

    @property
    def if_uncached_recorded_usd(self) -> float:
        """``if_uncached_usd`` at the prices each cached call was paid at (answers and
        judge): it differs from today's figure only when the price table changed since."""
        calls: list[Any] = list(self.records) + list(self._verdicts)
        if self.headline:
            calls += [j for p in self.headline.all_pairs for j in p.calls]
        return sum(call.cost_as_recorded_usd for call in calls)

    @property
    def outcomes(self) -> dict[str, int]:
        return dict(sorted(Counter(r.outcome for r in self.records).items()))

    @property
    def budget_stopped(self) -> bool:
        """The cap stopped an answer or a judge call of this run."""
        judge = self.headline is not None and self.headline.judge_passes_with("budget") > 0
        judge = judge or any(v.status == "budget" for v in self._verdicts)
        return judge or any(
            r.outcome == "not_run_budget" or CAP_REFUSED_RETRY in (r.error or "")
            for r in self.records
        )

    @property
    def replay_misses(self) -> int:
        """Answers and judge verdicts record mode none needed and the cache did not hold."""
        judge = self.headline.judge_passes_with("replay_miss") if self.headline else 0
        judge += sum(1 for v in self._verdicts if v.status == "replay_miss")
        return judge + sum(1 for r in self.records if r.outcome == "replay_miss")

    @property
    def batch_waiting(self) -> list[dict[str, Any]]:
        """The batches this run stopped waiting for, with how many of its calls each holds."""
        return list(self.batches.get("waiting", [])) if self.batches else []

    @property
    def judge_failures(self) -> dict[str, int]:
        """The pairwise judge's failed calls by reason (``Headline.judge_failures``)."""
        return self.headline.judge_failures if self.headline else {}

    @property
    def partial(self) -> bool:
        return (
            self.stopped is not None
            or self.budget_stopped
            or bool(self.batch_waiting)
            or bool(self.judge_failures)
        )

    @property
    def partial_reason(self) -> str | None:
        if self.stopped is not None:
            return f"{self.stopped}, not judged"
        if self.budget_stopped:
            return "cost cap reached; some calls were not made"
        if self.judge_failures and not self.batch_waiting:
            failed = sum(self.judge_failures.values())
            return f"{failed} judge call(s) failed; the pairs they judged are excluded"
        if self.batch_waiting:
            return (
                "; ".join(
                    f"{entry['calls']} call(s) still in batch {entry['batch_id']}"
                    for entry in self.batch_waiting
                )
                + "; rerun to collect them"
            )
        return None

    @property
    def items_not_run(self) -> int:
        """Items pytest never ran whose answers were dispatched (and are counted here)."""
        return sum(1 for r in self.records if not r.item_ran)

    @property
    def redactions(self) -> int:
        """API keys replaced by ``[redacted]`` in this run's answers, verdicts and errors."""
        pairs = self.headline.all_pairs if self.headline else []
        judged = sum(j.redactions for pair in pairs for j in pair.calls)
        judged += sum(v.redactions for v in self._verdicts)
        return sum(r.redactions for r in self.records) + judged

    @property
    def _verdicts(self) -> list[CriterionVerdict]:
        return self.binary.verdicts if self.binary else []

    @property
    def calls_made(self) -> int:
        return sum(1 for r in self.records if r.reached_server)

    @property
    def calls_cached(self) -> int:
        return sum(1 for r in self.records if r.cached)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "tool": {"name": "pytest-evalmine", "version": __version__},
            "run_id": self.run_id,
            "run_name": self.run_name,
            "shard": self.shard,
            "merged_from": self.merged_from,
            "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "suite": {
                "name": self.suite_name,
                "file": self.suite_file,
                "hash": self.suite_hash,
                "task_hashes": self.task_hashes,
                "task_content": self.task_content,
                "label_counts": self.label_counts,
            },
            "models": self.models,
            "model_builds": self.model_builds,
            "baseline": self.models[0] if self.models else None,
            "models_hash": self.models_hash,
            "partial": self.partial,
            "partial_reason": self.partial_reason,
            "items": len(self.records),
            "items_not_run": self.items_not_run,
            "replay_misses": self.replay_misses,
            "latest_note": self.latest_note,
            "outcomes": self.outcomes,
            "calls": {"made": self.calls_made, "cached": self.calls_cached},
            "redactions": self.redactions,
            "concurrency": self.concurrency,
            "batches": self.batches,
            "cost": {
                "cap_usd": self.cap_usd,
                "cap_source": self.cap_source,
                "estimate_usd": self.estimate_usd,
                "worst_case_usd": self.worst_case_usd,
                "spent_usd": self.spent_usd,
                "answers_spent_usd": self.answers_spent_usd,
                "judge_spent_usd": self.judge_spent_usd,
                "if_uncached_usd": self.if_uncached_usd,
                "if_uncached_recorded_usd": self.if_uncached_recorded_usd,
                "possibly_billed_usd": self.possibly_billed_usd,
                "possibly_billed_calls": self.calls_possibly_billed,
                "possibly_billed_tries": self.tries_possibly_billed,
                "prices_pinned": self.prices_pinned,
            },
            "usage_anomalies": self.usage_anomalies,
            "exec_sandbox": self.exec_sandbox,
            "record_mode": self.record_mode,
            "adapter_routing": self.adapter_routing,
            "scorecard": [score.to_dict() for score in self.scores],
            "scores": [row.to_dict() for row in self.task_scores],
            "score_only": self.score_only,
            "headline": self.headline.to_dict() if self.headline else None,
            "judge_note": self.judge_note,
            "repeats": self.repeats,
            "scored_tasks": list(self.scored_tasks),
            "binary_judges": self.binary.to_dict() if self.binary else None,
            "binary_judges_note": self.binary_note,
            "paired": [comparison.to_dict() for comparison in self.paired],
            "power": self.power,
            "ranking": self.ranking,
            "gate": self.gate.to_dict() if self.gate else None,
            "regressions": {
                "tasks": list(self.regression_tasks),
                "failed": [
                    {
                        "task": r.task,
                        "case": r.case,
                        "model": r.model,
                        "outcome": r.outcome,
                        "reason": failure_reason(r),
                    }
                    for r in self.regression_failures
                ],
            },
            "changes": self.changes,
            "command": self.command,
        }


def failure_reason(record: AnswerRecord) -> str:
    """Why an item did not pass, in one line: its error, else its first failed check."""
    if record.error:
        return record.error
    failed = next((c for c in record.checks if not c["passed"]), None)
    return f"{failed['name']}: {failed['message']}" if failed else ""


def summarize(
    *,
    run_id: str,
    records: Sequence[AnswerRecord],
    models: list[str],
    models_hash: str,
    suite_name: str,
    suite_file: str,
    suite_hash: str,
    latency_widths: dict[str, int] | None = None,
    **context: Any,
) -> RunSummary:
    ordered = sorted(records, key=lambda r: (r.task, r.case, models.index(r.model), r.repeat))
    paired = compare_models(ordered, models, suite_hash, context.get("scored_tasks", ()))
    summary = RunSummary(
        run_id=run_id,
        suite_name=suite_name,
        suite_file=suite_file,
        suite_hash=suite_hash,
        models=models,
        models_hash=models_hash,
        records=ordered,
        scores=score_models(ordered, models, latency_widths),
        task_scores=task_scores(ordered, models, suite_hash),
        paired=paired,
        **context,
    )
    gate_config = summary.gate_config
    if gate_config is None:
        return summary
    gate = evaluate_gate(gate_config, summary.headline, paired, len(summary.regression_failures))
    return dataclasses.replace(summary, gate=gate)
