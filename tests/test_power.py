"""Power and planning (spec: "Power and planning"): each figure by hand, then against a
seeded simulation (the planned n detects the planned delta about 80 % of the time), and
`evalmine plan` on the example suite, with and without a previous run."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

from pytest_evalmine.commands.cli import main
from pytest_evalmine.reports.power_section import power_figures, power_from_report, power_lines
from pytest_evalmine.stats import power as pw
from pytest_evalmine.stats.paired import PairedCase, compare_paired, noise_floor
from pytest_evalmine.stats.resample import kappa_interval, kappa_posterior_interval

from .conftest import SMALL_SUITE, latest_report, newest_run_dir

EXAMPLE = Path(__file__).resolve().parents[1] / "examples"
Z = 1.959963984540054  # the normal 97.5 % quantile
K = Z + 0.8416212335729143  # + the 80 % quantile


def fleiss_cohen_everitt(table: list[list[float]]) -> float:
    """n Var(kappa_hat), Fleiss, Cohen & Everitt (1969) eq. 13: an independent formula."""
    p = np.asarray(table, dtype=float)
    p = p / p.sum()
    rows, columns = p.sum(axis=1), p.sum(axis=0)
    observed, chance = np.trace(p), float(rows @ columns)
    kappa = (observed - chance) / (1 - chance)
    a = sum(p[i, i] * (1 - (rows[i] + columns[i]) * (1 - kappa)) ** 2 for i in range(3))
    b = (1 - kappa) ** 2 * sum(
        p[i, j] * (columns[i] + rows[j]) ** 2 for i in range(3) for j in range(3) if i != j
    )
    c = (kappa - chance * (1 - kappa)) ** 2
    return float((a + b - c) / (1 - chance) ** 2)


# by hand ----------------------------------------------------------------------------------
def test_the_z_values() -> None:
    assert pw.z_two_sided() == pytest.approx(Z, abs=1e-12)
    assert pw.z_sum() == pytest.approx(K, abs=1e-12)


def test_paired_binary_figures_by_hand() -> None:
    # n = k^2 (p - d^2) / d^2 = 7.84888 x 0.19 / 0.01 = 149.13 -> 150
    assert pw.paired_binary_cases(0.10, 0.20) == 150
    assert pw.paired_binary_cases(-0.10, 0.20) == 150  # a drop is planned like a gain
    # d = k sqrt(p / (n + k^2)) = 2.801585 x sqrt(0.2 / 157.84888)
    assert pw.paired_binary_mde(150, 0.20) == pytest.approx(K * math.sqrt(0.2 / (150 + K * K)))
    assert pw.paired_binary_mde(150, 0.20) == pytest.approx(0.09973, abs=1e-5)
    # the two are inverses: the planned n detects at most the planned delta
    for p, d in ((0.2, 0.05), (0.3, 0.1), (0.5, 0.2)):
        n = pw.paired_binary_cases(d, p)
        assert pw.paired_binary_mde(n, p) <= d < pw.paired_binary_mde(n - 1, p)
    # more cases changing one way than change at all: impossible
    assert pw.paired_binary_cases(0.3, 0.2) is None
    # 28 cases at 20 % discordance cannot detect even the largest delta (20 pts) at 80 %
    assert pw.paired_binary_mde(28, 0.20) is None
    assert pw.paired_binary_mde(0, 0.2) is None and pw.paired_binary_mde(10, 0.0) is None


def test_paired_continuous_figures_by_hand() -> None:
    # the normal test: (2.801585 x 0.3 / 0.05)^2 = 282.56 -> 283
    assert pw.paired_continuous_cases_normal(0.05, 0.3) == 283
    assert pw.paired_continuous_mde_normal(283, 0.3) == pytest.approx(K * 0.3 / math.sqrt(283))
    assert pw.paired_continuous_cases(0.0, 0.3) is None
    # the sd behind an interval: half-width z sd / sqrt(n)
    assert pw.sd_from_interval(-0.1, 0.1, 100) == pytest.approx(0.1 / Z * 10)


def test_the_reports_paired_spread_by_hand() -> None:
    """The report's interval (Dirichlet 1 per case, 1/2 at -1 and at 1) on 4 differences:
    the weighted mean's mean and variance from the Dirichlet's own moments,
    Var = sum a_i (x_i - m)^2 / (a0 (a0 + 1)), a0 = 5."""
    d = [0.1, 0.3, -0.2, 0.4]
    values, weights = [*d, -1.0, 1.0], [1, 1, 1, 1, 0.5, 0.5]
    m = sum(w * x for w, x in zip(weights, values, strict=True)) / 5
    variance = sum(w * (x - m) ** 2 for w, x in zip(weights, values, strict=True)) / (5 * 6)
    sd = float(np.std(d, ddof=1))
    centre, se = pw.jeffreys_paired_centre_and_se(4, sd, float(np.mean(d)))
    assert centre == pytest.approx(m, abs=1e-12)
    assert se == pytest.approx(math.sqrt(variance), abs=1e-12)
    # read backwards from the interval it implies, the sd comes back
    assert pw.sd_from_interval(-Z * se, Z * se, 4, delta=float(np.mean(d))) == pytest.approx(sd)


def test_the_checker_score_plan_uses_the_reports_test() -> None:
    """The planned n is the first where the report's test detects the delta with chance
    0.80 (``detects_paired_score``), more than the normal formula's on scores of small
    spread (the ends' half observations widen the interval), and the smallest detectable
    delta at that n is at most the planned one."""
    for sd, delta in ((0.15, 0.05), (0.2, 0.05), (0.3, 0.1)):
        n = pw.paired_continuous_cases(delta, sd)
        assert n is not None and n > pw.paired_continuous_cases_normal(delta, sd)
        assert pw.detects_paired_score(n, delta, sd)
        assert not pw.detects_paired_score(n - 1, delta, sd)
        mde = pw.paired_continuous_mde(n, sd)
        assert mde is not None and mde <= delta < pw.paired_continuous_mde(n - 1, sd)
    assert pw.paired_continuous_cases(0.05, 0.15) == 93  # the normal formula's 71
    assert pw.paired_continuous_mde(1, 0.2) is None


def test_ppi_labels_are_capped_at_the_items_per_estimate() -> None:
    """Issue 33: two candidates over 100 cases are two estimates of 100 pairs each, not one
    of 200; and a precision that labelling every pair does not reach is unreachable."""
    figures = power_figures(
        cases=100, repeats=1, candidates=[("a", "b"), ("a", "c")], judged=True, min_kappa=0.4
    )
    ppi = figures["ppi"]
    assert ppi["judged"] == 100
    assert ppi["labels_needed"] == pw.ppi_labels_within(0.10, 0.25, 0.5, 100)
    n = ppi["labels_needed"]

    # V [(1 - rho^2) / n + rho^2 / 100] under t_{n-2}: n fits, n - 1 does not
    def half(n: int) -> float:
        return student_t.ppf(0.975, n - 2) * math.sqrt(0.25 * (0.75 / n + 0.25 / 100))

    assert half(n) <= 0.10 < half(n - 1)
    assert n <= 100
    small = power_figures(cases=28, repeats=1, candidates=[("a", "b")], judged=True, min_kappa=0.4)
    assert small["ppi"]["labels_needed"] is None and small["ppi"]["labels_only"] is None
    line = next(x for x in power_lines(small) if "PPI" in x)
    assert "unreachable with this suite" in line
    assert f"+-{100 * student_t.ppf(0.975, 26) * math.sqrt(0.25 / 28):.1f} pts" in line


def test_kappa_variance_matches_fleiss_cohen_everitt() -> None:
    for agreement, shares in ((0.7, [1, 1, 1]), (0.8, [2, 1, 2]), (0.75, [5, 1, 1])):
        table = pw.agreement_table(agreement, shares)
        kappa, variance = pw.kappa_and_variance(table)
        chance = sum((s / sum(shares)) ** 2 for s in shares)
        assert sum(map(sum, table)) == pytest.approx(1.0)
        assert sum(table[i][i] for i in range(3)) == pytest.approx(agreement)
        assert kappa == pytest.approx((agreement - chance) / (1 - chance))
        assert variance == pytest.approx(fleiss_cohen_everitt(table), rel=1e-9)
    # 70 % agreement over three even categories: kappa (0.7 - 1/3) / (2/3) = 0.55
    assert pw.kappa_and_variance(pw.agreement_table(0.7, [1, 1, 1]))[0] == pytest.approx(0.55)
    with pytest.raises(ValueError, match="between chance"):
        pw.agreement_table(0.2, [1, 1, 1])


def test_kappa_labels_by_hand() -> None:
    table = pw.agreement_table(0.7, [1, 1, 1])
    # normal alone: k^2 v / (kappa - floor)^2 = 7.84888 x 0.4725 / 0.15^2 = 164.83 -> 165
    assert pw.kappa_labels_normal(table, 0.4) == 165
    n = pw.kappa_labels(table, 0.4)
    # the interval's own pull towards 0 and the end's wider spread ask for more labels
    assert 165 < n < 200
    assert pw.kappa_labels(table, 0.55) is None  # kappa not above the floor
    assert pw.kappa_labels(table, 0.6) is None


def test_ppi_labels_by_hand() -> None:
    # labels alone: z^2 V / h^2 = 3.841459 x 0.25 / 0.01 = 96.04, where the search starts;
    # the interval's t at n - 2: t_96 sqrt(0.25 / 98) = 1.98498 x 0.050508 = 0.10026 > 0.10,
    # t_97 sqrt(0.25 / 99) = 1.98472 x 0.050252 = 0.09974 <= 0.10 -> 99
    assert pw.ppi_labels(0.10, 0.25, 0.0, 0) == 99
    assert pw.ppi_labels(0.10, 0.25, 0.9, 0) == 99  # no unlabelled items: the judge adds none
    n = pw.ppi_labels(0.05, 0.25, 0.5, 200)
    assert pw.ppi_half_width(n, 0.25, 0.5, 200) <= 0.05 < pw.ppi_half_width(n - 1, 0.25, 0.5, 200)
    # a perfect judge over very many items: Var -> V/n (1 - N/(N+n)) = V/(N+n); the interval
    # still needs a degree of freedom: 3 labels
    assert pw.ppi_labels(0.05, 0.25, 1.0, 10**6) == 3
    assert pw.ppi_labels(0.05, 0.25, 0.5, 200) < pw.ppi_labels(0.05, 0.25, 0.0, 0)


def test_floor_repeats_by_hand() -> None:
    # R = 1 + ceil(z^2 / (2 n r^2)) = 1 + ceil(3.8415 / 3.5) = 3 for 28 cases at +-25 %
    assert pw.floor_repeats(28, 0.25) == 3
    assert pw.floor_precision(28, 3) == pytest.approx(Z / math.sqrt(2 * 28 * 2))
    assert pw.floor_precision(28, 3) <= 0.25 < pw.floor_precision(28, 2)
    assert pw.floor_repeats(1000, 0.25) == 2  # two repeats at least: one has no floor
    assert pw.floor_precision(28, 1) is None


# against simulation -----------------------------------------------------------------------
def test_planned_cases_detect_the_planned_binary_delta_80_percent() -> None:
    """2,000 paired pass/fail samples at the planned n, tested as the formula assumes (the
    normal interval of mean(d) clears 0): detection 0.80 +- 0.04."""
    rng = np.random.default_rng(20240501)
    for discordance, delta in ((0.2, 0.1), (0.3, 0.1), (0.4, 0.2)):
        n = pw.paired_binary_cases(delta, discordance)
        better, worse = (discordance + delta) / 2, (discordance - delta) / 2
        counts = rng.multinomial(n, [better, worse, 1 - discordance], size=2000)
        mean = (counts[:, 0] - counts[:, 1]) / n
        variance = (counts[:, 0] + counts[:, 1]) / n - mean**2
        detected = float(np.mean(mean - Z * np.sqrt(variance / n) > 0))
        assert abs(detected - 0.80) <= 0.04, (discordance, delta, n, detected)


def test_the_projects_paired_interval_agrees() -> None:
    """300 samples through stats.paired.compare_paired (the report's bootstrap, 2,000 draws):
    its interval clears 0 about as often (0.80 +- 0.07, three binomial standard errors)."""
    rng = np.random.default_rng(7)
    discordance, delta = 0.2, 0.1
    n = pw.paired_binary_cases(delta, discordance)
    detected = 0
    for sample in range(300):
        kind = rng.choice(3, size=n, p=[(0.2 + 0.1) / 2, (0.2 - 0.1) / 2, 0.8])
        cases = [
            PairedCase("t", str(i), (0.0,) if k == 0 else (1.0,), (1.0,) if k == 0 else (0.0,))
            if k < 2
            else PairedCase("t", str(i), (1.0,), (1.0,))
            for i, k in enumerate(kind)
        ]
        comparison = compare_paired(cases, seed=sample, resamples=2000, with_mcnemar=False)
        detected += comparison.interval.low > 0
    assert abs(detected / 300 - 0.80) <= 0.07, detected


def test_planned_cases_detect_the_planned_score_delta_80_percent() -> None:
    """200 samples through the report's own test (``compare_paired``, 1,000 draws) at the
    planned n: detection 0.80 +- 0.085 (three binomial sd). The normal formula's n (71)
    detected 0.60 here (benchmarks/sim_score_power.py, 1,000 samples)."""
    rng = np.random.default_rng(3)
    sd, delta = 0.15, 0.05
    n = pw.paired_continuous_cases(delta, sd)
    detected = 0
    for sample in range(200):
        d = np.clip(rng.normal(delta, sd, size=n), -1, 1).tolist()
        cases = [PairedCase("t", str(i), (0.5 - x / 2,), (0.5 + x / 2,)) for i, x in enumerate(d)]
        comparison = compare_paired(cases, seed=sample, resamples=1000, with_mcnemar=False)
        detected += comparison.interval.low > 0
    assert abs(detected / 200 - 0.80) <= 0.085, detected


@pytest.mark.parametrize(
    ("agreement", "shares", "floor"), [(0.7, [1, 1, 1], 0.4), (0.8, [2, 1, 2], 0.6)]
)
def test_planned_labels_clear_min_kappa_80_percent(
    agreement: float, shares: list[int], floor: float
) -> None:
    """1,000 label sets at the planned n through the project's kappa interval (1,000 draws
    each): its lower end clears min_kappa 0.80 +- 0.04 of the time."""
    table = pw.agreement_table(agreement, shares)
    n = pw.kappa_labels(table, floor)
    rng = np.random.default_rng(11)
    counts = rng.multinomial(n, np.ravel(table), size=1000)
    cleared = sum(
        kappa_posterior_interval(c.tolist(), seed=i, resamples=1000).low >= floor
        for i, c in enumerate(counts)
    )
    assert abs(cleared / 1000 - 0.80) <= 0.04, (n, cleared)


def test_kappa_posterior_interval_is_kappa_interval_over_counts() -> None:
    ratings = [("baseline", "baseline")] * 7 + [("tie", "candidate")] * 2 + [("tie", "tie")] * 3
    counts = [7, 0, 0, 0, 3, 2, 0, 0, 0]
    assert kappa_interval(ratings, seed=5) == kappa_posterior_interval(counts, seed=5)


def test_planned_audit_labels_give_the_planned_half_width() -> None:
    """PPI++ with its optimal weight over 4,000 simulated audits (a judge agreeing with the
    human label 75 % of the time: correlation 0.5): the interval's quantile (t at n - 2,
    from scipy here) x the estimates' spread is the planned half-width within 5 %, and the
    labels-only spread is the labels-only one."""
    from scipy.stats import t

    rng = np.random.default_rng(17)
    rho, unlabelled, half_width = 0.5, 200, 0.05
    n = pw.ppi_labels(half_width, 0.25, rho, unlabelled)
    agree = (1 + rho) / 2
    y = rng.random((4000, n)) < 0.5
    judge = np.where(rng.random((4000, n)) < agree, y, ~y)
    # the judge's calls on the unlabelled items (their human labels are never seen)
    hidden = rng.random((4000, unlabelled)) < 0.5
    others = np.where(rng.random((4000, unlabelled)) < agree, hidden, ~hidden)
    weight = rho * unlabelled / (unlabelled + n)  # Cov / Var(judge) x N / (N + n)
    estimates = y.mean(axis=1) - weight * (judge.mean(axis=1) - others.mean(axis=1))
    quantile = t.ppf(0.975, n - 2)
    assert quantile * estimates.std() == pytest.approx(
        pw.ppi_half_width(n, 0.25, rho, unlabelled), rel=0.05
    )
    assert quantile * estimates.std() <= half_width * 1.05
    assert Z * y.mean(axis=1).std() == pytest.approx(Z * math.sqrt(0.25 / n), rel=0.05)


def test_planned_repeats_measure_the_floor_to_the_planned_precision() -> None:
    """2,000 suites of normal scores at the planned repeats: the floor's central 95 % lies
    within +-(precision planned) of the true floor, to 0.03."""
    rng = np.random.default_rng(23)
    cases, sigma = 28, 0.2
    repeats = pw.floor_repeats(cases, 0.25)
    true = Z * math.sqrt(2 * sigma**2 / cases)
    scores = rng.random((2000, cases, 1)) + sigma * rng.standard_normal((2000, cases, repeats))
    # stats.paired.noise_floor, vectorised: t sqrt(2 W / n), W the mean per-case variance, t
    # Student's at min(n (R - 1), Satterthwaite's 2 W^2 / (Var(variances) / n)) degrees
    variances = scores.var(axis=2, ddof=1)
    within = variances.mean(axis=1)
    degrees = np.minimum(
        cases * (repeats - 1), 2 * within**2 / (variances.var(axis=1, ddof=1) / cases)
    )
    floors = student_t.ppf(0.975, degrees) * np.sqrt(2 * within / cases) / true
    for sample in range(20):
        assert noise_floor(scores[sample].tolist()) / true == pytest.approx(floors[sample])
    low, high = np.quantile(floors, [0.025, 0.975])
    assert (high - low) / 2 == pytest.approx(pw.floor_precision(cases, repeats), abs=0.03)
    assert (high - low) / 2 <= 0.25


# the figures and the command --------------------------------------------------------------
PREVIOUS = {
    "run_id": "20260101T000000Z-abcd",
    "models": ["a", "b"],
    "items": 200,
    "repeats": 1,
    "suite": {"label_counts": {"t": 30}},
    "paired": [
        {
            "baseline": "a",
            "candidate": "b",
            "metric": "all_pass",
            "cases": 100,
            "worse": 10,
            "better": 20,
            "delta": 0.1,
            "interval": {"low": 0.0, "high": 0.2},
        },
        {
            "baseline": "a",
            "candidate": "b",
            "metric": "score",
            "cases": 100,
            "worse": 30,
            "better": 40,
            "delta": 0.02,
            "interval": {"low": -0.02, "high": 0.06},
        },
    ],
    "headline": {
        "calibration": {
            "n": 30,
            "min_kappa": 0.4,
            "min_labels": 10,
            "confusion": {"matrix": [[10, 1, 1], [1, 4, 1], [1, 1, 10]]},
        }
    },
}


def test_figures_from_a_report_use_what_it_measured() -> None:
    power = power_from_report(PREVIOUS)
    binary, score = power["paired"]
    assert binary["source"] == "observed" and binary["discordance"] == pytest.approx(0.30)
    assert binary["mde_points"] == pytest.approx(100 * pw.paired_binary_mde(100, 0.30))
    assert binary["cases_for_delta"] == pw.paired_binary_cases(0.05, 0.30)
    # the interval's spread less the ends' half observations (section 27's interval)
    se = 0.08 / (2 * Z)
    m = 100 * 0.02 / 101
    spread = se * se * 101 * 102 - 100 * (0.02 - m) ** 2 - ((1 + m) ** 2 + (1 - m) ** 2) / 2
    sd = math.sqrt(spread / 99)
    assert sd < 0.08 / (2 * Z) * 10
    assert score["sd"] == pytest.approx(sd)
    assert score["cases_for_delta"] == pw.paired_continuous_cases(0.05, sd)
    kappa = power["kappa"]
    assert kappa["source"] == "observed" and kappa["labels"] == 30
    # the measured table with the interval's 1/9 pseudo-label per cell
    table = [[c + 1 / 9 for c in row] for row in [[10, 1, 1], [1, 4, 1], [1, 1, 10]]]
    assert kappa["kappa"] == pytest.approx(pw.kappa_and_variance(table)[0])
    assert kappa["labels_needed"] == pw.kappa_labels(table, 0.4)
    assert power["noise_floor"]["repeats_needed"] == pw.floor_repeats(100, 0.25)
    lines = power_lines(power)
    assert lines[0] == (
        "at 80 % power and 95 % confidence, from run 20260101T000000Z-abcd; 100 cases x 1 repeat(s)"
    )
    assert "discordance 30 % (observed)" in lines[1]


def run(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    code = main([args[0], "--rootdir", str(root), *args[1:]])
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_on_the_example_suite_without_a_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "examples")
    code, out, err = run(capsys, tmp_path, "plan", "examples/support-desk.eval.yaml")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1] == (
        "at 80 % power and 95 % confidence, from assumptions (no previous run); 28 cases x 1 "
        "repeat(s)"
    )
    assert "discordance 20 % (assumed): no delta is detectable" in lines[2]
    assert f"5.0 pts needs {pw.paired_binary_cases(0.05, 0.2)} cases" in lines[2]
    assert "agreement 70 %" in lines[3] and "(the suite has 18)" in lines[3]
    assert (
        lines[5]
        == "noise floor: unknown now (one repeat); +-25 % needs 3 repeats (--evalmine-repeat)"
    )
    code, out, _ = run(
        capsys,
        tmp_path,
        "plan",
        "examples/support-desk.eval.yaml",
        "--json",
        "--discordance",
        "0.4",
        "--delta",
        "10",
        "--repeat",
        "3",
    )
    figures = json.loads(out)
    row = figures["paired"][0]
    assert (row["discordance"], row["cases_for_delta"]) == (0.4, pw.paired_binary_cases(0.1, 0.4))
    assert row["mde_points"] == pytest.approx(100 * pw.paired_binary_mde(28, 0.4))
    assert figures["noise_floor"]["precision_now"] == pytest.approx(pw.floor_precision(28, 3))


def test_plan_reads_the_previous_run_and_an_option_wins(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "examples")
    run_dir = tmp_path / "reports" / "support-desk" / PREVIOUS["run_id"]
    run_dir.mkdir(parents=True)
    report = json.loads(json.dumps(PREVIOUS))
    for entry in report["paired"]:
        entry["baseline"], entry["candidate"] = (
            "anthropic/claude-haiku-4-5",
            "google/gemini-2.5-flash",
        )
    (run_dir / "report.json").write_text(json.dumps(report))
    (run_dir.parent / "latest.json").write_text(
        json.dumps({"path": f"{PREVIOUS['run_id']}/report.json"})
    )
    code, out, _ = run(capsys, tmp_path, "plan", "examples/support-desk.eval.yaml", "--json")
    figures = json.loads(out)
    assert code == 0 and figures["source"] == f"run {PREVIOUS['run_id']} and assumptions"
    assert figures["paired"][0]["discordance"] == pytest.approx(0.30)
    assert figures["kappa"]["source"] == "observed"
    code, out, _ = run(
        capsys,
        tmp_path,
        "plan",
        "examples/support-desk.eval.yaml",
        "--json",
        "--discordance",
        "0.5",
        "--agreement",
        "0.9",
    )
    figures = json.loads(out)
    assert (
        figures["paired"][0]["discordance"] == 0.5 and figures["paired"][0]["source"] == "assumed"
    )
    assert figures["kappa"]["source"] == "assumed" and figures["kappa"][
        "agreement"
    ] == pytest.approx(0.9)


def test_plan_refuses_an_agreement_below_chance(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "examples")
    code, _, err = run(
        capsys, tmp_path, "plan", "examples/support-desk.eval.yaml", "--agreement", "0.1"
    )
    assert code == 4 and err.startswith("evalmine: plan: agreement 0.1 must lie between chance")


def test_every_report_has_a_power_section(pytester: pytest.Pytester) -> None:
    """A run's report.json carries ``power`` from its own numbers; report.md and report.html
    show it; the terminal summary does not (planning figures, not the run's result)."""
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    report = latest_report(pytester.path)
    power = report["power"]
    row = power["paired"][0]
    assert (row["baseline"], row["candidate"], row["metric"]) == (
        "fake/alpha",
        "fake/beta",
        "all_pass",
    )
    assert power["cases"] == 3 and power["source"] == f"run {report['run_id']}"
    assert power["noise_floor"]["repeats_needed"] == pw.floor_repeats(3, 0.25)
    run_dir = newest_run_dir(pytester.path)
    markdown = (run_dir / "report.md").read_text()
    assert "## Power\n\nat 80 % power and 95 % confidence, from run" in markdown
    assert '<section id="power"' in (run_dir / "report.html").read_text()
    assert "-- Power --" not in result.stdout.str()
