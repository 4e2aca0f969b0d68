"""Comparing two raters' agreement with the same labels (spec: "Judge panel"): the difference
of their Cohen's kappas with a paired Bayesian bootstrap interval. The one place the panel's
gain over a juror is computed. numpy is imported inside the function.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .estimators import CATEGORIES, CONFIDENCE, Interval, cohen_kappa, interval_dict
from .resample import RESAMPLES, generator, quantile_interval, weighted_sums


@dataclass(frozen=True)
class KappaDifference:
    """kappa(first) - kappa(second) on the same ``n`` labels, and its interval."""

    n: int
    first: float | None
    second: float | None
    difference: float | None
    interval: Interval | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "kappa_first": self.first,
            "kappa_second": self.second,
            "difference": self.difference,
            "interval": interval_dict(self.interval),
        }


def kappa_difference(
    ratings: Sequence[tuple[str, str, str]],
    *,
    seed: int,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
) -> KappaDifference:
    """kappa(human, first) - kappa(human, second) over (human, first, second) triples, each
    a label both raters judged. The interval is the paired Bayesian bootstrap: every draw
    weighs the labels by one Dirichlet(1, ..., 1) vector (identical triples aggregated into
    one component whose parameter is their count), and both kappas are computed from the
    same weighted table, so what the two raters share cancels from the difference. A draw
    whose chance agreement is 1 for either rater (kappa undefined) is left out; no interval
    when every draw is."""
    import numpy as np

    first = cohen_kappa([(human, a) for human, a, _ in ratings]).value
    second = cohen_kappa([(human, b) for human, _, b in ratings]).value
    point = None if first is None or second is None else first - second
    if not ratings:
        return KappaDifference(0, first, second, point, None)
    kinds = sorted(Counter(ratings).items())
    index = {category: i for i, category in enumerate(CATEGORIES)}
    size = len(CATEGORIES)
    # Per kind: agreement of each rater, then the three marginals of human, first, second.
    columns = np.zeros((len(kinds), 2 + 3 * size))
    for row, ((human, a, b), _) in enumerate(kinds):
        columns[row, 0] = human == a
        columns[row, 1] = human == b
        for offset, category in enumerate((human, a, b)):
            columns[row, 2 + offset * size + index[category]] = 1.0
    alpha = [float(count) for _, count in kinds]
    sums = weighted_sums(alpha, columns, resamples, generator(seed))
    human_share = sums[:, 2 : 2 + size]
    kappas = []
    for rater in (0, 1):
        share = sums[:, 2 + (rater + 1) * size : 2 + (rater + 2) * size]
        chance = (human_share * share).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            kappas.append((sums[:, rater] - chance) / (1.0 - chance))
    draws = kappas[0] - kappas[1]
    draws = draws[np.isfinite(draws)]
    interval = quantile_interval(draws, confidence) if len(draws) else None
    return KappaDifference(len(ratings), first, second, point, interval)
