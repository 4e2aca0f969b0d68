"""The fake adapter: deterministic answers, schema-valid JSON, truncation and injected faults."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pytest_evalmine.adapters.base import (
    SCHEMA_NATIVE,
    AdapterError,
    Request,
    Response,
    cache_key,
)
from pytest_evalmine.adapters.fake import FAULT_KINDS, FakeAdapter, FakeOptions, Fault

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"winner": {"enum": ["1", "2", "tie"]}, "reason": {"type": "string"}},
    "required": ["winner", "reason"],
    "additionalProperties": False,
}

ADDRESS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "zip": {"type": "string", "minLength": 5, "maxLength": 5},
    },
    "required": ["city", "zip"],
    "additionalProperties": False,
}

# Each schema is one the fake must answer validly, every time.
SCHEMAS: dict[str, dict[str, Any]] = {
    "nested-objects": {
        "type": "object",
        "properties": {
            "customer": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "address": ADDRESS,
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["name", "address", "tags"],
                "additionalProperties": False,
            },
            "vip": {"type": "boolean"},
        },
        "required": ["customer", "vip"],
        "additionalProperties": False,
    },
    "properties-without-type": {
        "properties": {"a": {"type": "integer", "minimum": 3, "maximum": 3}},
        "required": ["a"],
    },
    "array-min-max-items": {
        "type": "array",
        "items": {"type": "integer", "minimum": 1, "maximum": 6},
        "minItems": 2,
        "maxItems": 4,
    },
    "array-up-to-one": {"type": "array", "items": {"type": "boolean"}, "maxItems": 1},
    "array-empty-allowed": {"type": "array", "minItems": 0, "maxItems": 0},
    "array-many-items": {"type": "array", "items": {"const": 7}, "minItems": 6},
    "array-of-objects": {
        "type": "array",
        "items": ADDRESS,
        "minItems": 1,
        "maxItems": 2,
    },
    "enum-strings": {"enum": ["red", "green", "blue"]},
    "enum-mixed": {"enum": [1, "two", None, True]},
    "const-object": {"const": {"answer": 42, "unit": "widgets"}},
    "const-in-object": {
        "type": "object",
        "properties": {"version": {"const": 2}, "kind": {"const": "ticket"}},
        "required": ["version", "kind"],
    },
    "integer-range": {"type": "integer", "minimum": 10, "maximum": 12},
    "integer-negative-range": {"type": "integer", "minimum": -50, "maximum": -40},
    "integer-only-minimum": {"type": "integer", "minimum": 1000},
    "number-range": {"type": "number", "minimum": 0.5, "maximum": 0.75},
    "number-negative-range": {"type": "number", "minimum": -2.5, "maximum": -1.25},
    "boolean": {"type": "boolean"},
    "object-all-optional": {
        "type": "object",
        "properties": {"note": {"type": "string"}, "score": {"type": "integer"}},
        "additionalProperties": False,
    },
    "object-of-booleans": {
        "type": "object",
        "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}},
        "required": ["a", "b"],
    },
    "nullable-string": {"type": ["string", "null"], "minLength": 2, "maxLength": 8},
    "nullable-integer": {"type": ["integer", "null"], "minimum": 5, "maximum": 9},
    "nullable-in-object": {
        "type": "object",
        "properties": {"note": {"type": ["string", "null"]}, "n": {"type": ["null", "number"]}},
        "required": ["note", "n"],
        "additionalProperties": False,
    },
    "only-null": {"type": "null"},
    "any-of": {
        "anyOf": [
            {"type": "string", "maxLength": 3},
            {"type": "integer", "minimum": 10, "maximum": 20},
            {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]},
        ]
    },
    "any-of-in-object": {
        "type": "object",
        "properties": {"value": {"anyOf": [{"type": "null"}, {"enum": ["a", "b"]}]}},
        "required": ["value"],
    },
    "ref-to-defs": {
        "type": "object",
        "properties": {
            "primary": {"$ref": "#/$defs/item"},
            "others": {"type": "array", "items": {"$ref": "#/$defs/item"}, "maxItems": 3},
        },
        "required": ["primary", "others"],
        "additionalProperties": False,
        "$defs": {
            "item": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "minLength": 3, "maxLength": 10},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 5},
                    "size": {"$ref": "#/$defs/size"},
                },
                "required": ["sku", "qty", "size"],
                "additionalProperties": False,
            },
            "size": {"enum": ["S", "M", "L"]},
        },
    },
    "string-formats": {
        "type": "object",
        "properties": {
            "due": {"type": "string", "format": "date"},
            "contact": {"type": "string", "format": "email"},
        },
        "required": ["due", "contact"],
    },
    "string-long-minimum": {"type": "string", "minLength": 250},
    "string-short-maximum": {"type": "string", "maxLength": 3},
    "string-window": {"type": "string", "minLength": 30, "maxLength": 35},
    "string-exact-length": {"type": "string", "minLength": 12, "maxLength": 12},
    "judge-verdict": VERDICT_SCHEMA,
    "ticket-triage-example": json.loads(
        (EXAMPLES / "schemas" / "ticket-triage.schema.json").read_text(encoding="utf-8")
    ),
}

# Edge ranges: each once crashed the fake or drew a value outside the range.
SCHEMAS_EDGE_RANGES: dict[str, dict[str, Any]] = {
    "integer-only-negative-maximum": {"type": "integer", "maximum": -1},
    "integer-exclusive-bounds": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
    "number-range-finer-than-cents": {"type": "number", "minimum": 0.001, "maximum": 0.009},
    "array-max-items-zero": {"type": "array", "maxItems": 0},
}


def complete(request: Request, options: FakeOptions | None = None) -> Response:
    return asyncio.run(FakeAdapter(options).complete(request))


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    return [error.message for error in validator(schema).iter_errors(instance)]


# --- determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [None, VERDICT_SCHEMA], ids=["prose", "schema"])
def test_same_request_gives_identical_response_across_instances(
    schema: dict[str, Any] | None,
) -> None:
    request = Request(
        model="fake/a", prompt="Where is my refund?", system="Be brief.", schema=schema
    )
    first = complete(request)
    second = complete(request)
    assert first.text == second.text
    assert first.usage == second.usage
    assert first.provider_request_id == second.provider_request_id
    assert first.provider_request_id is not None
    assert first.provider_request_id.startswith("fake-")
    assert first.finish_reason == second.finish_reason == "stop"


def test_one_instance_answers_a_repeated_request_identically() -> None:
    adapter = FakeAdapter()
    request = Request(model="fake/a", prompt="Same question twice")
    first = asyncio.run(adapter.complete(request))
    second = asyncio.run(adapter.complete(request))
    assert (first.text, first.usage, first.provider_request_id) == (
        second.text,
        second.usage,
        second.provider_request_id,
    )
    assert adapter.calls == 2


def test_cache_key_is_the_same_for_two_instances_and_differs_by_request() -> None:
    request = Request(model="fake/a", prompt="hello", schema=VERDICT_SCHEMA)
    assert cache_key(FakeAdapter(), request) == cache_key(FakeAdapter(), request)
    assert cache_key(FakeAdapter(), request) != cache_key(
        FakeAdapter(), Request(model="fake/a", prompt="hello")
    )


@pytest.mark.parametrize(
    "change",
    [
        {"prompt": "Where is my invoice?"},
        {"model": "fake/b"},
        {"repeat": 1},
        {"system": "Answer like a pirate."},
    ],
    ids=["prompt", "model", "repeat", "system"],
)
def test_a_different_request_gives_a_different_text(change: dict[str, Any]) -> None:
    base = {"model": "fake/a", "prompt": "Where is my refund?"}
    original = complete(Request(**base))
    changed = complete(Request(**{**base, **change}))
    assert original.text != changed.text
    assert original.provider_request_id != changed.provider_request_id


def test_repeats_give_many_distinct_answers() -> None:
    texts = {complete(Request(model="fake/a", prompt="same", repeat=r)).text for r in range(20)}
    assert len(texts) == 20


def test_response_round_trips_through_json() -> None:
    response = complete(Request(model="fake/a", prompt="x", schema=VERDICT_SCHEMA))
    assert Response.from_json(response.to_json()) == response


# --- prose and schema answers ----------------------------------------------------------------


def test_prose_answer_without_schema() -> None:
    for index in range(30):
        response = complete(Request(model="fake/a", prompt=f"Question number {index}"))
        assert response.text.strip()
        assert response.text.endswith(".")
        with pytest.raises(ValueError):
            json.loads(response.text)
        assert response.schema_mode is None
        assert response.finish_reason == "stop"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_answers_parse_and_validate(name: str) -> None:
    schema = SCHEMAS[name]
    validator(schema).check_schema(schema)
    for index in range(40):
        request = Request(model="fake/m", prompt=f"{name} #{index}", schema=schema, max_tokens=4096)
        response = complete(request)
        assert response.finish_reason == "stop"
        instance = json.loads(response.text)
        assert schema_errors(schema, instance) == [], (index, response.text)


@pytest.mark.parametrize("name", sorted(SCHEMAS_EDGE_RANGES))
def test_schema_answers_fit_edge_ranges(name: str) -> None:
    """Only a maximum, exclusive bounds, sub-cent ranges and ``maxItems: 0``."""
    schema = SCHEMAS_EDGE_RANGES[name]
    validator(schema).check_schema(schema)
    for index in range(20):
        response = complete(Request(model="fake/m", prompt=f"{name} #{index}", schema=schema))
        assert schema_errors(schema, json.loads(response.text)) == [], (index, response.text)


def test_schema_answers_vary_with_the_request() -> None:
    schema = SCHEMAS["ticket-triage-example"]
    answers = {
        complete(Request(model="fake/m", prompt=f"ticket {i}", schema=schema)).text
        for i in range(20)
    }
    assert len(answers) > 1


def test_judge_verdicts_are_valid_and_not_all_the_same() -> None:
    winners = []
    for index in range(40):
        prompt = f"Compare answer A {index} with answer B {index * 7}"
        response = complete(Request(model="fake/judge", prompt=prompt, schema=VERDICT_SCHEMA))
        verdict = json.loads(response.text)
        assert schema_errors(VERDICT_SCHEMA, verdict) == []
        assert set(verdict) == {"winner", "reason"}
        winners.append(verdict["winner"])
    assert len(set(winners)) >= 2
    assert set(winners) <= {"1", "2", "tie"}


def test_schema_mode_is_native_with_a_schema_and_none_without() -> None:
    adapter = FakeAdapter()
    with_schema = Request(model="fake/a", prompt="x", schema={"type": "string"})
    without = Request(model="fake/a", prompt="x")
    assert adapter.schema_mode(with_schema) == SCHEMA_NATIVE == "native"
    assert adapter.schema_mode(without) is None
    assert complete(with_schema).schema_mode == "native"
    assert complete(without).schema_mode is None


# --- tokens, truncation, latency -------------------------------------------------------------


def test_usage_counts_are_positive() -> None:
    for schema in (None, VERDICT_SCHEMA):
        response = complete(Request(model="fake/a", prompt="Count my tokens", schema=schema))
        assert response.usage.input_tokens > 0
        assert response.usage.output_tokens > 0
        assert response.usage.cached_input_tokens == 0
        assert response.usage.cache_write_tokens == 0


def test_longer_prompt_counts_more_input_tokens() -> None:
    short = complete(Request(model="fake/a", prompt="hi"))
    long = complete(Request(model="fake/a", prompt="hi " * 200))
    assert long.usage.input_tokens > short.usage.input_tokens


@pytest.mark.parametrize("max_tokens", [1, 3, 5, 10])
def test_prose_is_truncated_to_max_tokens(max_tokens: int) -> None:
    for index in range(10):
        response = complete(Request(model="fake/a", prompt=f"long {index}", max_tokens=max_tokens))
        assert response.finish_reason == "length"
        assert 0 < response.usage.output_tokens <= max_tokens
        assert response.text


def test_schema_answer_truncated_to_max_tokens_is_cut_json() -> None:
    schema = SCHEMAS["nested-objects"]
    full = complete(Request(model="fake/a", prompt="t", schema=schema, max_tokens=4096))
    assert full.finish_reason == "stop"
    assert full.usage.output_tokens > 8
    cut = complete(Request(model="fake/a", prompt="t", schema=schema, max_tokens=8))
    assert cut.finish_reason == "length"
    assert cut.usage.output_tokens <= 8
    assert cut.text
    with pytest.raises(ValueError):
        json.loads(cut.text)


def test_generous_max_tokens_does_not_truncate() -> None:
    response = complete(Request(model="fake/a", prompt="short", max_tokens=10_000))
    assert response.finish_reason == "stop"
    assert response.usage.output_tokens <= 10_000


def test_latency_is_at_least_the_configured_sleep() -> None:
    response = complete(Request(model="fake/a", prompt="slow"), FakeOptions(latency_s=0.05))
    assert response.latency_s >= 0.05


# --- faults ----------------------------------------------------------------------------------


def test_fault_kinds_are_the_documented_six() -> None:
    assert set(FAULT_KINDS) == {
        "rate_limit",
        "server_error",
        "timeout",
        "malformed_json",
        "schema_violation",
        "empty_answer",
    }


@pytest.mark.parametrize(
    ("kind", "status"), [("rate_limit", 429), ("server_error", 500), ("timeout", None)]
)
def test_transport_faults_raise_retryable_adapter_errors(kind: str, status: int | None) -> None:
    options = FakeOptions(faults=[Fault(kind)])
    with pytest.raises(AdapterError) as caught:
        complete(Request(model="fake/a", prompt="x"), options)
    assert caught.value.kind == kind
    assert caught.value.retryable is True
    assert caught.value.status == status
    assert options.faults[0].fired == 1


@pytest.mark.parametrize("schema", [None, VERDICT_SCHEMA], ids=["prose", "schema"])
def test_malformed_json_fault_gives_text_that_is_not_json(schema: dict[str, Any] | None) -> None:
    response = complete(
        Request(model="fake/a", prompt="x", schema=schema),
        FakeOptions(faults=[Fault("malformed_json")]),
    )
    assert response.text.strip()
    with pytest.raises(ValueError):
        json.loads(response.text)


@pytest.mark.parametrize(
    "name",
    [
        "judge-verdict",
        "nested-objects",
        "object-all-optional",
        "array-min-max-items",
        "integer-range",
        "boolean",
        "enum-strings",
        "string-window",
        "ticket-triage-example",
    ],
)
def test_schema_violation_fault_gives_json_that_fails_the_schema(name: str) -> None:
    schema = SCHEMAS[name]
    for index in range(5):
        response = complete(
            Request(model="fake/a", prompt=f"v{index}", schema=schema),
            FakeOptions(faults=[Fault("schema_violation")]),
        )
        assert schema_errors(schema, json.loads(response.text)) != [], response.text


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/t", "$defs": {"t": {"type": "object", "properties": {"a": {}}}}},
        {"anyOf": [{"type": "object"}, {"type": "array"}]},
        {"type": ["null", "object"]},
    ],
    ids=["root-ref", "root-anyOf", "null-first-type-list"],
)
def test_schema_violation_fault_fails_schemas_without_a_plain_root_type(
    schema: dict[str, Any],
) -> None:
    """A bare ``{}`` (what the fake once sent here) passes these schemas."""
    response = complete(
        Request(model="fake/a", prompt="x", schema=schema),
        FakeOptions(faults=[Fault("schema_violation")]),
    )
    assert schema_errors(schema, json.loads(response.text)) != [], response.text


@pytest.mark.parametrize("schema", [None, VERDICT_SCHEMA], ids=["prose", "schema"])
def test_empty_answer_fault_gives_empty_text(schema: dict[str, Any] | None) -> None:
    response = complete(
        Request(model="fake/a", prompt="x", schema=schema),
        FakeOptions(faults=[Fault("empty_answer")]),
    )
    assert response.text == ""
    assert response.usage.output_tokens == 0
    assert response.finish_reason == "stop"


def test_fault_scoped_by_model_leaves_other_models_alone() -> None:
    options = FakeOptions(faults=[Fault("empty_answer", model="fake/a", count=100)])
    adapter = FakeAdapter(options)
    other = asyncio.run(adapter.complete(Request(model="fake/b", prompt="refund please")))
    assert other.text == complete(Request(model="fake/b", prompt="refund please")).text
    assert other.text
    assert options.faults[0].fired == 0
    hit = asyncio.run(adapter.complete(Request(model="fake/a", prompt="refund please")))
    assert hit.text == ""
    assert options.faults[0].fired == 1


def test_fault_scoped_by_prompt_substring_leaves_other_prompts_alone() -> None:
    options = FakeOptions(faults=[Fault("server_error", prompt_contains="refund", count=100)])
    adapter = FakeAdapter(options)
    unaffected = asyncio.run(adapter.complete(Request(model="fake/a", prompt="Where is my order?")))
    assert unaffected.text == complete(Request(model="fake/a", prompt="Where is my order?")).text
    assert options.faults[0].fired == 0
    with pytest.raises(AdapterError):
        asyncio.run(adapter.complete(Request(model="fake/a", prompt="I want a refund now")))
    # The match is case-sensitive and on the prompt only, not the system text.
    asyncio.run(adapter.complete(Request(model="fake/a", prompt="REFUND", system="refund")))
    assert options.faults[0].fired == 1


def test_fault_scoped_by_model_and_prompt_needs_both() -> None:
    options = FakeOptions(
        faults=[Fault("empty_answer", model="fake/a", prompt_contains="refund", count=100)]
    )
    adapter = FakeAdapter(options)
    texts = {
        (model, prompt): asyncio.run(adapter.complete(Request(model=model, prompt=prompt))).text
        for model in ("fake/a", "fake/b")
        for prompt in ("refund me", "hello")
    }
    assert texts[("fake/a", "refund me")] == ""
    assert texts[("fake/a", "hello")]
    assert texts[("fake/b", "refund me")]
    assert texts[("fake/b", "hello")]


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_fault_fires_exactly_count_times_then_answers_normally(kind: str) -> None:
    options = FakeOptions(faults=[Fault(kind, count=3)])
    adapter = FakeAdapter(options)
    request = Request(model="fake/a", prompt="again", schema=VERDICT_SCHEMA)
    normal = complete(request)
    outcomes = []
    for _ in range(6):
        try:
            outcomes.append(asyncio.run(adapter.complete(request)).text)
        except AdapterError as error:
            outcomes.append(error)
    assert all(o != normal.text for o in outcomes[:3])
    assert outcomes[3:] == [normal.text] * 3
    assert options.faults[0].fired == 3


def test_faults_apply_in_order_and_each_has_its_own_count() -> None:
    options = FakeOptions(faults=[Fault("rate_limit", count=1), Fault("empty_answer", count=1)])
    adapter = FakeAdapter(options)
    request = Request(model="fake/a", prompt="x")
    with pytest.raises(AdapterError) as caught:
        asyncio.run(adapter.complete(request))
    assert caught.value.kind == "rate_limit"
    assert asyncio.run(adapter.complete(request)).text == ""
    assert asyncio.run(adapter.complete(request)).text == complete(request).text


def test_fault_parse_full_spec() -> None:
    fault = Fault.parse("rate_limit,model=fake/a,prompt=refund,count=3")
    assert fault == Fault(kind="rate_limit", model="fake/a", prompt_contains="refund", count=3)
    assert fault.fired == 0


def test_fault_parse_defaults_and_whitespace() -> None:
    assert Fault.parse("timeout") == Fault(
        kind="timeout", model=None, prompt_contains=None, count=1
    )
    assert Fault.parse(" empty_answer , count=2 ") == Fault(kind="empty_answer", count=2)


def test_parsed_fault_drives_the_adapter() -> None:
    options = FakeOptions(faults=[Fault.parse("rate_limit,model=fake/a,prompt=refund,count=3")])
    adapter = FakeAdapter(options)
    refund = Request(model="fake/a", prompt="a refund please")
    for _ in range(3):
        with pytest.raises(AdapterError):
            asyncio.run(adapter.complete(refund))
    assert asyncio.run(adapter.complete(refund)).text == complete(refund).text


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("meltdown", "unknown fault 'meltdown'"),
        ("", "unknown fault ''"),
        ("model=fake/a", "unknown fault"),
        ("rate_limit,speed=3", "unknown fault option 'speed'"),
        ("rate_limit,model", "is not name=value"),
        ("rate_limit,count=many", "many"),
    ],
)
def test_fault_parse_rejects_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Fault.parse(spec)


def test_unknown_fault_message_lists_the_kinds() -> None:
    with pytest.raises(ValueError) as caught:
        Fault.parse("meltdown")
    for kind in FAULT_KINDS:
        assert kind in str(caught.value)
