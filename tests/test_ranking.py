"""The Bradley-Terry ranking and the Pareto front (stats/ranking.py): by hand, and against an
independent fit (Zermelo's iteration, written here)."""

from __future__ import annotations

import json
import math
import random

import pytest

from pytest_evalmine.stats.ranking import (
    PSEUDO_WINS,
    Comparison,
    CostQuality,
    bradley_terry,
    fit_strengths,
    pareto_front,
)

from .conftest import SMALL_SUITE, latest_report, newest_run_dir

JUDGED = SMALL_SUITE.replace(
    "tasks:",
    """judge:
  model: fake/judge
  rubric: Prefer the answer a customer would find most helpful.
tasks:""",
)

np = pytest.importorskip("numpy")
pytest.importorskip("scipy")


def zermelo(wins: list[list[float]], rounds: int = 20_000) -> list[float]:
    """The MM iteration p_i <- W_i / sum_j n_ij / (p_i + p_j) (Zermelo 1929, Hunter 2004),
    log-strengths centred to sum 0: an independent route to the same maximum."""
    k = len(wins)
    p = [1.0] * k
    for _ in range(rounds):
        for i in range(k):
            total = sum(wins[i][j] for j in range(k) if j != i)
            denominator = sum((wins[i][j] + wins[j][i]) / (p[i] + p[j]) for j in range(k) if j != i)
            p[i] = total / denominator
        scale = math.exp(sum(math.log(x) for x in p) / k)
        p = [x / scale for x in p]
    return [math.log(x) for x in p]


def test_two_models_strength_difference_is_the_logit_of_the_win_share():
    # 7 wins, 2 losses and a tie for b: 7.5 of 10, plus half a win each way
    shares = [1.0] * 7 + [0.0] * 2 + [0.5]
    comparisons = [Comparison(f"t/c{i}", "b", "a", s) for i, s in enumerate(shares)]
    ranked = bradley_terry(comparisons, ["a", "b"], seed=1, resamples=200)
    assert [r.model for r in ranked] == ["b", "a"]
    expected = math.log((7.5 + PSEUDO_WINS) / (2.5 + PSEUDO_WINS))
    assert ranked[0].strength - ranked[1].strength == pytest.approx(expected, abs=1e-6)
    assert ranked[0].strength + ranked[1].strength == pytest.approx(0.0, abs=1e-9)
    assert ranked[0].interval.low < ranked[0].strength < ranked[0].interval.high
    # 10 pairs: the intervals overlap, the two are not told apart
    assert ranked[0].tied_with == ["a"] and ranked[1].tied_with == ["b"]


def test_two_models_closed_form_is_the_likelihoods_maximum_for_every_draw():
    """Two models take the closed form (no scipy); scipy's optimiser on the same likelihood,
    written here, lands on the same strengths, draw by draw."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_expit

    rng = np.random.default_rng(3)
    stack = rng.uniform(0.0, 9.0, size=(5, 2, 2))
    stack[:, [0, 1], [0, 1]] = 0.0
    fitted = fit_strengths(stack)
    for draw, strengths in zip(stack, fitted, strict=True):
        ahead, behind = draw[0, 1] + PSEUDO_WINS, draw[1, 0] + PSEUDO_WINS
        best = minimize_scalar(
            lambda d, a=ahead, b=behind: -(a * log_expit(d) + b * log_expit(-d)),
            bounds=(-50, 50),
            method="bounded",
            options={"xatol": 1e-12},
        )
        assert strengths[0] - strengths[1] == pytest.approx(best.x, abs=1e-6)
        assert strengths.sum() == pytest.approx(0.0, abs=1e-12)


def test_all_wins_give_a_finite_strength():
    comparisons = [Comparison(f"t/c{i}", "b", "a", 1.0) for i in range(5)]
    ranked = bradley_terry(comparisons, ["a", "b"], seed=1, resamples=100)
    assert ranked[0].strength - ranked[1].strength == pytest.approx(math.log(5.5 / 0.5), abs=1e-6)


def test_fit_matches_zermelo_on_three_models():
    wins = [[0.0, 6.0, 9.5], [4.0, 0.0, 7.0], [2.5, 3.0, 0.0]]
    padded = [
        [w + (PSEUDO_WINS if i != j else 0.0) for j, w in enumerate(row)]
        for i, row in enumerate(wins)
    ]
    expected = zermelo(padded)
    fitted = fit_strengths(np.array(wins))
    assert list(fitted) == pytest.approx(expected, abs=1e-5)
    # the same matrix in a stack of draws fits the same
    stacked = fit_strengths(np.array([wins, wins, np.array(wins).T]))
    assert list(stacked[0]) == pytest.approx(expected, abs=1e-5)
    assert list(stacked[2]) == pytest.approx(
        zermelo([list(r) for r in np.array(padded).T]), abs=1e-5
    )


def test_star_graph_ranks_candidates_through_the_baseline():
    # only candidate-vs-baseline pairs: c beats the baseline, b loses to it
    rng = random.Random(3)
    comparisons = []
    for i in range(300):
        comparisons.append(Comparison(f"t/c{i}", "b", "base", float(rng.random() < 0.3)))
        comparisons.append(Comparison(f"t/c{i}", "c", "base", float(rng.random() < 0.85)))
    ranked = bradley_terry(comparisons, ["base", "b", "c"], seed=7, resamples=500)
    assert [r.model for r in ranked] == ["c", "base", "b"]
    # each well apart from the next at 300 cases
    assert all(r.tied_with == [] for r in ranked)
    by_model = {r.model: r for r in ranked}
    assert by_model["base"].pairs == 600


def test_bootstrap_is_clustered_by_case_and_seeded():
    # each case carries two pairs that agree: clustering must see 40 cases, not 80 pairs
    rng = random.Random(5)
    per_case = []
    for i in range(40):
        share = float(rng.random() < 0.6)
        per_case += [Comparison(f"t/c{i}", "b", "a", share), Comparison(f"t/c{i}", "b", "a", share)]
    split = [Comparison(f"{c.cluster}/{n}", c.a, c.b, c.a_share) for n, c in enumerate(per_case)]
    clustered = bradley_terry(per_case, ["a", "b"], seed=11, resamples=1000)
    independent = bradley_terry(split, ["a", "b"], seed=11, resamples=1000)
    assert clustered[0].strength == pytest.approx(independent[0].strength)
    width = clustered[0].interval.high - clustered[0].interval.low
    narrower = independent[0].interval.high - independent[0].interval.low
    # twice the pairs per unit: about sqrt(2) wider
    assert width / narrower == pytest.approx(math.sqrt(2), rel=0.15)
    again = bradley_terry(per_case, ["a", "b"], seed=11, resamples=1000)
    assert again[0].interval == clustered[0].interval


def test_fewer_than_two_models_give_no_ranking():
    assert bradley_terry([], ["a", "b"], seed=1) == []


def test_pareto_front_by_hand():
    points = [
        CostQuality("cheap", 0.50, 0.001),
        CostQuality("best", 0.70, 0.010),
        CostQuality("dominated", 0.55, 0.012),  # worse and dearer than best
        CostQuality("middle", 0.60, 0.004),
        CostQuality("same_as_middle_but_dearer", 0.60, 0.005),
        CostQuality("unpriced", 0.90, None),
    ]
    assert pareto_front(points) == ["cheap", "best", "middle"]


def test_pareto_front_keeps_exact_equals():
    # neither is strictly better in either: both on the front
    points = [CostQuality("a", 0.5, 0.01), CostQuality("b", 0.5, 0.01)]
    assert pareto_front(points) == ["a", "b"]


def test_three_model_run_reports_the_ranking_and_the_pareto_front(pytester: pytest.Pytester):
    """report.json's ``ranking`` over a three-model fake run, its lines in the terminal and
    report.md, and the chart in report.html; no labels, so the ranking is flagged as its win
    rates are."""
    pytester.makefile(".eval.yaml", small=JUDGED)
    models = "fake/alpha,fake/beta,fake/gamma"
    result = pytester.runpytest(
        "--evalmine-fake", f"--evalmine-models={models}", "-p", "no:cacheprovider"
    )
    report = latest_report(pytester.path)
    ranking = report["ranking"]
    strengths = ranking["strengths"]
    assert sorted(r["model"] for r in strengths) == sorted(models.split(","))
    assert [r["rank"] for r in strengths] == [1, 2, 3]
    assert sum(r["strength"] for r in strengths) == pytest.approx(0.0, abs=1e-6)
    judged = report["headline"]["pairs"]["judged"]
    # a star graph: the baseline is in every pair, each candidate in its own
    by_model = {r["model"]: r for r in strengths}
    assert by_model["fake/alpha"]["pairs"] == judged
    assert by_model["fake/beta"]["pairs"] + by_model["fake/gamma"]["pairs"] == judged
    for row in strengths:
        assert row["interval"]["low"] <= row["strength"] <= row["interval"]["high"]
    # the win rates are not headline-eligible (no labels): neither is the ranking
    assert not report["headline"]["headline_eligible"]
    assert ranking["flag"] == "UNCALIBRATED" and not ranking["headline_eligible"]
    assert ranking["ineligible_reasons"]
    rows = {r["model"]: r for r in ranking["cost_quality"]}
    win_rates = {r["candidate"]: r["win_rate"] for r in report["headline"]["win_rates"]}
    assert rows["fake/beta"]["win_rate"] == pytest.approx(win_rates["fake/beta"])
    assert rows["fake/alpha"]["baseline"] and rows["fake/alpha"]["win_rate"] is None
    front = ranking["pareto_front"]["strength"]
    assert front and all(rows[m]["pareto"]["strength"] for m in front)
    # told apart as stronger: a higher strength whose interval does not overlap (not tied)
    ahead = {
        (x["model"], y["model"])
        for x in strengths
        for y in strengths
        if x["strength"] > y["strength"] and y["model"] not in x["tied_with"]
    }
    expected_front = pareto_front(
        [CostQuality(m, r["strength"], r["cost_per_case_usd"]) for m, r in rows.items()],
        lambda x, y: (x, y) in ahead,
    )
    assert front == expected_front
    out = result.stdout.str()
    assert (
        "-- Ranking and cost (Bradley-Terry" in out
        and "Pareto front (no model told apart as better for no more)" in out
    )
    assert "UNCALIBRATED" in out.split("-- Ranking and cost")[1]
    run_dir = newest_run_dir(pytester.path)
    assert "## Ranking and cost" in (run_dir / "report.md").read_text()
    page = (run_dir / "report.html").read_text()
    assert '<section id="ranking">' in page and 'class="cost-quality"' in page
    assert '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 760 320"' in page


def test_two_model_run_ranks_too_and_one_model_has_no_ranking(pytester: pytest.Pytester):
    pytester.makefile(".eval.yaml", small=JUDGED)
    pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    ranking = latest_report(pytester.path)["ranking"]
    assert [r["model"] for r in ranking["strengths"]] in (
        ["fake/alpha", "fake/beta"],
        ["fake/beta", "fake/alpha"],
    )
    pytester.runpytest("--evalmine-fake", "--evalmine-models=fake/alpha", "-p", "no:cacheprovider")
    assert latest_report(pytester.path)["ranking"] is None


def _summary(eligible: bool):
    """The parts of a RunSummary ``summary_ranking`` reads: two candidates judged against a
    baseline over four cases, their win rates eligible or not."""
    from types import SimpleNamespace

    comparisons = [
        SimpleNamespace(
            task="t", case=f"c{i}", candidate=candidate, baseline="alpha", judged=True, score=share
        )
        for i, shares in enumerate([(1.0, 0.0), (1.0, 0.5), (0.0, 0.0), (1.0, 1.0)])
        for candidate, share in zip(("beta", "gamma"), shares, strict=True)
    ]
    rates = [
        SimpleNamespace(
            candidate=c,
            win_rate=w,
            ineligible_reasons=[] if eligible else [f"no labels for {c}"],
        )
        for c, w in (("beta", 0.75), ("gamma", 0.375))
    ]
    headline = SimpleNamespace(all_pairs=comparisons, overall=rates, headline_eligible=eligible)
    scores = [
        SimpleNamespace(
            model=m,
            cost_if_uncached_usd=cost,
            cost_lower_bound=False,
            all_pass=SimpleNamespace(value=0.5),
        )
        for m, cost in (("alpha", 0.4), ("beta", 0.8), ("gamma", 0.2))
    ]
    records = [
        SimpleNamespace(
            model=m, task="t", case=f"c{i}", repeat=0, outcome="passed" if i < 2 else "failed"
        )
        for m in ("alpha", "beta", "gamma")
        for i in range(4)
    ]
    return SimpleNamespace(
        paired=[],
        models=["alpha", "beta", "gamma"],
        headline=headline,
        scores=scores,
        records=records,
        suite_hash="h",
    )


def test_ranking_carries_the_win_rates_calibration_flag():
    from pytest_evalmine.reports.ranking_section import ranking_lines, summary_ranking

    eligible = summary_ranking(_summary(True))
    assert eligible["headline_eligible"] and eligible["flag"] is None
    assert eligible["ineligible_reasons"] == []
    assert "UNCALIBRATED" not in "\n".join(ranking_lines(eligible))
    flagged = summary_ranking(_summary(False))
    assert flagged["flag"] == "UNCALIBRATED"
    assert flagged["ineligible_reasons"] == [
        "beta: no labels for beta",
        "gamma: no labels for gamma",
    ]
    lines = ranking_lines(flagged)
    assert all("\u2020 UNCALIBRATED" in line for line in lines[:3])
    # beta won 3 of 4 over the baseline, gamma 1.5 of 4: beta, alpha, gamma
    assert [r["model"] for r in flagged["strengths"]] == ["beta", "alpha", "gamma"]
    rows = {r["model"]: r for r in flagged["cost_quality"]}
    assert rows["beta"]["cost_per_case_usd"] == pytest.approx(0.2)
    # beta is strongest, gamma cheapest; alpha sits between on both: on the front too
    assert flagged["pareto_front"]["strength"] == ["alpha", "beta", "gamma"]
    # all pass the same: only the cheapest is on that front
    assert flagged["pareto_front"]["all_pass"] == ["gamma"]
    assert any("Pareto front (no model told apart as better for no more)" in line for line in lines)


def test_judge_pairs_all_judges_every_two_models_and_the_estimate_counts_them(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    """``judge: {pairs: all}`` judges every two models in both orders; the win rates still
    read the baseline's pairs only (the same as without it), the ranking reads them all, and
    the estimate before spending counts the extra calls."""
    models = "--evalmine-models=fake/alpha,fake/beta,fake/gamma"
    # a cache of its own per run: both estimates price every call as new
    monkeypatch.setenv("EVALMINE_HOME", str(pytester.path / "home-star"))
    pytester.makefile(".eval.yaml", small=JUDGED)
    pytester.runpytest("--evalmine-fake", models, "-p", "no:cacheprovider")
    star = latest_report(pytester.path)
    monkeypatch.setenv("EVALMINE_HOME", str(pytester.path / "home-all"))
    pytester.makefile(".eval.yaml", small=JUDGED.replace("judge:\n", "judge:\n  pairs: all\n"))
    result = pytester.runpytest("--evalmine-fake", models, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=9)
    every = latest_report(pytester.path)
    cases = 3
    assert star["headline"]["pairs"]["between_candidates"] == 0
    assert every["headline"]["pairs"]["between_candidates"] == cases
    assert every["headline"]["pairs"]["total"] == star["headline"]["pairs"]["total"] == 2 * cases
    calls = every["headline"]["judge_calls"]
    # three model pairs, both orders (a request asked twice in the run is cached the second time)
    assert calls["made"] + calls["cached"] == 2 * 3 * cases
    # the baseline's pairs are the same requests: the same win rates
    assert [r["win_rate"] for r in every["headline"]["win_rates"]] == [
        r["win_rate"] for r in star["headline"]["win_rates"]
    ]
    by_model = {r["model"]: r["pairs"] for r in every["ranking"]["strengths"]}
    assert by_model == {"fake/alpha": 2 * cases, "fake/beta": 2 * cases, "fake/gamma": 2 * cases}
    run_dir = newest_run_dir(pytester.path)
    lines = (run_dir / "pairs.jsonl").read_text().splitlines()
    kinds = {(json.loads(line)["baseline"], json.loads(line)["candidate"]) for line in lines}
    assert ("fake/beta", "fake/gamma") in kinds and len(lines) == 3 * cases
    # the estimate priced the judge's calls of the third model pair too (nothing cached in
    # either run, the same answers)
    assert every["cost"]["estimate_usd"] > star["cost"]["estimate_usd"]


def test_judge_pairs_is_baseline_by_default_and_refuses_other_values(tmp_path):
    from pytest_evalmine.errors import EvalmineError
    from pytest_evalmine.suite.loader import load_suite

    path = tmp_path / "small.eval.yaml"
    path.write_text(JUDGED)
    assert load_suite(path).judge.pairs == "baseline"
    path.write_text(JUDGED.replace("judge:\n", "judge:\n  pairs: all\n"))
    assert load_suite(path).judge.pairs == "all"
    path.write_text(JUDGED.replace("judge:\n", "judge:\n  pairs: some\n"))
    with pytest.raises(EvalmineError, match="pairs"):
        load_suite(path)


def test_cost_quality_chart_marks_the_front_and_the_flag():
    from pytest_evalmine.reports.ranking_section import cost_quality_svg, summary_ranking

    flagged = summary_ranking(_summary(False))
    svg = cost_quality_svg(flagged)
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 760 320"')
    assert svg.count("<circle") == 3 and "<polyline" in svg  # three on the front, joined
    assert "\u2020 UNCALIBRATED" in svg
    # the dearest point sits right of the middle: its label runs leftwards
    assert 'text-anchor="end">beta $0.2000' in svg
    assert "UNCALIBRATED" not in cost_quality_svg(summary_ranking(_summary(True)))


def test_the_expanded_percentile_level_by_hand() -> None:
    """Hesterberg's expanded percentile interval: the quantiles at
    Phi(-sqrt(n / (n - 1)) t_{n-1}(0.975)), 1.59 % at 20 cases (the plain 2.5 % covered 0.93
    there, benchmarks/sim_ranking.py), towards 2.5 % as the cases grow."""
    from scipy.stats import norm
    from scipy.stats import t as student_t

    from pytest_evalmine.stats.ranking import expanded_confidence

    for n in (5, 20, 50, 200):
        tail = norm.cdf(-math.sqrt(n / (n - 1)) * student_t.ppf(0.975, n - 1))
        assert (1 - expanded_confidence(n)) / 2 == pytest.approx(tail, abs=1e-9)
    assert (1 - expanded_confidence(20)) / 2 == pytest.approx(0.0159, abs=1e-4)
    assert expanded_confidence(1) == 0.95


def test_the_interval_is_the_expanded_one_and_contains_the_plain_one() -> None:
    comparisons = [Comparison(f"t/c{i}", "a", "b", float(i % 3 > 0)) for i in range(20)]
    wide = bradley_terry(comparisons, ["a", "b"], seed=3, resamples=2000)
    plain = bradley_terry(comparisons, ["a", "b"], seed=3, resamples=2000, expanded=False)
    for w, p in zip(wide, plain, strict=True):
        assert w.interval.low < p.interval.low and p.interval.high < w.interval.high
