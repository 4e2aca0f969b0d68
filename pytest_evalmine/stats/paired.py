"""Paired comparison of two versions on the same cases (spec: "Statistics", "Paired
comparison"): the per-case delta B - A with a clustered, stratified interval, exact McNemar
on pass/fail, which cases got worse or better, and the noise floor from repeats. Over plain
score sequences; the caller says what a score is."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .estimators import Interval, interval_dict, mean
from .proportions import normal_quantile
from .resample import RESAMPLES, Cluster, mean_interval


@dataclass(frozen=True)
class PairedCase:
    """One case scored for A and B (scores in [0, 1], one per repeat, paired by repeat).
    ``stratum`` is what the interval resamples within (a task)."""

    stratum: str
    case: str
    a: tuple[float, ...]
    b: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.a or len(self.a) != len(self.b):
            raise ValueError(f"case {self.case}: A and B need the same number of scores (>= 1)")

    @property
    def delta(self) -> float:
        """B - A, the mean over the repeats."""
        return sum(self.b) / len(self.b) - sum(self.a) / len(self.a)

    @property
    def a_passed(self) -> bool:
        """Passed in every repeat (score 1)."""
        return all(score >= 1 for score in self.a)

    @property
    def b_passed(self) -> bool:
        return all(score >= 1 for score in self.b)


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on the discordant cases: ``a_only`` passed for A only, ``b_only``
    for B only. Under no difference, b_only ~ Binomial(a_only + b_only, 1/2)."""

    a_only: int
    b_only: int
    p_value: float
    mid_p_value: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "a_only": self.a_only,
            "b_only": self.b_only,
            "p_value": self.p_value,
            "mid_p_value": self.mid_p_value,
        }


@dataclass(frozen=True)
class PairedComparison:
    cases: int
    observations: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None  # B - A over every observation
    interval: Interval | None
    worse: tuple[PairedCase, ...]  # B below A, largest drop first
    better: tuple[PairedCase, ...]  # B above A, largest gain first
    mcnemar: McNemar | None
    # Each side's noise floor (``noise_floor``), None without a case of two repeats.
    floor_a: float | None = None
    floor_b: float | None = None

    @property
    def noise_floor(self) -> float | None:
        """The comparison's floor: the noisier side's."""
        known = [f for f in (self.floor_a, self.floor_b) if f is not None]
        return max(known) if known else None

    @property
    def beyond_noise(self) -> bool | None:
        """True when the interval lies on one side of 0 and the delta exceeds the floor on
        that side; None when the floor is unknown (no repeats) or nothing was compared."""
        floor = self.noise_floor
        if floor is None or self.delta is None or self.interval is None:
            return None
        if self.interval.low > 0:
            return self.delta > floor
        if self.interval.high < 0:
            return -self.delta > floor
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "observations": self.observations,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "delta": self.delta,
            "interval": interval_dict(self.interval),
            "worse": len(self.worse),
            "better": len(self.better),
            "same": self.cases - len(self.worse) - len(self.better),
            "mcnemar": self.mcnemar.to_dict() if self.mcnemar else None,
            "noise_floor": {
                "baseline": self.floor_a,
                "candidate": self.floor_b,
                "floor": self.noise_floor,
            },
            "beyond_noise": self.beyond_noise,
        }


def noise_floor(repeats: Sequence[Sequence[float]]) -> float | None:
    """How far two single runs of one model on these cases drift apart by chance: the 95 %
    half-width z sqrt(2 W / n) of the difference of two runs' mean scores, where W is the
    mean over the n cases with two or more scores of their sample variance (ddof 1) over
    the repeats. With two repeats per case this is z sqrt(mean(d^2) / n), d the per-case
    difference between the repeats: the repeat-vs-repeat paired delta's half-width. None
    when no case has two scores."""
    variances = [statistics.variance(scores) for scores in repeats if len(scores) >= 2]
    if not variances:
        return None
    return normal_quantile() * math.sqrt(2 * sum(variances) / len(variances) / len(variances))


def mcnemar_exact(a_only: int, b_only: int) -> McNemar:
    """Two-sided exact p = min(1, 2 P(X <= min)) for X ~ Binomial(a_only + b_only, 1/2), and
    the mid-p value, that p minus P(X = min) (Fagerland, Lydersen & Laake 2013): the exact
    test is conservative, the mid-p close to nominal."""
    discordant = a_only + b_only
    if discordant == 0:
        return McNemar(a_only, b_only, 1.0, 1.0)
    smaller = min(a_only, b_only)
    # With p = 1/2 every outcome weighs 2^-n, so the tail is a sum of binomial coefficients:
    # exact integers, one division (correctly rounded). This keeps scipy.stats (about 80 MB
    # and half a second of import) out of every run.
    coefficient, tail = 1, 1
    for i in range(smaller):
        coefficient = coefficient * (discordant - i) // (i + 1)
        tail += coefficient
    outcomes = 1 << discordant
    p_value = min(1.0, 2 * tail / outcomes)
    mid_p = p_value - coefficient / outcomes
    return McNemar(a_only, b_only, p_value, mid_p)


def compare_paired(
    cases: Sequence[PairedCase],
    *,
    seed: int,
    resamples: int = RESAMPLES,
    with_mcnemar: bool = True,
) -> PairedComparison:
    """Paired delta B - A with its 95 % interval (cases are the clusters, resampled within
    their stratum, score deltas in [-1, 1]); McNemar on the cases' pass/fail unless
    ``with_mcnemar`` is false (fractional scores, whose 1 is not the pass verdict)."""
    a_scores = [score for case in cases for score in case.a]
    b_scores = [score for case in cases for score in case.b]
    clusters = [
        Cluster(case.stratum, sum(b - a for a, b in zip(case.a, case.b, strict=True)), len(case.a))
        for case in cases
    ]
    observations = sum(c.size for c in clusters)
    delta = sum(c.total for c in clusters) / observations if observations else None
    changed = [case for case in cases if case.delta != 0]
    return PairedComparison(
        cases=len(cases),
        observations=observations,
        mean_a=mean(a_scores),
        mean_b=mean(b_scores),
        delta=delta,
        interval=mean_interval(
            clusters, low_end=-1.0, high_end=1.0, seed=seed, resamples=resamples
        ),
        worse=tuple(sorted((c for c in changed if c.delta < 0), key=_change_order)),
        better=tuple(sorted((c for c in changed if c.delta > 0), key=_gain_order)),
        mcnemar=mcnemar_exact(
            sum(c.a_passed and not c.b_passed for c in cases),
            sum(c.b_passed and not c.a_passed for c in cases),
        )
        if cases and with_mcnemar
        else None,
        floor_a=noise_floor([case.a for case in cases]),
        floor_b=noise_floor([case.b for case in cases]),
    )


def _change_order(case: PairedCase) -> tuple[float, str, str]:
    return (case.delta, case.stratum, case.case)


def _gain_order(case: PairedCase) -> tuple[float, str, str]:
    return (-case.delta, case.stratum, case.case)
