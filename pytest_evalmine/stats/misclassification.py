"""A pass rate measured by an imperfect binary judge, corrected for the judge's error rates
(spec: "Statistics", "Binary judges"): the Rogan-Gladen estimator with its delta-method
interval. Standard library only."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .estimators import CONFIDENCE, Interval, interval_dict
from .proportions import normal_quantile


@dataclass(frozen=True)
class CorrectedRate:
    """The true pass rate estimated from the judge's observed rate and its recalls."""

    value: float  # clipped to [0, 1]
    unclipped: float
    standard_error: float
    interval: Interval

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate": self.value,
            "unclipped": self.unclipped,
            "standard_error": self.standard_error,
            "interval": interval_dict(self.interval),
        }


def rogan_gladen(
    passed: int,
    n: int,
    true_passes: int,
    human_passes: int,
    true_fails: int,
    human_fails: int,
    confidence: float = CONFIDENCE,
) -> CorrectedRate | None:
    """Rogan & Gladen (1978): p = (q + s - 1) / (r + s - 1), with q = passed / n the judge's
    pass rate, r = true_passes / human_passes its PASS recall (sensitivity) and
    s = true_fails / human_fails its FAIL recall (specificity), the three estimated from
    independent samples. The delta method gives

        Var(p) = [q~(1-q~)/n + p^2 r~(1-r~)/n_P + (1-p)^2 s~(1-s~)/n_F] / (r + s - 1)^2

    (the partial derivatives are 1/J, -p/J and (1-p)/J with J = r + s - 1; p clipped to
    [0, 1] in them). The variances use the Agresti-Coull proportions x~ = (k + z^2/2) /
    (m + z^2): with the raw ones a recall of 1 on 20 labels has no variance at all and the
    interval covered 0.85 in simulation. The interval is p +- z sd, and it and p are clipped
    to [0, 1]. None when a sample is empty or J <= 0 (a judge no better than chance carries
    no information about the true rate)."""
    if min(n, human_passes, human_fails) <= 0:
        return None
    q = passed / n
    r = true_passes / human_passes
    s = true_fails / human_fails
    youden = r + s - 1
    if youden <= 0:
        return None
    p = (q + s - 1) / youden
    z = normal_quantile(confidence)
    weight = _clip(p)
    variance = (
        _binomial_variance(passed, n, z)
        + weight * weight * _binomial_variance(true_passes, human_passes, z)
        + (1 - weight) * (1 - weight) * _binomial_variance(true_fails, human_fails, z)
    ) / (youden * youden)
    sd = math.sqrt(variance)
    return CorrectedRate(
        value=_clip(p),
        unclipped=p,
        standard_error=sd,
        interval=Interval(_clip(p - z * sd), _clip(p + z * sd)),
    )


def _binomial_variance(successes: int, n: int, z: float) -> float:
    """Variance of a proportion's estimate at the Agresti-Coull proportion, never 0."""
    adjusted = (successes + z * z / 2) / (n + z * z)
    return adjusted * (1 - adjusted) / n


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))
