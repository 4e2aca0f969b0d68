"""Prediction-powered estimates of a mean (spec: "Prediction-powered estimates"): a judge's
scores on every item and a person's scores on a uniformly random sample of them give an
unbiased estimate of the person's mean, with a valid interval whatever the judge's biases.
Standard library only.

Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, "Prediction-powered inference", Science
(2023), and the power-tuned PPI++ of Angelopoulos, Duchi & Zrnic (2023). Here the judge has
scored every item, the labelled ones included (the papers' unlabelled set is disjoint), so

    theta(lambda) = mean_N(lambda f) + mean_n(Y - lambda f)

with f the judge's score on all N items and Y the person's on the n labelled ones. Its
variance, counting that mean_N(f) contains the labelled items (Cov(mean_N f, mean_n g) =
Cov(f, g) / N):

    Var = Var(Y - lambda f) / n + lambda (2 Cov(Y, f) - lambda Var(f)) / N

It is smallest at lambda* = Cov(Y, f) / Var(f), the regression slope of Y on f. (Written
over the disjoint unlabelled N - n items, theta is PPI++'s estimator with lambda' = lambda
(N - n) / N, and PPI++'s optimum lambda' = Cov / ((1 + n / (N - n)) Var) is this same
lambda*.) lambda* is estimated by the slope on the labelled items (the regression estimator
of survey sampling: a judge that matches every label gets exactly 1, where the pooled
Var(f) over a different set of items would give it less) and clipped to [0, 1]: 0 is the
labels-only
mean, and no lambda in [0, lambda*] has a larger variance than it, so the estimate is never
worse than the labels alone beyond the noise of estimating lambda; the clip at 1 keeps a
noisy slope from a handful of labels from over-trusting the judge. The interval is
theta +- q sd with q the Student t quantile at n - 2 degrees of freedom (n - 1 with a fixed
lambda), the residual variance over n - 2 as in the regression estimator: the normal
quantile undercovered at 20 labels in simulation (0.91 for a judge biased to one side;
benchmarks/sim_ppi.py), clipped to [0, 1], when some label is fractional. When every label
is at an end of the scale (a pass rate) a symmetric interval fails near 0 and 1 (0.885 at a
pass rate of 0.9 and 30 labels), and the interval is Wilson's score interval at the
effective size theta (1 - theta) / Var with the t quantile for z (``_score_interval``;
benchmarks/sim_ppi_binary.py: 0.930-0.992 over pass rates 0.05-0.95 and 20-200
labels). The effective n is Var(Y) / Var: how many labels
alone would give the same variance."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from .estimators import CONFIDENCE, Interval, interval_dict
from .paired import t_quantile

NO_SPREAD = 1e-12  # a sample variance at or below this is a sample without spread


@dataclass(frozen=True)
class PPIEstimate:
    """The person's mean estimated from ``labelled`` (human, judge) score pairs and the
    judge's scores on all ``judged`` items."""

    value: float  # clipped to [0, 1]
    unclipped: float
    standard_error: float
    interval: Interval
    labels: int  # n
    judged: int  # N
    lam: float  # the power-tuning weight used (0: labels only)
    effective_n: float | None  # labels alone would need this many for the same variance
    labels_only: float  # mean_n(Y)
    labels_only_interval: Interval

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.value,
            "unclipped": self.unclipped,
            "standard_error": self.standard_error,
            "interval": interval_dict(self.interval),
            "labels": self.labels,
            "judged": self.judged,
            "lambda": self.lam,
            "effective_n": self.effective_n,
            "labels_only": self.labels_only,
            "labels_only_interval": interval_dict(self.labels_only_interval),
        }


def ppi_mean(
    labelled: Sequence[tuple[float, float]],
    judged: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    lam: float | None = None,
    quantile: str = "t",
    method: str = "auto",
    low_end: float = 0.0,
    high_end: float = 1.0,
) -> PPIEstimate | None:
    """PPI++ estimate of the mean of Y. ``labelled`` holds (Y, f) for the labelled items,
    ``judged`` f for every item the judge scored (the labelled ones among them). ``lam``
    fixes the weight (0: labels only); None tunes it. ``quantile`` "normal" is for the
    simulation that chose "t". None when fewer than 2 labels or more
    labels than judged items."""
    n, big_n = len(labelled), len(judged)
    if n < 2 or big_n < n:
        return None
    ys = [y for y, _ in labelled]
    fs = [f for _, f in labelled]
    mean_y, mean_f_n, mean_f_all = _mean(ys), _mean(fs), _mean(judged)
    var_y = _covariance(ys, ys)
    cov_yf = _covariance(ys, fs)
    var_f = _covariance(judged, judged)
    var_f_n = _covariance(fs, fs)
    # A weight tuned on the labels costs a degree of freedom, as in the regression estimator
    # (Cochran, "Sampling Techniques", 7.3): residual variance over n - 2, t at n - 2.
    tuned = lam is None and n > 2
    if lam is None:
        lam = 0.0 if var_f_n <= 0 else min(1.0, max(0.0, cov_yf / var_f_n))
    df = n - 2 if tuned else n - 1
    estimate = mean_y + lam * (mean_f_all - mean_f_n)
    residuals = [y - lam * f for y, f in labelled]
    normal = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    # No spread at all among the labels (or in what the judge leaves unexplained) is not a
    # variance of 0: a handful of labels cannot rule out the disagreements it did not meet.
    floor = _variance_floor(n, normal, high_end - low_end)
    residual_variance = _covariance(residuals, residuals) * (n - 1) / df
    residual_variance = floor if residual_variance <= NO_SPREAD else residual_variance
    var_y = floor if var_y <= NO_SPREAD else var_y
    variance = max(residual_variance / n + lam * (2 * cov_yf - lam * var_f) / big_n, 0.0)
    sd = math.sqrt(variance)
    q = t_quantile(df, confidence) if quantile == "t" else normal
    q_labels = t_quantile(n - 1, confidence) if quantile == "t" else normal
    scale = high_end - low_end
    unit = (_clip(estimate, low_end, high_end) - low_end) / scale
    effective = var_y / variance if variance > 0 else None
    if method == "auto":
        # A pass rate (every label at an end) gets the score interval; fractional scores
        # (win rates with ties and soft wins) keep the t interval, which covers there.
        method = "wilson" if all(y in (low_end, high_end) for y in ys) else "t"
    if method == "t":
        low, high = estimate - q * sd, estimate + q * sd
        labels_low = mean_y - q_labels * math.sqrt(var_y / n)
        labels_high = mean_y + q_labels * math.sqrt(var_y / n)
    else:
        if method == "wilson-z":
            q = q_labels = normal
        low, high = _scaled(
            _score_interval(unit, variance / scale**2, effective or n, q), low_end, scale
        )
        mean_unit = (mean_y - low_end) / scale
        labels_low, labels_high = _scaled(
            _score_interval(mean_unit, var_y / n / scale**2, n, q_labels), low_end, scale
        )
    return PPIEstimate(
        value=_clip(estimate, low_end, high_end),
        unclipped=estimate,
        standard_error=sd,
        interval=Interval(_clip(low, low_end, high_end), _clip(high, low_end, high_end)),
        labels=n,
        judged=big_n,
        lam=lam,
        effective_n=effective,
        labels_only=mean_y,
        labels_only_interval=Interval(
            _clip(labels_low, low_end, high_end), _clip(labels_high, low_end, high_end)
        ),
    )


def _score_interval(
    rate: float, variance: float, fallback_n: float, q: float
) -> tuple[float, float]:
    """Wilson's score interval for a rate in [0, 1] estimated with ``variance``, at the
    effective sample size p(1 - p) / variance (Korn & Graubard 1998 for a proportion from a
    complex sample; here the design is the judge's help), with the critical value ``q`` (a t
    quantile: the sample size is itself estimated, Korn & Graubard's degrees-of-freedom
    adjustment, since Wilson at n (z / t)^2 with z is Wilson at n with t). At a rate of 0 or 1
    p(1 - p) says nothing, and ``fallback_n`` (the effective n) is used."""
    spread = rate * (1 - rate)
    size = spread / variance if spread > 0 and variance > 0 else fallback_n
    ratio = q * q / size
    centre = (rate + ratio / 2) / (1 + ratio)
    half = q / (1 + ratio) * math.sqrt(spread / size + ratio / (4 * size))
    low = 0.0 if rate <= 0 else centre - half
    high = 1.0 if rate >= 1 else centre + half
    return low, high


def _scaled(ends: tuple[float, float], low_end: float, scale: float) -> tuple[float, float]:
    return low_end + scale * ends[0], low_end + scale * ends[1]


def _variance_floor(n: int, z: float, scale: float) -> float:
    """The variance a sample of n values without any spread stands for, as Agresti and Coull
    (1998) do for a proportion of 0 or n out of n: that of a rate of (z^2 / 2) / (n + z^2)
    (times the scale's width squared). Without it, 21 labels all preferring the candidate gave
    the interval [100%, 100%]; with it [88%, 100%] (Wilson's: [85%, 100%]). Only a sample
    with no spread at all gets it: a floor under every sample made good judges' intervals
    cover 0.99 at 20 labels."""
    rate = (z * z / 2) / (n + z * z)
    return scale * scale * rate * (1 - rate)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _covariance(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Sample covariance (n - 1 in the denominator); 0 for fewer than two values."""
    if len(xs) < 2:
        return 0.0
    mx, my = _mean(xs), _mean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (len(xs) - 1)


def _clip(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))
