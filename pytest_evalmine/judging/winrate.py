"""Win rates, flip rate and the judge's position bias, each gated for the headline
(spec: "Win rate")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..stats.estimators import Interval, interval_dict, mean, seed_from
from ..stats.proportions import Proportion
from ..stats.resample import Cluster, mean_interval
from ..suite.model import DEFAULT_MIN_PAIRS
from .calibration import MAX_FLIP_RATE, Calibration
from .pairs import Pair


@dataclass(frozen=True)
class PositionBias:
    """How often the winner sat in slot 1, over passes with a decisive winner. Judging both
    orders cancels it out of the score, but a judge that favours a slot is reading the
    order, not the answers: significantly away from 1/2 (the Wilson interval excludes it)
    is flagged."""

    decisive_passes: int
    slot_1_wins: int

    @property
    def share(self) -> Proportion:
        return Proportion(self.slot_1_wins, self.decisive_passes)

    @property
    def slot_1_share(self) -> float | None:
        return self.share.value

    @property
    def flagged(self) -> bool:
        interval = self.share.interval
        return interval is not None and not interval.low <= 0.5 <= interval.high

    def describe(self) -> str:
        interval = self.share.interval
        shown = f" [{100 * interval.low:.1f}%, {100 * interval.high:.1f}%]" if interval else ""
        share = "-" if self.slot_1_share is None else f"{100 * self.slot_1_share:.1f}%"
        return f"slot 1 won {share}{shown} of {self.decisive_passes} decisive passes"

    def to_dict(self) -> dict[str, Any]:
        return {
            "decisive_passes": self.decisive_passes,
            "slot_1_wins": self.slot_1_wins,
            "slot_1_share": self.slot_1_share,
            "interval": interval_dict(self.share.interval),
            "flagged": self.flagged,
        }


@dataclass
class WinRate:
    candidate: str
    task: str | None  # None: over every task
    n: int
    win_rate: float | None
    interval: Interval | None
    outcomes: dict[str, int]
    calibration_labels: int = 0  # the labels of this candidate that back the row
    headline_eligible: bool = False
    ineligible_reasons: list[str] = field(default_factory=list)

    @property
    def flips(self) -> Proportion:
        return Proportion(self.outcomes.get("flip", 0), self.n)

    @property
    def flip_rate(self) -> float | None:
        return self.flips.value

    def title(self) -> str:
        return f"over schema-passing pairs only, n={self.n}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "task": self.task,
            "title": self.title(),
            "n": self.n,
            "win_rate": self.win_rate,
            "interval": interval_dict(self.interval),
            "outcomes": self.outcomes,
            "flip_rate": self.flip_rate,
            "flip_rate_interval": interval_dict(self.flips.interval),
            "calibration_labels": self.calibration_labels,
            "headline_eligible": self.headline_eligible,
            "flag": None if self.headline_eligible else "UNCALIBRATED",
            "ineligible_reasons": self.ineligible_reasons,
        }


OUTCOME_NAMES = ("win", "loss", "tie", "soft_win", "soft_loss", "flip")


def win_rate(pairs: Sequence[Pair], candidate: str, task: str | None, seed_text: str) -> WinRate:
    judged = [p for p in pairs if p.judged and p.candidate == candidate]
    if task is not None:
        judged = [p for p in judged if p.task == task]
    scores = [p.score for p in judged if p.score is not None]
    interval = mean_interval(
        [Cluster("", score, 1) for score in scores],
        low_end=0.0,
        high_end=1.0,
        seed=seed_from(seed_text, "win_rate", candidate, task or ""),
    )
    counted = Counter(p.outcome for p in judged)
    return WinRate(
        candidate=candidate,
        task=task,
        n=len(judged),
        win_rate=mean(scores),
        interval=interval,
        outcomes={name: counted.get(name, 0) for name in OUTCOME_NAMES},
    )


def win_rates(
    pairs: Sequence[Pair],
    candidates: Sequence[str],
    calibrations: Mapping[str, Calibration],
    seed_text: str,
    *,
    min_pairs: int = DEFAULT_MIN_PAIRS,
) -> tuple[list[WinRate], list[WinRate]]:
    """(overall per candidate, per candidate and task worst first), each gated for the
    headline on its own candidate's calibration and position bias and on its own flip rate
    and number of pairs (below ``min_pairs`` a row is shown, never a headline: a handful of
    pairs says little whatever its interval)."""
    overall = [win_rate(pairs, c, None, seed_text) for c in candidates]
    per_task = [
        win_rate(pairs, c, task, seed_text)
        for c in candidates
        for task in sorted({p.task for p in pairs if p.candidate == c})
    ]
    biases = {c: position_bias([p for p in pairs if p.candidate == c]) for c in candidates}
    for rate in overall + per_task:
        calibration = calibrations[rate.candidate]
        rate.calibration_labels = calibration.kappa.n
        rate.ineligible_reasons = ineligible_reasons(
            rate, calibration, biases[rate.candidate], min_pairs
        )
        rate.headline_eligible = not rate.ineligible_reasons
    per_task.sort(key=lambda r: (r.win_rate is None, r.win_rate or 0.0, r.candidate, r.task or ""))
    return overall, per_task


def ineligible_reasons(
    rate: WinRate, calibration: Calibration, bias: PositionBias, min_pairs: int
) -> list[str]:
    """Why a win rate may not be a headline, in the order checked (empty: eligible)."""
    reasons = []
    if not calibration.passed:
        reasons.append(
            f"{calibration.status}: {calibration.reason()} (labels for {rate.candidate})"
        )
    flips = rate.flip_rate
    if flips is not None and flips > MAX_FLIP_RATE:
        reasons.append(
            f"flip rate {flips:.2f} > {MAX_FLIP_RATE:.2f}: the verdicts follow the "
            "presentation order, not quality"
        )
    if bias.flagged:
        reasons.append(f"position bias: {bias.describe()}, significantly away from 50%")
    if rate.n == 0:
        reasons.append("no judged pairs")
    elif rate.n < min_pairs:
        reasons.append(f"only {rate.n} judged pairs; a headline needs at least {min_pairs}")
    return reasons


def position_bias(pairs: Sequence[Pair]) -> PositionBias:
    # A panel's pair: one pass per order, the slot most of its jurors chose (bias_passes).
    decisive = [p for pair in pairs for p in pair.bias_passes if p.winner_slot in ("1", "2")]
    return PositionBias(len(decisive), sum(p.winner_slot == "1" for p in decisive))


def exclusions(pairs: Sequence[Pair]) -> dict[str, dict[str, int]]:
    """Excluded pairs counted by reason, per candidate."""
    table: dict[str, Counter[str]] = {}
    for pair in pairs:
        if pair.excluded:
            table.setdefault(pair.candidate, Counter())[pair.excluded] += 1
    return {candidate: dict(sorted(counts.items())) for candidate, counts in sorted(table.items())}
