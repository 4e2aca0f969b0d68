"""The audit sample and the prediction-powered estimate of the user's own preference
(spec: "Prediction-powered estimates"): the judge's score on every judged pair, corrected
by the user's labels on a random sample of them.

A label counts here only when its pair is in the audit sample, chosen by a hash of (task,
case, candidate) before any verdict or label exists. Labels picked by "Label next" (flips,
contradictions) are chosen *because* the judge struggled there: they measure the judge
(kappa), but as a sample of the user's preference they are biased, so outside the audit
sample they stay out of the estimate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..stats.ppi import PPIEstimate, ppi_mean
from ..stats.sampling import HASH_RULE, hash_rank, in_hash_sample
from ..suite.model import Suite
from .pairs import Pair

# The default audit fraction aims at this many pairs per candidate.
AUDIT_PAIRS_PER_CANDIDATE = 30
# The fewest audit labels for a headline whatever the suite's min_labels: at 10 the interval
# covered 0.90 for a judge biased to one side, at 20 0.93 and more (benchmarks/sim_ppi.py).
PPI_MIN_LABELS = 20
HUMAN_SCORE = {"candidate": 1.0, "tie": 0.5, "baseline": 0.0}
AUDIT_HASH = HASH_RULE.replace("ids", "task, case, candidate")


def judged_cases(suite: Suite) -> int:
    """The pairs each candidate has in a full run of the suite: the cases of judged tasks."""
    return sum(len(task.cases) for task in suite.tasks if task.judge)


def audit_fraction(suite: Suite) -> float:
    """The suite's ``judge.audit.fraction``, else the share of its judged cases that puts
    about ``AUDIT_PAIRS_PER_CANDIDATE`` pairs of each candidate in the sample. Fixed by the
    suite, not the run: a run of some of its tasks has the same sample, fewer pairs of it."""
    if suite.judge.audit_fraction is not None:
        return suite.judge.audit_fraction
    return min(1.0, AUDIT_PAIRS_PER_CANDIDATE / max(1, judged_cases(suite)))


def in_audit_sample(task: str, case: str, candidate: str, fraction: float) -> bool:
    return in_hash_sample(fraction, task, case, candidate)


def audit_rank(task: str, case: str, candidate: str) -> int:
    """The audit sample's own labelling order (report.html): a random order, and any prefix
    of it is a random sample too, so stopping early keeps the labels usable."""
    return hash_rank(task, case, candidate)


def mark_audit_sample(pairs: Sequence[Pair], fraction: float) -> None:
    for pair in pairs:
        pair.audit = in_audit_sample(pair.task, pair.case, pair.candidate, fraction)


@dataclass
class AuditEstimate:
    """One candidate's prediction-powered win rate over its judged pairs."""

    candidate: str
    fraction: float
    judged: int  # N: judged pairs (the raw win rate's n)
    sample_pairs: int  # judged pairs in the audit sample
    audit_labels: int  # of them labelled: n
    other_labels: int  # labelled judged pairs outside the sample: in kappa, not here
    min_labels: int  # the suite's; a headline needs max(min_labels, PPI_MIN_LABELS)
    estimate: PPIEstimate | None
    ineligible_reasons: list[str] = field(default_factory=list)

    @property
    def headline_eligible(self) -> bool:
        return not self.ineligible_reasons

    def describe(self) -> str:
        """``human-preference estimate (PPI): 47.1% [38.0%, 56.3%] from 24 audit labels +
        200 judged pairs (effective n 61)``."""
        head = "human-preference estimate (PPI)"
        counts = f"{self.audit_labels} audit labels + {self.judged} judged pairs"
        if self.estimate is None:
            return f"{head}: - ({counts}; it needs at least 2 audit labels)"
        e = self.estimate
        effective = "-" if e.effective_n is None else f"{e.effective_n:.0f}"
        return (
            f"{head}: {100 * e.value:.1f}% [{100 * e.interval.low:.1f}%, "
            f"{100 * e.interval.high:.1f}%] from {counts} (effective n {effective})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "fraction": self.fraction,
            "judged": self.judged,
            "sample_pairs": self.sample_pairs,
            "audit_labels": self.audit_labels,
            "other_labels": self.other_labels,
            "min_labels": self.min_labels,
            **(self.estimate.to_dict() if self.estimate else _NO_ESTIMATE),
            "headline_eligible": self.headline_eligible,
            "ineligible_reasons": self.ineligible_reasons,
            "text": self.describe(),
        }


_NO_ESTIMATE: dict[str, Any] = {
    key: None
    for key in (
        "estimate",
        "unclipped",
        "standard_error",
        "interval",
        "labels",
        "lambda",
        "effective_n",
        "labels_only",
        "labels_only_interval",
    )
}


def audit_estimate(
    pairs: Sequence[Pair], candidate: str, fraction: float, min_labels: int
) -> AuditEstimate:
    """The estimate from pairs whose ``label`` (the matched human label, set by calibration)
    and ``audit`` flag are already set. The judge's score is the pair's score, the one the raw
    win rate averages, so the two sit side by side."""
    judged = [p for p in pairs if p.judged and p.candidate == candidate and p.score is not None]
    sample = [p for p in judged if p.audit]
    labelled = [(HUMAN_SCORE[p.label], p.score) for p in sample if p.label is not None]
    estimate = ppi_mean(labelled, [p.score for p in judged if p.score is not None])
    reasons = []
    needed = max(min_labels, PPI_MIN_LABELS)
    if estimate is None:
        reasons.append(f"{len(labelled)} audit labels; an estimate needs at least 2")
    elif len(labelled) < needed:
        reasons.append(
            f"only {len(labelled)} labels in the audit sample; a headline needs {needed}"
        )
    return AuditEstimate(
        candidate=candidate,
        fraction=fraction,
        judged=len(judged),
        sample_pairs=len(sample),
        audit_labels=len(labelled),
        other_labels=sum(p.label is not None for p in judged if not p.audit),
        min_labels=min_labels,
        estimate=estimate,
        ineligible_reasons=reasons,
    )


def audit_estimates(
    pairs: Sequence[Pair], candidates: Sequence[str], fraction: float, min_labels: int
) -> dict[str, AuditEstimate]:
    return {c: audit_estimate(pairs, c, fraction, min_labels) for c in candidates}
