"""Win rates, flip rate and the judge's position bias (spec: "Win rate")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..stats.estimators import Interval, mean, percentile_bootstrap, seed_from
from .calibration import MAX_FLIP_RATE, Calibration
from .pairs import Pair


@dataclass
class WinRate:
    candidate: str
    task: str | None  # None: over every task
    n: int
    win_rate: float | None
    interval: Interval | None
    outcomes: dict[str, int]
    flip_rate: float | None
    headline_eligible: bool = False
    ineligible_reasons: list[str] = field(default_factory=list)

    def title(self) -> str:
        return f"over schema-passing pairs only, n={self.n}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "task": self.task,
            "title": self.title(),
            "n": self.n,
            "win_rate": self.win_rate,
            "interval": self.interval.to_dict() if self.interval else None,
            "outcomes": self.outcomes,
            "flip_rate": self.flip_rate,
            "headline_eligible": self.headline_eligible,
            "flag": None if self.headline_eligible else "UNCALIBRATED",
            "ineligible_reasons": self.ineligible_reasons,
        }


@dataclass(frozen=True)
class PositionBias:
    decisive_passes: int
    slot_1_wins: int

    @property
    def slot_1_share(self) -> float | None:
        return self.slot_1_wins / self.decisive_passes if self.decisive_passes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "decisive_passes": self.decisive_passes,
            "slot_1_wins": self.slot_1_wins,
            "slot_1_share": self.slot_1_share,
        }


OUTCOME_NAMES = ("win", "loss", "tie", "soft_win", "soft_loss", "flip")


def win_rate(pairs: Sequence[Pair], candidate: str, task: str | None, seed_text: str) -> WinRate:
    judged = [p for p in pairs if p.judged and p.candidate == candidate]
    if task is not None:
        judged = [p for p in judged if p.task == task]
    scores = [p.score for p in judged if p.score is not None]
    interval, _ = percentile_bootstrap(
        scores, mean, seed=seed_from(seed_text, "win_rate", candidate, task or "")
    )
    counted = Counter(p.outcome for p in judged)
    return WinRate(
        candidate=candidate,
        task=task,
        n=len(judged),
        win_rate=mean(scores),
        interval=interval,
        outcomes={name: counted.get(name, 0) for name in OUTCOME_NAMES},
        flip_rate=counted.get("flip", 0) / len(judged) if judged else None,
    )


def win_rates(
    pairs: Sequence[Pair], candidates: Sequence[str], calibration: Calibration, seed_text: str
) -> tuple[list[WinRate], list[WinRate]]:
    """(overall per candidate, per candidate and task worst first), each flagged with the
    headline gate: calibration passed and the candidate's flip rate at most 0.30."""
    overall = [win_rate(pairs, c, None, seed_text) for c in candidates]
    per_task = [
        win_rate(pairs, c, task, seed_text)
        for c in candidates
        for task in sorted({p.task for p in pairs if p.candidate == c})
    ]
    flip_by_candidate = {rate.candidate: rate.flip_rate for rate in overall}
    for rate in overall + per_task:
        reasons = [] if calibration.passed else [f"{calibration.status}: {calibration.reason()}"]
        flips = flip_by_candidate[rate.candidate]
        if flips is not None and flips > MAX_FLIP_RATE:
            reasons.append(
                f"flip rate {flips:.2f} > {MAX_FLIP_RATE:.2f}: the verdicts follow the "
                "presentation order, not quality"
            )
        if rate.n == 0:
            reasons.append("no judged pairs")
        rate.ineligible_reasons = reasons
        rate.headline_eligible = not reasons
    per_task.sort(key=lambda r: (r.win_rate is None, r.win_rate or 0.0, r.candidate, r.task or ""))
    return overall, per_task


def position_bias(pairs: Sequence[Pair]) -> PositionBias:
    decisive = [p for pair in pairs for p in pair.passes if p.winner_slot in ("1", "2")]
    return PositionBias(len(decisive), sum(p.winner_slot == "1" for p in decisive))


def exclusions(pairs: Sequence[Pair]) -> dict[str, dict[str, int]]:
    """Excluded pairs counted by reason, per candidate."""
    table: dict[str, Counter[str]] = {}
    for pair in pairs:
        if pair.excluded:
            table.setdefault(pair.candidate, Counter())[pair.excluded] += 1
    return {candidate: dict(sorted(counts.items())) for candidate, counts in sorted(table.items())}
