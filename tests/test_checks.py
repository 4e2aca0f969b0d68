"""Answer checks: JSON extraction, empty answers, parse and schema failures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_evalmine.scoring.checks import Check, CheckResult, check_answer, parse_json_answer

TRIAGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "bug", "other"]},
        "priority": {"enum": ["p1", "p2", "p3"]},
        "tags": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    },
    "required": ["category", "priority"],
    "additionalProperties": False,
}


# --- parse_json_answer -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  \n{"a": [1, 2]}\n  ', {"a": [1, 2]}),
        ("[1, 2, 3]", [1, 2, 3]),
        ('"just a string"', "just a string"),
        ("42", 42),
        ("null", None),
        ('{"text": "```json\\n{}\\n```"}', {"text": "```json\n{}\n```"}),
    ],
    ids=["object", "padded", "array", "string", "number", "null", "fence-inside-json"],
)
def test_whole_text_json(text: str, expected: Any) -> None:
    assert parse_json_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        'Here you go:\n```json\n{"category": "bug"}\n```\nAnything else?',
        'Here you go:\n```\n{"category": "bug"}\n```',
        '```JSON\n{"category": "bug"}\n```',
        '```json  \n{"category": "bug"}```',
        'Sure.\n\n```jsonc\n{\n  "category": "bug"\n}\n```\n',
    ],
    ids=["json-tag", "bare", "upper-tag", "trailing-space-no-final-newline", "multiline"],
)
def test_fenced_block(text: str) -> None:
    assert parse_json_answer(text) == {"category": "bug"}


def test_first_fenced_block_wins() -> None:
    text = 'One:\n```json\n{"n": 1}\n```\nTwo:\n```json\n{"n": 2}\n```\n'
    assert parse_json_answer(text) == {"n": 1}


def test_first_fenced_block_not_json_is_an_error_even_if_a_later_one_is() -> None:
    text = "```python\nprint('hi')\n```\n```json\n{\"n\": 2}\n```\n"
    with pytest.raises(ValueError, match="first fenced block is not JSON"):
        parse_json_answer(text)


@pytest.mark.parametrize(
    "text",
    [
        "The category is bug.",
        "",
        '{"category": "bug"',
        "category: bug",
        'Inline ```{"a": 1}``` is not a block',
    ],
    ids=["prose", "empty", "cut-json", "yaml", "inline-fence"],
)
def test_not_json_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="not JSON"):
        parse_json_answer(text)


# --- check_answer without a schema -----------------------------------------------------------


def test_non_empty_answer_passes_without_schema() -> None:
    result = check_answer("Thanks for reaching out.", None)
    assert result.passed
    assert result.failed is None
    assert [c.name for c in result.checks] == ["answer"]
    assert result.status("answer") is True
    assert result.status("parse") is None
    assert result.status("schema") is None
    assert result.parsed is None


def test_prose_without_schema_is_not_parsed() -> None:
    result = check_answer("not { json", None)
    assert result.passed
    assert result.status("parse") is None


@pytest.mark.parametrize("text", ["", " ", "\n\t  \n"], ids=["empty", "space", "whitespace"])
@pytest.mark.parametrize("schema", [None, TRIAGE], ids=["no-schema", "schema"])
def test_empty_or_whitespace_answer_fails_the_answer_check(
    text: str, schema: dict[str, Any] | None
) -> None:
    result = check_answer(text, schema)
    assert not result.passed
    assert result.failed is not None
    assert result.failed.name == "answer"
    assert result.failed.message
    assert result.status("answer") is False
    assert result.status("parse") is None
    assert result.status("schema") is None


# --- check_answer with a schema --------------------------------------------------------------


def test_schema_pass() -> None:
    text = '{"category": "billing", "priority": "p2", "tags": [{"name": "refund"}]}'
    result = check_answer(text, TRIAGE)
    assert result.passed
    assert [c.name for c in result.checks] == ["answer", "parse", "schema"]
    assert all(c.passed for c in result.checks)
    assert result.parsed == json.loads(text)
    assert result.status("schema") is True


def test_schema_pass_from_a_fenced_block() -> None:
    result = check_answer('Result:\n```json\n{"category": "bug", "priority": "p1"}\n```', TRIAGE)
    assert result.passed
    assert result.parsed == {"category": "bug", "priority": "p1"}


def test_parse_failure() -> None:
    result = check_answer("I think it is a billing issue.", TRIAGE)
    assert not result.passed
    assert result.failed is not None
    assert result.failed.name == "parse"
    assert "not JSON" in result.failed.message
    assert result.status("answer") is True
    assert result.status("parse") is False
    assert result.status("schema") is None
    assert result.parsed is None


def test_schema_failure_names_the_json_path() -> None:
    result = check_answer('{"category": "bug", "priority": "urgent"}', TRIAGE)
    assert not result.passed
    assert result.failed is not None
    assert result.failed.name == "schema"
    assert result.failed.message.startswith("$.priority: ")
    assert "urgent" in result.failed.message
    assert result.status("parse") is True
    assert result.status("schema") is False
    assert result.parsed == {"category": "bug", "priority": "urgent"}


def test_schema_failure_path_through_an_array() -> None:
    result = check_answer('{"category": "bug", "priority": "p1", "tags": [{"name": 7}]}', TRIAGE)
    assert result.failed is not None
    assert result.failed.name == "schema"
    assert result.failed.message.startswith("$.tags[0].name: ")


def test_schema_failure_at_the_root() -> None:
    result = check_answer('{"category": "bug"}', TRIAGE)
    assert result.failed is not None
    assert result.failed.name == "schema"
    assert result.failed.message.startswith("$: ")
    assert "priority" in result.failed.message


def test_schema_failure_for_wrong_root_type() -> None:
    result = check_answer("[1, 2]", TRIAGE)
    assert result.status("parse") is True
    assert result.status("schema") is False


def test_schema_failure_for_extra_property() -> None:
    result = check_answer('{"category": "bug", "priority": "p1", "mood": "sad"}', TRIAGE)
    assert result.status("schema") is False
    assert result.failed is not None
    assert "mood" in result.failed.message


def test_schema_uses_draft_2020_12() -> None:
    # prefixItems exists only from draft 2020-12 on; an older validator would ignore it.
    schema = {"type": "array", "prefixItems": [{"type": "integer"}]}
    assert check_answer("[1]", schema).passed
    assert check_answer('["one"]', schema).status("schema") is False


# --- CheckResult -----------------------------------------------------------------------------


def test_check_result_status_and_failed() -> None:
    result = CheckResult(
        (Check("answer", True), Check("parse", False, "bad"), Check("schema", False, "worse"))
    )
    assert result.status("answer") is True
    assert result.status("parse") is False
    assert result.status("schema") is False
    assert result.status("judge") is None
    assert not result.passed
    assert result.failed == Check("parse", False, "bad")


def test_check_result_all_passed() -> None:
    result = CheckResult((Check("answer", True), Check("parse", True)), parsed=[1])
    assert result.passed
    assert result.failed is None
    assert result.parsed == [1]


def test_empty_check_result_passes() -> None:
    assert CheckResult(()).passed
    assert CheckResult(()).status("answer") is None


def test_fenced_block_with_windows_line_endings_is_found() -> None:
    assert parse_json_answer('Here:\r\n```json\r\n{"a": 1}\r\n```') == {"a": 1}
