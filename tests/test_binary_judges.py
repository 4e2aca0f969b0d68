"""Binary judges (spec: "Binary judges"): the suite keys and labels, the calls through the one
dispatcher (estimated, cached, capped), the verdicts, the statistics (Wilson recalls, the
Rogan-Gladen corrected rate and its delta-method interval) and the reports."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import sqlite3
from itertools import islice
from pathlib import Path

import pytest

from pytest_evalmine import exitcodes
from pytest_evalmine.adapters.fake import FakeAdapter
from pytest_evalmine.errors import SuiteError
from pytest_evalmine.judging.binary import (
    TEST_FRACTION,
    binary_from_verdicts,
    calibrate_criterion,
    in_test_split,
)
from pytest_evalmine.judging.criteria import (
    CRITERION_SCHEMA,
    UNPARSEABLE,
    CriterionVerdict,
    criterion_request,
    parse_criterion_verdict,
)
from pytest_evalmine.stats.misclassification import rogan_gladen
from pytest_evalmine.suite.loader import Criterion, CriterionLabel, load_suite

from .conftest import newest_run_dir, write_suite

CASES = [f"c{i}" for i in range(8)]
BINARY_SUITE = (
    """\
version: 1
suite: binary
models: [fake/alpha]
defaults: {max_tokens: 64}
judge: {model: fake/judge, criteria: {min_labels_per_class: 1, min_recall: 0.0}}
tasks:
  - id: reply
    kind: rewrite
    prompt: "Reply politely to: {{ text }}"
    judges:
      - {name: polite, criterion: "The reply is polite."}
      - {name: on-topic, criterion: "The reply answers the message."}
    cases:
"""
    + "".join(f"      - {{id: {case}, vars: {{text: 'message {case}'}}}}\n" for case in CASES)
    + "labels:\n"
    + "".join(
        f"  - {{task: reply, case: {case}, model: fake/alpha, criterion: polite, "
        f"label: {'PASS' if i % 2 else 'FAIL'}}}\n"
        for i, case in enumerate(CASES)
    )
)


# --- suite file -----------------------------------------------------------------------------
def _load_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SuiteError) as info:
        load_suite(write_suite(tmp_path, text))
    return str(info.value)


def test_judges_and_criterion_labels_load(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, BINARY_SUITE))
    assert suite.task("reply").judges == (
        Criterion("polite", "The reply is polite."),
        Criterion("on-topic", "The reply answers the message."),
    )
    assert suite.labels == ()
    assert suite.criterion_labels[1] == CriterionLabel(
        "reply", "c1", "fake/alpha", "polite", "PASS"
    )
    assert (suite.judge.min_labels_per_class, suite.judge.min_recall) == (1, 0.0)


def test_a_repeated_judge_name_is_refused_where_it_repeats(tmp_path: Path) -> None:
    text = BINARY_SUITE.replace("name: on-topic", "name: polite")
    error = _load_error(tmp_path, text)
    assert "$.tasks[0].judges[1].name: duplicate judge name 'polite' in this task" in error


def test_a_misspelt_judge_key_names_the_key_and_path(tmp_path: Path) -> None:
    error = _load_error(tmp_path, BINARY_SUITE.replace('criterion: "The reply is', 'critrion: "x'))
    assert "$.tasks[0].judges[0]: unknown key 'critrion' (allowed: criterion, name)" in error


def test_criterion_labels_are_checked_against_the_tasks_judges(tmp_path: Path) -> None:
    text = BINARY_SUITE.replace(
        "criterion: polite, label: FAIL}\n", "criterion: rude, label: FAIL}\n", 1
    )
    error = _load_error(tmp_path, text)
    assert (
        "$.labels[0].criterion: task 'reply' has no judge 'rude' (its judges: polite, on-topic)"
        in error
    )
    error = _load_error(tmp_path, BINARY_SUITE.replace("label: PASS", "label: pass", 1))
    assert "$.labels[1].label: 'pass' is not one of ['PASS', 'FAIL']" in error
    twice = (
        BINARY_SUITE
        + "  - {task: reply, case: c0, model: fake/alpha, criterion: polite, label: PASS}\n"
    )
    error = _load_error(tmp_path, twice)
    assert "$.labels[8]: duplicate label for this task, case, model and criterion" in error


def test_both_kinds_of_label_share_a_labels_file(tmp_path: Path) -> None:
    (tmp_path / "labels.jsonl").write_text(
        '{"task": "reply", "case": "c0", "model": "fake/alpha", "criterion": "polite", '
        '"label": "PASS", "note": "kind"}\n'
        '{"task": "reply", "case": "c0", "baseline": "fake/alpha", "candidate": "fake/beta", '
        '"prefer": "tie"}\n'
        '{"task": "reply", "case": "c1", "model": "fake/alpha", "criterion": "polite", '
        '"labl": "PASS"}\n'
    )
    text = BINARY_SUITE.split("labels:")[0] + "labels_path: labels.jsonl\n"
    error = _load_error(tmp_path, text)
    assert "labels.jsonl: line 3: unknown key 'labl'" in error
    (tmp_path / "labels.jsonl").write_text(
        "\n".join((tmp_path / "labels.jsonl").read_text().splitlines()[:2]) + "\n"
    )
    suite = load_suite(write_suite(tmp_path, text))
    assert [label.note for label in suite.criterion_labels] == ["kind"]
    assert [label.prefer for label in suite.labels] == ["tie"]


# --- requests and verdicts ------------------------------------------------------------------
def test_the_fake_judge_gives_deterministic_binary_verdicts(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, BINARY_SUITE))
    criterion = suite.task("reply").judges[0]
    labels = []
    for case in CASES:
        request = criterion_request("fake/judge", suite, "reply", case, criterion, f"hi {case}")
        assert request.schema == CRITERION_SCHEMA
        assert request.context["purpose"] == "judge"
        first = asyncio.run(FakeAdapter().complete(request)).text
        assert asyncio.run(FakeAdapter().complete(request)).text == first
        label, critique = parse_criterion_verdict(first)
        assert label in ("PASS", "FAIL") and critique
        labels.append(label)
    assert set(labels) == {"PASS", "FAIL"}


@pytest.mark.parametrize(
    "text",
    ['{"label": "pass", "critique": "x"}', '{"label": "PASS"}', "PASS", '{"label": "PASS", '],
)
def test_an_unusable_verdict_has_no_label(text: str) -> None:
    label, reason = parse_criterion_verdict(text)
    assert label is None and reason


def test_a_fenced_verdict_is_read() -> None:
    text = 'Sure.\n```json\n{"label": "FAIL", "critique": "It is rude."}\n```'
    assert parse_criterion_verdict(text) == ("FAIL", "It is rude.")


# --- the held-out split ---------------------------------------------------------------------
def test_the_split_is_a_stable_hash_of_task_and_case() -> None:
    # pinned: sha256("t\x1fc1") starts 479a8d92 (< 2^31: test), "t\x1fc2" bb6f6b79 (dev)
    assert hashlib.sha256(b"t\x1fc1").hexdigest()[:8] == "479a8d92"
    assert in_test_split("t", "c1") is True
    assert in_test_split("t", "c2") is False
    assert in_test_split("triage", "charged-twice") is True
    assert in_test_split("polite", "refund-no") is False
    share = sum(in_test_split("task", f"case-{i}") for i in range(20_000)) / 20_000
    assert abs(share - TEST_FRACTION) < 0.01


# --- statistics -----------------------------------------------------------------------------
def adjusted(successes: int, n: int) -> float:
    """The Agresti-Coull proportion (k + z^2/2) / (n + z^2)."""
    z2 = 1.959963984540054**2
    return (successes + z2 / 2) / (n + z2)


def test_rogan_gladen_by_hand() -> None:
    # q = 60/100, TPR r = 45/50, TNR s = 40/50: J = 0.7, p = (0.6 + 0.8 - 1) / 0.7 = 4/7.
    # Variances at the adjusted proportions: q~ = 61.9207/103.8415, r~ = 46.9207/53.8415,
    # s~ = 41.9207/53.8415 (z^2/2 = 1.9207); Var = [q~(1-q~)/100 + (16/49) r~(1-r~)/50
    # + (9/49) s~(1-s~)/50] / 0.49.
    q, r, s = adjusted(60, 100), adjusted(45, 50), adjusted(40, 50)
    assert (q, r, s) == pytest.approx((0.596301, 0.871461, 0.778596), abs=1e-6)
    variance = (q * (1 - q) / 100 + 16 / 49 * r * (1 - r) / 50 + 9 / 49 * s * (1 - s) / 50) / 0.49
    assert variance == pytest.approx(0.0076981, abs=1e-7)  # raw proportions: 0.0072970
    rate = rogan_gladen(60, 100, 45, 50, 40, 50)
    assert rate is not None
    assert rate.value == pytest.approx(4 / 7, abs=1e-15)
    assert rate.standard_error == pytest.approx(math.sqrt(variance), rel=1e-12)
    z = 1.959963984540054
    assert rate.interval.low == pytest.approx(4 / 7 - z * math.sqrt(variance), rel=1e-12)
    assert rate.interval.high == pytest.approx(4 / 7 + z * math.sqrt(variance), rel=1e-12)


def test_rogan_gladen_matches_a_numeric_delta_method() -> None:
    """The closed-form variance against the delta method done numerically: central
    differences of the estimator, and the variances of three independent proportions (at
    the adjusted proportions, the weights at p clipped to [0, 1])."""
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(12)
    for _ in range(200):
        n, n_pos, n_neg = (int(v) for v in rng.integers(5, 400, size=3))
        tp = int(rng.integers(n_pos // 2 + 1, n_pos + 1))
        tn = int(rng.integers(n_neg // 2 + 1, n_neg + 1))
        passed = int(rng.integers(0, n + 1))
        rate = rogan_gladen(passed, n, tp, n_pos, tn, n_neg)
        q, r, s = passed / n, tp / n_pos, tn / n_neg
        if r + s - 1 <= 0:
            assert rate is None
            continue
        assert rate is not None

        def estimator(x: np.ndarray) -> float:
            return (x[0] + x[2] - 1) / (x[1] + x[2] - 1)

        # Where p leaves [0, 1] the weights are taken at the clipped p: q moved to match.
        point = np.array([q, r, s])
        p = estimator(point)
        if not 0 <= p <= 1:
            point[0] = min(1.0, max(0.0, p)) * (r + s - 1) + 1 - s
        h = 1e-6
        gradient = np.array(
            [(estimator(point + h * e) - estimator(point - h * e)) / (2 * h) for e in np.eye(3)]
        )
        variances = [
            adjusted(k, m) * (1 - adjusted(k, m)) / m
            for k, m in ((passed, n), (tp, n_pos), (tn, n_neg))
        ]
        assert rate.unclipped == pytest.approx(p, rel=1e-12, abs=1e-12)
        expected_sd = math.sqrt(gradient @ np.diag(variances) @ gradient)
        assert rate.standard_error == pytest.approx(expected_sd, rel=1e-6, abs=1e-9)
        assert 0.0 <= rate.interval.low <= rate.value <= rate.interval.high <= 1.0


def test_rogan_gladen_covers_with_a_perfect_recall_on_few_labels() -> None:
    """Seeded simulation: 200 answers, 20 PASS and 20 FAIL labels, true rate 0.1 or 0.9,
    recalls (1.0, 0.95) or (0.95, 0.9): the raw-proportion variance covered 0.85-0.93."""
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(20261201)
    for truth, r, s in ((0.1, 1.0, 0.95), (0.9, 0.95, 0.9), (0.5, 1.0, 1.0)):
        covered = runs = 0
        for _ in range(400):
            q = truth * r + (1 - truth) * (1 - s)
            rate = rogan_gladen(
                int(rng.binomial(200, q)), 200,
                int(rng.binomial(20, r)), 20, int(rng.binomial(20, s)), 20,
            )  # fmt: skip
            if rate is not None:
                runs += 1
                covered += rate.interval.low <= truth <= rate.interval.high
        assert covered / runs >= 0.94, (truth, r, s, covered / runs)


def test_rogan_gladen_clips_and_refuses_a_chance_judge() -> None:
    below = rogan_gladen(1, 100, 90, 100, 90, 100)  # q below the judge's false-PASS rate
    assert below is not None and below.unclipped < 0 and below.value == 0.0
    assert below.interval.low == 0.0
    assert rogan_gladen(50, 100, 50, 100, 50, 100) is None  # J = 0
    assert rogan_gladen(50, 100, 40, 100, 40, 100) is None  # J < 0
    assert rogan_gladen(5, 10, 0, 0, 5, 5) is None  # no PASS labels


def _labels(pairs: list[tuple[str, str]]) -> tuple[list[CriterionLabel], dict]:
    """Labels in the test split only, with the judge's verdict per label: (human, judge)."""
    test_cases = (f"k{i}" for i in range(10_000) if in_test_split("t", f"k{i}"))
    labels, usable = [], {}
    for (human, judge), case in zip(pairs, islice(test_cases, len(pairs)), strict=True):
        labels.append(CriterionLabel("t", case, "m/a", "c", human))
        usable[("t", case, "m/a", "c")] = judge
    return labels, usable


def test_recalls_with_wilson_intervals_equal_statsmodels() -> None:
    confint = pytest.importorskip("statsmodels.stats.proportion").proportion_confint
    pairs = [("PASS", "PASS")] * 17 + [("PASS", "FAIL")] * 3 + [("FAIL", "FAIL")] * 9
    pairs += [("FAIL", "PASS")] * 4
    labels, usable = _labels(pairs)
    calibration = calibrate_criterion("t", "c", labels, usable, 10, 0.5)
    tpr, tnr = calibration.pass_recall, calibration.fail_recall
    assert (tpr.successes, tpr.n, tnr.successes, tnr.n) == (17, 20, 9, 13)
    for recall, (x, n) in ((tpr, (17, 20)), (tnr, (9, 13))):
        low, high = confint(x, n, alpha=0.05, method="wilson")
        assert recall.interval.low == pytest.approx(low, abs=1e-9)
        assert recall.interval.high == pytest.approx(high, abs=1e-9)
    assert calibration.youden == pytest.approx(17 / 20 + 9 / 13 - 1)
    # 9/13 has the Wilson lower bound 0.42: below a floor of 0.5
    assert calibration.reasons == ["FAIL recall's lower bound 0.42 is below 0.50"]


def test_dev_split_labels_never_enter_the_recalls() -> None:
    dev = next(f"k{i}" for i in range(100) if not in_test_split("t", f"k{i}"))
    labels = [CriterionLabel("t", dev, "m/a", "c", "PASS")]
    calibration = calibrate_criterion("t", "c", labels, {("t", dev, "m/a", "c"): "FAIL"}, 1, 0)
    assert (calibration.test_labels, calibration.dev_labels) == (0, 1)
    assert calibration.pass_recall.n == 0
    assert calibration.reasons == [
        "0 test-split human PASS label(s), fewer than 1",
        "0 test-split human FAIL label(s), fewer than 1",
    ]


def test_too_few_labels_of_one_class_is_not_eligible() -> None:
    labels, usable = _labels([("PASS", "PASS")] * 30 + [("FAIL", "FAIL")] * 4)
    calibration = calibrate_criterion("t", "c", labels, usable, 5, 0.5)
    assert calibration.reasons == ["4 test-split human FAIL label(s), fewer than 5"]
    assert not calibration.eligible


def test_rates_all_pass_and_corrected_rate_from_verdicts(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, BINARY_SUITE))
    verdicts = []
    for i, case in enumerate(CASES):
        verdicts.append(
            CriterionVerdict("reply", case, "fake/alpha", "polite", "PASS" if i < 6 else "FAIL")
        )
        on_topic = CriterionVerdict("reply", case, "fake/alpha", "on-topic", "PASS")
        if i == 0:
            on_topic = CriterionVerdict(
                "reply", case, "fake/alpha", "on-topic", None, status=UNPARSEABLE, error="x"
            )
        verdicts.append(on_topic)
    binary = binary_from_verdicts(suite, verdicts, ["fake/alpha"], "fake/judge")
    polite, on_topic = binary.rates
    assert (polite.pass_rate.successes, polite.pass_rate.n) == (6, 8)
    assert (on_topic.pass_rate.successes, on_topic.pass_rate.n) == (7, 7)
    assert on_topic.no_verdict == {UNPARSEABLE: 1}
    (all_pass,) = binary.all_pass
    # c0 has no usable on-topic verdict; c1..c5 pass both; c6, c7 fail polite
    assert (all_pass.rate.successes, all_pass.rate.n, all_pass.incomplete) == (5, 7, 1)
    # polite's labels: odd cases PASS, even FAIL; the judge said PASS for c0..c5
    test = [i for i, case in enumerate(CASES) if in_test_split("reply", case)]
    tp = sum(1 for i in test if i % 2 and i < 6)
    tn = sum(1 for i in test if not i % 2 and i >= 6)
    n_pos = sum(1 for i in test if i % 2)
    calibration = binary.calibrations[0]
    assert (calibration.pass_recall.successes, calibration.pass_recall.n) == (tp, n_pos)
    assert (calibration.fail_recall.successes, calibration.fail_recall.n) == (tn, len(test) - n_pos)
    expected = rogan_gladen(6, 8, tp, n_pos, tn, len(test) - n_pos)
    assert polite.corrected == expected
    assert binary.calibrations[1].reasons  # on-topic has no labels: never eligible
    assert not all_pass.eligible and not on_topic.eligible


# --- end to end on the fake adapter ---------------------------------------------------------
def _report(root: Path) -> dict:
    return json.loads((newest_run_dir(root, "binary") / "report.json").read_text())


def test_a_run_judges_every_answer_on_every_criterion(pytester: pytest.Pytester) -> None:
    write_suite(pytester.path, BINARY_SUITE, "binary.eval.yaml")
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    assert result.ret == 0
    report = _report(pytester.path)
    binary = report["binary_judges"]
    assert binary["calls"] == {"made": 16, "cached": 0}
    assert binary["verdicts"] == {"total": 16, "by_status": {"ok": 16}}
    assert binary["test_split"] == {
        "fraction": 0.5,
        "hash": "sha256(task \\x1f case), first 8 hex digits as an integer < 0.5 x 2^32",
        "reads_this_run": 1,
    }
    assert binary["judge"]["model"] == "fake/judge"
    assert report["cost"]["judge_spent_usd"] == pytest.approx(binary["cost"]["spent_usd"])
    assert binary["cost"]["spent_usd"] > 0
    rows = {row["criterion"]: row for row in binary["criteria"]}
    verdicts = [
        json.loads(line)
        for line in (newest_run_dir(pytester.path, "binary") / "verdicts.jsonl")
        .read_text()
        .splitlines()
    ]
    assert len(verdicts) == 16
    for name in ("polite", "on-topic"):
        own = [v for v in verdicts if v["criterion"] == name]
        assert rows[name]["pass_rate"]["successes"] == sum(v["label"] == "PASS" for v in own)
        assert rows[name]["pass_rate"]["n"] == 8
    # polite's recalls recomputed here from the verdicts, the labels and the split
    judge = {v["case"]: v["label"] for v in verdicts if v["criterion"] == "polite"}
    test = [(i, case) for i, case in enumerate(CASES) if in_test_split("reply", case)]
    human_pass = [case for i, case in test if i % 2]
    human_fail = [case for i, case in test if not i % 2]
    (calibration,) = [c for c in binary["calibration"] if c["criterion"] == "polite"]
    assert calibration["pass_recall"]["n"] == len(human_pass)
    assert calibration["pass_recall"]["successes"] == sum(judge[c] == "PASS" for c in human_pass)
    assert calibration["fail_recall"]["successes"] == sum(judge[c] == "FAIL" for c in human_fail)
    assert calibration["test_labels"] + calibration["dev_labels"] == 8
    text = "\n".join(result.outlines)
    assert "Binary judges (PASS/FAIL per criterion)" in text
    assert "read once in this run" in text
    section = text.split("-- Binary judges")[1].split("-- Scorecard --")[0]
    assert all(len(line) <= 80 for line in section.splitlines())
    assert "PASS recall" in section and "FAIL recall" in section
    markdown = (newest_run_dir(pytester.path, "binary") / "report.md").read_text()
    assert "## Binary judges (PASS/FAIL per criterion)" in markdown
    assert (
        "| model | task | criterion | pass rate | corrected (Rogan-Gladen) "
        "| prediction-powered (PPI) |" in markdown
    )
    # polite's PPI rate, as report.json holds it, in its row; below 20 labels, no headline
    ppi = rows["polite"]["ppi"]
    assert ppi is not None and not rows["polite"]["ppi_eligible"] and ppi["labels"] < 20
    low, high = ppi["interval"]["low"], ppi["interval"]["high"]
    shown = f"{100 * ppi['estimate']:.1f}% [{100 * low:.1f}%, {100 * high:.1f}%]"
    shown += f" from {ppi['labels']} labels"
    assert f"{shown}\u2020 too few labels |" in markdown
    assert rows["on-topic"]["ppi"] is None
    # on-topic has no labels: flagged wherever it is shown
    assert rows["on-topic"]["flag"] == "UNCALIBRATED"
    assert "\u2020 reply/on-topic not eligible" in markdown
    page = (newest_run_dir(pytester.path, "binary") / "report.html").read_text()
    assert '<section id="binary-judges"><h2>Binary judges (PASS/FAIL per criterion)</h2>' in page
    assert "corrected (Rogan-Gladen)" in page and "reply/on-topic not eligible" in page


def test_judge_calls_are_estimated_cached_and_refused_over_the_cap(
    pytester: pytest.Pytester,
) -> None:
    write_suite(pytester.path, BINARY_SUITE, "binary.eval.yaml")
    refused = pytester.runpytest("--evalmine-fake", "--evalmine-max-cost=0.000001")
    assert refused.ret == exitcodes.REFUSED_BEFORE_SPENDING
    refused.stdout.fnmatch_lines(["*8 uncached answer call(s) and 16 judge call(s)*"])
    cache = pytester.path / ".evalmine" / "cache.sqlite"
    if cache.exists():
        with sqlite3.connect(cache) as db:
            assert db.execute("SELECT count(*) FROM answers").fetchone() == (0,)
    assert pytester.runpytest("--evalmine-fake").ret == 0
    first = _report(pytester.path)
    rerun = pytester.runpytest("--evalmine-fake", "--evalmine-max-cost=0.000001")
    assert rerun.ret == 0  # everything cached: the estimate is $0, under any cap
    second = _report(pytester.path)
    assert second["cost"]["estimate_usd"] == 0
    assert first["cost"]["estimate_usd"] > 0
    assert second["binary_judges"]["calls"] == {"made": 0, "cached": 16}
    assert second["binary_judges"]["criteria"] == first["binary_judges"]["criteria"]


def test_a_malformed_verdict_is_recorded_as_unparseable(pytester: pytest.Pytester) -> None:
    write_suite(pytester.path, BINARY_SUITE, "binary.eval.yaml")
    result = pytester.runpytest(
        "--evalmine-fake", "--evalmine-fake-fault=malformed_json,phase=judge,count=1"
    )
    assert result.ret == 0
    binary = _report(pytester.path)["binary_judges"]
    assert binary["verdicts"]["by_status"] == {"ok": 15, UNPARSEABLE: 1}
    assert sum(row["pass_rate"]["n"] for row in binary["criteria"]) == 15
    assert sum(sum(row["no_verdict"].values()) for row in binary["criteria"]) == 1
    assert binary["all_pass"][0]["incomplete_answers"] == 1
    result.stdout.fnmatch_lines(["*no verdict: unparseable 1*"])
    verdicts = (newest_run_dir(pytester.path, "binary") / "verdicts.jsonl").read_text()
    (bad,) = [json.loads(line) for line in verdicts.splitlines() if '"unparseable"' in line]
    assert bad["label"] is None and bad["error"]


def test_without_a_judge_model_the_report_says_so(pytester: pytest.Pytester) -> None:
    text = BINARY_SUITE.replace("model: fake/judge, ", "")
    write_suite(pytester.path, text, "binary.eval.yaml")
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == 0
    report = _report(pytester.path)
    assert report["binary_judges"] is None
    assert report["binary_judges_note"].startswith("binary judges not run: no judge model")


def test_a_replay_needs_no_call_and_a_stored_run_renders_again(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_evalmine.commands.cli import main

    write_suite(pytester.path, BINARY_SUITE, "binary.eval.yaml")
    assert pytester.runpytest("--evalmine-fake").ret == 0
    recorded = _report(pytester.path)
    replay = pytester.runpytest("--evalmine-fake", "--evalmine-record=none")
    assert replay.ret == 0
    replayed = _report(pytester.path)
    assert replayed["binary_judges"]["calls"] == {"made": 0, "cached": 16}
    assert replayed["binary_judges"]["criteria"] == recorded["binary_judges"]["criteria"]
    run_dir = newest_run_dir(pytester.path, "binary")
    before = (run_dir / "report.md").read_text()
    (run_dir / "report.md").unlink()
    assert main(["report", "--rootdir", str(pytester.path), run_dir.name]) == 0
    assert (run_dir / "report.md").read_text() == before
    assert "## Binary judges (PASS/FAIL per criterion)" in before


def test_two_xdist_workers_give_the_same_verdicts(pytester: pytest.Pytester) -> None:
    write_suite(pytester.path, BINARY_SUITE, "binary.eval.yaml")
    assert pytester.runpytest_subprocess("--evalmine-fake", "-n", "2").ret == 0
    parallel = _report(pytester.path)["binary_judges"]
    assert parallel["calls"] == {"made": 16, "cached": 0}
    assert pytester.runpytest("--evalmine-fake", "--evalmine-no-cache").ret == 0
    single = _report(pytester.path)["binary_judges"]
    assert single["criteria"] == parallel["criteria"]
    assert single["calibration"] == parallel["calibration"]
