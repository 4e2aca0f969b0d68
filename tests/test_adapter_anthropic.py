"""Anthropic adapter against a real loopback server: exact request shape, documented response
shapes (the Messages API reference), error mapping and key redaction. Also the shared HTTP
helpers (``adapters/http.py``) that every httpx adapter relies on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

from pytest_evalmine.adapters.anthropic import (
    AnthropicAdapter,
    accepts_sampling,
    transform_schema,
)
from pytest_evalmine.adapters.base import AdapterError, Request, Response, Usage
from pytest_evalmine.adapters.http import ClientHolder, retry_after
from pytest_evalmine.redaction import redact

from .conftest import clear_proxies
from .http_server import LoopbackServer, Reply, refused_url, running_server

ENV = "EVALMINE_TEST_ANTHROPIC_KEY"
# Built at run time so no key-shaped literal sits in the source.
KEY = "sk-" + "ant-" + "x" * 40
# A key no key-shaped pattern would catch: only the adapter's own redaction can hide it.
PLAIN_KEY = "plain" + "Q" * 30

MESSAGE_OK: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [
        {"type": "thinking", "thinking": "let me see", "signature": "sig"},
        {"type": "text", "text": '{"label":'},
        {"type": "text", "text": ' "billing"}'},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 21,
        "output_tokens": 9,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 2048,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard",
    },
}


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_e"}


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv(ENV, KEY)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with running_server() as loopback:
        yield loopback


def adapter_for(server: LoopbackServer) -> AnthropicAdapter:
    return AnthropicAdapter(api_key_env=ENV, base_url=server.url + "/")


def request(model: str = "claude-sonnet-4-6", **fields: Any) -> Request:
    return Request(model=f"anthropic/{model}", prompt=fields.pop("prompt", "Hello"), **fields)


def call(adapter: AnthropicAdapter, req: Request) -> Response:
    async def once() -> Response:
        try:
            return await adapter.complete(req)
        finally:
            await adapter.aclose()

    return asyncio.run(once())


def failure(adapter: AnthropicAdapter, req: Request) -> AdapterError:
    with pytest.raises(AdapterError) as info:
        call(adapter, req)
    return info.value


# --- request shape -------------------------------------------------------------------------


def test_request_shape_headers_and_body(server: LoopbackServer) -> None:
    server.add(Reply.json(200, MESSAGE_OK))
    call(
        adapter_for(server),
        request(
            "claude-sonnet-4-5-20250929",
            prompt="My invoice is wrong",
            system="Classify the ticket.",
            max_tokens=64,
            temperature=0.2,
            top_p=0.9,
            stop=("###",),
        ),
    )
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers
    # temperature and top_p together are a 400 on these models: temperature wins.
    assert sent.body == {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "My invoice is wrong"}],
        "system": "Classify the ticket.",
        "stop_sequences": ["###"],
        "temperature": 0.2,
    }


def test_unset_optional_fields_are_not_sent(server: LoopbackServer) -> None:
    server.add(Reply.json(200, MESSAGE_OK))
    call(adapter_for(server), request("claude-haiku-4-5"))
    assert server.requests[0].body == {
        "model": "claude-haiku-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Hello"}],
    }


def test_top_p_alone_is_sent_to_an_older_model(server: LoopbackServer) -> None:
    server.add(Reply.json(200, MESSAGE_OK))
    call(adapter_for(server), request("claude-opus-4-1-20250805", top_p=0.5))
    body = server.requests[0].body
    assert body["top_p"] == 0.5
    assert "temperature" not in body


@pytest.mark.parametrize(
    "model",
    [
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-opus-5",
        "claude-sonnet-5",
        "claude-opus-5-5",
        "claude-haiku-5-5-20261001",
        "claude-fable-5-1",
        "claude-mythos-preview",
    ],
)
def test_models_without_sampling_never_get_temperature_or_top_p(
    server: LoopbackServer, model: str
) -> None:
    server.add(Reply.json(200, MESSAGE_OK))
    call(adapter_for(server), request(model, temperature=0.0, top_p=0.9))
    body = server.requests[0].body
    assert body["model"] == model
    assert "temperature" not in body
    assert "top_p" not in body


@pytest.mark.parametrize(
    ("model", "accepts"),
    [
        ("claude-3-5-sonnet-20241022", True),
        ("claude-3-7-sonnet-latest", True),
        ("claude-opus-4-20250514", True),
        ("claude-sonnet-4-5", True),
        ("claude-opus-4-6", True),
        ("claude-opus-4-7", False),
        ("claude-sonnet-5-20260301", False),
        ("claude-fable-5", False),
    ],
)
def test_sampling_capability_by_model_id(model: str, accepts: bool) -> None:
    # "claude-*-5*" as a glob would also catch claude-3-5-sonnet and claude-sonnet-4-5.
    assert accepts_sampling(model) is accepts


def test_schema_is_sent_natively_in_the_supported_subset(server: LoopbackServer) -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "label": {"enum": ["billing", "bug", "other"]},
            "score": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Rating"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "refs": {
                "type": "array",
                "items": {"type": "string", "pattern": "^T-[0-9]+$"},
                "minItems": 2,
                "maxItems": 4,
            },
            "when": {"type": "string", "format": "date"},
            "site": {"type": "string", "format": "idn-hostname"},
            "kind": {"const": "ticket"},
            "contact": {
                "oneOf": [
                    {"type": "string", "format": "email"},
                    {"type": "object", "properties": {"phone": {"type": "string"}}},
                ]
            },
        },
        "required": ["label", "score"],
    }
    server.add(Reply.json(200, MESSAGE_OK))
    adapter = adapter_for(server)
    req = request(schema=schema)
    assert adapter.schema_mode(req) == "native"
    response = call(adapter, req)
    assert response.schema_mode == "native"
    assert server.requests[0].body["output_config"] == {
        "format": {
            "type": "json_schema",
            "schema": {
                "type": "object",
                "properties": {
                    "label": {"enum": ["billing", "bug", "other"]},
                    "score": {
                        "type": "integer",
                        "description": 'Rating\n\n{"maximum": 5, "minimum": 1}',
                    },
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "refs": {
                        "type": "array",
                        "items": {"type": "string", "description": '{"pattern": "^T-[0-9]+$"}'},
                        "description": '{"maxItems": 4, "minItems": 2}',
                    },
                    "when": {"type": "string", "format": "date"},
                    "site": {"type": "string", "description": '{"format": "idn-hostname"}'},
                    "kind": {"enum": ["ticket"]},
                    "contact": {
                        "anyOf": [
                            {"type": "string", "format": "email"},
                            {
                                "type": "object",
                                "properties": {"phone": {"type": "string"}},
                                "additionalProperties": False,
                            },
                        ]
                    },
                },
                "required": ["label", "score"],
                "additionalProperties": False,
            },
        }
    }
    # The task's own schema is left untouched: the answer is still checked against it.
    assert schema["properties"]["score"]["minimum"] == 1
    assert "additionalProperties" not in schema


def test_schema_transform_keeps_defs_refs_and_closes_open_maps() -> None:
    schema = {
        "type": "object",
        "$defs": {"item": {"type": "object", "properties": {"n": {"type": "number"}}}},
        "properties": {
            "first": {"$ref": "#/$defs/item"},
            "extra": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    assert transform_schema(schema) == {
        "$defs": {
            "item": {
                "type": "object",
                "properties": {"n": {"type": "number"}},
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {
            "first": {"$ref": "#/$defs/item"},
            "extra": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        "additionalProperties": False,
    }


def test_no_schema_means_no_output_config(server: LoopbackServer) -> None:
    server.add(Reply.json(200, MESSAGE_OK))
    adapter = adapter_for(server)
    assert adapter.schema_mode(request()) is None
    call(adapter, request())
    assert "output_config" not in server.requests[0].body


# --- response shapes -----------------------------------------------------------------------


def test_documented_response_is_parsed(server: LoopbackServer) -> None:
    server.add(Reply.json(200, MESSAGE_OK, headers={"request-id": "req_011"}))
    response = call(adapter_for(server), request())
    # Text blocks only, joined; the thinking block is not part of the answer.
    assert response.text == '{"label": "billing"}'
    assert response.usage == Usage(
        input_tokens=21, output_tokens=9, cached_input_tokens=2048, cache_write_tokens=100
    )
    assert response.finish_reason == "stop"
    assert response.provider_request_id == "req_011"
    assert response.latency_s > 0


def test_body_id_stands_in_for_a_missing_request_id_header(server: LoopbackServer) -> None:
    server.add(Reply.json(200, MESSAGE_OK))
    assert call(adapter_for(server), request()).provider_request_id == "msg_01"


def test_null_cache_fields_count_as_zero(server: LoopbackServer) -> None:
    body = {
        **MESSAGE_OK,
        "usage": {
            "input_tokens": 5,
            "output_tokens": 2,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": None,
        },
    }
    server.add(Reply.json(200, body))
    assert call(adapter_for(server), request()).usage == Usage(input_tokens=5, output_tokens=2)


def test_missing_usage_is_estimated_and_marked_unreported(server: LoopbackServer) -> None:
    body = {key: value for key, value in MESSAGE_OK.items() if key != "usage"}
    server.add(Reply.json(200, body))
    response = call(adapter_for(server), request(prompt="x" * 9, system="abc"))
    # ceil(12 / 4) + 8 template tokens input, ceil(len('{"label": "billing"}') / 4) output.
    assert response.usage == Usage(input_tokens=3 + 8, output_tokens=5, reported=False)


@pytest.mark.parametrize(
    ("stop_reason", "normalized"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),
        ("tool_use", "tool_use"),
    ],
)
def test_stop_reason_is_normalized(
    server: LoopbackServer, stop_reason: str, normalized: str
) -> None:
    server.add(Reply.json(200, {**MESSAGE_OK, "stop_reason": stop_reason}))
    assert call(adapter_for(server), request()).finish_reason == normalized


def test_unexpected_shape_is_a_malformed_response(server: LoopbackServer) -> None:
    server.add(Reply.json(200, {"id": "msg_01", "type": "message"}))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable) == ("malformed_response", True)


# --- errors --------------------------------------------------------------------------------


def test_rate_limit_carries_retry_after(server: LoopbackServer) -> None:
    server.add(
        Reply.json(
            429,
            error_body("rate_limit_error", "Number of request tokens has exceeded your limit"),
            headers={"retry-after": "7"},
        )
    )
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("rate_limit", True, 429)
    assert error.retry_after_s == 7.0
    assert "Number of request tokens has exceeded your limit" in str(error)


def test_retry_after_ms_wins_over_retry_after(server: LoopbackServer) -> None:
    server.add(
        Reply.json(
            429,
            error_body("rate_limit_error", "slow down"),
            headers={"retry-after": "7", "retry-after-ms": "1500"},
        )
    )
    assert failure(adapter_for(server), request()).retry_after_s == 1.5


def test_spend_cap_429_is_not_retried(server: LoopbackServer) -> None:
    body = error_body("rate_limit_error", "monthly spend limit reached")
    body["error"]["details"] = {"error_code": "enforced_spend_limit_reached"}
    server.add(Reply.json(429, body))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable) == ("rate_limit", False)


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (500, "api_error", "Internal server error"),
        (529, "overloaded_error", "Overloaded"),
        (504, "timeout_error", "Request timed out"),
        (409, "conflict_error", "Conflict"),
    ],
)
def test_server_errors_are_retryable(
    server: LoopbackServer, status: int, kind: str, message: str
) -> None:
    server.add(Reply.json(status, error_body(kind, message)))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("server_error", True, status)
    assert message in str(error)


def test_bad_request_keeps_the_providers_message(server: LoopbackServer) -> None:
    message = "`temperature` is deprecated for this model."
    server.add(Reply.json(400, error_body("invalid_request_error", message)))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("bad_request", False, 400)
    assert message in str(error)
    assert "invalid_request_error" in str(error)


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_are_not_retried(server: LoopbackServer, status: int) -> None:
    server.add(Reply.json(status, error_body("authentication_error", "invalid x-api-key")))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("auth", False, status)


@pytest.mark.parametrize(
    ("status", "header", "retryable"), [(400, "true", True), (500, "false", False)]
)
def test_x_should_retry_overrides_the_status(
    server: LoopbackServer, status: int, header: str, retryable: bool
) -> None:
    # Both providers send it and both SDKs obey it: the server knows best.
    server.add(
        Reply.json(status, error_body("api_error", "try later"), headers={"x-should-retry": header})
    )
    assert failure(adapter_for(server), request()).retryable is retryable


def test_non_json_error_page_is_still_classified(server: LoopbackServer) -> None:
    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    server.add(Reply(status=502, body=page, headers={"Content-Type": "text/html"}))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("server_error", True, 502)
    assert "502 Bad Gateway" in str(error)


def test_slow_response_times_out(server: LoopbackServer) -> None:
    # The server would answer after 30 s; the stop of the fixture wakes it early.
    server.add(Reply(status=200, body=json.dumps(MESSAGE_OK).encode(), delay_s=30.0))
    error = failure(adapter_for(server), request(timeout_s=0.2))
    assert (error.kind, error.retryable) == ("timeout", True)


@pytest.mark.parametrize(
    "body",
    [b"<html>not json</html>", json.dumps(MESSAGE_OK).encode()[:40], b""],
    ids=["not-json", "truncated", "empty"],
)
def test_unparseable_success_body_is_malformed(server: LoopbackServer, body: bytes) -> None:
    server.add(Reply(status=200, body=body))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("malformed_response", True, 200)


def test_body_shorter_than_its_content_length_is_a_connection_error(
    server: LoopbackServer,
) -> None:
    full = json.dumps(MESSAGE_OK).encode()
    server.add(Reply(status=200, body=full[:30], content_length=len(full)))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable) == ("connection", True)


def test_dropped_connection_is_retryable(server: LoopbackServer) -> None:
    server.add(Reply(drop=True))
    error = failure(adapter_for(server), request())
    assert (error.kind, error.retryable) == ("connection", True)


def test_refused_connection_is_retryable() -> None:
    with refused_url() as url:
        error = failure(AnthropicAdapter(api_key_env=ENV, base_url=url), request())
    assert (error.kind, error.retryable) == ("connection", True)


# --- secrets and readiness -----------------------------------------------------------------


@pytest.mark.parametrize("key", [KEY, PLAIN_KEY], ids=["key-shaped", "plain"])
@pytest.mark.parametrize("status", [400, 401, 429, 500])
def test_echoed_key_never_reaches_an_error_message(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, key: str, status: int
) -> None:
    monkeypatch.setenv(ENV, key)
    server.add(Reply.json(status, error_body("authentication_error", f"bad key {key} given")))
    error = failure(adapter_for(server), request())
    assert server.requests[0].headers["x-api-key"] == key  # it was sent, and echoed
    assert key not in str(error)
    assert all(key not in str(arg) for arg in error.args)
    assert "[redacted]" in str(error)


def test_echoed_key_in_a_malformed_body_is_redacted(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, PLAIN_KEY)
    server.add(Reply(status=200, body=f"oops {PLAIN_KEY}".encode()))
    error = failure(adapter_for(server), request())
    assert error.kind == "malformed_response"
    assert PLAIN_KEY not in str(error)


def test_check_ready_names_the_missing_variable_without_calling(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV)
    adapter = adapter_for(server)
    with pytest.raises(AdapterError) as info:
        adapter.check_ready()
    assert (info.value.kind, info.value.retryable) == ("auth", False)
    assert ENV in str(info.value)
    # complete() refuses the same way, before opening a connection.
    assert failure(adapter, request()).kind == "auth"
    assert server.requests == []


def test_check_ready_passes_with_the_variable_set(server: LoopbackServer) -> None:
    adapter_for(server).check_ready()
    assert server.requests == []


def test_adapter_survives_a_new_event_loop_per_batch(server: LoopbackServer) -> None:
    # The dispatcher runs one asyncio loop per batch and closes the adapter at its end; the
    # adapter must open a fresh client on the next batch's loop.
    server.add(Reply.json(200, MESSAGE_OK), Reply.json(200, MESSAGE_OK))
    adapter = adapter_for(server)
    first = call(adapter, request())
    second = call(adapter, request())
    assert first.text == second.text == '{"label": "billing"}'
    assert len(server.requests) == 2


# --- shared HTTP helpers -------------------------------------------------------------------


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 11, 29, 10, 0, 0, tzinfo=timezone.utc)
    headers = {"Retry-After": "Sun, 29 Nov 2026 10:00:45 GMT"}
    assert retry_after(headers, now=now) == 45.0
    assert retry_after({"retry-after": "Sun, 29 Nov 2026 09:00:00 GMT"}, now=now) == 0.0
    assert retry_after({"retry-after": "soon"}, now=now) is None
    assert retry_after({}, now=now) is None


def test_redact_hides_given_secrets_and_key_shapes() -> None:
    google = "AIza" + "b" * 35
    text = redact(f"a {PLAIN_KEY} b {KEY} c {google}", [PLAIN_KEY, None, ""])
    assert PLAIN_KEY not in text and KEY not in text and google not in text
    assert text.startswith("a [redacted] b ")


def test_client_holder_closes_its_client() -> None:
    holder = ClientHolder()

    async def use() -> bool:
        client = holder.get()
        assert holder.get() is client
        await holder.aclose()
        return client.is_closed

    assert asyncio.run(use()) is True


def test_client_holder_never_hands_out_a_client_of_another_loop() -> None:
    # An AsyncClient's pool is bound to the loop that opened it; reusing it on a new loop
    # fails on the first pooled connection. (No request is made: nothing to leak.)
    holder = ClientHolder()

    async def get() -> httpx.AsyncClient:
        return holder.get()

    first = asyncio.run(get())
    second = asyncio.run(get())
    assert second is not first
    asyncio.run(holder.aclose())  # from a third loop: forgets the client, never awaits it
    assert not second.is_closed
