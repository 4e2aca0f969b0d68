"""Paired comparison of two versions on the same cases (spec: "Statistics"): the per-case
delta B - A with a clustered, stratified interval, exact McNemar on pass/fail, and which
cases got worse or better. Over plain score sequences; the caller says what a score is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .estimators import Interval, interval_dict, mean
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
        }


def mcnemar_exact(a_only: int, b_only: int) -> McNemar:
    """Two-sided exact p = min(1, 2 P(X <= min)) for X ~ Binomial(a_only + b_only, 1/2), and
    the mid-p value, that p minus P(X = min) (Fagerland, Lydersen & Laake 2013): the exact
    test is conservative, the mid-p close to nominal."""
    from scipy.stats import binom

    discordant = a_only + b_only
    if discordant == 0:
        return McNemar(a_only, b_only, 1.0, 1.0)
    smaller = min(a_only, b_only)
    p_value = min(1.0, 2 * float(binom.cdf(smaller, discordant, 0.5)))
    mid_p = p_value - float(binom.pmf(smaller, discordant, 0.5))
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
    )


def _change_order(case: PairedCase) -> tuple[float, str, str]:
    return (case.delta, case.stratum, case.case)


def _gain_order(case: PairedCase) -> tuple[float, str, str]:
    return (-case.delta, case.stratum, case.case)
