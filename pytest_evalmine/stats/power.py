"""Power and planning (spec: "Power and planning"): how many cases, labels and repeats a
question needs, before it is asked. Closed forms over the normal approximations the
project's own intervals reduce to (``statistics.NormalDist``); kappa's labels are searched
with the project's kappa interval itself, numpy imported lazily by ``resample``.

Every function takes ``alpha`` (the interval's two-sided level: 0.05 for the 95 % intervals
of section 26) and, where a detection is planned, ``power`` (the chance of detecting it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

from .paired import t_quantile
from .resample import RESAMPLES

ALPHA = 0.05
POWER = 0.80
MAX_LABELS = 10_000_000  # the kappa search gives up beyond this many labels
PPI_FEWEST_LABELS = 3  # a PPI interval's t quantile needs n - 2 >= 1 degrees of freedom


def z_two_sided(alpha: float = ALPHA) -> float:
    """z_{1-alpha/2}: 1.959963984540054 at alpha 0.05, the z of every 95 % interval."""
    return NormalDist().inv_cdf(1 - alpha / 2)


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """z_{1-alpha/2} + z_{power} (2.80 at 95 % and 80 %): an interval's lower end
    delta_hat - z_{1-alpha/2} se clears 0 with chance ``power`` when the true delta is
    this many standard errors."""
    return z_two_sided(alpha) + NormalDist().inv_cdf(power)


# paired deltas ----------------------------------------------------------------------------
def paired_binary_mde(
    cases: int, discordance: float, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest paired pass/fail delta (B - A, a proportion) detected with chance
    ``power`` over ``cases`` cases, when a share ``discordance`` of the cases pass for one
    side only.

    Per case d = B - A is -1, 0 or 1; with p = P(d != 0) and delta = E[d],
    Var(d) = p - delta^2. The paired interval (a bootstrap of mean(d), section 27) is
    delta_hat +- z_{1-alpha/2} sqrt(Var(d) / n) to first order, so its lower end clears 0
    with chance ``power`` when delta = k sqrt((p - delta^2) / n), k = z_{1-alpha/2} +
    z_{power}; solved for delta: delta = k sqrt(p / (n + k^2)). None without a case or a
    discordant one, and when that delta exceeds p (|delta| <= p: even every discordant case
    changing one way is not detected with that chance)."""
    if cases <= 0 or discordance <= 0:
        return None
    k = z_sum(alpha, power)
    delta = k * math.sqrt(discordance / (cases + k * k))
    return delta if delta <= discordance else None


def paired_binary_cases(
    delta: float, discordance: float, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Cases for ``paired_binary_mde`` to reach ``delta``: n = k^2 (p - delta^2) / delta^2,
    rounded up. None when delta > p: more cases changing one way than change at all."""
    delta = abs(delta)
    if delta <= 0 or delta > discordance:
        return None
    k = z_sum(alpha, power)
    return max(1, math.ceil(k * k * (discordance - delta * delta) / (delta * delta)))


def paired_continuous_mde_normal(
    cases: int, sd: float, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The normal test's smallest detectable delta for a per-case score difference of
    standard deviation ``sd``: delta = k sd / sqrt(n). The report's test is wider
    (``paired_continuous_mde``); this is the formula's first guess."""
    if cases <= 0:
        return None
    return z_sum(alpha, power) * sd / math.sqrt(cases)


def paired_continuous_cases_normal(
    delta: float, sd: float, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """The normal test's n = (k sd / delta)^2, rounded up; None for a delta of 0."""
    if delta == 0:
        return None
    return max(1, math.ceil((z_sum(alpha, power) * sd / abs(delta)) ** 2))


def jeffreys_paired_centre_and_se(
    cases: int, sd: float, delta: float, low_end: float = -1.0, high_end: float = 1.0
) -> tuple[float, float]:
    """Centre and standard error of the report's paired interval (section 27: the Bayesian
    bootstrap with the Jeffreys half observation at each end, one stratum, one score per
    case) for n cases whose differences have mean ``delta`` and sample sd ``sd``. With
    Dirichlet weights 1 per case and 1/2 at each end (total n + 1), the weighted mean has
    mean m = (n delta + (low + high) / 2) / (n + 1) and variance
    [sum (d_i - m)^2 + (low - m)^2 / 2 + (high - m)^2 / 2] / ((n + 1)(n + 2)), where
    sum (d_i - m)^2 = (n - 1) sd^2 + n (delta - m)^2. The ends add about one difference of 1
    to the spread: on scores of small spread (sd 0.15) that is 5-8 % wider than
    sd / sqrt(n), which a normal plan misses."""
    n = cases
    centre = (n * delta + (low_end + high_end) / 2) / (n + 1)
    spread = (
        (n - 1) * sd * sd
        + n * (delta - centre) ** 2
        + ((low_end - centre) ** 2 + (high_end - centre) ** 2) / 2
    )
    return centre, math.sqrt(spread / ((n + 1) * (n + 2)))


def detects_paired_score(
    cases: int, delta: float, sd: float, alpha: float = ALPHA, power: float = POWER
) -> bool:
    """Whether the report's paired interval over ``cases`` cases clears 0 with chance at
    least ``power`` when the true delta is ``delta``: its lower end m - z se clears 0 with
    chance ``power`` when E[m] - z se >= z_power sd(m), sd(m) = n / (n + 1) sd / sqrt(n)
    (m is the centre of ``jeffreys_paired_centre_and_se``, shrunk towards 0 by the ends)."""
    if cases < 2:
        return False
    centre, se = jeffreys_paired_centre_and_se(cases, sd, abs(delta))
    spread = cases / (cases + 1) * sd / math.sqrt(cases)
    return centre - z_two_sided(alpha) * se >= NormalDist().inv_cdf(power) * spread


def paired_continuous_mde(
    cases: int, sd: float, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest checker-score delta the report's test (``detects_paired_score``)
    detects with chance ``power`` over ``cases`` cases, by bisection on delta; None when
    even a delta of 1 is not (too few cases)."""

    def detects(delta: float) -> bool:
        return detects_paired_score(cases, delta, sd, alpha, power)

    if cases < 2 or not detects(1.0):
        return None
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (low, middle) if detects(middle) else (middle, high)
    return high


def paired_continuous_cases(
    delta: float, sd: float, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Cases for the report's test to detect ``delta`` with chance ``power``: the smallest
    n with ``detects_paired_score``, searched upwards from the normal test's n (the report's
    test is wider, never narrower). None for a delta of 0 or one out of [-1, 1]."""
    if delta == 0 or abs(delta) > 1:
        return None
    start = max(2, paired_continuous_cases_normal(delta, sd, alpha, power) or 2)
    return smallest_passing(
        lambda cases: detects_paired_score(cases, delta, sd, alpha, power), start - 1, start
    )


def sd_from_interval(
    low: float, high: float, cases: int, alpha: float = ALPHA, delta: float | None = None
) -> float:
    """The per-case difference's standard deviation behind a paired interval over ``cases``
    cases (what a report.json, which keeps no per-case scores, still tells). With the
    comparison's ``delta``, ``jeffreys_paired_centre_and_se`` read backwards: the ends' half
    observations are taken out of the spread (else a plan would count them twice, once in
    the sd and again in the test); without it, (high - low) / (2 z) sqrt(n)."""
    se = (high - low) / (2 * z_two_sided(alpha))
    if delta is None or cases < 2:
        return se * math.sqrt(cases)
    n = cases
    centre = n * delta / (n + 1)
    ends = ((-1 - centre) ** 2 + (1 - centre) ** 2) / 2
    spread = se * se * (n + 1) * (n + 2) - n * (delta - centre) ** 2 - ends
    return math.sqrt(max(0.0, spread) / (n - 1))


# kappa ------------------------------------------------------------------------------------
Table = Sequence[Sequence[float]]


def agreement_table(agreement: float, shares: Sequence[float]) -> list[list[float]]:
    """Cell probabilities for a judge that agrees with people on a share ``agreement`` of
    the labels, both using the categories in proportions ``shares``: the common-marginals
    model pi_ij = s_i s_j (1 - kappa) + [i = j] kappa s_i, whose raw agreement is
    ``agreement`` and whose kappa is (agreement - p_e) / (1 - p_e), p_e = sum s_i^2.
    Raises ValueError when the agreement is below chance (kappa would be < 0) or above 1."""
    total = sum(shares)
    s = [share / total for share in shares]
    chance = sum(x * x for x in s)
    if not chance <= agreement <= 1 or chance >= 1:
        raise ValueError(f"agreement {agreement:g} must lie between chance ({chance:.2f}) and 1")
    kappa = (agreement - chance) / (1 - chance)
    size = len(s)
    return [
        [s[i] * s[j] * (1 - kappa) + (kappa * s[i] if i == j else 0.0) for j in range(size)]
        for i in range(size)
    ]


def kappa_and_variance(table: Table) -> tuple[float, float] | None:
    """Cohen's kappa of cell probabilities (or counts) and the variance of its estimate on
    one label: n Var(kappa_hat) by the delta method over the multinomial cells,
    sum pi_ij g_ij^2 - (sum pi_ij g_ij)^2 with g_ij = d kappa / d pi_ij
    = ([i = j](1 - p_e) - (1 - p_o)(c_i + r_j)) / (1 - p_e)^2 (r rows, c columns). The
    project's kappa interval (a Dirichlet posterior over the cells, section 17) is this
    normal to first order. None when p_e = 1."""
    total = sum(sum(row) for row in table)
    pi = [[cell / total for cell in row] for row in table]
    size = len(pi)
    rows = [sum(pi[i]) for i in range(size)]
    columns = [sum(pi[r][j] for r in range(size)) for j in range(size)]
    observed = sum(pi[i][i] for i in range(size))
    chance = sum(rows[i] * columns[i] for i in range(size))
    if chance >= 1:
        return None
    kappa = (observed - chance) / (1 - chance)
    first = second = 0.0
    for i in range(size):
        for j in range(size):
            g = ((1 - chance) * (i == j) - (1 - observed) * (columns[i] + rows[j])) / (
                1 - chance
            ) ** 2
            first += pi[i][j] * g
            second += pi[i][j] * g * g
    return kappa, max(0.0, second - first * first)


def kappa_labels_normal(
    table: Table, min_kappa: float, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Labels for kappa's lower end to clear ``min_kappa`` with chance ``power`` under the
    normal approximation alone: n = k^2 v / (kappa - min_kappa)^2 (v from
    ``kappa_and_variance``), rounded up. None when kappa is not above the floor (no number
    of labels clears it)."""
    found = kappa_and_variance(table)
    if found is None or found[0] <= min_kappa:
        return None
    kappa, variance = found
    k = z_sum(alpha, power)
    return max(1, math.ceil(k * k * variance / (kappa - min_kappa) ** 2))


def kappa_labels(
    table: Table,
    min_kappa: float,
    alpha: float = ALPHA,
    power: float = POWER,
    *,
    resamples: int = RESAMPLES,
) -> int | None:
    """Labels for the project's kappa interval (section 17) to have its lower end at or
    above ``min_kappa`` with chance ``power``, for a judge whose agreement with people is
    ``table`` (cell probabilities or counts).

    The interval's lower end L on n labels sits below kappa_hat by about the distance the
    posterior of the expected table (n pi, plus the interval's 1/9 pseudo-label per cell)
    puts it, L(n); kappa_hat varies across label sets with standard deviation sqrt(v / n).
    So L clears the floor with chance ``power`` when L(n) - z_{power} sqrt(v / n) >=
    min_kappa. The normal approximation alone (``kappa_labels_normal``) ignores the
    pseudo-label's pull towards 0 and the posterior's skew, and planned about 0.75 power in
    simulation; this bisection over n with the interval itself plans 0.80. numpy (through
    ``resample``). None when kappa is not above the floor."""
    from .resample import kappa_posterior_interval

    found = kappa_and_variance(table)
    start = kappa_labels_normal(table, min_kappa, alpha, power)
    if found is None or start is None:
        return None
    total = sum(sum(row) for row in table)
    cells = [cell / total for row in table for cell in row]
    z_power = NormalDist().inv_cdf(power)

    def clears(n: int) -> bool:
        low = kappa_posterior_interval(
            [n * cell for cell in cells], seed=0, resamples=resamples, confidence=1 - alpha
        ).low
        return low - z_power * lower_end_sd(cells, n, alpha) >= min_kappa

    return smallest_passing(clears, 0, start)


def lower_end_sd(cells: Sequence[float], n: int, alpha: float = ALPHA) -> float:
    """How much kappa's interval's lower end varies across sets of n labels: the delta
    method over the multinomial cells applied to the end itself, kappa - z sqrt(v / n), not
    to kappa alone. A set that agrees more also has a narrower interval (v falls as kappa
    rises), so the end moves further than kappa does: planned with kappa's own spread, the
    labels reached 0.775 power instead of 0.80 in simulation. The gradient is numerical
    (central differences); the end is homogeneous of degree 0 in the cells, so the
    multinomial variance is sum pi g^2 - (sum pi g)^2 over the nine cells."""
    z = z_two_sided(alpha)
    size = round(math.sqrt(len(cells)))

    def end(values: Sequence[float]) -> float:
        table = [list(values[r * size : (r + 1) * size]) for r in range(size)]
        found = kappa_and_variance(table)
        assert found is not None
        return found[0] - z * math.sqrt(found[1] / n)

    step = 1e-6
    gradient = []
    for i in range(len(cells)):
        up = [c + (step if j == i else 0.0) for j, c in enumerate(cells)]
        down = [c - (step if j == i and c >= step else 0.0) for j, c in enumerate(cells)]
        gradient.append((end(up) - end(down)) / (sum(up) - sum(down)))
    first = sum(c * g for c, g in zip(cells, gradient, strict=True))
    second = sum(c * g * g for c, g in zip(cells, gradient, strict=True))
    return math.sqrt(max(0.0, second - first * first) / n)


# prediction-powered inference -------------------------------------------------------------
def ppi_labels(
    half_width: float,
    variance: float,
    rho: float,
    unlabelled: int,
    alpha: float = ALPHA,
) -> int:
    """Human (audit) labels for a prediction-powered interval of half-width ``half_width``
    on the mean of an outcome of variance ``variance``, when the judge's score correlates
    ``rho`` with the human label and ``unlabelled`` items carry only the judge's score.

    PPI++ (Angelopoulos, Duchi & Zrnic 2023) with its variance-optimal weight
    lambda = Cov / Var(judge) x N / (N + n) has variance Var(Y) / n x (1 - rho^2 N / (N + n))
    (N unlabelled, n labelled); labels alone (rho = 0) need n = z^2 Var(Y) / h^2, an upper
    bound. Setting z^2 Var(Y) (N (1 - rho^2) + n) = h^2 n (N + n) gives the quadratic
    h^2 n^2 + (h^2 N - z^2 V) n - z^2 V N (1 - rho^2) = 0, whose positive root, rounded up,
    is where the search starts: the interval itself takes Student's t at n - 2 degrees of
    freedom (section 16), wider than z, so n grows until ``ppi_half_width`` fits."""
    if half_width <= 0:
        raise ValueError("the half-width must be positive")
    zz_v = z_two_sided(alpha) ** 2 * variance
    h2 = half_width * half_width
    n_big = max(0, unlabelled)
    b = h2 * n_big - zz_v
    c = zz_v * n_big * (1 - rho * rho)
    n = max(PPI_FEWEST_LABELS, math.ceil((-b + math.sqrt(b * b + 4 * h2 * c)) / (2 * h2) - 1e-9))
    while ppi_half_width(n, variance, rho, n_big, alpha) > half_width and n < MAX_LABELS:
        n += 1
    return n


def ppi_half_width(
    labels: int, variance: float, rho: float, unlabelled: int, alpha: float = ALPHA
) -> float:
    """The half-width ``ppi_labels`` plans for: t_{n-2} sqrt(V / n (1 - rho^2 N / (N + n))),
    the quantile of the PPI interval (section 16; n - 2 as the fitted weight costs one)."""
    n_big = max(0, unlabelled)
    shrink = 1 - rho * rho * n_big / (n_big + labels)
    degrees = max(1, labels - 2)
    return t_quantile(degrees, 1 - alpha) * math.sqrt(variance / labels * shrink)


def ppi_labels_within(
    half_width: float, variance: float, rho: float, judged: int, alpha: float = ALPHA
) -> int | None:
    """Audit labels for a PPI interval of half-width ``half_width`` when the judge scored
    ``judged`` items per estimate (a candidate's pairs, a model's answers) and the labels
    are a sample of those same items, as the product's estimate takes them (section 16):
    n labelled leave N = judged - n judged only, so the smallest n <= judged with
    ``ppi_half_width(n, V, rho, judged - n)`` <= h, V [(1 - rho^2) / n + rho^2 / judged] under
    the root. None when even every item labelled does not reach it: no number of labels
    gives that precision with this suite (more cases do)."""
    if half_width <= 0:
        raise ValueError("the half-width must be positive")
    if judged < PPI_FEWEST_LABELS:
        return None

    def fits(n: int) -> bool:
        return ppi_half_width(n, variance, rho, judged - n, alpha) <= half_width

    if not fits(judged):
        return None
    # the half-width falls as n grows (fewer judged-only items, a smaller t): bisect
    return smallest_passing(fits, PPI_FEWEST_LABELS - 1, judged)


# noise floor ------------------------------------------------------------------------------
def floor_precision(cases: int, repeats: int, alpha: float = ALPHA) -> float | None:
    """The relative 95 % half-width of the noise floor (section 27) measured over ``cases``
    cases of ``repeats`` repeats each: floor = q sqrt(2 W / n) (q the t quantile of section
    27, a constant here), W the mean of n per-case variances on R - 1 degrees of freedom
    each. For normal scores of one spread,
    Var(W) / W^2 = 2 / (n (R - 1)), and the floor, a square root, has half that relative
    standard error: 1 / sqrt(2 n (R - 1)). None below two repeats (no floor)."""
    if repeats < 2 or cases <= 0:
        return None
    return z_two_sided(alpha) / math.sqrt(2 * cases * (repeats - 1))


def floor_repeats(cases: int, precision: float, alpha: float = ALPHA) -> int | None:
    """Repeats for the floor to be known within +-``precision`` (relative, at 95 %):
    R = 1 + ceil(z^2 / (2 n precision^2)), at least 2. None without a case."""
    if cases <= 0 or precision <= 0:
        return None
    z = z_two_sided(alpha)
    return max(2, 1 + math.ceil(z * z / (2 * cases * precision * precision) - 1e-9))


def smallest_passing(passes: Callable[[int], bool], low: int, high: int) -> int | None:
    """The smallest whole n above ``low`` for which ``passes`` (false below some n, true from
    it on) holds: ``high`` doubled until it passes (None past ``MAX_LABELS``), then the gap
    bisected."""
    while not passes(high):
        low, high = high, 2 * high
        if high > MAX_LABELS:
            return None
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if passes(middle) else (middle, high)
    return high
