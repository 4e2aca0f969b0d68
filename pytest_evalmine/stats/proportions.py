"""Proportions with their Wilson score interval (spec: "Statistics"): the one place a rate
and its interval are computed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from .estimators import CONFIDENCE, Interval, interval_dict


def normal_quantile(confidence: float = CONFIDENCE) -> float:
    """z with P(|Z| <= z) = confidence (1.959963984540054 at 95 %)."""
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval | None:
    """Wilson (1927) score interval: never zero-width at 0/n or n/n, unlike the Wald
    interval, and close to nominal coverage even for small n (Brown, Cai & DasGupta 2001)."""
    if n <= 0:
        return None
    return _wilson(successes / n, n, confidence)


def _wilson(p: float, n: float, confidence: float) -> Interval:
    z = normal_quantile(confidence)
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    # At 0/n and n/n the bound is exactly 0 (1); rounding would leave 1e-17 off it.
    low = 0.0 if p == 0 else centre - half
    high = 1.0 if p == 1 else centre + half
    return Interval(low, high)


def effective_sample_size(clusters: Sequence[tuple[int, int]]) -> float:
    """n / deff for a proportion over clusters of (successes, trials), e.g. a case's repeats.
    deff (Kish) is the cluster-robust variance of the ratio estimator,
    k/(k-1) sum (y_i - p m_i)^2 / n^2 over k clusters, divided by the independent p(1-p)/n.
    Clamped to [k, n]: repeats never count for less than their cases (deff <= cluster size)
    nor for more than independent answers; at p = 0 or 1 nothing shows how alike repeats
    are, so the cases count (k)."""
    n = sum(trials for _, trials in clusters)
    k = len(clusters)
    p = sum(successes for successes, _ in clusters) / n
    if k < 2 or p in (0.0, 1.0):
        return float(k)
    spread = sum((successes - p * trials) ** 2 for successes, trials in clusters)
    variance = k / (k - 1) * spread / (n * n)
    if variance == 0:
        return float(n)
    return min(float(n), max(float(k), p * (1 - p) / variance))


def clustered_wilson_interval(
    clusters: Sequence[tuple[int, int]], confidence: float = CONFIDENCE
) -> Interval | None:
    """The Wilson interval at the effective sample size (Korn & Graubard 1998's approach for
    clustered proportions): for answers that come in correlated groups, such as repeats."""
    n = sum(trials for _, trials in clusters)
    if n <= 0:
        return None
    successes = sum(successes for successes, _ in clusters)
    return _wilson(successes / n, effective_sample_size(clusters), confidence)


@dataclass(frozen=True)
class Proportion:
    """successes / n with its 95 % Wilson interval; every rate the reports show is one."""

    successes: int
    n: int
    # (successes, trials) per group of correlated answers (a case's repeats); when a group
    # has more than one answer, the interval is the clustered Wilson interval.
    clusters: tuple[tuple[int, int], ...] = ()

    @property
    def value(self) -> float | None:
        return self.successes / self.n if self.n else None

    @property
    def clustered(self) -> bool:
        return any(trials > 1 for _, trials in self.clusters)

    @property
    def interval(self) -> Interval | None:
        if self.clustered:
            return clustered_wilson_interval(self.clusters)
        return wilson_interval(self.successes, self.n)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "successes": self.successes,
            "n": self.n,
            "rate": self.value,
            "interval": interval_dict(self.interval),
        }
        if self.clustered:
            data["effective_n"] = effective_sample_size(self.clusters)
        return data
