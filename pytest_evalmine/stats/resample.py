"""Seeded resampling intervals on numpy (spec: "Statistics"): the Bayesian bootstrap of a
(stratified, clustered) mean and the posterior interval of Cohen's kappa.

numpy is imported inside the functions: the plugin must import without it. Every interval
takes an explicit seed and draws from ``numpy.random.default_rng(seed)`` (PCG64) in a fixed
order, so a rerun of the same suite reproduces every interval exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .estimators import CATEGORIES, CONFIDENCE, Interval

if TYPE_CHECKING:
    import numpy as np

RESAMPLES = 10_000
BLOCK_CELLS = 2_000_000  # draws x components held in memory at once (16 MB of floats)
# Half an observation at each end of the scale: the Jeffreys prior, under which a proportion's
# interval is the Jeffreys interval. It keeps an all-win (or all-same) sample from giving a
# zero-width interval.
END_PSEUDO_COUNT = 0.5
# One pseudo-label spread evenly over the nine cells of the kappa table: perfect agreement on
# a few labels then gives an interval reaching below 1 instead of the point [1, 1].
KAPPA_PSEUDO_COUNT_PER_CELL = 1 / 9


@dataclass(frozen=True)
class Cluster:
    """The values one unit of resampling contributes: a case's scores (or score deltas) over
    its repeats. ``stratum`` (a task) is resampled separately."""

    stratum: str
    total: float
    size: int


def generator(seed: int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng(seed)


def quantile_interval(draws: np.ndarray, confidence: float = CONFIDENCE) -> Interval:
    """The (1-c)/2 and (1+c)/2 quantiles, type 7 (numpy's default, linear)."""
    import numpy as np

    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return Interval(float(low), float(high))


def dirichlet(alpha: Sequence[float], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` draws of Dirichlet(alpha), rows summing to 1 (normalised gammas)."""
    import numpy as np

    gammas = rng.standard_gamma(np.asarray(alpha, dtype=float), size=(resamples, len(alpha)))
    return gammas / gammas.sum(axis=1, keepdims=True)


def weighted_sums(
    alpha: Sequence[float], columns: np.ndarray, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Dirichlet(alpha) draws times ``columns`` (one row per component): the weighted sums of
    each draw, one row per draw.

    The gammas are drawn one parameter at a time (distinct parameters ascending, each a
    ``resamples x components`` block with a scalar shape, in component order): numpy's
    array-shape path costs several times the scalar one, and with many distinct values
    (fractional scores) the gammas are the whole cost. Each block is multiplied into the
    sums as it is drawn, and the normalisation divides the sums, not the gammas. Blocks of
    rows keep memory bounded; the generator fills them in the same order either way, so the
    row blocks do not change the result."""
    import numpy as np

    alpha = np.asarray(alpha, dtype=float)
    # The last column is the gammas' own sum: the normaliser.
    weighted = np.column_stack([columns, np.ones(len(alpha))])
    sums = np.zeros((resamples, weighted.shape[1]))
    for shape in np.unique(alpha):
        part = weighted[alpha == shape]
        rows = max(1, BLOCK_CELLS // len(part))
        for start in range(0, resamples, rows):
            stop = min(resamples, start + rows)
            sums[start:stop] += rng.standard_gamma(shape, size=(stop - start, len(part))) @ part
    return sums[:, :-1] / sums[:, -1:]


def mean_interval(
    clusters: Sequence[Cluster],
    *,
    low_end: float,
    high_end: float,
    seed: int,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """Interval of sum(total) / sum(size) over ``clusters`` by the Bayesian bootstrap (Rubin
    1981) with the Jeffreys prior's half observation at each end of the scale.

    Within each stratum the clusters and two pseudo-clusters, at ``low_end`` and ``high_end``,
    get Dirichlet weights (1 per cluster; 1/2 x the stratum's share of the clusters per
    pseudo-cluster), scaled to the stratum's share, so strata keep their sizes as in a
    stratified bootstrap and the pseudo-observations add up to one in all. A pseudo-cluster
    has the average cluster size. With one stratum of 0/1 values this is the Jeffreys
    interval's Beta(x + 1/2, n - x + 1/2) posterior, and no sample gives a zero-width
    interval.

    Identical clusters of a stratum are drawn as one Dirichlet component whose parameter is
    their count (the Dirichlet's aggregation property): the same draw in distribution, at a
    cost that depends on the distinct values, not the sample size."""
    import numpy as np

    if not clusters:
        return None
    rng = generator(seed)
    numerator = np.zeros(resamples)
    denominator = np.zeros(resamples)
    mean_size = sum(c.size for c in clusters) / len(clusters)
    by_stratum: dict[str, Counter[tuple[float, float]]] = {}
    for cluster in clusters:
        by_stratum.setdefault(cluster.stratum, Counter())[(cluster.total, cluster.size)] += 1
    for stratum in sorted(by_stratum):
        kinds = sorted(by_stratum[stratum].items())
        share = sum(count for _, count in kinds) / len(clusters)
        pseudo = END_PSEUDO_COUNT * share
        totals = [total for (total, _), _ in kinds] + [low_end * mean_size, high_end * mean_size]
        sizes = [size for (_, size), _ in kinds] + [mean_size, mean_size]
        alpha = [count for _, count in kinds] + [pseudo, pseudo]
        sums = weighted_sums(alpha, np.array([totals, sizes], dtype=float).T, resamples, rng)
        numerator += sums[:, 0] * share
        denominator += sums[:, 1] * share
    return quantile_interval(numerator / denominator, confidence)


def kappa_interval(
    ratings: Sequence[tuple[str, str]],
    *,
    seed: int,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """Posterior interval of Cohen's kappa: the 3x3 table's cell probabilities are drawn
    from Dirichlet(counts + 1/9) (the Bayesian bootstrap of the labels plus one pseudo-label
    spread over the cells) and kappa is computed from each draw. Every draw has chance
    agreement below 1, so the interval exists whenever there is a rating."""
    if not ratings:
        return None
    index = {category: i for i, category in enumerate(CATEGORIES)}
    size = len(CATEGORIES)
    counts = [0.0] * (size * size)
    for human, judge in ratings:
        counts[index[human] * size + index[judge]] += 1
    return kappa_posterior_interval(counts, seed=seed, resamples=resamples, confidence=confidence)


def kappa_posterior_interval(
    counts: Sequence[float],
    *,
    seed: int,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
) -> Interval:
    """``kappa_interval`` over the nine cell counts (row-major, human by judge), which may
    be fractional: the planner (``stats.power``) asks it about an expected table."""
    import numpy as np

    size = len(CATEGORIES)
    alpha = np.asarray(counts, dtype=float) + KAPPA_PSEUDO_COUNT_PER_CELL
    cells = dirichlet(alpha, resamples, generator(seed))
    table = cells.reshape(resamples, size, size)
    observed = np.trace(table, axis1=1, axis2=2)
    chance = (table.sum(axis=2) * table.sum(axis=1)).sum(axis=1)
    return quantile_interval((observed - chance) / (1 - chance), confidence)
