"""Hostile task schemas (issue 20 item 2): what a suite's schema must be, and what the fake
adapter does with a schema it cannot satisfy.

Before: every schema below loaded (``evalmine validate`` said ok); on the fake adapter each
item was an ``adapter_crash`` (TypeError, AttributeError, IndexError, RecursionError,
MemoryError), ``minItems: 10000000`` never finished, and a misspelt keyword was taken as an
annotation, so the schema check passed every answer.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pytest_evalmine.adapters import fake
from pytest_evalmine.adapters.base import AdapterError, Request
from pytest_evalmine.adapters.fake import FakeAdapter
from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.scoring.checks import check_answer
from pytest_evalmine.suite.loader import load_suite

from .conftest import latest_answers

SUITE = """\
version: 1
suite: hostile
models: [fake/a]
tasks:
  - id: t
    kind: extract
    prompt: "Give JSON."
    schema_path: schemas/t.json
    cases: [{id: c1}, {id: c2}]
"""
SHOWN = "suites/hostile.eval.yaml"


def write_suite(folder: Path, schema_text: str, suite: str = SUITE) -> Path:
    (folder / "schemas").mkdir(exist_ok=True)
    (folder / "schemas" / "t.json").write_text(schema_text, "utf-8")
    path = folder / "hostile.eval.yaml"
    path.write_text(suite, "utf-8")
    return path


def refusal(folder: Path, schema_text: str, suite: str = SUITE) -> list[str]:
    with pytest.raises(EvalmineError) as info:
        load_suite(write_suite(folder, schema_text, suite), shown=SHOWN)
    return str(info.value).splitlines()


def answer(schema: Any, prompt: str = "Give JSON.") -> str:
    request = Request(model="fake/a", prompt=prompt, schema=schema)
    return asyncio.run(FakeAdapter().complete(request)).text


# --- refused when the suite loads --------------------------------------------------------

# Each was accepted by `evalmine validate`; the comment is what the fake adapter then raised.
REFUSED = {
    "false": ("false", "$: the schema is false: no answer satisfies it"),  # TypeError
    "one": ("1", "$: a task schema is a JSON object (or true), not a number"),  # TypeError
    "list": ("[1,2,3]", "$: a task schema is a JSON object (or true), not a list"),  # Attribute
    "empty-list": ("[]", "$: a task schema is a JSON object (or true), not a list"),  # Attribute
    "string": ('"x"', "$: a task schema is a JSON object (or true), not a string"),  # Attribute
    # Before: a file holding null was dropped and the task had no schema check at all.
    "null": ("null", "$: a task schema is a JSON object (or true), not null"),
    "allOf-false": (  # TypeError
        '{"allOf":[false]}',
        "$.allOf[0]: false, yet allOf requires every branch: no answer satisfies the schema",
    ),
    "required-false": (  # TypeError
        '{"type":"object","properties":{"a":false},"required":["a"]}',
        "$.properties.a: false, yet 'a' is required: no answer satisfies the schema",
    ),
    "enum-empty": ('{"enum":[]}', "$.enum: enum lists no value: no answer satisfies the schema"),
    "ref-loop-required": (  # RecursionError
        '{"$defs":{"n":{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},'
        '"required":["a"]}},"$ref":"#/$defs/n"}',
        "$.$defs.n.properties.a: $ref '#/$defs/n' loops back to $.$defs.n through values it "
        "requires: no finite answer satisfies the schema",
    ),
    "root-loop-required": (
        '{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}',
        "$.properties.a: $ref '#' loops back to $ through values it requires: no finite "
        "answer satisfies the schema",
    ),
    "typo-properties": (  # passed every answer
        '{"type":"object","propetries":{"a":{"type":"string"}}}',
        "$: unknown keyword 'propetries' (did you mean 'properties'?)",
    ),
    "typo-required": (
        '{"type":"object","properties":{"a":{"type":"string"}},"reuqired":["a"]}',
        "$: unknown keyword 'reuqired' (did you mean 'required'?)",
    ),
    "upper-case-required": (
        '{"type":"object","REQUIRED":["a"]}',
        "$: unknown keyword 'REQUIRED' (did you mean 'required'?)",
    ),
    "typo-deep": (
        '{"type":"object","properties":{"a":{"type":"array","items":{"tpye":"string"}}}}',
        "$.properties.a.items: unknown keyword 'tpye' (did you mean 'type'?)",
    ),
    "typo-in-defs": (
        '{"$defs":{"x":{"anyOf":[{"type":"string"},{"minimun":1}]}},"$ref":"#/$defs/x"}',
        "$.$defs.x.anyOf[1]: unknown keyword 'minimun' (did you mean 'minimum'?)",
    ),
    "not-a-keyword-of-draft-07": (
        '{"$schema":"http://json-schema.org/draft-07/schema#","prefixItems":[true]}',
        "$: unknown keyword 'prefixItems' (a keyword of 2020-12, not of draft-07)",
    ),
    "metaschema": (
        '{"type":"object","required":"a"}',
        "$.required: not a valid JSON Schema: 'a' is not of type 'array'",
    ),
    "bad-pattern": (
        '{"type":"string","pattern":"("}',
        "$.pattern: not a valid JSON Schema: '(' is not a 'regex'",
    ),
    "unknown-dialect": (
        '{"$schema":"http://example.com/my-schema","type":"object"}',
        "$.$schema: $schema 'http://example.com/my-schema' is not a JSON Schema dialect this "
        "plugin checks (known: draft-04, draft-06, draft-07, 2019-09, 2020-12)",
    ),
    "string-bounds-cross": (
        '{"type":"string","minLength":5,"maxLength":2}',
        "$: minLength 5 is above maxLength 2: no answer satisfies the schema",
    ),
    "integer-between-nothing": (
        '{"type":"integer","exclusiveMinimum":1,"exclusiveMaximum":2}',
        "$: no integer lies between the bounds 1 and 2: no answer satisfies the schema",
    ),
    "array-item-required-false": (
        '{"type":"array","prefixItems":[{"type":"string"},false],"minItems":2}',
        "$.prefixItems[1]: false, yet minItems 2 needs item 1: no answer satisfies the schema",
    ),
    "required-undeclared-closed": (
        '{"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false}',
        "$.additionalProperties: false, yet 'b' is required and only additionalProperties can "
        "hold it: no answer satisfies the schema",
    ),
    "enum-of-other-type": (
        '{"type":"string","enum":[1,2]}',
        "$.enum: no enum value is of type string: no answer satisfies the schema",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_hostile_schema_file_is_refused_in_one_line_naming_its_path(
    tmp_path: Path, name: str
) -> None:
    text, problem = REFUSED[name]
    assert refusal(tmp_path, text) == [f"suites/schemas/t.json: {problem}"]


def test_an_inline_schema_names_the_path_inside_the_suite(tmp_path: Path) -> None:
    suite = SUITE.replace(
        "schema_path: schemas/t.json",
        "schema: {type: object, properties: {a: {tpye: string}}}",
    )
    assert refusal(tmp_path, "{}", suite) == [
        f"{SHOWN}: $.tasks[0].schema.properties.a: unknown keyword 'tpye' (did you mean 'type'?)"
    ]


def test_every_misspelt_keyword_is_named_at_once(tmp_path: Path) -> None:
    lines = refusal(tmp_path, '{"tpye":"object","properties":{"a":{"minLenght":1}},"reqired":[]}')
    assert lines == [
        "suites/schemas/t.json: $: unknown keyword 'reqired' (did you mean 'required'?)",
        "suites/schemas/t.json: $: unknown keyword 'tpye' (did you mean 'type'?)",
        "suites/schemas/t.json: $.properties.a: unknown keyword 'minLenght' "
        "(did you mean 'minLength'?)",
    ]


def test_a_file_a_ref_names_is_held_to_the_same_keywords(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "defs.json").write_text(
        '{"$defs":{"x":{"type":"string","maxLenght":3}}}', "utf-8"
    )
    lines = refusal(tmp_path, '{"$ref":"defs.json#/$defs/x"}')
    assert lines == [
        "suites/schemas/defs.json: $.$defs.x: unknown keyword 'maxLenght' "
        "(did you mean 'maxLength'?)"
    ]


# --- accepted ---------------------------------------------------------------------------

ACCEPTED = {
    "true": "true",
    "annotations": json.dumps(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": "c",
            "title": "t",
            "description": "d",
            "examples": [{"a": "x"}],
            "default": {"a": "x"},
            "deprecated": False,
            "readOnly": False,
            "type": "object",
            "properties": {"a": {"type": "string", "contentMediaType": "text/plain"}},
            "required": ["a"],
            # a data keyword holds values, not schemas: their keys are not keywords
            "const": {"a": "x", "tpye": 1},
        }
    ),
    # the fake leaves a forbidden optional property out
    "optional-false": '{"type":"object","properties":{"a":{"type":"string"},"b":false}}',
    # the type list allows a string, which no property applies to
    "false-property-but-a-string-will-do": (
        '{"type":["object","string"],"properties":{"a":false},"required":["a"]}'
    ),
    "one-anyOf-branch-enough": '{"anyOf":[{"enum":[]},{"type":"integer"}]}',
    "tree": (
        '{"type":"object","properties":{"name":{"type":"string"},'
        '"kids":{"type":"array","items":{"$ref":"#"}}},"required":["name"]}'
    ),
    "recursion-through-an-optional-branch": (
        '{"$defs":{"n":{"anyOf":[{"type":"null"},{"type":"object","properties":'
        '{"next":{"$ref":"#/$defs/n"}},"required":["next"]}]}},"$ref":"#/$defs/n"}'
    ),
    "draft-07-tuple": (
        '{"$schema":"http://json-schema.org/draft-07/schema#","type":"array",'
        '"items":[{"type":"string"},{"type":"integer"}],"additionalItems":false,"minItems":2}'
    ),
    "draft-04-exclusive-boolean": (
        '{"$schema":"http://json-schema.org/draft-04/schema#","type":"integer",'
        '"minimum":0,"exclusiveMinimum":true,"maximum":2}'
    ),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_a_satisfiable_schema_loads_and_the_fake_answers_it_validly(
    tmp_path: Path, name: str
) -> None:
    suite = load_suite(write_suite(tmp_path, ACCEPTED[name]), shown=SHOWN)
    task = suite.task("t")
    assert isinstance(task.schema, dict)
    for prompt in ("one", "two", "three", "four"):
        result = check_answer(answer(task.schema, prompt), task.schema, task.schema_refs)
        assert [c.name for c in result.checks if not c.passed] == [], result.checks


def test_true_is_read_as_the_empty_schema(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, "true"), shown=SHOWN)
    assert suite.task("t").schema == {}
    assert suite.document["tasks"][0]["schema"] == {}


# --- the fake adapter's generator -----------------------------------------------------------

# Schemas the loader refuses still reach the fake through the evalmine fixture.
UNANSWERABLE = {
    "false": (False, "$: false accepts no value"),
    "one": (1, "$: not a schema (a JSON object or a boolean)"),
    "list": ([1, 2, 3], "$: not a schema (a JSON object or a boolean)"),
    "string": ("x", "$: not a schema (a JSON object or a boolean)"),
    "enum-empty": ({"enum": []}, "$.enum: enum lists no value"),
    "allOf-false": ({"allOf": [False]}, "$.allOf[0]: false accepts no value"),
    "required-false": (
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        "$.properties.a: false, yet 'a' is required",
    ),
    "ref-loop-required": (
        {
            "$defs": {
                "n": {
                    "type": "object",
                    "properties": {"a": {"$ref": "#/$defs/n"}},
                    "required": ["a"],
                }
            },
            "$ref": "#/$defs/n",
        },
        "nested deeper than 32 subschemas",
    ),
    "ref-to-itself": ({"$ref": "#"}, "nested deeper than 32 subschemas"),
    "min-length-1e18": (
        {"type": "string", "minLength": 1e18},
        "$.minLength: 1000000000000000000 characters are more than it writes in a string "
        "(at most 100000)",
    ),
    "min-items-1e18": (
        {"type": "array", "minItems": 10**18},
        "$.minItems: 1000000000000000000 items are more than it writes in an array (at most 1000)",
    ),
    "min-items-1e7": (
        {"type": "array", "minItems": 10**7},
        "$.minItems: 10000000 items are more than it writes in an array (at most 1000)",
    ),
    "nested-arrays": (
        {"type": "array", "minItems": 1000, "items": {"type": "array", "minItems": 1000}},
        "the answer would hold more than 10000 values",
    ),
    "long-strings": (
        {"type": "array", "minItems": 1000, "items": {"type": "string", "minLength": 99_999}},
        "the answer would exceed 1000000 characters",
    ),
    "integer-between-nothing": (
        {"type": "integer", "minimum": 0.2, "maximum": 0.8},
        "$: no integer lies between 0.2 and 0.8",
    ),
    "pointer-to-nothing": (
        {"$ref": "#/$defs/absent"},
        "$: $ref '#/$defs/absent' points to nothing",
    ),
}


@pytest.mark.parametrize("name", sorted(UNANSWERABLE))
def test_the_fake_refuses_a_schema_it_cannot_satisfy_in_one_line_naming_the_path(
    name: str,
) -> None:
    schema, problem = UNANSWERABLE[name]
    with pytest.raises(AdapterError) as info:
        answer(schema)
    error = info.value
    assert error.kind == "bad_request" and not error.retryable
    assert not error.may_have_been_billed
    message = str(error)
    assert message.startswith("the fake adapter cannot answer this schema: ")
    assert problem in message and "\n" not in message


def test_the_fake_stops_at_its_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake, "GENERATE_BUDGET_S", -1.0)
    with pytest.raises(AdapterError, match=r"\$: no answer within -1 s"):
        answer({"type": "object", "properties": {"a": {"type": "string"}}})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "minimum": -1e308, "maximum": 1e308},
        {"type": "number", "minimum": 1e308},
        {"type": "integer", "minimum": 1e300, "maximum": 1e300},
        {"type": "string", "minLength": 1e3, "maxLength": 1e3},
        {"type": "array", "minItems": 3.0, "maxItems": 3.0},
        {"type": "object", "required": ["x", "y"], "additionalProperties": {"type": "integer"}},
        {"type": "object", "patternProperties": {"^x": {"type": "boolean"}}, "required": ["xa"]},
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}},
                {"required": ["a"]},
            ]
        },
        {
            "allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
            "$defs": {
                "a": {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]},
                "b": {"properties": {"b": {"const": 2}}, "required": ["b"]},
            },
        },
        {"type": "array", "prefixItems": [{"const": 1}, {"const": "two"}], "items": False},
        {"anyOf": [{"$ref": "#/$defs/none"}, {"type": "null"}], "$defs": {"none": {"enum": []}}},
        {"$defs": {"n": {"$anchor": "node", "type": "integer"}}, "$ref": "#node"},
    ],
    ids=lambda s: json.dumps(s)[:40],
)
def test_the_fake_answers_odd_but_satisfiable_schemas_validly(schema: dict[str, Any]) -> None:
    for prompt in ("one", "two", "three"):
        instance = json.loads(answer(schema, prompt))
        errors = [e.message for e in Draft202012Validator(schema).iter_errors(instance)]
        assert errors == [], (instance, errors)


def test_an_unanswerable_schema_is_an_item_error_not_an_adapter_crash(
    pytester: pytest.Pytester,
) -> None:
    """Before: minItems 10000000 ran until killed (memory climbing), minLength 1e18 was an
    adapter_crash (TypeError)."""
    (pytester.path / "schemas").mkdir()
    (pytester.path / "schemas" / "t.json").write_text(
        '{"type":"object","properties":{"rows":{"type":"array","minItems":10000000}},'
        '"required":["rows"]}',
        "utf-8",
    )
    pytester.makefile(".eval.yaml", small=SUITE)
    result = pytester.runpytest("--evalmine-fake")
    result.assert_outcomes(errors=2)
    records = latest_answers(pytester.path, "hostile")
    assert [r["outcome"] for r in records] == ["error", "error"]
    assert records[0]["error"] == (
        "bad_request: the fake adapter cannot answer this schema: $.properties.rows.minItems: "
        "10000000 items are more than it writes in an array (at most 1000) (after 1 attempt(s))"
    )


def test_a_long_ref_chain_to_false_is_refused_without_recursing_past_python(
    tmp_path: Path,
) -> None:
    """3,000 $refs in a row: the explanation stops after 100 and names where it got to
    (it raised RecursionError out of the loader while being written)."""
    chain: dict[str, Any] = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(3000)}
    chain["a3000"] = False
    schema = {
        "$defs": chain,
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/a0"}},
        "required": ["x"],
    }
    lines = refusal(tmp_path, json.dumps(schema))
    assert lines == [
        "suites/schemas/t.json: $.$defs.a98: nothing satisfies this subschema, yet "
        "$ref '#/$defs/a98' points to it: no answer satisfies the schema"
    ]
    chain["a3000"] = {"type": "string"}
    # Satisfiable, but checking an answer would exhaust Python's recursion (issue 28): refused
    # at load too; the fake, handed it all the same, stops at its own depth.
    assert refusal(tmp_path, json.dumps(schema)) == [
        "suites/schemas/t.json: $.$defs.a2935: more than 64 subschemas ($ref, allOf, anyOf, "
        "oneOf, not, if/then/else) apply to the same value one after another from here: "
        "checking an answer would exhaust Python's recursion"
    ]
    with pytest.raises(AdapterError, match="nested deeper than 32 subschemas"):
        answer(schema)
