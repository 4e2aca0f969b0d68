"""Session-finish judging of one suite: pairs, verdicts, calibration, win rates
(spec: "Judge", "Calibration", "Win rate"). Pure core: the plugin hands in records and a
dispatcher, and gets back one ``Headline`` for the reports."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..run.dispatch import Dispatcher
from ..run.outcome import ERROR
from ..run.records import AnswerRecord
from ..suite.model import Suite
from .audit import AUDIT_HASH, AuditEstimate, audit_estimates, audit_fraction, mark_audit_sample
from .calibration import (
    Calibration,
    calibrate_on_suite,
    calibrate_per_candidate,
    kappa_by_reference,
)
from .judge import JudgeRecord, judge_pairs, judge_panel, judge_record, task_prompt
from .pairs import Pair, apply_check_overrides, plan_pairs
from .panel import PanelReport, all_jurors, panel_report
from .winrate import PositionBias, WinRate, exclusions, position_bias, win_rates

DAGGER = "\u2020"


# A failed call's error ends with its tries (and why it was not retried): grouped without them.
_AFTER_ATTEMPTS = re.compile(r" \(after \d+ attempt\(s\)\).*$", re.DOTALL)


@dataclass
class Headline:
    judge: JudgeRecord
    pairs: list[Pair]
    calibration: Calibration  # pooled over every candidate: what the report's section shows
    calibrations: dict[str, Calibration]  # per candidate: what gates its win rates
    overall: list[WinRate]
    per_task: list[WinRate]
    bias: PositionBias
    excluded: dict[str, dict[str, int]] = field(default_factory=dict)
    # per candidate: the prediction-powered estimate from the audit sample's labels
    ppi: dict[str, AuditEstimate] = field(default_factory=dict)
    audit_fraction: float = 1.0
    # judge.pairs: all: the pairs of two candidates. The ranking reads them with ``pairs``;
    # the win rates, calibration and bias read ``pairs`` (each candidate vs the baseline).
    other_pairs: list[Pair] = field(default_factory=list)
    # judge.panel: each juror calibrated, and the panel against them (spec: "Judge panel")
    panel: PanelReport | None = None
    # kappa on the labelled pairs whose case has a reference answer, and on those without
    by_reference: dict[str, Any] | None = None

    @property
    def all_pairs(self) -> list[Pair]:
        return [*self.pairs, *self.other_pairs]

    @cached_property
    def pair_dicts(self) -> list[dict[str, Any]]:
        """Every pair as pairs.jsonl holds it, built once: pairs.jsonl, report.html and both
        "Label next" sections read them (a 10,000-case run has 10,000 pairs)."""
        return [pair.to_dict() for pair in self.all_pairs]

    @property
    def headline_eligible(self) -> bool:
        return bool(self.overall) and all(rate.headline_eligible for rate in self.overall)

    # The judge's calls and spend count every call of a pair (``Pair.calls``): its passes and
    # the unusable verdicts asked again, which were paid for too.
    @property
    def judge_calls_made(self) -> int:
        return sum(1 for p in self.all_pairs for j in p.calls if j.reached_server)

    @property
    def judge_calls_cached(self) -> int:
        return sum(1 for p in self.all_pairs for j in p.calls if j.cached)

    @property
    def judge_cost_usd(self) -> float:
        return sum(j.cost_usd for p in self.all_pairs for j in p.calls)

    @property
    def judge_cost_if_uncached_usd(self) -> float:
        return sum(j.cost_if_uncached_usd for p in self.all_pairs for j in p.calls)

    @property
    def judge_prompt_cache(self) -> dict[str, int]:
        """The provider's prompt cache over the judge calls made this run: how many read the
        cached prefix, and the tokens read from and written to it (report.json)."""
        made = [j for p in self.all_pairs for j in p.calls if j.attempts and not j.cached]
        return {
            "calls": len(made),
            "read": sum(1 for j in made if j.cached_input_tokens > 0),
            "cached_input_tokens": sum(j.cached_input_tokens for j in made),
            "cache_write_tokens": sum(j.cache_write_tokens for j in made),
        }

    def check_overrides(self, candidate: str) -> int:
        return sum(p.check_override for p in self.pairs if p.candidate == candidate)

    @property
    def judge_possibly_billed_usd(self) -> float:
        return sum(j.possibly_billed_usd for p in self.all_pairs for j in p.calls)

    @property
    def judge_failures(self) -> dict[str, int]:
        """The judge calls that failed (a provider's error, after its retries), by reason,
        most first: a dead judge server fails both orders of every pair, which the pairs'
        ``judge_error`` alone counts once."""
        reasons = Counter(
            _AFTER_ATTEMPTS.sub("", j.error or "unknown")
            for p in self.all_pairs
            for j in p.all_passes
            if j.error_kind == ERROR
        )
        return dict(reasons.most_common())

    def judge_passes_with(self, error_kind: str) -> int:
        """Judge passes that ended with ``error_kind`` (e.g. ``budget``, ``replay_miss``)."""
        return sum(1 for p in self.all_pairs for j in p.all_passes if j.error_kind == error_kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge.to_dict(),
            "headline_eligible": self.headline_eligible,
            "calibration": self.calibration.to_dict(),
            "calibration_per_candidate": {
                candidate: calibration.to_dict()
                for candidate, calibration in self.calibrations.items()
            },
            "win_rates": [rate.to_dict() for rate in self.overall],
            "win_rates_per_task": [rate.to_dict() for rate in self.per_task],
            "position_bias": self.bias.to_dict(),
            "position_bias_per_candidate": {
                rate.candidate: position_bias(
                    [p for p in self.pairs if p.candidate == rate.candidate]
                ).to_dict()
                for rate in self.overall
            },
            "exclusions": self.excluded,
            "audit": {"fraction": self.audit_fraction, "hash": AUDIT_HASH},
            "ppi": {candidate: estimate.to_dict() for candidate, estimate in self.ppi.items()},
            "check_overrides": {
                c.candidate: self.check_overrides(c.candidate) for c in self.overall
            },
            "pairs": {
                "total": len(self.pairs),
                "judged": sum(p.judged for p in self.pairs),
                "excluded": sum(p.excluded is not None for p in self.pairs),
                # judge.pairs: all: the pairs of two candidates, beside the baseline's
                "between_candidates": len(self.other_pairs),
            },
            "judge_calls": {"made": self.judge_calls_made, "cached": self.judge_calls_cached},
            "judge_cost": {
                "spent_usd": self.judge_cost_usd,
                "if_uncached_usd": self.judge_cost_if_uncached_usd,
                "possibly_billed_usd": self.judge_possibly_billed_usd,
            },
            "judge_prompt_cache": self.judge_prompt_cache,
            "panel": self.panel.to_dict() if self.panel else None,
            "calibration_by_reference": self.by_reference,
        }


def judged_task_ids(suite: Suite) -> set[str]:
    return {task.id for task in suite.tasks if task.judge}


def run_headline(
    suite: Suite,
    records: Sequence[AnswerRecord],
    models: Sequence[str],
    judge_model: str,
    dispatcher: Dispatcher,
    *,
    gate_on: str = "point",
    jurors: Mapping[str, Sequence[str]] | None = None,
) -> Headline:
    """``jurors``: task id -> its jurors for a panel (``panel.jurors_by_task``); None or {}:
    ``judge_model`` alone judges."""
    pairs = plan_pairs(records, models, judged_task_ids(suite), suite.judge.pairs)
    for pair in pairs:
        pair.prompt = task_prompt(suite, pair.task, pair.case)
    if jurors:
        judge_panel(pairs, records, suite, jurors, dispatcher)
    else:
        judge_pairs(pairs, records, suite, judge_model, dispatcher)
    apply_check_overrides(pairs, records)
    return headline_from_pairs(
        suite, pairs, models, judge_model, gate_on=gate_on, jurors=all_jurors(jurors or {})
    )


def headline_from_pairs(
    suite: Suite,
    pairs: list[Pair],
    models: Sequence[str],
    judge_model: str,
    *,
    gate_on: str = "point",
    jurors: Sequence[str] = (),
) -> Headline:
    """Calibration, win rates and bias of pairs already judged: after judging, and when a
    stored run's report is rendered again from its pairs.jsonl (no call, no cost). Pairs of
    two candidates (``judge.pairs: all``) feed the ranking only."""
    other_pairs = [p for p in pairs if p.baseline != models[0]]
    pairs = [p for p in pairs if p.baseline == models[0]]
    fraction = audit_fraction(suite)
    mark_audit_sample(pairs, fraction)
    calibration = calibrate_on_suite(suite, pairs, gate_on=gate_on)
    candidates = list(models[1:])
    calibrations = calibrate_per_candidate(
        suite.labels, pairs, candidates, calibration, seed_text=suite.hash
    )
    overall, per_task = win_rates(
        pairs, candidates, calibrations, suite.hash, min_pairs=suite.judge.min_pairs
    )
    panel = panel_report(suite, pairs, jurors, calibration, gate_on=gate_on) if jurors else None
    return Headline(
        judge=judge_record(suite, judge_model, jurors),
        panel=panel,
        by_reference=kappa_by_reference(suite, calibration),
        pairs=pairs,
        calibration=calibration,
        calibrations=calibrations,
        overall=overall,
        per_task=per_task,
        bias=position_bias(pairs),
        excluded=exclusions(pairs),
        ppi=audit_estimates(pairs, candidates, fraction, suite.judge.min_labels),
        audit_fraction=fraction,
        other_pairs=other_pairs,
    )
