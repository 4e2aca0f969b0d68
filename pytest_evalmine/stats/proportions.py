"""Proportions with their Wilson score interval (spec: "Statistics"): the one place a rate
and its interval are computed."""

from __future__ import annotations

import math
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
    z = normal_quantile(confidence)
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    # At 0/n and n/n the bound is exactly 0 (1); rounding would leave 1e-17 off it.
    low = 0.0 if successes == 0 else centre - half
    high = 1.0 if successes == n else centre + half
    return Interval(low, high)


@dataclass(frozen=True)
class Proportion:
    """successes / n with its 95 % Wilson interval; every rate the reports show is one."""

    successes: int
    n: int

    @property
    def value(self) -> float | None:
        return self.successes / self.n if self.n else None

    @property
    def interval(self) -> Interval | None:
        return wilson_interval(self.successes, self.n)

    def to_dict(self) -> dict[str, Any]:
        return {
            "successes": self.successes,
            "n": self.n,
            "rate": self.value,
            "interval": interval_dict(self.interval),
        }
