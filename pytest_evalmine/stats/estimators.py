"""Closed-form estimators (spec: "Statistics"): means, type-7 percentiles, Cohen's kappa and
its Landis-Koch band, and the seeds the resampling intervals (``resample``) draw from. Pure
functions over plain lists, standard library only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

CATEGORIES = ("baseline", "tie", "candidate")
CONFIDENCE = 0.95
# Landis & Koch (1977), "The measurement of observer agreement for categorical data".
LANDIS_KOCH = (
    (0.0, "poor"),
    (0.20, "slight"),
    (0.40, "fair"),
    (0.60, "moderate"),
    (0.80, "substantial"),
    (1.0, "almost perfect"),
)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high}


def interval_dict(interval: Interval | None) -> dict[str, float] | None:
    """An interval as report.json holds it: ``{low, high}``, or null when there is none."""
    return interval.to_dict() if interval else None


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of judge against human over ``CATEGORIES``.

    ``confusion[h][j]`` counts pairs the human put in category h and the judge in j.
    ``value`` is None when chance agreement is 1 (every rating in one shared category).
    """

    n: int
    confusion: tuple[tuple[int, ...], ...]
    observed_agreement: float | None
    chance_agreement: float | None
    value: float | None

    @property
    def band(self) -> str | None:
        return landis_koch_band(self.value) if self.value is not None else None


def confusion_matrix(pairs: Sequence[tuple[str, str]]) -> tuple[tuple[int, ...], ...]:
    """Rows human, columns judge, in ``CATEGORIES`` order."""
    index = {category: i for i, category in enumerate(CATEGORIES)}
    matrix = [[0] * len(CATEGORIES) for _ in CATEGORIES]
    for human, judge in pairs:
        matrix[index[human]][index[judge]] += 1
    return tuple(tuple(row) for row in matrix)


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> Kappa:
    """kappa = (p_o - p_e) / (1 - p_e), p_o = sum_i m_ii / n,
    p_e = sum_i (row_i / n)(col_i / n)."""
    matrix = confusion_matrix(pairs)
    n = len(pairs)
    if n == 0:
        return Kappa(0, matrix, None, None, None)
    size = len(CATEGORIES)
    # Exact fractions: a kappa of exactly 0.4 must meet a 0.40 floor, not miss it by 1e-16.
    observed = Fraction(sum(matrix[i][i] for i in range(size)), n)
    rows = [sum(matrix[i]) for i in range(size)]
    columns = [sum(matrix[r][i] for r in range(size)) for i in range(size)]
    chance = Fraction(sum(rows[i] * columns[i] for i in range(size)), n * n)
    value = None if chance == 1 else float((observed - chance) / (1 - chance))
    return Kappa(n, matrix, float(observed), float(chance), value)


def landis_koch_band(value: float) -> str:
    if value < 0:
        return "poor"
    for upper, name in LANDIS_KOCH[1:]:
        if value <= upper:
            return name
    return "almost perfect"


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (Hyndman-Fan type 7, numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def seed_from(*parts: str) -> int:
    """A bootstrap seed derived from text (the suite hash and what is being measured)."""
    import hashlib

    return int(hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16], 16)
