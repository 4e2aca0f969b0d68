"""Bounded work per answer, task schemas (issue 28 section 4): an answer is hostile input, and
so is the size of a schema the suite loads.

Before: ``pattern``/``patternProperties`` ran in ``re`` without a limit (``(a|aa)+$`` on a
long enough key or string: minutes, Ctrl-C swallowed), ``uniqueItems`` compared every pair of
objects (8,000: over a minute), a ``$ref`` loop reached through a property loaded and every
answer reaching it failed with RecursionError, and a 13 MB schema took minutes to load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema._utils
import pytest

from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.scoring.checks import check_answer
from pytest_evalmine.suite import bounded_validation, schema_loops, task_schema
from pytest_evalmine.suite.loader import load_suite
from pytest_evalmine.suite.refs import offline_validator

SHOWN = "suites/s.eval.yaml"
DRAFT7 = "http://json-schema.org/draft-07/schema#"


def suite_text(*schemas: Any) -> str:
    tasks = "".join(
        f"  - id: t{i}\n    kind: extract\n    prompt: Give JSON.\n"
        f"    schema: {json.dumps(schema)}\n    cases: [{{id: c}}]\n"
        for i, schema in enumerate(schemas)
    )
    return f"version: 1\nsuite: s\nmodels: [fake/a]\ntasks:\n{tasks}"


def load(folder: Path, *schemas: Any) -> Any:
    path = folder / "s.eval.yaml"
    path.write_text(suite_text(*schemas), "utf-8")
    return load_suite(path, shown=SHOWN)


def refusal(folder: Path, *schemas: Any) -> list[str]:
    with pytest.raises(EvalmineError) as info:
        load(folder, *schemas)
    return str(info.value).splitlines()


def schema_check(folder: Path, schema: Any, answer: Any) -> str:
    """The ``schema`` check's message for ``answer`` ('' when it passed), as a run checks it:
    the loaded schema with the files its $refs name."""
    task = load(folder, schema).task("t0")
    result = check_answer(json.dumps(answer), task.schema, task.schema_refs)
    check = next(c for c in result.checks if c.name == "schema")
    return "" if check.passed else check.message


# A pattern that backtracks catastrophically: ``re`` takes about Fibonacci(n) steps on n a's
# and a b (30: a second or more here, 60: decades), and so does ``regex``, within a deadline.
SLOW = "(a|aa)+$"
SLOW_TEXT = "a" * 30 + "b"

SLOW_SCHEMAS = {
    "pattern": ({"type": "string", "pattern": SLOW}, SLOW_TEXT),
    "patternProperties": ({"type": "object", "patternProperties": {SLOW: {}}}, {SLOW_TEXT: 1}),
    "additionalProperties": (
        {"patternProperties": {SLOW: {}}, "additionalProperties": False},
        {SLOW_TEXT: 1},
    ),
    "unevaluatedProperties": (
        {"patternProperties": {SLOW: {}}, "unevaluatedProperties": False},
        {SLOW_TEXT: 1},
    ),
    "draft-07 below a $ref": (
        {
            "$schema": DRAFT7,
            "definitions": {"s": {"pattern": SLOW}},
            "items": {"$ref": "#/definitions/s"},
        },
        [SLOW_TEXT],
    ),
}


@pytest.mark.parametrize("name", SLOW_SCHEMAS)
def test_a_catastrophic_schema_pattern_fails_the_check_within_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(bounded_validation, "PATTERN_TIMEOUT_S", 0.05)
    schema, answer = SLOW_SCHEMAS[name]
    message = schema_check(tmp_path, schema, answer)
    assert f"pattern {SLOW!r} timed out after 0.05 s on this answer" in message, message
    assert message.endswith("(catastrophic backtracking): not decided, counted as failed")


def test_the_same_patterns_still_decide_answers_they_match_quickly(tmp_path: Path) -> None:
    assert schema_check(tmp_path, {"type": "string", "pattern": SLOW}, "aaaa") == ""
    assert "does not match" in schema_check(tmp_path, {"pattern": "^b"}, "abc")
    # issue 28's own example (``re``: 2.7 s at 24 characters, minutes at 40); ``regex``
    # decides it at once
    message = schema_check(tmp_path, {"type": "string", "pattern": "^(a+)+$"}, "a" * 24 + "!")
    assert "does not match '^(a+)+$'" in message
    schema = {"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False}
    assert schema_check(tmp_path, schema, {"x1": 1}) == ""
    assert "'y' does not match any of the regexes" in schema_check(tmp_path, schema, {"y": 1})


def test_the_whole_answer_has_one_deadline_not_one_per_string(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each string alone is far below the per-search limit; together they pass the answer's
    deadline, and the check stops there instead of running them all."""
    monkeypatch.setattr(bounded_validation, "SCHEMA_CHECK_TIMEOUT_S", 0.05)
    schema = {"type": "array", "items": {"pattern": SLOW}}
    message = schema_check(tmp_path, schema, ["a" * 22 + "b"] * 150)
    assert message == (
        "checking this answer against the schema took over 0.05 s: not decided, counted as failed"
    )


def test_unique_items_is_one_pass_not_every_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted: the pairs jsonschema's own comparison looks at (objects do not sort, so it
    compared all n(n-1)/2 of them: 8,000 objects took over a minute)."""
    compared = []
    equal = jsonschema._utils.equal
    monkeypatch.setattr(jsonschema._utils, "equal", lambda a, b: compared.append(1) or equal(a, b))
    answer = [{"i": i} for i in range(600)]
    schema = {"type": "array", "uniqueItems": True}
    assert schema_check(tmp_path, schema, answer) == ""
    message = schema_check(tmp_path, schema, [*answer, {"i": 7}])
    assert message.endswith("has non-unique elements (items 7 and 600 are equal)")
    assert len(compared) < 600


UNIQUENESS = [
    [1, 1.0],
    [1, True],
    [0, False],
    [None, False],
    ["1", 1],
    [[1], [True]],
    [[1, 2], [2, 1]],
    [{"a": 1, "b": [1]}, {"b": [1.0], "a": 1}],
    [{"a": 1}, {"a": 1, "b": 2}],
    [{"a": {"b": None}}, {"a": {"b": False}}],
    [2.5, 2.5],
    [10**20, 1e20],
    [[], {}],
]


@pytest.mark.parametrize("items", UNIQUENESS, ids=json.dumps)
def test_unique_items_agrees_with_json_schema_equality(items: list[Any]) -> None:
    """The stock validator's verdict (its pairwise comparison) is the reference."""
    schema = {"uniqueItems": True}
    stock = jsonschema.Draft202012Validator(schema).is_valid(items)
    bounded = offline_validator(schema)
    with bounded_validation.bounded_check():
        assert bounded.is_valid(items) is stock


LOOPS = {
    "through a property": (
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
        "$.tasks[0].schema.$defs.b.$ref: $ref '#/$defs/a' loops back to "
        "$.tasks[0].schema.$defs.a without descending into the answer",
    ),
    "through not and allOf in an item": (
        {
            "$defs": {"n": {"not": {"allOf": [{"$ref": "#/$defs/n"}]}}},
            "items": {"$ref": "#/$defs/n"},
        },
        "$.tasks[0].schema.$defs.n.not.allOf[0].$ref: $ref '#/$defs/n' loops back to "
        "$.tasks[0].schema.$defs.n without descending into the answer",
    ),
}


@pytest.mark.parametrize("name", LOOPS)
def test_a_ref_loop_reached_through_the_answer_is_refused_at_load(
    tmp_path: Path, name: str
) -> None:
    schema, start = LOOPS[name]
    assert refusal(tmp_path, schema) == [
        f"{SHOWN}: {start}: checking an answer that reaches it would never end"
    ]


def test_a_ref_loop_across_files_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"$ref": "b.json"}', "utf-8")
    (tmp_path / "b.json").write_text('{"anyOf": [{"$ref": "a.json"}]}', "utf-8")
    schema = {"type": "object", "properties": {"x": {"$ref": "a.json"}}}
    assert refusal(tmp_path, schema) == [
        "suites/b.json: $.anyOf[0].$ref: $ref 'a.json' loops back to $ without descending "
        "into the answer: checking an answer that reaches it would never end"
    ]


def test_a_recursive_schema_that_descends_still_loads_and_checks(tmp_path: Path) -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    nested: dict[str, Any] = {"kids": []}
    for _ in range(20):
        nested = {"kids": [nested]}
    assert schema_check(tmp_path, tree, nested) == ""
    assert "is not of type 'array'" in schema_check(tmp_path, tree, {"kids": [{"kids": 1}]})


def test_a_long_in_place_chain_is_refused_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema_loops, "MAX_IN_PLACE_CHAIN", 7)
    chain: dict[str, Any] = {f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}]} for i in range(3)}
    chain["a3"] = {"type": "string"}
    assert load(
        tmp_path, {"$defs": chain, "items": {"$ref": "#/$defs/a0"}}
    )  # 7 in a row: at the bound
    chain["a3"] = {"$ref": "#/$defs/a4"}
    chain["a4"] = {"type": "string"}
    assert refusal(tmp_path, {"$defs": chain, "items": {"$ref": "#/$defs/a0"}}) == [
        f"{SHOWN}: $.tasks[0].schema.items: more than 7 subschemas ($ref, allOf, anyOf, "
        "oneOf, not, if/then/else) apply to the same value one after another from here: "
        "checking an answer would exhaust Python's recursion"
    ]


def test_a_schema_of_too_many_values_is_refused_before_its_metaschema_check(
    tmp_path: Path,
) -> None:
    """Far below the 16 MiB a file may hold, yet minutes of work (a 13 MB schema)."""
    schema = {"properties": {"a": {"enum": list(range(100_001))}}}
    assert refusal(tmp_path, schema) == [
        f"{SHOWN}: $.tasks[0].schema: the schema holds over 100,000 JSON values (100,000 at "
        "most, counting every task schema of the suite and the files their $refs name): too "
        "large to load and check answers against in bounded time"
    ]


def test_the_subschema_bound_counts_the_suites_schemas_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_schema, "MAX_SUBSCHEMAS", 50)
    thirty = {"properties": {f"p{i}": {"type": "string"} for i in range(29)}}
    assert load(tmp_path, thirty)
    assert refusal(tmp_path, thirty, thirty) == [
        f"{SHOWN}: $.tasks[1].schema: the schema has 30 subschemas (50 at most, counting every "
        "task schema of the suite and the files their $refs name): too large to load and check "
        "answers against in bounded time"
    ]
