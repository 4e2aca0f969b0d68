"""Deterministic checkers (spec: "Checks"): each against GSM8K answer strings where it reads
numbers (solutions written in its style, and the public test split's when a copy is there),
and against the edge cases the spec names."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.errors import SuiteError
from pytest_evalmine.scoring import checkers
from pytest_evalmine.scoring.checkers import (
    BUILTIN,
    NO_GOLD,
    CheckInput,
    Verdict,
    extract_choice,
    extract_number,
    user_checker,
)
from pytest_evalmine.scoring.checks import Check, CheckResult
from pytest_evalmine.scoring.item import score_answer, validate_checks
from pytest_evalmine.suite.loader import Case, CheckSpec, load_suite

from .conftest import shared_data, write_suite
from .written_data import gsm8k_rows


def run(name: str, text: str, reference: Any = NO_GOLD, **options: Any) -> Check:
    return BUILTIN[name].function(CheckInput(text=text, reference=reference, options=options))


@pytest.fixture(params=["written", "public"])
def gsm8k(request: pytest.FixtureRequest) -> list[dict[str, str]]:
    """GSM8K solutions: 160 written in its style (tests/written_data.py), and the public test
    split's 1,319 (skips without a copy of it, naming EVALMINE_DATA; fails under CI=true)."""
    if request.param == "written":
        return gsm8k_rows(160)
    path = shared_data() / "gsm8k" / "test.jsonl"
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    assert len(rows) == 1319
    return rows


def gold_of(answer: str) -> str:
    return answer.rsplit("#### ", 1)[1].strip()


# --- number against GSM8K answers ------------------------------------------------------------


def test_number_reads_the_gold_of_every_gsm8k_solution(gsm8k: list[dict[str, str]]) -> None:
    """The reference solutions end in '#### N': the last number of each is its gold."""
    wrong = [
        (row["answer"][-60:], gold_of(row["answer"]))
        for row in gsm8k
        if not run("number", row["answer"], gold_of(row["answer"])).passed
    ]
    assert wrong == []


def test_number_prefers_answer_line_over_the_last_number_in_gsm8k_solutions(
    gsm8k: list[dict[str, str]],
) -> None:
    """A model that writes its working, then 'Answer: N', then a stray number."""
    for row in gsm8k[:160]:
        gold = gold_of(row["answer"])
        working = row["answer"].rsplit("####", 1)[0]
        text = f"{working}\nAnswer: {gold}\n(That took me 3 steps and 45 seconds.)"
        assert run("number", text, gold).passed, text[-120:]
        assert not run("number", text + "\nAnswer: 999999", gold).passed


def test_number_reads_boxed_gsm8k_answers_with_thousands_and_currency(
    gsm8k: list[dict[str, str]],
) -> None:
    for row in gsm8k[:160]:
        gold = Decimal(gold_of(row["answer"]).replace(",", ""))  # public item 146: "2,125"
        formatted = f"${gold:,}"
        working = row["answer"].rsplit("####", 1)[0]
        text = f"{working}\nSo the final result is \\boxed{{{formatted}}}. Check: 1 + 1 = 2."
        result = run("number", text, gold_of(row["answer"]))
        assert result.passed, (formatted, result.message)
        assert "boxed" in result.message


@pytest.mark.parametrize(
    ("text", "expected", "where"),
    [
        ("Answer: 18", 18, "after 'Answer:'"),
        ("**Answer:** $1,234.50", Decimal("1234.50"), "after 'Answer:'"),
        ("The answer is: -7 degrees", -7, "after 'Answer:'"),
        ("answer: \u22123", -3, "after 'Answer:'"),
        ("She pays \u20ac12.5 per hour", Decimal("12.5"), "the last number"),
        ("16 - 3 - 4 = 9", 9, "the last number"),
        ("We get \\boxed{\\frac{70}{1}} and 5 spare", 70, "in \\boxed{}"),
        ("Answer: none\nBut really it is 42.", 42, "the last number"),
        ("1,000,000 people", 1000000, "the last number"),
        ("It is 18.", 18, "the last number"),
        ("v1.2 costs 3", 3, "the last number"),
    ],
)
def test_extract_number(text: str, expected: Any, where: str) -> None:
    assert extract_number(text) == (Decimal(expected), where)


def test_no_number() -> None:
    assert extract_number("no digits here") is None
    result = run("number", "no digits here", 5)
    assert not result.passed and result.score == 0.0
    assert result.expected == "5" and result.got is None


@pytest.mark.parametrize(
    ("text", "gold", "options", "passed"),
    [
        ("Answer: 18.0", 18, {}, True),
        ("Answer: 18", "18.00", {}, True),
        ("Answer: 18", "$18", {}, True),
        ("Answer: 70,000", "70000", {}, True),
        ("Answer: 3.14", 3.14159, {"tolerance": 0.01}, True),
        ("Answer: 3.2", 3.14159, {"tolerance": 0.01}, False),
        ("Answer: -5", 5, {}, False),
        ("Answer: 17", 18, {}, False),
    ],
)
def test_number_comparison(text: str, gold: Any, options: dict[str, Any], passed: bool) -> None:
    result = run("number", text, gold, **options)
    assert result.passed is passed
    assert result.score == (1.0 if passed else 0.0)


def test_number_failure_says_expected_and_got() -> None:
    result = run("number", "Working...\nAnswer: 17", 18)
    assert result.message == "17 (after 'Answer:') is not 18"
    assert (result.expected, result.got) == ("18", "17")


# --- choice ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("Answer: C", "C"),
        ("Answer: (b)", "B"),
        ("**Answer:** D.", "D"),
        ("I think the answer is (A) because...", "A"),
        ("Options (A) and (C) are close; I pick (C)", "C"),
        ("Reasoning...\nB\n", "B"),
        ("Reasoning...\n**B.**", "B"),
    ],
)
def test_extract_choice(text: str, letter: str) -> None:
    assert extract_choice(text, "ABCD")[0] == letter  # type: ignore[index]


def test_choice_letters_are_configurable() -> None:
    assert run("choice", "Answer: E", "E", letters="ABCDE").passed
    assert not run("choice", "Answer: E", "A").passed  # E is not a letter of ABCD
    assert extract_choice("A cat sat. Ages ago.", "ABCD") is None


# --- exact, contains, not_contains, regex ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gold", "options", "passed"),
    [
        ("Paris.", "paris", {}, True),
        ("  The   Eiffel\nTower!! ", "the eiffel tower", {}, True),
        ("Paris", "paris", {"case_sensitive": True}, False),
        ("Lyon", ["Paris", "Lyon"], {}, True),
        ("Paris, France", "Paris", {}, False),
        ('"Paris"', "Paris", {}, False),
    ],
)
def test_exact(text: str, gold: Any, options: dict[str, Any], passed: bool) -> None:
    assert run("exact", text, gold, **options).passed is passed


def test_contains_whole_word_and_case() -> None:
    text = "We refunded the charge; refunds take 3 days."
    assert run("contains", text, "REFUND").passed
    assert not run("contains", text, "REFUND", case_sensitive=True).passed
    assert not run("contains", text, "refund", whole_word=True).passed
    assert run("contains", text, "refunds", whole_word=True).passed
    both = run("contains", text, ["refund", "apology"])
    assert not both.passed and both.score == 0.5 and "apology" in both.message
    assert run("contains", text, ["refund", "apology"], any=True).passed
    assert run("contains", "C++ rocks", "C++", whole_word=True).passed


def test_not_contains() -> None:
    text = "As an AI language model, I cannot."
    result = run("not_contains", text, ["as an ai", "sorry"])
    assert not result.passed and result.score == 0.5
    assert "as an ai" in result.message
    assert run("not_contains", "Happy to help.", ["sorry"]).passed


def test_regex_match_and_last_group() -> None:
    text = "Ticket: ABC-12. Later: ticket: xyz-99"
    assert run("regex", text, pattern=r"[A-Z]{3}-\d+").passed
    assert not run("regex", "nothing", pattern=r"\d+").passed
    assert run("regex", text, "XYZ-99", pattern=r"ticket: (\S+)", ignore_case=True).passed
    assert not run("regex", text, "ABC-12", pattern=r"(?i)ticket: (\S+)").passed
    named = run("regex", "id=7; id=8", 8, pattern=r"id=(?P<n>\d)", group="n")
    assert named.passed and named.got == "'8'"
    assert run("regex", "Score: 10/10", "Score: 10/10", pattern=r"Score: (\S+)", group=0).passed


def test_a_catastrophically_backtracking_pattern_fails_the_check_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (a|aa)+$ on 60 a's and a b: Python's re takes on the order of Fibonacci(60) steps
    # (decades), and holds the interpreter's lock while it does.
    monkeypatch.setattr(checkers, "REGEX_TIMEOUT_S", 0.2)
    result = run("regex", "a" * 60 + "b", pattern=r"(a|aa)+$")
    assert not result.passed and result.score == 0.0
    assert "timed out after 0.2 s on this answer (catastrophic backtracking)" in result.message
    # the same pattern on an answer it matches in linear time still decides
    assert run("regex", "aaaa", pattern=r"(a|aa)+$").passed


# --- json_fields and json_path --------------------------------------------------------------


GOLD = {"name": "Blue Spice", "eatType": "coffee shop", "area": "city centre", "near": None}


def test_json_fields_all_right() -> None:
    answer = '{"name": "blue spice", "eatType": "Coffee Shop", "area": "city centre", "near": null}'
    result = run("json_fields", answer, GOLD)
    assert result.passed and result.score == 1.0
    assert result.message == "4/4 fields right"


def test_json_fields_null_must_be_null_and_missing_is_wrong() -> None:
    answer = {"name": "Blue Spice", "eatType": "pub", "near": ""}
    result = run("json_fields", json.dumps(answer), GOLD)
    assert not result.passed and result.score == 0.25
    assert "eatType: expected 'coffee shop', got 'pub'" in result.message
    assert "area: expected 'city centre', got missing" in result.message
    assert "near: expected null, got ''" in result.message


def test_json_fields_threshold_fields_and_fenced_answer() -> None:
    answer = 'Here:\n```json\n{"name": "Blue Spice", "eatType": "pub", "area": "city centre"}\n```'
    assert run("json_fields", answer, GOLD, threshold=0.5).passed
    assert not run("json_fields", answer, GOLD, threshold=0.8).passed
    assert run("json_fields", answer, GOLD, fields=["name", "area"]).passed
    assert not run("json_fields", "not json", GOLD).passed
    assert not run("json_fields", "[1]", GOLD).passed


def test_json_value_equality() -> None:
    assert run("json_fields", '{"n": 18.0, "ok": true}', {"n": 18, "ok": True}).passed
    assert not run("json_fields", '{"n": 1}', {"n": True}).passed
    assert not run("json_fields", '{"n": true}', {"n": 1}).passed


def test_json_path() -> None:
    answer = '{"order": {"items": [{"sku": "A1", "qty": 2}], "note": null, "a b": 1}}'
    assert run("json_path", answer, 2, path="$.order.items[0].qty").passed
    assert run("json_path", answer, "a1", path="order.items[0].sku").passed
    assert run("json_path", answer, None, path="$.order.note").passed
    assert run("json_path", answer, 1, path="$.order['a b']").passed
    missing = run("json_path", answer, 1, path="$.order.items[3].qty")
    assert not missing.passed and missing.message == "no value at $.order.items[3].qty"
    assert not run("json_path", answer, 3, path="$.order.items[0].qty").passed


# --- length ----------------------------------------------------------------------------------


def test_max_words_and_chars() -> None:
    assert run("max_words", "one two  three\nfour", max=4).passed
    result = run("max_words", "one two three four five", max=4)
    assert not result.passed and result.message == "5 words, at most 4 allowed"
    assert run("max_chars", "abcd", max=4).passed
    assert not run("max_chars", "abcde", max=4).passed


# --- item score and user checks ---------------------------------------------------------------


def test_item_score_is_the_mean_of_its_checks() -> None:
    checks = (CheckSpec("number", {}, "$"), CheckSpec("contains", {"value": "dollars"}, "$"))
    case = Case("c", {}, gold=18)
    result = score_answer("Answer: 18", None, checks, case, BUILTIN)
    assert [c.name for c in result.checks] == ["answer", "number", "contains"]
    assert not result.passed and result.score == 0.5
    assert score_answer("", None, checks, case, BUILTIN).score == 0.0
    assert score_answer("fine", None, (), case, BUILTIN).score == 1.0
    assert CheckResult((Check("answer", True), Check("parse", False))).score == 0.0


def test_case_reference_order() -> None:
    spec = CheckSpec("contains", {"value": "task-wide"}, "$")
    assert Case("c", {}, gold="gold").reference(spec) == "task-wide"
    assert Case("c", {}, gold="g", expected={"contains": "mine"}).reference(spec) == "mine"
    assert Case("c", {}, gold="gold").reference(CheckSpec("number", {}, "$")) == "gold"
    assert Case("c", {}).reference(CheckSpec("number", {}, "$")) is NO_GOLD


@pytest.mark.parametrize(
    ("value", "passed", "score"),
    [
        (True, True, 1.0),
        (False, False, 0.0),
        (0.4, False, 0.4),
        (1, True, 1.0),
        (Verdict(True, 0.9, "close enough"), True, 0.9),
    ],
)
def test_user_check_results(value: Any, passed: bool, score: float) -> None:
    check = user_checker("mine", lambda inp: value)(CheckInput("text", NO_GOLD, {}))
    assert (check.name, check.passed, check.score) == ("mine", passed, score)


def test_user_check_threshold_and_bad_results() -> None:
    assert user_checker("m", lambda inp: 0.4)(CheckInput("t", NO_GOLD, {"threshold": 0.3})).passed
    with pytest.raises(TypeError, match="returned str"):
        user_checker("m", lambda inp: "yes")(CheckInput("t", NO_GOLD, {}))
    with pytest.raises(ValueError, match="outside"):
        user_checker("m", lambda inp: 1.5)(CheckInput("t", NO_GOLD, {}))


# --- suite validation ------------------------------------------------------------------------


SUITE = """\
version: 1
suite: checked
models: [fake/a]
tasks:
  - id: t
    kind: answer
    prompt: "Q {{ q }}"
    checks: CHECKS
    cases:
      - {id: one, vars: {q: "1"}, gold: 18}
      - {id: two, vars: {q: "2"}GOLD2}
"""


def load_checked(tmp_path: Path, checks: str, gold2: str = ", gold: 3") -> Any:
    text = SUITE.replace("CHECKS", checks).replace("GOLD2", gold2)
    path = write_suite(tmp_path, text)
    suite = load_suite(path)
    validate_checks(suite, BUILTIN, "suite.eval.yaml")
    return suite


def test_checks_load_in_both_shapes(tmp_path: Path) -> None:
    suite = load_checked(tmp_path, "[number, {max_words: {max: 3}}, {contains: {value: x}}]")
    specs = suite.tasks[0].checks
    assert [(s.name, s.options) for s in specs] == [
        ("number", {}),
        ("max_words", {"max": 3}),
        ("contains", {"value": "x"}),
    ]
    assert specs[1].where == "$.tasks[0].checks[1]"
    assert suite.tasks[0].cases[0].gold == 18


@pytest.mark.parametrize(
    ("checks", "gold2", "where", "message"),
    [
        ("[nubmer]", ", gold: 3", "checks[0]", "unknown check 'nubmer' (built-in: choice, "),
        ("[number]", "", "checks[0]", "check 'number' needs a value to compare with"),
        ("[number]", ", gold: three", "checks[0]", "number gold: 'three' is not a number"),
        ("[{regex: {pattern: '(x'}}]", "", "checks[0]", "regex pattern does not compile"),
        ("[{regex: {pattern: 'x', group: 2}}]", "", "checks[0]", "regex group 2 does not exist"),
        ("[{json_path: {path: '$..a'}}]", "", "checks[0]", "json_path '$..a': cannot read"),
        ("[choice]", ", gold: F", "checks[0]", "choice gold must be one of the letters ABCD"),
        ("[json_fields]", ", gold: 3", "checks[0]", "json_fields needs an object as gold"),
    ],
)
def test_bad_checks_are_one_line_suite_errors(
    tmp_path: Path, checks: str, gold2: str, where: str, message: str
) -> None:
    with pytest.raises(SuiteError) as info:
        load_checked(tmp_path, checks, gold2)
    assert info.value.path == f"$.tasks[0].{where}"
    assert message in info.value.problem
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        ("[{max_words: {}}]", "missing required key 'max'"),
        ("[{max_words: {max: 3, min: 1}}]", "unknown key 'min'"),
        ("[{number: {}, exact: {}}]", "has too many properties"),
        ("[{number: {tolerance: -1}}]", "less than the minimum of 0"),
        ("['no spaces please']", "does not match"),
    ],
)
def test_check_options_are_schema_validated(tmp_path: Path, checks: str, message: str) -> None:
    with pytest.raises(SuiteError, match=re.escape(message)):
        load_checked(tmp_path, checks)
