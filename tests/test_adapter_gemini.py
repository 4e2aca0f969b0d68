"""The Gemini adapter against a real loopback HTTP server, and its schema translation."""

from __future__ import annotations

import asyncio
import json
import math
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.adapters.base import AdapterError, Request, Response
from pytest_evalmine.adapters.gemini import (
    PROMPTED_INSTRUCTION,
    GeminiAdapter,
    parse_response,
    translate_schema,
)
from pytest_evalmine.adapters.registry import AdapterRegistry
from pytest_evalmine.run.dispatch import ERROR, OK, Dispatcher
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.store import Store
from tests.http_server import LoopbackServer, Reply, refused_url, running_server

MODEL = "google/gemini-2.5-flash"
PATH = "/v1beta/models/gemini-2.5-flash:generateContent"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A key made at run time, shaped unlike any real key so only our redaction hides it."""
    value = "test-" + secrets.token_hex(16)
    monkeypatch.setenv("GEMINI_API_KEY", value)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    return value


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with running_server() as srv:
        yield srv


def adapter_for(server: LoopbackServer) -> GeminiAdapter:
    return GeminiAdapter(base_url=server.url + "/v1beta")


def call(adapter: GeminiAdapter, request: Request) -> Response:
    async def run() -> Response:
        try:
            return await adapter.complete(request)
        finally:
            await adapter.aclose()

    return asyncio.run(run())


def fail(adapter: GeminiAdapter, request: Request) -> AdapterError:
    with pytest.raises(AdapterError) as info:
        call(adapter, request)
    return info.value


def ok_body(text: str = "Hello.", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "candidates": [
            {
                "index": 0,
                "finishReason": "STOP",
                "content": {"role": "model", "parts": [{"text": text}]},
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 12,
            "candidatesTokenCount": 3,
            "totalTokenCount": 15,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-abc",
    }
    body.update(extra)
    return body


def error_body(code: int, status: str, message: str, details: list[Any] | None = None) -> Any:
    return {"error": {"code": code, "message": message, "status": status, "details": details or []}}


# --- requests on the wire ---------------------------------------------------------------------


def test_request_shape_with_every_parameter(server: LoopbackServer, key: str) -> None:
    server.add(Reply.json(200, ok_body()))
    request = Request(
        model=MODEL,
        prompt="My invoice is wrong",
        system="Classify the ticket.",
        max_tokens=256,
        temperature=0.2,
        top_p=0.9,
        stop=("###", "END"),
    )
    call(adapter_for(server), request)
    [received] = server.requests
    assert received.method == "POST"
    assert received.path == PATH
    assert received.headers["x-goog-api-key"] == key
    assert key not in received.path and "?" not in received.path
    assert [name for name, value in received.headers.items() if key in value] == ["x-goog-api-key"]
    assert key.encode() not in received.raw
    assert received.headers["content-type"] == "application/json"
    assert received.body == {
        "contents": [{"role": "user", "parts": [{"text": "My invoice is wrong"}]}],
        "systemInstruction": {"parts": [{"text": "Classify the ticket."}]},
        "generationConfig": {
            "maxOutputTokens": 256,
            "temperature": 0.2,
            "topP": 0.9,
            "stopSequences": ["###", "END"],
        },
    }


def test_unset_parameters_are_not_sent(server: LoopbackServer, key: str) -> None:
    server.add(Reply.json(200, ok_body()))
    call(adapter_for(server), Request(model=MODEL, prompt="Hi", max_tokens=64))
    assert server.requests[0].body == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
        "generationConfig": {"maxOutputTokens": 64},
    }


def test_native_schema_is_translated_into_response_schema(server: LoopbackServer, key: str) -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "label": {"enum": ["billing", "bug"]},
            "note": {"type": ["string", "null"]},
        },
        "required": ["label"],
        "additionalProperties": False,
    }
    server.add(Reply.json(200, ok_body('{"label": "billing", "note": null}')))
    adapter = adapter_for(server)
    request = Request(model=MODEL, prompt="Classify", schema=schema)
    assert adapter.schema_mode(request) == "native"
    assert adapter.schema_fallback_reason(request) is None
    response = call(adapter, request)
    assert response.schema_mode == "native"
    config = server.requests[0].body["generationConfig"]
    assert config == {
        "maxOutputTokens": 1024,
        "responseMimeType": "application/json",
        "responseSchema": {
            "type": "OBJECT",
            "properties": {
                "label": {"type": "STRING", "enum": ["billing", "bug"]},
                "note": {"type": "STRING", "nullable": True},
            },
            "propertyOrdering": ["label", "note"],
            "required": ["label"],
        },
    }
    assert server.requests[0].body["contents"][0]["parts"][0]["text"] == "Classify"


def test_untranslatable_schema_falls_back_to_prompted_json(
    server: LoopbackServer, key: str
) -> None:
    schema = {"type": "object", "patternProperties": {"^x-": {"type": "string"}}}
    server.add(Reply.json(200, ok_body('{"x-a": "b"}')))
    adapter = adapter_for(server)
    request = Request(model=MODEL, prompt="Make headers", system="Be terse.", schema=schema)
    assert adapter.schema_mode(request) == "prompted"
    reason = adapter.schema_fallback_reason(request)
    assert reason is not None and "patternProperties" in reason
    response = call(adapter, request)
    assert response.schema_mode == "prompted"
    body = server.requests[0].body
    assert body["generationConfig"] == {
        "maxOutputTokens": 1024,
        "responseMimeType": "application/json",
    }
    prompt = body["contents"][0]["parts"][0]["text"]
    assert prompt.startswith("Make headers\n\n")
    assert PROMPTED_INSTRUCTION in prompt
    assert json.dumps(schema) in prompt
    assert body["systemInstruction"] == {"parts": [{"text": "Be terse."}]}


def test_property_order_of_the_schema_is_kept() -> None:
    schema = {
        "type": "object",
        "properties": {"zeta": {"type": "string"}, "alpha": {"type": "string"}},
        "required": ["zeta", "alpha"],
    }
    body = GeminiAdapter().body(Request(model=MODEL, prompt="p", schema=schema))
    sent = body["generationConfig"]["responseSchema"]
    assert sent["propertyOrdering"] == ["zeta", "alpha"]
    assert list(sent["properties"]) == ["zeta", "alpha"]


def test_schema_mode_is_decided_from_the_schema_alone() -> None:
    adapter = GeminiAdapter()
    native = Request(model=MODEL, prompt="p", schema={"type": "string"})
    prompted = Request(model=MODEL, prompt="p", schema={"type": "integer", "const": 3})
    assert [adapter.schema_mode(native) for _ in range(3)] == ["native"] * 3
    assert [adapter.schema_mode(prompted) for _ in range(3)] == ["prompted"] * 3
    assert adapter.schema_mode(Request(model=MODEL, prompt="p")) is None
    assert adapter.schema_fallback_reason(Request(model=MODEL, prompt="p")) is None


# --- responses --------------------------------------------------------------------------------


def test_documented_response_with_thoughts_and_cached_tokens(
    server: LoopbackServer, key: str
) -> None:
    body = {
        "candidates": [
            {
                "index": 0,
                "finishReason": "STOP",
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Let me think about the label.", "thought": True},
                        {"text": '{"label":', "thoughtSignature": "c2ln"},
                        {"text": '"billing"}'},
                    ],
                },
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 30,
            "candidatesTokenCount": 8,
            "thoughtsTokenCount": 120,
            "cachedContentTokenCount": 10,
            "totalTokenCount": 158,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mOkfab-xyz",
    }
    server.add(Reply.json(200, body))
    response = call(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert response.text == '{"label":"billing"}'
    assert response.finish_reason == "stop"
    assert response.provider_request_id == "mOkfab-xyz"
    assert response.usage.input_tokens == 20
    assert response.usage.cached_input_tokens == 10
    assert response.usage.output_tokens == 128
    assert response.usage.cache_write_tokens == 0
    assert response.usage.reported is True
    assert response.latency_s >= 0


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "refusal"),
        ("RECITATION", "refusal"),
        ("BLOCKLIST", "refusal"),
        ("PROHIBITED_CONTENT", "refusal"),
        ("SPII", "refusal"),
        ("OTHER", "other"),
        ("LANGUAGE", "other"),
        ("FINISH_REASON_UNSPECIFIED", "other"),
    ],
)
def test_finish_reasons_are_normalized(raw: str, normalized: str) -> None:
    body = ok_body()
    body["candidates"][0]["finishReason"] = raw
    response = parse_response(body, latency_s=0.1, schema_mode=None, estimate_input="p")
    assert response.finish_reason == normalized


def test_safety_candidate_without_content_is_an_empty_refusal() -> None:
    body = {"candidates": [{"index": 0, "finishReason": "SAFETY"}], "usageMetadata": {}}
    response = parse_response(body, latency_s=0.1, schema_mode=None, estimate_input="p")
    assert (response.text, response.finish_reason) == ("", "refusal")


def test_blocked_prompt_is_an_empty_refusal(server: LoopbackServer, key: str) -> None:
    body = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
        "responseId": "blocked-1",
    }
    server.add(Reply.json(200, body))
    response = call(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert response.text == ""
    assert response.finish_reason == "refusal"
    assert response.usage.input_tokens == 9 and response.usage.output_tokens == 0
    assert response.provider_request_id == "blocked-1"


def test_missing_usage_is_an_unreported_estimate(server: LoopbackServer, key: str) -> None:
    body = ok_body("twelve chars")
    del body["usageMetadata"]
    server.add(Reply.json(200, body))
    request = Request(model=MODEL, prompt="p" * 40, system="s" * 20)
    usage = call(adapter_for(server), request).usage
    assert usage.reported is False
    assert usage.input_tokens == math.ceil(60 / 4) + 8
    assert usage.output_tokens == math.ceil(len("twelve chars") / 4)


def test_absent_counts_in_present_usage_are_zero() -> None:
    body = ok_body()
    body["usageMetadata"] = {"promptTokenCount": 7, "totalTokenCount": 7}
    usage = parse_response(body, latency_s=0, schema_mode=None, estimate_input="p").usage
    assert (usage.input_tokens, usage.output_tokens, usage.reported) == (7, 0, True)


# --- errors -----------------------------------------------------------------------------------


def test_429_with_retry_info_waits_the_given_delay(server: LoopbackServer, key: str) -> None:
    details = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"},
    ]
    body = error_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded. Please retry in 12.0s.", details)
    server.add(Reply.json(429, body))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable, error.status) == ("rate_limit", True, 429)
    assert error.retry_after_s == 12.0
    assert "RESOURCE_EXHAUSTED" in str(error) and "Quota exceeded" in str(error)


def test_429_with_retry_after_header(server: LoopbackServer, key: str) -> None:
    body = error_body(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted")
    server.add(Reply.json(429, body, headers={"Retry-After": "7"}))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable, error.retry_after_s) == ("rate_limit", True, 7.0)


def test_429_retry_info_wins_over_the_header(server: LoopbackServer, key: str) -> None:
    details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.5s"}]
    body = error_body(429, "RESOURCE_EXHAUSTED", "slow down", details)
    server.add(Reply.json(429, body, headers={"Retry-After": "30"}))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert error.retry_after_s == 0.5


def test_429_on_a_zero_quota_is_not_retried(server: LoopbackServer, key: str) -> None:
    message = (
        "Quota exceeded for metric: generativelanguage.googleapis.com/"
        "generate_content_free_tier_requests, limit: 0, model: gemini-2.5-pro"
    )
    details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "40s"}]
    server.add(Reply.json(429, error_body(429, "RESOURCE_EXHAUSTED", message, details)))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable, error.retry_after_s) == ("rate_limit", False, None)


@pytest.mark.parametrize(
    ("status", "name", "kind", "retryable"),
    [
        (500, "INTERNAL", "server_error", True),
        (503, "UNAVAILABLE", "server_error", True),
        (504, "DEADLINE_EXCEEDED", "server_error", True),
        (400, "INVALID_ARGUMENT", "bad_request", False),
        (400, "FAILED_PRECONDITION", "bad_request", False),
        (403, "PERMISSION_DENIED", "auth", False),
        (404, "NOT_FOUND", "bad_request", False),
    ],
)
def test_error_statuses(
    server: LoopbackServer, key: str, status: int, name: str, kind: str, retryable: bool
) -> None:
    message = f"the provider says {name.lower()}"
    server.add(Reply.json(status, error_body(status, name, message)))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable, error.status) == (kind, retryable, status)
    assert message in str(error) and name in str(error)


def test_invalid_key_is_an_auth_error_and_the_echoed_key_is_redacted(
    server: LoopbackServer, key: str
) -> None:
    details = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com", "key": key},
        }
    ]
    message = f"API key not valid: {key}. Please pass a valid API key."
    server.add(Reply.json(400, error_body(400, "INVALID_ARGUMENT", message, details)))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable, error.status) == ("auth", False, 400)
    assert "API key not valid" in str(error)
    assert key not in str(error) and key not in repr(error.args)


@pytest.mark.parametrize(
    "reply",
    [
        "html_500",
        "json_200_echo",
        "malformed_200",
    ],
)
def test_key_never_appears_in_any_error(server: LoopbackServer, key: str, reply: str) -> None:
    if reply == "html_500":
        server.add(Reply(status=502, body=f"<html>bad gateway for {key}</html>".encode()))
    elif reply == "json_200_echo":
        server.add(Reply.json(200, {"unexpected": key}))
    else:
        server.add(Reply(status=200, body=f'{{"candidates": "{key}'.encode()))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert key not in str(error)


def test_slow_answer_beyond_the_timeout(server: LoopbackServer, key: str) -> None:
    server.add(Reply(status=200, body=json.dumps(ok_body()).encode(), delay_s=5.0))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p", timeout_s=0.2))
    assert (error.kind, error.retryable) == ("timeout", True)


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not json</html>",
        b'{"candidates": [{"content": {"parts": [{"text": "cut',
        b"",
    ],
)
def test_malformed_or_truncated_json(server: LoopbackServer, key: str, body: bytes) -> None:
    server.add(Reply(status=200, body=body))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable) == ("malformed_response", True)


@pytest.mark.parametrize(
    "payload",
    [
        [],
        {"candidates": []},
        {"candidates": "text"},
        {"candidates": [{"content": {"parts": [{"text": 3}]}}]},
        {"candidates": [{"content": {"parts": "text"}}]},
        {
            "candidates": [{"content": {"parts": [{"text": "a"}]}}],
            "usageMetadata": {"promptTokenCount": "many"},
        },
    ],
)
def test_unexpected_json_shapes(server: LoopbackServer, key: str, payload: Any) -> None:
    server.add(Reply.json(200, payload))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable) == ("malformed_response", True)


def test_usage_metadata_without_counts_is_an_estimate() -> None:
    body = ok_body("abcd")
    body["usageMetadata"] = {"trafficType": "ON_DEMAND"}
    usage = parse_response(body, latency_s=0, schema_mode=None, estimate_input="x" * 8).usage
    assert (usage.input_tokens, usage.output_tokens, usage.reported) == (10, 1, False)


def test_body_cut_short_of_its_content_length(server: LoopbackServer, key: str) -> None:
    data = json.dumps(ok_body()).encode()
    server.add(Reply(status=200, body=data[:20], content_length=len(data)))
    error = fail(adapter_for(server), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable) == ("connection", True)


def test_connection_refused(key: str) -> None:
    with refused_url() as url:
        adapter = GeminiAdapter(base_url=url + "/v1beta")
        error = fail(adapter, Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable) == ("connection", True)
    assert key not in str(error)


# --- readiness --------------------------------------------------------------------------------


def test_check_ready_names_the_missing_variable(
    monkeypatch: pytest.MonkeyPatch, server: LoopbackServer
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    # GOOGLE_API_KEY is not a documented fallback in the wire-format reference: not read.
    monkeypatch.setenv("GOOGLE_API_KEY", "test-" + secrets.token_hex(8))
    adapter = adapter_for(server)
    with pytest.raises(AdapterError) as info:
        adapter.check_ready()
    assert info.value.kind == "auth" and "GEMINI_API_KEY" in str(info.value)
    error = fail(adapter, Request(model=MODEL, prompt="p"))
    assert error.kind == "auth"
    assert server.requests == []


def test_check_ready_passes_with_a_key(key: str) -> None:
    GeminiAdapter().check_ready()
    GeminiAdapter(api_key_env="OTHER_GEMINI_KEY_FOR_TEST").schema_mode(
        Request(model=MODEL, prompt="p")
    )
    with pytest.raises(AdapterError, match="OTHER_GEMINI_KEY_FOR_TEST"):
        GeminiAdapter(api_key_env="OTHER_GEMINI_KEY_FOR_TEST").check_ready()


# --- through the dispatcher -------------------------------------------------------------------


def test_dispatcher_retries_a_503_then_caches_the_answer(
    server: LoopbackServer, key: str, tmp_path: Path
) -> None:
    details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0s"}]
    server.add(
        Reply.json(503, error_body(503, "UNAVAILABLE", "overloaded", details)),
        Reply.json(200, ok_body("Fine.")),
    )
    registry = AdapterRegistry()
    registry.register("google", lambda: adapter_for(server))
    dispatcher = Dispatcher(
        registry=registry,
        store=Store(tmp_path / "cache.sqlite"),
        prices=load_prices(),
        run_token="run",
        cap_usd=1.0,
    )
    request = Request(model=MODEL, prompt="p", max_tokens=32)
    outcome = next(iter(dispatcher.run(dispatcher.plan([request])).values()))
    assert (outcome.status, outcome.attempts) == (OK, 2)
    assert outcome.response is not None and outcome.response.text == "Fine."
    assert outcome.cost_usd > 0
    # Answered from the cache on a fresh loop: no third request reaches the server.
    again = next(iter(dispatcher.run(dispatcher.plan([request])).values()))
    assert again.cached and len(server.requests) == 2

    server.add(Reply.json(400, error_body(400, "INVALID_ARGUMENT", "bad")))
    failed = next(
        iter(dispatcher.run(dispatcher.plan([Request(model=MODEL, prompt="q")])).values())
    )
    assert (failed.status, failed.attempts, failed.error_kind) == (ERROR, 1, "bad_request")


# --- schema translation -----------------------------------------------------------------------


def test_translate_nullable_unions() -> None:
    translated, reason = translate_schema(
        {
            "type": "object",
            "properties": {
                "a": {"type": ["string", "null"], "maxLength": 5},
                "b": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
                "c": {"enum": ["x", "y", None]},
                "d": {"type": "null"},
            },
        }
    )
    assert reason is None
    assert translated == {
        "type": "OBJECT",
        "properties": {
            "a": {"type": "STRING", "maxLength": 5, "nullable": True},
            "b": {"type": "INTEGER", "minimum": 0, "nullable": True},
            "c": {"type": "STRING", "enum": ["x", "y"], "nullable": True},
            "d": {"type": "NULL"},
        },
        "propertyOrdering": ["a", "b", "c", "d"],
    }


def test_translate_nested_objects_and_arrays() -> None:
    schema = {
        "type": "object",
        "title": "Ticket",
        "description": "A support ticket",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": "string", "format": "email", "minLength": 1},
                "minItems": 1,
                "maxItems": 3,
                "uniqueItems": False,
            },
            "customer": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "exclusiveMinimum": 0, "format": "int64"},
                    "score": {"type": "number", "minimum": 0.5, "maximum": 1},
                    "vip": {"type": "boolean", "default": False},
                    "since": {"type": "string", "format": "date-time"},
                },
                "required": ["id"],
                "additionalProperties": False,
            },
        },
        "required": ["tags", "customer"],
    }
    translated, reason = translate_schema(schema)
    assert reason is None
    assert translated == {
        "type": "OBJECT",
        "title": "Ticket",
        "description": "A support ticket",
        "properties": {
            "tags": {
                "type": "ARRAY",
                "items": {"type": "STRING", "minLength": 1},
                "minItems": 1,
                "maxItems": 3,
            },
            "customer": {
                "type": "OBJECT",
                "properties": {
                    "id": {"type": "INTEGER", "format": "int64", "minimum": 1},
                    "score": {"type": "NUMBER", "minimum": 0.5, "maximum": 1},
                    "vip": {"type": "BOOLEAN"},
                    "since": {"type": "STRING", "format": "date-time"},
                },
                "propertyOrdering": ["id", "score", "vip", "since"],
                "required": ["id"],
            },
        },
        "propertyOrdering": ["tags", "customer"],
        "required": ["tags", "customer"],
    }


def test_translate_enums_const_and_multiple_types() -> None:
    assert translate_schema({"enum": ["a", "b", "a"]}) == (
        {"type": "STRING", "enum": ["a", "b"]},
        None,
    )
    assert translate_schema({"type": "string", "const": "only"}) == (
        {"type": "STRING", "enum": ["only"]},
        None,
    )
    assert translate_schema({"type": ["integer", "string", "null"], "minimum": 1}) == (
        {
            "anyOf": [
                {"type": "INTEGER", "minimum": 1, "nullable": True},
                {"type": "STRING", "nullable": True},
            ]
        },
        None,
    )
    assert translate_schema(
        {"oneOf": [{"type": "string"}, {"type": "integer"}], "description": "either"}
    ) == ({"description": "either", "anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}, None)


def test_translate_inlines_local_refs() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/order",
        "$defs": {
            "money": {
                "type": "object",
                "properties": {"amount": {"type": "number"}, "currency": {"$ref": "#/$defs/cur"}},
                "required": ["amount", "currency"],
            },
            "cur": {"enum": ["EUR", "USD"]},
        },
        "definitions": {"note": {"type": "string"}},
        "type": "object",
        "properties": {
            "total": {"$ref": "#/$defs/money", "description": "order total"},
            "refund": {"$ref": "#/$defs/money"},
            "note": {"$ref": "#/definitions/note"},
        },
    }
    translated, reason = translate_schema(schema)
    assert reason is None
    money = {
        "type": "OBJECT",
        "properties": {
            "amount": {"type": "NUMBER"},
            "currency": {"type": "STRING", "enum": ["EUR", "USD"]},
        },
        "propertyOrdering": ["amount", "currency"],
        "required": ["amount", "currency"],
    }
    assert translated == {
        "type": "OBJECT",
        "properties": {
            "total": {**money, "description": "order total"},
            "refund": money,
            "note": {"type": "STRING"},
        },
        "propertyOrdering": ["total", "refund", "note"],
    }
    assert "$defs" not in json.dumps(translated) and "$ref" not in json.dumps(translated)


def test_translation_does_not_change_its_input() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/a"}, "b": {"type": ["string", "null"]}},
        "required": ["a"],
        "$defs": {"a": {"enum": ["x", None], "description": "d"}},
    }
    snapshot = json.dumps(schema, sort_keys=True)
    translate_schema(schema)
    assert json.dumps(schema, sort_keys=True) == snapshot


@pytest.mark.parametrize(
    ("schema", "reason_part"),
    [
        (
            {
                "$defs": {
                    "node": {
                        "type": "object",
                        "properties": {
                            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                        },
                    }
                },
                "$ref": "#/$defs/node",
            },
            "recursive $ref",
        ),
        ({"type": "object", "properties": {"v": {"const": 3}}}, "const of non-string"),
        ({"type": "integer", "enum": [1, 2, 3]}, "enum of non-string"),
        ({"enum": [True, False]}, "enum of non-string"),
        (
            {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
            "patternProperties",
        ),
        ({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}, "tuple items"),
        ({"type": "array", "prefixItems": [{"type": "string"}]}, "prefixItems"),
        ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "allOf"),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems"),
        ({"type": "number", "exclusiveMinimum": 0}, "exclusiveMinimum"),
        ({"type": "integer", "multipleOf": 5}, "multipleOf"),
        ({"type": "object"}, "object without properties"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties"),
        ({"$ref": "https://example.com/schema.json"}, "not a local reference"),
        ({"$ref": "#/$defs/missing"}, "does not resolve"),
        ({}, "no type"),
        ({"type": "object", "properties": {"a": True}}, "boolean schema"),
        ({"type": "string", "not": {"const": "x"}}, "not is not supported"),
        ({"type": "array"}, "array without items"),
        ({"type": "date"}, "unknown type"),
        ("not a schema", "not a JSON object"),
    ],
)
def test_untranslatable_schemas_give_a_reason(schema: Any, reason_part: str) -> None:
    translated, reason = translate_schema(schema)
    assert translated is None
    assert reason is not None and reason_part in reason


def test_reason_names_the_place_in_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "integer", "const": 1}}},
    }
    assert translate_schema(schema) == (
        None,
        "$.properties.items.items: const of non-string values (int) is not supported",
    )
