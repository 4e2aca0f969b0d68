"""M19 in code: a judge verdict preferring the answer whose checks failed over one whose
checks passed is overridden to the passing side, counted, and shown (spec: "Pairs and
scoring")."""

from __future__ import annotations

import json

import pytest

from pytest_evalmine.judging.judge import with_check_outcome
from pytest_evalmine.judging.pairs import (
    BASELINE_FIRST,
    CANDIDATE_FIRST,
    JudgePass,
    Pair,
    apply_check_overrides,
    exclusion_reason,
)
from pytest_evalmine.run.records import AnswerRecord

from .conftest import SCRIPTED_CONFTEST, latest_report


def record(model: str, outcome: str, checks: list[dict] | None = None) -> AnswerRecord:
    return AnswerRecord(
        suite="s", suite_file="s.yaml", task="t", kind="answer", case="c", model=model,
        outcome=outcome, text="Answer: 1", checks=checks or [{"name": "answer", "passed": True}],
    )  # fmt: skip


def judged_pair(slot_bf: str, slot_cf: str) -> Pair:
    pair = Pair("s", "t", "c", "base", "cand")
    pair.passes = [JudgePass(BASELINE_FIRST, slot_bf), JudgePass(CANDIDATE_FIRST, slot_cf)]
    return pair


@pytest.mark.parametrize(
    ("slots", "base", "cand", "override", "score", "outcome"),
    [
        (("2", "1"), "passed", "failed", True, 0.0, "loss"),  # judge: candidate; it failed
        (("2", "tie"), "passed", "failed", True, 0.0, "loss"),  # soft preference counts too
        (("1", "2"), "failed", "passed", True, 1.0, "win"),  # judge: baseline; it failed
        (("2", "1"), "failed", "passed", False, 1.0, "win"),  # judge already right
        (("tie", "tie"), "passed", "failed", False, 0.5, "tie"),  # a tie prefers no one
        (("2", "2"), "passed", "failed", False, 0.5, "flip"),  # a flip prefers no one
        (("2", "1"), "failed", "failed", False, 1.0, "win"),  # both failed: the judge decides
        (("1", "2"), "passed", "passed", False, 0.0, "loss"),
    ],
)
def test_override(
    slots: tuple[str, str], base: str, cand: str, override: bool, score: float, outcome: str
) -> None:
    pair = judged_pair(*slots)
    apply_check_overrides([pair], [record("base", base), record("cand", cand)])
    assert pair.check_override is override
    assert (pair.score, pair.outcome) == (score, outcome)
    data = pair.to_dict()
    assert data["check_override"] is override and data["score"] == score


def test_calibration_category_stays_the_judges_own() -> None:
    pair = judged_pair("2", "1")
    apply_check_overrides([pair], [record("base", "passed"), record("cand", "failed")])
    assert pair.judge_score == 1.0 and pair.score == 0.0
    assert pair.category == "candidate"


def test_a_failed_own_check_is_judged_a_failed_schema_is_not() -> None:
    own = [{"name": "answer", "passed": True}, {"name": "number", "passed": False, "score": 0}]
    assert exclusion_reason(record("m", "failed", own)) is None
    schema = [{"name": "answer", "passed": True}, {"name": "parse", "passed": True},
              {"name": "schema", "passed": False}]  # fmt: skip
    assert exclusion_reason(record("m", "failed", schema)) == "schema_fail"


def test_the_judge_sees_each_answers_check_outcome() -> None:
    checks = [
        {"name": "answer", "passed": True, "score": None},
        {"name": "number", "passed": False, "message": "17 (after 'Answer:') is not 18",
         "score": 0.0},
        {"name": "max_words", "passed": True, "message": "3 words", "score": 1.0},
    ]  # fmt: skip
    failing = record("m", "failed", checks)
    assert with_check_outcome(failing) == (
        "Answer: 1\n\n[Deterministic checks of this answer: FAILED: number: 17 (after "
        "'Answer:') is not 18]"
    )
    checks[1] = {**checks[1], "passed": True}
    assert with_check_outcome(record("m", "passed", checks)).endswith(
        "[Deterministic checks of this answer: passed (number, max_words)]"
    )
    assert with_check_outcome(record("m", "passed")) == "Answer: 1"


SUITE = """\
version: 1
suite: overridden
models: [fake/base, fake/cand]
judge: {model: fake/judge}
tasks:
  - id: math
    kind: answer
    prompt: "Q {{ n }}"
    checks: [number]
    cases:
      - {id: one, vars: {n: 1, reply_base: "Answer: 18", reply_cand: "Answer: 17"}, gold: 18}
      - {id: two, vars: {n: 2, reply_base: "Answer: 5", reply_cand: "So, Answer: 5"}, gold: 5}
"""

# The judge always prefers the candidate, and logs each prompt.
JUDGE = """

class PreferCandidate(Scripted):
    async def complete(self, request):
        import json, os
        with open(os.path.join(os.path.dirname(__file__), "prompts.log"), "a") as log:
            log.write(json.dumps(request.prompt) + "\\n")
        slot = "2" if request.context["order"] == "baseline_first" else "1"
        return Response(text=json.dumps({"winner": slot, "reason": "scripted"}),
                        usage=Usage(input_tokens=5, output_tokens=5), latency_s=0.0)


@pytest.fixture(scope="session")
def evalmine_judge_adapters():
    registry = AdapterRegistry()
    registry.register("fake", PreferCandidate)
    return registry
"""


def test_a_run_overrides_counts_and_shows_it(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SCRIPTED_CONFTEST + JUDGE)
    pytester.makefile(".eval.yaml", overridden=SUITE)
    result = pytester.runpytest()
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["fake/cand: 50.0%*", "*W/L/T 1/1/0*", "*; check_override 1"])
    report = latest_report(pytester.path, "overridden")
    assert report["headline"]["check_overrides"] == {"fake/cand": 1}
    assert report["headline"]["win_rates"][0]["win_rate"] == 0.5
    pointer = json.loads((pytester.path / "reports/overridden/latest.json").read_text())
    pairs_file = pytester.path / "reports/overridden" / pointer["run_id"] / "pairs.jsonl"
    pairs = {p["case"]: p for p in map(json.loads, pairs_file.read_text().splitlines())}
    assert pairs["one"]["check_override"] is True and pairs["one"]["score"] == 0.0
    assert pairs["one"]["judge_score"] == 1.0 and pairs["one"]["outcome"] == "loss"
    assert pairs["two"]["check_override"] is False and pairs["two"]["score"] == 1.0
    prompts = [
        json.loads(line) for line in (pytester.path / "prompts.log").read_text().splitlines()
    ]
    failed_note = (
        "[Deterministic checks of this answer: FAILED: number: 17 (after 'Answer:') is not 18]"
    )
    assert sum(failed_note in prompt for prompt in prompts) == 2  # both orders of case one
    assert sum(prompt.count("passed (number)") for prompt in prompts) == 6
