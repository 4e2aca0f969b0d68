"""The judge, calibration and the headline gate, end to end under pytest (pytester)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_evalmine import exitcodes

from .conftest import SMALL_SUITE, latest_report

JUDGED_SUITE = (
    SMALL_SUITE.replace(
        "tasks:",
        """judge:
  model: fake/judge
  rubric: Prefer the answer a customer would find most helpful.
  calibration: {min_kappa: 0.4, min_labels: 3, min_pairs: 3, on_below_floor: flag}
tasks:""",
    )
    + """labels:
  - {task: triage, case: charged-twice, baseline: fake/alpha, candidate: fake/beta,
     prefer: candidate}
  - {task: triage, case: login-loop, baseline: fake/alpha, candidate: fake/beta, prefer: baseline}
  - {task: polite, case: refund-no, baseline: fake/beta, candidate: fake/alpha, prefer: baseline}
"""
)

# Scripted judges for pytester runs: they read the pair's identity from Request.context (never
# shown to a real judge) and log every call so tests can count judge calls.
JUDGES_CONFTEST = """\
import json, os
import pytest
import yaml
from pytest_evalmine.adapters.base import Response, Usage
from pytest_evalmine.adapters.registry import AdapterRegistry

HERE = os.path.dirname(__file__)
MODE = os.environ.get("TEST_JUDGE", "labels")


def label_preference(context):
    suite = yaml.safe_load(open(os.path.join(HERE, "judged.eval.yaml")))
    for label in suite.get("labels", []):
        if (label["task"], label["case"]) != (context["task"], context["case"]):
            continue
        prefer = label["prefer"]
        if label["baseline"] == context["candidate"]:
            prefer = {"baseline": "candidate", "candidate": "baseline"}.get(prefer, prefer)
        return prefer
    return "tie"


class ScriptedJudge:
    name = "scripted-judge"
    version = "1"

    def schema_mode(self, request):
        return "native"

    async def complete(self, request):
        with open(os.path.join(HERE, "judge_calls.log"), "a") as log:
            log.write(json.dumps(request.context) + "\\n")
        if MODE == "first":
            winner = "1"
        else:
            prefer = label_preference(request.context)
            candidate_slot = "2" if request.context["order"] == "baseline_first" else "1"
            other = "1" if candidate_slot == "2" else "2"
            winner = {"candidate": candidate_slot, "baseline": other}.get(prefer, "tie")
        text = json.dumps({"winner": winner, "reason": "scripted"})
        return Response(text=text, usage=Usage(input_tokens=10, output_tokens=5), latency_s=0.0)

    async def aclose(self):
        pass


@pytest.fixture(scope="session")
def evalmine_judge_adapters():
    registry = AdapterRegistry()
    registry.register("fake", ScriptedJudge)
    return registry
"""


@pytest.fixture
def judged(pytester: pytest.Pytester) -> Path:
    return pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)


@pytest.fixture
def scripted(pytester: pytest.Pytester, judged: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeconftest(JUDGES_CONFTEST)
    return pytester.path / "judge_calls.log"


def judge_calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def headline(root: Path) -> dict:
    return latest_report(root, "small")["headline"]


def require_ten_labels(judged: Path) -> None:
    judged.write_text(judged.read_text().replace("min_labels: 3", "min_labels: 10"))


def test_hash_judge_is_uncalibrated_and_flagged_in_order(
    pytester: pytest.Pytester, judged: Path
) -> None:
    require_ten_labels(judged)
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == 0
    out = result.stdout.str()
    order = [out.index(t) for t in ("-- Calibration --", "-- Win rates", "-- Scorecard --")]
    assert order == sorted(order)
    report = headline(pytester.path)
    assert report["headline_eligible"] is False
    assert report["calibration"]["status"] == "insufficient_labels"
    rate = report["win_rates"][0]
    assert rate["flag"] == "UNCALIBRATED" and rate["title"] == "over schema-passing pairs only, n=3"
    assert "\u2020 UNCALIBRATED" in out
    markdown = next((pytester.path / "reports" / "small").glob("*/report.md")).read_text()
    assert "\u2020 UNCALIBRATED" in markdown
    sections, fenced = [], False
    for line in markdown.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("## "):
            sections.append(line)
    assert sections[:5] == [
        "## Calibration",
        "## Win rates (candidate vs baseline)",
        "## Scorecard",
        "## Per task, worst first",
        "## Exclusions (pairs not judged)",
    ]
    assert sections[-1] == "## Decision log entry (paste into DECISIONS.md and complete)"
    assert "- Decision: ____" in markdown and "\u2020" in markdown.split("## Decision log")[1]


def test_a_judge_that_agrees_with_every_label_is_headline_eligible(
    pytester: pytest.Pytester, scripted: Path
) -> None:
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == 0
    report = headline(pytester.path)
    calibration = report["calibration"]
    assert calibration["status"] == "ok" and calibration["kappa"] == 1.0
    assert calibration["inverted_labels"] == 1  # the polite label names the models swapped
    assert calibration["confusion"]["matrix"] == [[1, 0, 0], [0, 0, 0], [0, 0, 2]]
    assert report["headline_eligible"] is True
    assert report["win_rates"][0]["flag"] is None
    out = result.stdout.str()
    assert "UNCALIBRATED" not in out.split("-- Win rates")[1].split("-- Scorecard")[0]
    # The per-task rows hold 2 and 1 pairs, under min_pairs 3: shown, never a headline.
    assert [r["ineligible_reasons"] for r in report["win_rates_per_task"]] == [
        ["only 2 judged pairs; a headline needs at least 3"],
        ["only 1 judged pairs; a headline needs at least 3"],
    ]
    # polite: the label prefers fake/beta as "baseline" of a swapped pair -> candidate fake/beta
    # wins there; triage: one win, one loss.
    assert report["win_rates"][0]["win_rate"] == pytest.approx(2 / 3)
    assert len(judge_calls(scripted)) == 6


def test_a_judge_preferring_slot_one_is_refused_despite_perfect_looking_labels(
    pytester: pytest.Pytester, scripted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_JUDGE", "first")
    pytester.runpytest("--evalmine-fake")
    report = headline(pytester.path)
    assert report["headline_eligible"] is False
    rate = report["win_rates"][0]
    assert rate["flip_rate"] == 1.0 and rate["outcomes"]["flip"] == 3
    assert any("presentation order" in reason for reason in rate["ineligible_reasons"])
    bias = report["position_bias"]
    assert (bias["decisive_passes"], bias["slot_1_wins"], bias["slot_1_share"]) == (6, 6, 1.0)
    # 6 of 6: Wilson [61%, 100%] excludes 1/2, so the position bias is flagged too.
    assert bias["flagged"] is True
    assert any(r.startswith("position bias: ") for r in rate["ineligible_reasons"])


def test_excluded_pairs_never_reach_the_judge(pytester: pytest.Pytester, scripted: Path) -> None:
    result = pytester.runpytest(
        "--evalmine-fake", "--evalmine-fake-fault=empty_answer,model=fake/beta,prompt=loops"
    )
    assert result.ret == 1
    calls = judge_calls(scripted)
    assert {(c["task"], c["case"]) for c in calls} == {
        ("triage", "charged-twice"),
        ("polite", "refund-no"),
    }
    assert len(calls) == 4
    report = headline(pytester.path)
    assert report["exclusions"] == {"fake/beta": {"empty_answer": 1}}
    assert report["calibration"]["unmatched_labels"] == {"pair_excluded:empty_answer": 1}
    pairs_file = next((pytester.path / "reports" / "small").glob("*/pairs.jsonl"))
    pairs = [json.loads(line) for line in pairs_file.read_text().splitlines()]
    excluded = [p for p in pairs if p["excluded"]]
    assert len(pairs) == 3 and len(excluded) == 1 and excluded[0]["passes"] == []
    judged_pair = next(p for p in pairs if not p["excluded"])
    assert [p["order"] for p in judged_pair["passes"]] == ["baseline_first", "candidate_first"]


def test_second_run_judges_from_cache_at_no_cost(pytester: pytest.Pytester, scripted: Path) -> None:
    pytester.runpytest("--evalmine-fake")
    first = latest_report(pytester.path)
    pytester.runpytest("--evalmine-fake")
    second = latest_report(pytester.path)
    assert len(judge_calls(scripted)) == 6
    assert first["headline"]["judge_calls"] == {"made": 6, "cached": 0}
    assert second["headline"]["judge_calls"] == {"made": 0, "cached": 6}
    assert second["cost"]["spent_usd"] == 0
    assert second["headline"]["win_rates"] == first["headline"]["win_rates"]
    assert second["changes"]["same_suite"] is True


@pytest.mark.parametrize(
    ("options", "floor", "expected"),
    [
        ([], "flag", 0),
        ([], "fail", exitcodes.CALIBRATION_GATE_FAILED),
        (["--evalmine-fail-under-calibration"], "flag", exitcodes.CALIBRATION_GATE_FAILED),
    ],
)
def test_calibration_gate_exit_code(
    pytester: pytest.Pytester, judged: Path, options: list[str], floor: str, expected: int
) -> None:
    require_ten_labels(judged)
    judged.write_text(
        judged.read_text().replace("on_below_floor: flag", f"on_below_floor: {floor}")
    )
    assert pytester.runpytest("--evalmine-fake", *options).ret == expected


def test_kappa_gate_on_the_lower_bound(pytester: pytest.Pytester, scripted: Path) -> None:
    pytester.runpytest("--evalmine-fake", "--evalmine-kappa-gate=lower")
    calibration = headline(pytester.path)["calibration"]
    assert calibration["gate_on"] == "lower"
    # Three perfectly agreeing labels: kappa 1, but resamples of three labels often hold one
    # category only, so the interval is what it is; the status follows its lower bound.
    low = calibration["kappa_interval"]["low"]
    assert calibration["status"] == ("ok" if low >= 0.4 else "below_floor")


def test_unknown_judge_model_is_refused_before_any_call(
    pytester: pytest.Pytester, judged: Path
) -> None:
    result = pytester.runpytest("--evalmine-fake", "--evalmine-judge=mystery/judge-1")
    assert result.ret == exitcodes.REFUSED_BEFORE_SPENDING
    result.stdout.fnmatch_lines(["*no price for model 'mystery/judge-1'*"])
    assert not (pytester.path / ".evalmine" / "cache.sqlite").exists() or not latest_exists(
        pytester.path
    )


def latest_exists(root: Path) -> bool:
    return (root / "reports" / "small" / "latest.json").exists()


def test_the_estimate_includes_the_judge_calls(pytester: pytest.Pytester, judged: Path) -> None:
    # Answers alone are estimated near $0.0006; with six judge calls well above it.
    result = pytester.runpytest("--evalmine-fake", "--evalmine-max-cost=0.001")
    assert result.ret == exitcodes.REFUSED_BEFORE_SPENDING
    result.stdout.fnmatch_lines(["*6 uncached answer call(s) and 6 judge call(s)*"])
    no_judge = pytester.runpytest("--evalmine-fake", "--evalmine-max-cost=0.001", "-k", "alpha")
    assert no_judge.ret == 0, "without candidates there is nothing to judge"


def test_compare_reports_changes_of_the_suite(pytester: pytest.Pytester, judged: Path) -> None:
    pytester.runpytest("--evalmine-fake")
    assert latest_report(pytester.path)["changes"] is None
    judged.write_text(judged.read_text().replace("Rewrite politely", "Rewrite kindly"))
    pytester.runpytest("--evalmine-fake")
    changes = latest_report(pytester.path)["changes"]
    assert changes["same_suite"] is False
    assert changes["suite_changes"]["tasks_modified"] == ["polite"]
    assert "win_rate_movements" not in changes
    markdown = sorted((pytester.path / "reports" / "small").glob("*/report.md"))[-1].read_text()
    assert "the suite changed (different suite hash): no win-rate deltas" in markdown
    # The cases both runs answered are still compared, one by one (tests/test_cross_run.py).
    assert "tasks changed: polite (prompt); only in A: none; only in B: none" in markdown


def test_judge_not_configured_is_a_note(pytester: pytest.Pytester, small_suite: Path) -> None:
    result = pytester.runpytest("--evalmine-fake")
    result.stdout.fnmatch_lines(["-- Judge --", "no judge configured*"])
    assert latest_report(pytester.path)["headline"] is None


def test_pytest_html_carries_the_flagged_summary_and_escaped_answers(
    pytester: pytest.Pytester, judged: Path
) -> None:
    judged.write_text(judged.read_text().replace("I was charged twice", "<b>charged</b> twice"))
    result = pytester.runpytest(
        "--evalmine-fake", "--html=out.html", "--self-contained-html", "-p", "html"
    )
    assert result.ret == 0
    page = (pytester.path / "out.html").read_text()
    assert "evalmine-summary" in page
    assert "UNCALIBRATED" in page and "Calibration" in page
    assert "evalmine-answer" in page


def test_xdist_gives_the_same_judged_numbers(pytester: pytest.Pytester, judged: Path) -> None:
    pytester.runpytest_subprocess("--evalmine-fake", "-p", "no:cacheprovider")
    serial = headline(pytester.path)
    parallel_run = pytester.runpytest_subprocess(
        "--evalmine-fake", "-n", "2", "--evalmine-no-cache", "-p", "no:cacheprovider"
    )
    assert parallel_run.ret == 0
    parallel = headline(pytester.path)
    for key in ("calibration", "win_rates", "win_rates_per_task", "position_bias", "exclusions"):
        assert parallel[key] == serial[key], key


def test_an_interrupted_run_is_not_judged(pytester: pytest.Pytester, scripted: Path) -> None:
    result = pytester.runpytest(
        "--evalmine-fake", "-x", "--evalmine-fake-fault=empty_answer,prompt=twice"
    )
    assert result.ret == 1
    assert judge_calls(scripted) == []
    report = latest_report(pytester.path)
    assert report["headline"] is None
    assert report["judge_note"] == "not judged: stopped early (-x or --maxfail)"


def test_judging_in_parts_gives_the_verdicts_of_one_batch(
    pytester: pytest.Pytester, judged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_evalmine.judging import judge

    def verdicts() -> list[tuple]:
        run = latest_report(pytester.path, "small")["run_id"]
        lines = (pytester.path / "reports" / "small" / run / "pairs.jsonl").read_text()
        return sorted(
            (p["task"], p["case"], p["candidate"], x["order"], x["winner_slot"], x["key"])
            for p in map(json.loads, lines.splitlines())
            for x in p["passes"]
        )

    assert pytester.runpytest("--evalmine-fake").ret == 0
    whole = verdicts()
    monkeypatch.setattr(judge, "JUDGE_BATCH_PASSES", 2)  # six passes: three parts
    parts = pytester.runpytest("--evalmine-fake", "--evalmine-record=all", "-s")
    assert parts.ret == 0
    assert verdicts() == whole and len(whole) == 6
    assert latest_report(pytester.path, "small")["headline"]["judge_calls"]["made"] == 6
    # One count over the parts, not a count per part.
    shown = re.findall(r"evalmine: (\d+)/(\d+) judge verdicts", parts.stdout.str())
    assert shown and {total for _, total in shown} == {"6"} and shown[-1][0] == "6"


CHECKED_JUDGED_SUITE = """
version: 1
suite: small
models: [fake/a, fake/b]
judge: {model: fake/judge}
tasks:
  - id: reply
    kind: answer
    prompt: "Reply to {{ text }}"
    checks: [{contains: {value: help}}]
    cases:
      - {id: c1, vars: {text: hello}}
      - {id: c2, vars: {text: refund}}
      - {id: c3, vars: {text: where}}
"""


def test_a_cached_rerun_of_checked_answers_estimates_its_judge_calls_as_cached(
    pytester: pytest.Pytester,
) -> None:
    # The pairwise judge sees each answer with its checks' outcome (M19); the estimate built
    # the judge requests from the bare text, so a fully cached rerun priced every judge call
    # as new and a tight cap refused a run that costs nothing.
    pytester.makefile(".eval.yaml", small=CHECKED_JUDGED_SUITE)
    first = pytester.runpytest("--evalmine-fake")
    assert first.ret == pytest.ExitCode.TESTS_FAILED  # the fake answers miss "help"
    paid = latest_report(pytester.path)["cost"]
    assert paid["judge_spent_usd"] > 0
    rerun = pytester.runpytest("--evalmine-fake", "--evalmine-max-cost=0.000001")
    assert rerun.ret == pytest.ExitCode.TESTS_FAILED
    cost = latest_report(pytester.path)["cost"]
    assert (cost["estimate_usd"], cost["worst_case_usd"], cost["spent_usd"]) == (0.0, 0.0, 0.0)


def test_a_dead_judge_server_names_its_failures_and_marks_the_run_partial(
    pytester: pytest.Pytester,
) -> None:
    # Issue 28: 32 judge calls failed with "connection refused", and the terminal and
    # report.md said only "judge_error 16" (pairs, not calls), in a run not marked partial.
    from .http_server import refused_url

    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE.replace("fake/judge", "local/judge"))
    with refused_url() as url:
        result = pytester.runpytest(
            f"--evalmine-endpoint=local={url}/v1,free", "--evalmine-retries=0"
        )
    result.assert_outcomes(passed=6)
    host_port = url.removeprefix("http://")
    why = f"connection: connection to {url} failed: connection refused by {host_port}"
    failed = f"judge calls that failed: 6; 6 x {why}"
    report = latest_report(pytester.path)
    assert report["partial"] is True
    assert report["partial_reason"] == "6 judge call(s) failed; the pairs they judged are excluded"
    assert report["headline"]["exclusions"] == {"fake/beta": {"judge_error": 3}}
    run_dir = pytester.path / "reports" / "small" / report["run_id"]
    markdown = (run_dir / "report.md").read_text()
    assert failed in markdown and "PARTIAL RUN" in markdown
    assert failed in " ".join(result.stdout.str().split())
