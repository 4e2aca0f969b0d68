"""judge.py without the plugin: the judge request, verdict parsing, the judge record, and
judge_pairs through a real Dispatcher with a scripted judge adapter (spec section 14)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_evalmine.adapters.base import AdapterError, Request, Response, Usage
from pytest_evalmine.adapters.registry import AdapterRegistry
from pytest_evalmine.judging.judge import (
    DEFAULT_RUBRIC,
    PROMPT_TEMPLATE_VERSION,
    SYSTEM_PROMPT,
    VERDICT_SCHEMA,
    _plain_verdict,
    judge_pairs,
    judge_record,
    judge_request,
    parse_verdict,
    parsed_verdict,
)
from pytest_evalmine.judging.pairs import BASELINE_FIRST, CANDIDATE_FIRST, Pair, plan_pairs
from pytest_evalmine.run.dispatch import Dispatcher
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.run.store import Store
from pytest_evalmine.suite.loader import Suite, load_suite

BASE, CAND = "fake/base-model-xyz", "fake/cand-model-qrs"
JUDGE = "fake/judge-model"
BASE_TEXT, CAND_TEXT = "BASELINE SAYS: sorry, it ships Monday.", "CANDIDATE SAYS: here is a fix."

SUITE = """\
version: 1
suite: judged
models: [{base}, {cand}]
judge:
  model: {judge}
  rubric: "{suite_rubric}"
tasks:
  - id: reply
    kind: rewrite
    prompt: "Reply to the customer: {{{{ msg }}}}"
    rubric: "{task_rubric}"
    cases:
      - {{id: late, vars: {{msg: "my order is late"}}}}
      - {{id: refund, vars: {{msg: "I want a refund"}}}}
  - id: fact
    kind: answer
    prompt: "Answer briefly: {{{{ q }}}}"
    cases:
      - {{id: sum, vars: {{q: "what is 2+2"}}}}
  - id: chatter
    kind: generate
    judge: false
    prompt: "Say hi"
    cases:
      - {{id: hi}}
"""


def make_suite(
    directory: Path,
    suite_rubric: str = "Suite rubric: be accurate.",
    task_rubric: str = "Task rubric: be kind.",
    replace: tuple[str, str] | None = None,
) -> Suite:
    text = SUITE.format(
        base=BASE, cand=CAND, judge=JUDGE, suite_rubric=suite_rubric, task_rubric=task_rubric
    )
    if replace is not None:
        assert replace[0] in text
        text = text.replace(*replace)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "judged.eval.yaml"
    path.write_text(text)
    return load_suite(path)


def answer(task: str, case: str, model: str, outcome: str = "passed") -> AnswerRecord:
    text = BASE_TEXT if model == BASE else CAND_TEXT
    return AnswerRecord(
        suite="judged",
        suite_file="judged.eval.yaml",
        task=task,
        kind="rewrite",
        case=case,
        model=model,
        outcome=outcome,
        text=f"{text} ({task}/{case})" if outcome == "passed" else None,
        checks=[{"name": "answer", "passed": True, "message": ""}] if outcome == "passed" else [],
    )


def answers_of(suite: Suite) -> list[AnswerRecord]:
    return [
        answer(task.id, case.id, model)
        for task in suite.tasks
        for case in task.cases
        for model in (BASE, CAND)
    ]


def sections(prompt: str) -> dict[str, str]:
    """The prompt's '## Heading' sections, by heading."""
    parts = re.split(r"^## (.+)\n", prompt, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


# --- the request ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("order", "first", "second"),
    [(BASELINE_FIRST, BASE_TEXT, CAND_TEXT), (CANDIDATE_FIRST, CAND_TEXT, BASE_TEXT)],
)
def test_judge_request_puts_each_answer_in_its_slot(
    tmp_path: Path, order: str, first: str, second: str
) -> None:
    suite = make_suite(tmp_path)
    pair = Pair("judged", "reply", "late", BASE, CAND)
    request = judge_request(JUDGE, suite, pair, order, {BASE: BASE_TEXT, CAND: CAND_TEXT}, 1)
    parts = sections(request.prompt)
    assert list(parts) == ["Task given to the assistant", "Answer 1", "Answer 2", "Your verdict"]
    assert parts["Task given to the assistant"] == "Reply to the customer: my order is late"
    assert parts["Answer 1"] == first
    assert parts["Answer 2"] == second
    assert parts["Your verdict"] == "Reply with the JSON object only."
    # Everything constant is in the system text, the prefix the providers cache.
    constant = sections(request.system or "")
    assert list(constant) == ["Reply format", "Rubric"]
    assert constant["Rubric"] == "Suite rubric: be accurate.\n\nTask rubric: be kind."
    assert '"winner": "1" | "2" | "tie"' in constant["Reply format"]
    assert (request.system or "").startswith(SYSTEM_PROMPT + "\n\n## Reply format\n")
    assert request.cache_system
    assert request.model == JUDGE
    assert "order" in SYSTEM_PROMPT and "length" in SYSTEM_PROMPT
    assert request.schema == VERDICT_SCHEMA
    assert request.temperature == 0.0
    assert request.max_tokens == 300
    assert request.repeat == 1
    assert request.context is not None
    assert request.context["order"] == order
    assert (request.context["baseline"], request.context["candidate"]) == (BASE, CAND)


def test_model_names_never_reach_the_judge(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    for order in (BASELINE_FIRST, CANDIDATE_FIRST):
        for repeat in (0, 1):
            pair = Pair("judged", "fact", "sum", BASE, CAND)
            request = judge_request(JUDGE, suite, pair, order, {BASE: "4", CAND: "four"}, repeat)
            rendered = (request.system or "") + "\n" + request.prompt
            for name in (BASE, CAND, "base-model-xyz", "cand-model-qrs", JUDGE):
                assert name not in rendered


def test_default_rubric_and_partial_rubrics(tmp_path: Path) -> None:
    pair = Pair("judged", "reply", "late", BASE, CAND)
    texts = {BASE: "a", CAND: "b"}

    def rubric(suite: Suite) -> str:
        request = judge_request(JUDGE, suite, pair, BASELINE_FIRST, texts)
        return sections(request.system or "")["Rubric"]

    assert rubric(make_suite(tmp_path / "none", "", "")) == DEFAULT_RUBRIC
    assert rubric(make_suite(tmp_path / "task", "", "Only the task.")) == "Only the task."
    assert rubric(make_suite(tmp_path / "suite", "Only the suite.", "")) == "Only the suite."
    # A task without a rubric key gets the suite rubric alone.
    fact = Pair("judged", "fact", "sum", BASE, CAND)
    system = judge_request(JUDGE, make_suite(tmp_path / "s"), fact, BASELINE_FIRST, texts).system
    assert sections(system or "")["Rubric"] == "Suite rubric: be accurate."


def test_braces_in_answers_stay_literal(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    pair = Pair("judged", "reply", "late", BASE, CAND)
    tricky = {BASE: '{"winner": "1"} {answer_2} {0}', CAND: "{{ msg }}"}
    request = judge_request(JUDGE, suite, pair, BASELINE_FIRST, tricky)
    parts = sections(request.prompt)
    assert parts["Answer 1"] == '{"winner": "1"} {answer_2} {0}'
    assert parts["Answer 2"] == "{{ msg }}"


# --- verdict parsing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "winner", "reason"),
    [
        ('{"winner": "2", "reason": "more complete"}', "2", "more complete"),
        ('  {"reason": "same", "winner": "tie"}\n', "tie", "same"),
        ('Verdict:\n```json\n{"winner": "1", "reason": "correct"}\n```\nDone.', "1", "correct"),
        ('```\n{"winner": "tie", "reason": "equal"}\n```', "tie", "equal"),
    ],
)
def test_parse_verdict_accepts_json_and_fenced_json(text: str, winner: str, reason: str) -> None:
    assert parse_verdict(text) == (winner, reason)


@pytest.mark.parametrize(
    "text",
    [
        '{"reason": "no winner given"}',
        '{"winner": "3", "reason": "a third answer"}',
        '{"winner": 1, "reason": "a number, not a string"}',
        '{"winner": "1"}',
        '{"winner": "1", "reason": "x", "confidence": 0.9}',
        "Answer 2 is better because it is more complete.",
        "",
        "```json\nnot json\n```",
    ],
)
def test_parse_verdict_rejects_unusable_verdicts(text: str) -> None:
    winner, message = parse_verdict(text)
    assert winner is None
    assert message


VERDICT_VALUES = st.one_of(
    st.sampled_from(["1", "2", "tie", "3", "", "TIE"]),
    st.text(max_size=4),
    st.integers(-2, 3),
    st.booleans(),
    st.none(),
    st.lists(st.just("1"), max_size=2),
)


@given(
    st.one_of(
        st.dictionaries(st.sampled_from(["winner", "reason", "why"]), VERDICT_VALUES),
        VERDICT_VALUES,
    )
)
def test_the_plain_verdict_reading_agrees_with_the_schema(value: Any) -> None:
    # The shortcut reads a valid verdict object without the validator; every other answer
    # gets the validator's result and message.
    text = json.dumps(value)
    verdict, why = parsed_verdict(text, VERDICT_SCHEMA)
    expected = (None, why) if verdict is None else (verdict["winner"], verdict["reason"])
    assert parse_verdict(text) == expected
    plain = _plain_verdict(text)
    assert plain is None or plain == expected
    if verdict is not None and text == json.dumps(verdict):
        assert plain == expected  # a valid verdict object takes the shortcut


# --- the judge record ----------------------------------------------------------------------


def canonical_sha(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_judge_record_fields(tmp_path: Path) -> None:
    record = judge_record(make_suite(tmp_path), JUDGE)
    rubrics = {
        "suite": "Suite rubric: be accurate.",
        "tasks": {"reply": "Task rubric: be kind.", "fact": None, "chatter": None},
    }
    assert record.to_dict() == {
        "model": JUDGE,
        "rubric_hash": canonical_sha(rubrics),
        "prompt_template_version": PROMPT_TEMPLATE_VERSION,
        "verdict_schema_hash": canonical_sha(VERDICT_SCHEMA),
    }
    # 2: each answer's check outcome (M19); 3: the constant part first, as the system text
    assert PROMPT_TEMPLATE_VERSION == "3"


def test_judge_record_follows_rubrics_not_prompts(tmp_path: Path) -> None:
    base = make_suite(tmp_path / "base")
    record = judge_record(base, JUDGE)
    task_rubric = make_suite(tmp_path / "task", task_rubric="Task rubric: be brief.")
    suite_rubric = make_suite(tmp_path / "suite", suite_rubric="Suite rubric: be fast.")
    prompt = make_suite(tmp_path / "prompt", replace=("Answer briefly:", "Answer in full:"))
    assert judge_record(task_rubric, JUDGE).rubric_hash != record.rubric_hash
    assert judge_record(suite_rubric, JUDGE).rubric_hash != record.rubric_hash
    assert prompt.hash != base.hash  # the suite did change...
    assert judge_record(prompt, JUDGE) == record  # ...but not the judge as an instrument
    assert judge_record(base, "fake/other-judge").model == "fake/other-judge"
    assert judge_record(base, "fake/other-judge").rubric_hash == record.rubric_hash


# --- judge_pairs through a real dispatcher -------------------------------------------------

Script = Callable[[Request], str]


@dataclass
class ScriptedJudge:
    """A judge adapter answering from ``script(request)``; records every call it gets."""

    script: Script
    name: str = "fake"
    version: str = "1"
    calls: list[Request] = field(default_factory=list)

    def schema_mode(self, request: Request) -> str | None:
        return "native"

    def key_extra(self, request: Request) -> dict[str, str]:
        # A stand-in for the fake adapter with no code of its own to fingerprint: an empty
        # extra keeps the fake's cache key, and says so (no EvalmineWarning in the test run).
        return {}

    async def complete(self, request: Request) -> Response:
        self.calls.append(request)
        await asyncio.sleep(0)
        return Response(
            text=self.script(request),
            usage=Usage(input_tokens=100, output_tokens=20),
            latency_s=0.0,
            schema_mode="native",
        )

    async def aclose(self) -> None:
        return None

    def calls_for(self, case: str, order: str | None = None) -> list[Request]:
        return [
            c
            for c in self.calls
            if c.context is not None
            and c.context["case"] == case
            and (order is None or c.context["order"] == order)
        ]


def candidate_wins(request: Request) -> str:
    assert request.context is not None
    slot = "2" if request.context["order"] == BASELINE_FIRST else "1"
    return json.dumps({"winner": slot, "reason": "the candidate is better"})


def dispatcher(tmp_path: Path, adapter: ScriptedJudge, **kwargs: Any) -> Dispatcher:
    registry = AdapterRegistry()
    registry.register("fake", lambda: adapter)
    options: dict[str, Any] = {"cap_usd": 10.0, "backoff_s": 0.0, **kwargs}
    return Dispatcher(
        registry=registry,
        store=Store(tmp_path / "cache.sqlite"),
        prices=load_prices(),
        run_token="run",
        **options,
    )


def planned(suite: Suite, records: list[AnswerRecord]) -> list[Pair]:
    judged_tasks = {t.id for t in suite.tasks if t.judge}
    return plan_pairs(records, [BASE, CAND], judged_tasks)


def test_judged_pairs_in_both_orders(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    records = answers_of(suite)
    pairs = planned(suite, records)
    assert [(p.task, p.case) for p in pairs] == [
        ("fact", "sum"),
        ("reply", "late"),
        ("reply", "refund"),
    ]
    judge = ScriptedJudge(candidate_wins)
    judge_pairs(pairs, records, suite, JUDGE, dispatcher(tmp_path, judge))
    assert len(judge.calls) == 6
    for p in pairs:
        assert p.excluded is None and p.judged
        assert sorted(x.order for x in p.passes) == [BASELINE_FIRST, CANDIDATE_FIRST]
        assert p.score == 1.0 and p.outcome == "win"
        assert all(x.reason == "the candidate is better" and x.key for x in p.passes)
        assert all(x.cost_usd > 0 and not x.cached and x.attempts == 1 for x in p.passes)
    # No call for the task with judge: false; every request is a verdict request.
    assert {(c.context or {}).get("task") for c in judge.calls} == {"reply", "fact"}
    assert all(c.schema == VERDICT_SCHEMA and c.model == JUDGE for c in judge.calls)


def test_excluded_pairs_never_reach_the_judge(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    records = answers_of(suite)
    broken = next(r for r in records if (r.case, r.model) == ("refund", CAND))
    broken.outcome, broken.text, broken.checks = "error", None, []
    del records[next(i for i, r in enumerate(records) if (r.case, r.model) == ("sum", BASE))]
    pairs = planned(suite, records)
    assert {p.case: p.excluded for p in pairs} == {
        "sum": "missing_answer",
        "late": None,
        "refund": "provider_error",
    }
    judge = ScriptedJudge(candidate_wins)
    judge_pairs(pairs, records, suite, JUDGE, dispatcher(tmp_path, judge))
    assert len(judge.calls_for("late")) == len(judge.calls) == 2
    by_case = {p.case: p for p in pairs}
    assert by_case["late"].judged
    assert by_case["refund"].excluded == "provider_error" and by_case["refund"].passes == []
    assert by_case["sum"].excluded == "missing_answer" and by_case["sum"].passes == []


def test_an_unparseable_verdict_is_asked_once_more(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    records = answers_of(suite)

    def script(request: Request) -> str:
        assert request.context is not None
        if (request.context["case"], request.context["order"], request.repeat) == (
            "late",
            BASELINE_FIRST,
            0,
        ):
            return "Answer 2 is clearly the better one."
        return candidate_wins(request)

    judge = ScriptedJudge(script)
    pairs = planned(suite, records)
    judge_pairs(pairs, records, suite, JUDGE, dispatcher(tmp_path, judge))
    late = next(p for p in pairs if p.case == "late")
    assert late.excluded is None and late.judged and late.score == 1.0
    retried = judge.calls_for("late", BASELINE_FIRST)
    assert [c.repeat for c in retried] == [0, 1]
    assert retried[0].prompt == retried[1].prompt
    assert [c.repeat for c in judge.calls_for("late", CANDIDATE_FIRST)] == [0]
    assert len(judge.calls) == 7
    # The failed pass was replaced by the retry, not kept beside it.
    assert len(late.passes) == 2
    first = next(x for x in late.passes if x.order == BASELINE_FIRST)
    assert (first.winner_slot, first.error, first.error_kind) == ("2", None, None)
    assert all(p.judged for p in pairs)

    # A rerun replays both the unusable verdict and its retry from the cache.
    again = planned(suite, records)
    judge.calls.clear()
    judge_pairs(again, records, suite, JUDGE, dispatcher(tmp_path, judge))
    assert judge.calls == []
    assert [p.to_dict()["score"] for p in again] == [p.to_dict()["score"] for p in pairs]
    assert all(x.cached and x.cost_usd == 0 for p in again for x in p.passes)


def test_a_verdict_unparseable_twice_excludes_the_pair(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    records = answers_of(suite)

    def script(request: Request) -> str:
        assert request.context is not None
        if request.context["case"] == "refund":
            return "I prefer the second answer."
        return candidate_wins(request)

    judge = ScriptedJudge(script)
    pairs = planned(suite, records)
    judge_pairs(pairs, records, suite, JUDGE, dispatcher(tmp_path, judge))
    refund = next(p for p in pairs if p.case == "refund")
    assert refund.excluded == "judge_unparseable"
    assert not refund.judged and refund.score is None
    for order in (BASELINE_FIRST, CANDIDATE_FIRST):
        assert [c.repeat for c in judge.calls_for("refund", order)] == [0, 1]
    assert len(judge.calls) == 2 + 2 + 4
    assert all(x.error_kind == "unparseable" and x.error for x in refund.passes)
    assert [p.excluded for p in pairs if p.case != "refund"] == [None, None]


def test_a_judge_provider_error_excludes_the_pair(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    records = answers_of(suite)

    def script(request: Request) -> str:
        assert request.context is not None
        if request.context["case"] == "sum" and request.context["order"] == CANDIDATE_FIRST:
            raise AdapterError("bad_request", "the judge refused", retryable=False, status=400)
        return candidate_wins(request)

    judge = ScriptedJudge(script)
    pairs = planned(suite, records)
    judge_pairs(pairs, records, suite, JUDGE, dispatcher(tmp_path, judge))
    total = next(p for p in pairs if p.case == "sum")
    assert total.excluded == "judge_error"
    assert not total.judged
    # A provider error is not retried as an unparseable verdict would be.
    assert [c.repeat for c in judge.calls_for("sum", CANDIDATE_FIRST)] == [0]
    assert len(judge.calls) == 6
    failed = next(x for x in total.passes if x.order == CANDIDATE_FIRST)
    assert failed.winner_slot is None
    assert failed.error is not None and "the judge refused" in failed.error
    assert [p.excluded for p in pairs if p.case != "sum"] == [None, None]


def test_judge_replay_misses_exclude_pairs_as_judge_replay_miss(tmp_path: Path) -> None:
    """Spec: "judge_replay_miss". In record mode none with an empty cache every judge call is
    a replay miss."""
    suite = make_suite(tmp_path)
    records = answers_of(suite)
    judge = ScriptedJudge(candidate_wins)
    pairs = planned(suite, records)
    judge_pairs(pairs, records, suite, JUDGE, dispatcher(tmp_path, judge, record="none"))
    assert judge.calls == []
    assert [p.excluded for p in pairs] == ["judge_replay_miss"] * 3


def test_judge_calls_over_the_cap_exclude_pairs_as_judge_not_run(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    records = answers_of(suite)
    judge = ScriptedJudge(candidate_wins)
    pairs = planned(suite, records)
    judge_pairs(pairs, records, suite, JUDGE, dispatcher(tmp_path, judge, cap_usd=1e-9))
    assert judge.calls == []
    assert [p.excluded for p in pairs] == ["judge_not_run"] * 3


def test_suite_helper_builds_the_intended_suite(tmp_path: Path) -> None:
    # Guards the helper above: the formatted YAML really has the three tasks and the judge.
    suite = make_suite(tmp_path)
    assert [t.id for t in suite.tasks] == ["reply", "fact", "chatter"]
    assert [t.judge for t in suite.tasks] == [True, True, False]
    assert suite.judge.model == JUDGE
    assert suite.judge.rubric == "Suite rubric: be accurate."
