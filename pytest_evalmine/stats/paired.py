"""Paired comparison of two versions on the same cases (spec: "Statistics", "Paired
comparison"): the per-case delta B - A with a clustered, stratified interval, exact McNemar
on pass/fail, which cases got worse or better, and the noise floor from repeats. Over plain
score sequences; the caller says what a score is."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

from .estimators import CONFIDENCE, Interval, interval_dict, mean
from .proportions import normal_quantile
from .resample import RESAMPLES, Cluster, mean_interval

# A score is a fraction of checks (or a mean of such fractions), computed in floats: 0.1 + 0.2
# and 0.3 + 0.0 differ in the last bit. A case's change is decided on the fractions the scores
# stand for: a score within SNAP of a fraction of denominator at most MAX_DENOMINATOR is that
# fraction (the float rounding of a mean of a few checks' shares is below 1e-15), any other
# score its exact binary value. Sums that far apart (NEAR_ZERO) are told apart by fsum alone.
MAX_DENOMINATOR = 10**6
SNAP = 1e-12
NEAR_ZERO = 1e-9


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

    @cached_property
    def difference(self) -> float:
        """sum(B) - sum(A) over the repeats, exactly 0 when the two sides' scores are the same
        fractions in any order or split (see ``SNAP``); else their float difference."""
        if sorted(self.a) == sorted(self.b):
            return 0.0
        rough = math.fsum(self.b) - math.fsum(self.a)
        if abs(rough) > NEAR_ZERO:
            return rough
        return float(exact_total(self.b) - exact_total(self.a))

    @property
    def delta(self) -> float:
        """B - A, the mean over the repeats: 0 exactly for an unchanged case."""
        return self.difference / len(self.a)

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
class Excess:
    """|delta| - floor and its interval (``PairedComparison.excess``), in the change's
    direction: above 0 means past the floor."""

    value: float
    interval: Interval

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "interval": interval_dict(self.interval)}


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
    def excess(self) -> Excess | None:
        """How far the change goes past the noise floor, in the change's direction: |delta| -
        floor, and the delta's interval (oriented the same way: negated for a drop) moved by
        the floor. None without a floor or a delta."""
        floor = self.noise_floor
        if floor is None or self.delta is None or self.interval is None:
            return None
        if self.delta < 0:
            low, high = -self.interval.high - floor, -self.interval.low - floor
            return Excess(-self.delta - floor, Interval(low, high))
        low, high = self.interval.low - floor, self.interval.high - floor
        return Excess(self.delta - floor, Interval(low, high))

    @property
    def beyond_noise(self) -> bool | None:
        """True when the excess over the floor has its interval above 0 (the change's whole
        interval lies past the floor, evalpair's rule); None when the floor is unknown (no
        repeats) or nothing was compared."""
        excess = self.excess
        return None if excess is None else excess.interval.low > 0

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
            "excess": self.excess.to_dict() if self.excess else None,
            "beyond_noise": self.beyond_noise,
        }


@lru_cache(maxsize=4096)
def score_fraction(score: float) -> Fraction:
    """The fraction a score stands for (see ``SNAP``)."""
    exact = Fraction(score)
    near = exact.limit_denominator(MAX_DENOMINATOR)
    return near if abs(near - exact) <= SNAP else exact


def exact_total(scores: Iterable[float]) -> Fraction:
    return sum((score_fraction(score) for score in scores), Fraction(0))


def noise_floor(repeats: Sequence[Sequence[float]]) -> float | None:
    """How far two single runs of one model on these cases drift apart by chance
    (``drift_half_width``), at most 1: two means of scores in [0, 1] never drift further
    apart than the scale, and with a few flaky cases t at one or two degrees of freedom
    (12.7, 4.3) made it 304 points. None when no case has two scores."""
    width = drift_half_width(repeats)
    return None if width is None else min(1.0, width)


def drift_half_width(repeats: Sequence[Sequence[float]]) -> float | None:
    """The 95 % half-width t sqrt(2 W / n) of the difference of two runs' mean scores, where
    W is the mean over the n cases with two or more scores of their sample variance (ddof 1)
    over the repeats, and t Student's quantile at ``floor_degrees_of_freedom``. With two
    repeats per case sqrt(2 W / n) = sqrt(mean(d^2) / n), d the per-case difference between
    the repeats. None when no case has two scores."""
    measured = [scores for scores in repeats if len(scores) >= 2]
    if not measured:
        return None
    variances = [statistics.variance(scores) for scores in measured]
    within = sum(variances) / len(variances)
    if within == 0:
        return 0.0  # repeats that always agree: no drift, whatever the quantile
    degrees = floor_degrees_of_freedom(variances, sum(len(scores) - 1 for scores in measured))
    return t_quantile(degrees) * math.sqrt(2 * within / len(variances))


def floor_degrees_of_freedom(variances: Sequence[float], pooled: int) -> float:
    """The degrees of freedom of W, the mean of the cases' variances: the pooled
    sum(repeats - 1) when the cases are alike, fewer (Satterthwaite's 2 W^2 / Var(W), Var(W)
    the cases' variances' sample variance over n) when a few cases carry the noise. Typical
    of a model that answers most cases the same every time: W then rests on the few that
    flip, and the pooled count alone (t at 20 df for 20 cases x 2 repeats, chances U(0.8,
    1)) let two reruns drift beyond the floor 8.4 % of the time, the normal z 11.5 %."""
    if len(variances) < 2:
        return float(pooled)
    n = len(variances)
    within = math.fsum(variances) / n
    # Var(W): the variances' sample variance over n (two floating passes: only the degrees
    # of freedom depend on it, and statistics.variance's exact sums are slow on 10,000 cases)
    spread = math.fsum((v - within) ** 2 for v in variances) / (n - 1) / n
    if spread == 0:
        return float(pooled)
    return min(float(pooled), 2 * within * within / spread)


def t_quantile(degrees: float, confidence: float = CONFIDENCE) -> float:
    """t with P(|T| <= t) = confidence for Student's T at ``degrees`` (> 0) degrees of
    freedom, within 1e-12 relative of scipy's ``t.ppf`` (the tests). Written here: the plugin
    does not depend on scipy (whose import alone costs half a second)."""
    z = normal_quantile(confidence)
    if degrees >= 500:
        # The Cornish-Fisher expansion in 1/degrees (Abramowitz & Stegun 26.7.5), within
        # 1e-13 of the quantile from 500 degrees up, where the log-gammas of the tail below
        # start to lose digits.
        z2 = z * z
        terms = (
            (z2 + 1) * z / 4,
            ((5 * z2 + 16) * z2 + 3) * z / 96,
            (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384,
            ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160,
        )
        return z + sum(term / degrees ** (i + 1) for i, term in enumerate(terms))
    # Newton on the two-sided tail P(|T| > t), convex and falling in t > 0: from z, below
    # the root, every step lands below it again, so the iteration climbs to it monotonically.
    alpha, t = 1 - confidence, z
    for _ in range(200):
        step = (_t_tail(t, degrees) - alpha) / (2 * _t_density(t, degrees))
        t += step
        if step <= 1e-15 * t:
            break
    return t


def _t_tail(t: float, degrees: float) -> float:
    """P(|T| > t) = I_x(degrees / 2, 1 / 2) at x = degrees / (degrees + t^2)."""
    return _regularized_beta(
        degrees / 2, 0.5, degrees / (degrees + t * t), t * t / (degrees + t * t)
    )


def _t_density(t: float, degrees: float) -> float:
    log_scale = (
        math.lgamma((degrees + 1) / 2)
        - math.lgamma(degrees / 2)
        - 0.5 * math.log(degrees * math.pi)
    )
    return math.exp(log_scale - (degrees + 1) / 2 * math.log1p(t * t / degrees))


def _regularized_beta(a: float, b: float, x: float, y: float) -> float:
    """I_x(a, b), y = 1 - x given separately (no cancellation near x = 1), by its continued
    fraction (Numerical Recipes, section 6.4) on the side where it converges fast."""
    if x <= 0:
        return 0.0
    if y <= 0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, y) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), by the modified Lentz method."""
    tiny = 1e-300

    def guard(value: float) -> float:
        return tiny if abs(value) < tiny else value

    c, d = 1.0, 1 / guard(1 - (a + b) * x / (a + 1))
    fraction = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 / guard(1 + numerator * d)
            c = guard(1 + numerator / c)
            fraction *= c * d
        if abs(c * d - 1) < 1e-16:
            break
    return fraction


def mcnemar_exact(a_only: int, b_only: int) -> McNemar:
    """Two-sided exact p = min(1, 2 P(X <= min)) for X ~ Binomial(a_only + b_only, 1/2), and
    the mid-p value min(1, 2 [P(X <= min) - P(X = min) / 2]) (Fagerland, Lydersen & Laake
    2013): the exact test is conservative, the mid-p close to nominal. The cap comes after
    the half point mass is taken off: a balanced table has mid-p 1, as it has p 1."""
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
    mid_p = min(1.0, (2 * tail - coefficient) / outcomes)
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
    clusters = [Cluster(case.stratum, case.difference, len(case.a)) for case in cases]
    observations = sum(c.size for c in clusters)
    delta = math.fsum(c.total for c in clusters) / observations if observations else None
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
