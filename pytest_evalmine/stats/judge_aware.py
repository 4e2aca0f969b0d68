"""A judge-aware Bradley-Terry ranking (spec: "Ranking and cost", "Judge-aware ranking"): the
models' strengths and each juror's reliability weight, fitted jointly by maximum likelihood,
with intervals from the same clustered Bayesian bootstrap as the plain ranking
(stats.ranking).

P(i beats j | juror r) = sigmoid(w_r (s_i - s_j)), w_r >= 0: a juror of weight 0 gives coin
flips, a larger weight sharper verdicts (the judge-aware Bradley-Terry of arXiv 2601.21817,
its discrimination form). The likelihood sees only the products w_r (s_i - s_j), so the fit
is pinned by sum s = 0 and mean w = 1 (a fitted pair (s, w) is rescaled to it: the likelihood
is unchanged). Pure core: numpy and scipy are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .estimators import CONFIDENCE, Interval, interval_dict
from .ranking import PSEUDO_WINS, RANKING_RESAMPLES, RankedModel, fit_strengths, overlap
from .resample import generator, quantile_interval, weighted_sums

if TYPE_CHECKING:
    import numpy as np

# Bootstrap draws per L-BFGS-B call: one call over all 2,000 draws iterates until its worst
# draw converges, and many small calls pay scipy's overhead each (measured: 500 a draw block
# took 4.5 s where 2,000 took 10.5 s and 100 took 14.7 s, 4 models x 3 jurors x 80 cases).
DRAW_BLOCK = 500
# Below this mean weight every juror gives coin flips: the strengths are not identified.
NO_SIGNAL = 1e-9


@dataclass(frozen=True)
class JurorComparison:
    """One juror's verdict on one judged pair: the share of it model ``a`` won by that
    juror's two passes (1, 0, 1/2 a tie or a flip, 3/4 a soft win); ``cluster`` the case."""

    cluster: str
    juror: str
    a: str
    b: str
    a_share: float


@dataclass
class JurorWeight:
    juror: str
    weight: float  # the jurors' weights average 1; 0: its verdicts carry no information
    interval: Interval | None
    verdicts: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "juror": self.juror,
            "weight": self.weight,
            "interval": interval_dict(self.interval),
            "verdicts": self.verdicts,
        }


@dataclass
class JudgeAwareRanking:
    strengths: list[RankedModel]  # strongest first
    jurors: list[JurorWeight]  # in panel order

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": "judge_aware_bradley_terry",
            "strengths": [dict(r.to_dict(), rank=i + 1) for i, r in enumerate(self.strengths)],
            "juror_weights": [row.to_dict() for row in self.jurors],
        }


def fit_judge_aware(
    wins: np.ndarray, start: np.ndarray | None = None, *, loose: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood strengths and juror weights for wins[r, i, j] (juror r's wins of i
    over j; or a stack [draw, r, i, j] fitted at once, one separable L-BFGS-B problem), half
    a win added each way on every pair of models a juror judged. Returns (strengths, weights)
    with sum s = 0 and mean w = 1 per draw (both 0 when no juror carries signal). ``loose``:
    the bootstrap's tolerances (near-tied models leave the weights weakly identified and the
    tight ones cost hundreds of iterations more; the quantiles move by under 1e-3)."""
    import numpy as np
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    single = wins.ndim == 3
    stack = np.array(wins[None] if single else wins, dtype=float)
    draws, jurors, k = stack.shape[0], stack.shape[1], stack.shape[2]
    met = (stack + stack.transpose(0, 1, 3, 2)) > 0
    stack = stack + PSEUDO_WINS * met
    stack[:, :, np.arange(k), np.arange(k)] = 0.0
    free_count = k - 1 + jurors
    pin = stack.sum(axis=(1, 2, 3))  # the penalty's scale: a draw's comparisons

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = x.reshape(draws, free_count)
        free = x[:, : k - 1]
        s = np.concatenate([free, -free.sum(axis=1, keepdims=True)], axis=1)
        return s, x[:, k - 1 :]

    def negative_log_likelihood(x: np.ndarray) -> tuple[float, np.ndarray]:
        s, w = unpack(x)
        diff = s[:, :, None] - s[:, None, :]  # [draw, i, j]: s_i - s_j
        z = w[:, :, None, None] * diff[:, None]  # [draw, r, i, j]
        value = -float((stack * log_expit(z)).sum())
        pull = stack * expit(-z)  # d/dz of w log sigmoid(z)
        d_weight = (pull * diff[:, None]).sum(axis=(2, 3))
        by_diff = (pull * w[:, :, None, None]).sum(axis=1)  # [draw, i, j]
        d_strength = by_diff.sum(axis=2) - by_diff.sum(axis=1)
        # The likelihood is flat along w -> c w, s -> s / c: a penalty on mean w - 1, zero
        # on the ridge's point the fit reports, keeps L-BFGS-B off the ridge's far ends
        # (s -> 0, w -> infinity on near-tied models) without moving the maximum.
        off = w.mean(axis=1) - 1.0
        value += float((pin * off * off).sum())
        d_weight -= (2 * pin * off / jurors)[:, None]
        gradient = np.concatenate([d_strength[:, :-1] - d_strength[:, -1:], d_weight], axis=1)
        return value, -gradient.ravel()

    if start is None:
        point = fit_strengths(stack.sum(axis=(0, 1)) / draws)
        x0 = np.concatenate([point[:-1], np.ones(jurors)])
    else:
        x0 = np.asarray(start, dtype=float)
    bounds = ([(None, None)] * (k - 1) + [(0.0, None)] * jurors) * draws
    result = minimize(
        negative_log_likelihood,
        np.tile(x0, draws),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={
            "maxiter": 20_000,
            "ftol": 1e-10 if loose else 1e-15,
            "gtol": 1e-5 if loose else 1e-9,
        },
    )
    s, w = unpack(result.x)
    scale = w.mean(axis=1, keepdims=True)
    signal = scale > NO_SIGNAL
    s = np.where(signal, s * scale, 0.0)
    w = np.where(signal, w / np.where(signal, scale, 1.0), 0.0)
    return (s[0], w[0]) if single else (s, w)


def juror_win_tensor(
    comparisons: Sequence[JurorComparison], jurors: Sequence[str], models: Sequence[str]
) -> tuple[np.ndarray, list[str]]:
    """Per case, each juror's wins of i over j flattened (row: a cluster, column
    (r*k + i)*k + j), and the clusters in order."""
    import numpy as np

    model_index = {model: i for i, model in enumerate(models)}
    juror_index = {juror: r for r, juror in enumerate(jurors)}
    clusters = sorted({c.cluster for c in comparisons})
    row = {cluster: n for n, cluster in enumerate(clusters)}
    k = len(models)
    wins = np.zeros((len(clusters), len(jurors) * k * k))
    for c in comparisons:
        r, i, j = juror_index[c.juror], model_index[c.a], model_index[c.b]
        wins[row[c.cluster], (r * k + i) * k + j] += c.a_share
        wins[row[c.cluster], (r * k + j) * k + i] += 1 - c.a_share
    return wins, clusters


def judge_aware_bradley_terry(
    comparisons: Sequence[JurorComparison],
    models: Sequence[str],
    jurors: Sequence[str],
    *,
    seed: int,
    resamples: int = RANKING_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> JudgeAwareRanking | None:
    """Strengths (strongest first, ties marked as the plain ranking marks them) and juror
    weights, each with the plain ranking's interval: every case gets Dirichlet(1, ..., 1)
    weights times the number of cases, all its jurors' verdicts carry them, and both are
    fitted again; 2,000 draws. None with fewer than two models or jurors."""
    import numpy as np

    present = [m for m in models if any(m in (c.a, c.b) for c in comparisons)]
    sitting = [j for j in jurors if any(c.juror == j for c in comparisons)]
    if len(present) < 2 or len(sitting) < 2:
        return None
    kept = [c for c in comparisons if c.a in present and c.b in present and c.juror in sitting]
    k, size = len(present), len(sitting)
    wins, clusters = juror_win_tensor(kept, sitting, present)
    strengths, weights = fit_judge_aware(wins.sum(axis=0).reshape(size, k, k))
    model_intervals: list[Interval | None] = [None] * k
    juror_intervals: list[Interval | None] = [None] * size
    if resamples > 0:
        draws = weighted_sums(np.ones(len(clusters)), wins, resamples, generator(seed))
        draws *= len(clusters)
        start = np.concatenate([strengths[:-1], weights])
        stack = draws.reshape(resamples, size, k, k)
        blocks = [
            fit_judge_aware(stack[first : first + DRAW_BLOCK], start, loose=True)
            for first in range(0, resamples, DRAW_BLOCK)
        ]
        fitted_s = np.concatenate([block[0] for block in blocks])
        fitted_w = np.concatenate([block[1] for block in blocks])
        model_intervals = [quantile_interval(fitted_s[:, i], confidence) for i in range(k)]
        juror_intervals = [quantile_interval(fitted_w[:, r], confidence) for r in range(size)]
    met = {(c.cluster, c.a, c.b) for c in kept}
    ranked = [
        RankedModel(
            model,
            float(strengths[i]),
            model_intervals[i],
            sum(model in (a, b) for _, a, b in met),
        )
        for i, model in enumerate(present)
    ]
    for row in ranked:
        row.tied_with = [o.model for o in ranked if o is not row and overlap(row, o)]
    ranked.sort(key=lambda r: (-r.strength, r.model))
    return JudgeAwareRanking(
        strengths=ranked,
        jurors=[
            JurorWeight(
                juror, float(weights[r]), juror_intervals[r], sum(c.juror == juror for c in kept)
            )
            for r, juror in enumerate(sitting)
        ],
    )
