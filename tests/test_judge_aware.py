"""The judge-aware Bradley-Terry ranking (spec: "Judge-aware ranking") against a maximum
likelihood written out again here (Newton's method on another parametrisation), and its
weights: a juror giving coin flips gets a weight near 0, a consistent one a high weight."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_evalmine.stats.judge_aware import JurorComparison, judge_aware_bradley_terry

MODELS = ["m0", "m1", "m2", "m3"]


def simulate(
    true_strengths: list[float], true_weights: list[float | None], cases: int, seed: int
) -> list[JurorComparison]:
    """Every two models on every case, each juror giving a 0/1 verdict with
    P = sigmoid(w (s_i - s_j)); a weight of None: a coin flip."""
    rng = np.random.default_rng(seed)
    rows = []
    for case in range(cases):
        for i in range(len(MODELS)):
            for j in range(i + 1, len(MODELS)):
                for r, weight in enumerate(true_weights):
                    if weight is None:
                        p = 0.5
                    else:
                        gap = true_strengths[i] - true_strengths[j]
                        p = 1 / (1 + np.exp(-weight * gap))
                    share = float(rng.random() < p)
                    rows.append(JurorComparison(f"t/c{case}", f"j{r}", MODELS[i], MODELS[j], share))
    return rows


def hand_mle(rows: list[JurorComparison], jurors: int) -> tuple[np.ndarray, np.ndarray]:
    """Newton's method on (s_1.., log w_1.., with s_0 = 0 and w_0 = 1): another pinning of
    the same likelihood (pseudo-wins of 1/2 each way per juror and pair of models), mapped
    to sum s = 0, mean w = 1 at the end. Hessian by central differences of the gradient;
    a steepest-ascent step where the likelihood is not concave."""
    k = len(MODELS)
    wins = np.zeros((jurors, k, k))
    for c in rows:
        r, i, j = int(c.juror[1:]), MODELS.index(c.a), MODELS.index(c.b)
        wins[r, i, j] += c.a_share
        wins[r, j, i] += 1 - c.a_share
    wins += 0.5 * ((wins + wins.transpose(0, 2, 1)) > 0)
    for r in range(jurors):
        np.fill_diagonal(wins[r], 0.0)

    def log_likelihood(theta: np.ndarray) -> float:
        s = np.concatenate([[0.0], theta[: k - 1]])
        w = np.concatenate([[1.0], np.exp(theta[k - 1 :])])
        total = 0.0
        for r in range(jurors):
            for i in range(k):
                for j in range(k):
                    if i != j:
                        z = w[r] * (s[i] - s[j])
                        total -= wins[r, i, j] * np.logaddexp(0.0, -z)
        return total

    def gradient(theta: np.ndarray) -> np.ndarray:
        """Written by the chain rule, loop by loop: dL/dz = W sigmoid(-z)."""
        s = np.concatenate([[0.0], theta[: k - 1]])
        w = np.concatenate([[1.0], np.exp(theta[k - 1 :])])
        d_s, d_w = np.zeros(k), np.zeros(jurors)
        for r in range(jurors):
            for i in range(k):
                for j in range(k):
                    if i != j:
                        z = w[r] * (s[i] - s[j])
                        pull = wins[r, i, j] / (1 + np.exp(z))
                        d_s[i] += pull * w[r]
                        d_s[j] -= pull * w[r]
                        d_w[r] += pull * (s[i] - s[j]) * w[r]  # by log w
        return np.concatenate([d_s[1:], d_w[1:]])

    theta = np.concatenate([-0.3 * np.arange(1, k), np.zeros(jurors - 1)])
    for _ in range(500):
        g = gradient(theta)
        hessian = np.zeros((len(theta), len(theta)))
        for n in range(len(theta)):
            step = np.zeros_like(theta)
            step[n] = 1e-5
            hessian[:, n] = (gradient(theta + step) - gradient(theta - step)) / 2e-5
        move = np.linalg.solve(hessian, -g)
        if np.dot(g, move) <= 0:  # not concave here: a steepest-ascent step instead
            move = g / max(1.0, float(np.linalg.norm(g)))
        size = 1.0
        while log_likelihood(theta + size * move) < log_likelihood(theta) - 1e-12:
            size /= 2
        theta = theta + size * move
        if np.abs(g).max() < 1e-7:
            break
    s = np.concatenate([[0.0], theta[: k - 1]])
    w = np.concatenate([[1.0], np.exp(theta[k - 1 :])])
    scale = w.mean()
    return (s - s.mean()) * scale, w / scale


def test_strengths_and_weights_equal_an_independent_newton_mle() -> None:
    rows = simulate([0.8, 0.3, -0.2, -0.9], [2.0, 1.0, 0.5], cases=60, seed=3)
    ranking = judge_aware_bradley_terry(rows, MODELS, ["j0", "j1", "j2"], seed=1, resamples=0)
    assert ranking is not None
    strengths, weights = hand_mle(rows, 3)
    fitted = {row.model: row.strength for row in ranking.strengths}
    for i, model in enumerate(MODELS):
        assert fitted[model] == pytest.approx(strengths[i], abs=1e-4)
    for r, row in enumerate(ranking.jurors):
        assert row.juror == f"j{r}"
        assert row.weight == pytest.approx(weights[r], abs=1e-4)
    assert sum(fitted.values()) == pytest.approx(0.0, abs=1e-9)
    assert np.mean([row.weight for row in ranking.jurors]) == pytest.approx(1.0, abs=1e-9)


def test_random_juror_weighs_near_zero_and_consistent_one_high() -> None:
    rows = simulate([1.0, 0.4, -0.4, -1.0], [3.0, 3.0, None], cases=80, seed=5)
    ranking = judge_aware_bradley_terry(rows, MODELS, ["j0", "j1", "j2"], seed=2, resamples=300)
    assert ranking is not None
    weights = {row.juror: row for row in ranking.jurors}
    assert weights["j2"].weight < 0.15
    assert weights["j0"].weight > 1.2 and weights["j1"].weight > 1.2
    assert weights["j2"].interval is not None and weights["j0"].interval is not None
    # the coin-flipping juror's interval sits below the consistent jurors'
    assert weights["j2"].interval.high < weights["j0"].interval.low
    for row in ranking.jurors:
        assert row.interval.low <= row.weight + 1e-9 <= row.interval.high + 2e-9
    assert [row.model for row in ranking.strengths] == MODELS  # the true order
    for row in ranking.strengths:
        assert row.interval is not None and row.interval.low <= row.strength <= row.interval.high
        assert row.pairs == 80 * 3  # each model meets the other three on every case
    # the same seed gives the same intervals
    again = judge_aware_bradley_terry(rows, MODELS, ["j0", "j1", "j2"], seed=2, resamples=300)
    assert again is not None and again.jurors[2].interval == weights["j2"].interval


def test_fewer_than_two_jurors_or_models_gives_none() -> None:
    rows = simulate([0.5, 0.0, -0.2, -0.3], [1.0], cases=5, seed=1)
    assert judge_aware_bradley_terry(rows, MODELS, ["j0"], seed=1) is None
    assert judge_aware_bradley_terry([], MODELS, ["j0", "j1"], seed=1) is None


def test_panel_with_all_pairs_ranks_judge_aware_end_to_end(pytester: pytest.Pytester) -> None:
    from .conftest import latest_report, newest_run_dir
    from .test_judge_panel import PANEL_SUITE

    suite = PANEL_SUITE.replace(
        "models: [fake/alpha, fake/beta]", "models: [fake/alpha, fake/beta, fake/gamma]"
    ).replace("  vote: majority\n", "  vote: majority\n  pairs: all\n")
    pytester.makefile(".eval.yaml", panel=suite)
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == 0, result.stdout.str()
    ranking = latest_report(pytester.path, "panel")["ranking"]
    aware = ranking["judge_aware"]
    assert aware["method"] == "judge_aware_bradley_terry"
    assert sorted(row["model"] for row in aware["strengths"]) == [
        "fake/alpha",
        "fake/beta",
        "fake/gamma",
    ]
    weights = {row["juror"]: row for row in aware["juror_weights"]}
    assert set(weights) == {"fake/judge-slot1", "fake/judge-longer", "fake/judge-noisy"}
    # judge-slot1 flips every pair (a half share each way): its verdicts say nothing
    assert weights["fake/judge-slot1"]["weight"] < 0.05
    assert weights["fake/judge-longer"]["weight"] > weights["fake/judge-slot1"]["weight"]
    assert sum(row["weight"] for row in weights.values()) == pytest.approx(3.0, abs=1e-6)
    assert all(row["verdicts"] == 3 * 16 for row in weights.values())
    for row in weights.values():
        assert row["interval"]["low"] <= row["weight"] + 1e-9
    report_md = (newest_run_dir(pytester.path, "panel") / "report.md").read_text()
    assert "Judge-aware ranking" in report_md
    assert "juror fake/judge-slot1: weight 0.00" in report_md
