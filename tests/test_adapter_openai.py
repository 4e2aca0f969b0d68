"""OpenAI adapter (and OpenAI-compatible servers) against a real loopback server: exact
request shape, documented response shapes (the Chat Completions reference and the llama.cpp
and vLLM docs), error mapping and key redaction."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_evalmine.adapters.base import AdapterError, Request, Response, Usage, cache_key
from pytest_evalmine.adapters.http import secrets_in
from pytest_evalmine.adapters.openai import OpenAIAdapter, accepts_sampling, strict_compatible

from .conftest import clear_proxies
from .http_server import LoopbackServer, Reply, refused_url, running_server

ENV = "EVALMINE_TEST_OPENAI_KEY"
COMPAT_ENV = "EVALMINE_TEST_GATEWAY_TOKEN"
# Built at run time so no key-shaped literal sits in the source.
KEY = "sk-" + "proj-" + "y" * 40
PLAIN_KEY = "plain" + "Z" * 30

STRICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["billing", "bug"]},
        "note": {"type": ["string", "null"]},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}},
                "required": ["sku"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["label", "note", "items"],
    "additionalProperties": False,
}

COMPLETION_OK: dict[str, Any] = {
    "id": "chatcmpl-01",
    "object": "chat.completion",
    "created": 1764400000,
    "model": "gpt-4.1",
    "system_fingerprint": "fp_1",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {
                "role": "assistant",
                "content": '{"label":"billing","note":null,"items":[]}',
                "refusal": None,
            },
        }
    ],
    "usage": {
        "prompt_tokens": 1500,
        "completion_tokens": 120,
        "total_tokens": 1620,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 100},
    },
}


def error_body(message: str, kind: str, code: str | int | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.delenv(COMPAT_ENV, raising=False)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with running_server() as loopback:
        yield loopback


def openai_for(server: LoopbackServer, **options: Any) -> OpenAIAdapter:
    return OpenAIAdapter(base_url=server.url + "/v1", api_key_env=ENV, **options)


def compatible_for(server: LoopbackServer, **options: Any) -> OpenAIAdapter:
    options.setdefault("api_key_env", None)
    return OpenAIAdapter(name="llamacpp", base_url=server.url + "/v1/", **options)


def request(model: str = "openai/gpt-4.1", **fields: Any) -> Request:
    return Request(model=model, prompt=fields.pop("prompt", "Hello"), **fields)


def call(adapter: OpenAIAdapter, req: Request) -> Response:
    async def once() -> Response:
        try:
            return await adapter.complete(req)
        finally:
            await adapter.aclose()

    return asyncio.run(once())


def failure(adapter: OpenAIAdapter, req: Request) -> AdapterError:
    with pytest.raises(AdapterError) as info:
        call(adapter, req)
    return info.value


# --- request shape: OpenAI -----------------------------------------------------------------


def test_openai_request_shape(server: LoopbackServer) -> None:
    server.add(Reply.json(200, COMPLETION_OK))
    call(
        openai_for(server),
        request(
            prompt="My invoice is wrong",
            system="Classify the ticket.",
            max_tokens=64,
            temperature=0.0,
            top_p=0.9,
            stop=("###", "END"),
        ),
    )
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "Classify the ticket."},
            {"role": "user", "content": "My invoice is wrong"},
        ],
        "max_completion_tokens": 64,
        "temperature": 0.0,
        "top_p": 0.9,
        "stop": ["###", "END"],
    }


def test_unset_optional_fields_are_not_sent(server: LoopbackServer) -> None:
    server.add(Reply.json(200, COMPLETION_OK))
    call(openai_for(server), request())
    assert server.requests[0].body == {
        "model": "gpt-4.1",
        "messages": [{"role": "user", "content": "Hello"}],
        "max_completion_tokens": 1024,
    }


@pytest.mark.parametrize(
    "model", ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "gpt-5.1", "gpt-5.4"]
)
def test_reasoning_models_never_get_temperature_or_top_p(
    server: LoopbackServer, model: str
) -> None:
    server.add(Reply.json(200, COMPLETION_OK))
    call(openai_for(server), request(f"openai/{model}", temperature=0.0, top_p=0.5))
    body = server.requests[0].body
    assert body["model"] == model
    assert "temperature" not in body
    assert "top_p" not in body


@pytest.mark.parametrize(
    ("model", "accepts"),
    [
        ("gpt-4.1", True),
        ("gpt-4o-mini", True),
        ("omni-local", True),
        ("o3", False),
        ("openai/gpt-5-nano", False),
    ],
)
def test_sampling_capability_by_model_id(model: str, accepts: bool) -> None:
    assert accepts_sampling(model) is accepts


def test_strict_schema_is_sent_with_strict_true(server: LoopbackServer) -> None:
    server.add(Reply.json(200, COMPLETION_OK))
    adapter = openai_for(server)
    req = request(schema=STRICT_SCHEMA)
    assert adapter.schema_mode(req) == "native"
    call(adapter, req)
    assert server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": STRICT_SCHEMA, "strict": True},
    }


@pytest.mark.parametrize(
    "schema",
    [
        # a property left optional
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["a"],
            "additionalProperties": False,
        },
        # an object left open
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        # a nested object left open
        {
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {}}},
            "required": ["a"],
            "additionalProperties": False,
        },
        # a keyword strict mode does not support
        {
            "type": "object",
            "properties": {"a": {"type": "string", "minLength": 3}},
            "required": ["a"],
            "additionalProperties": False,
        },
        # a root that is not an object
        {"type": "array", "items": {"type": "string"}},
    ],
    ids=["optional-property", "open-object", "open-nested", "minLength", "array-root"],
)
def test_non_strict_schema_is_sent_with_strict_false(
    server: LoopbackServer, schema: dict[str, Any]
) -> None:
    server.add(Reply.json(200, COMPLETION_OK))
    call(openai_for(server), request(schema=schema))
    assert server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": False},
    }


def test_strict_rules() -> None:
    assert strict_compatible(STRICT_SCHEMA)
    with_defs = {
        "type": "object",
        "$defs": {"n": {"type": "object", "properties": {}, "additionalProperties": False}},
        "properties": {"x": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert strict_compatible(with_defs)
    with_all_of = {**with_defs, "properties": {"x": {"allOf": [{"$ref": "#/$defs/n"}]}}}
    assert not strict_compatible(with_all_of)


# --- request shape: OpenAI-compatible servers ----------------------------------------------


def test_compatible_server_without_token_gets_no_authorization(server: LoopbackServer) -> None:
    server.add(Reply.json(200, COMPLETION_OK))
    adapter = compatible_for(server)
    assert adapter.name == "llamacpp"
    adapter.check_ready()  # nothing to check without a token
    call(adapter, request("llamacpp/qwen/qwen3-8b", max_tokens=32, temperature=0.7))
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert "authorization" not in sent.headers
    # llama.cpp reads max_tokens; max_completion_tokens is dropped by some servers.
    assert sent.body == {
        "model": "qwen/qwen3-8b",
        "messages": [{"role": "user", "content": "Hello"}],
        "max_completion_tokens": 32,
        "max_tokens": 32,
        "temperature": 0.7,
    }


def test_compatible_server_with_token_sends_bearer(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(COMPAT_ENV, PLAIN_KEY)
    server.add(Reply.json(200, COMPLETION_OK))
    call(compatible_for(server, api_key_env=COMPAT_ENV), request("llamacpp/local"))
    assert server.requests[0].headers["authorization"] == f"Bearer {PLAIN_KEY}"


def test_compatible_server_with_missing_token_fails_check_ready(server: LoopbackServer) -> None:
    adapter = compatible_for(server, api_key_env=COMPAT_ENV)
    with pytest.raises(AdapterError) as info:
        adapter.check_ready()
    assert (info.value.kind, info.value.retryable) == ("auth", False)
    assert COMPAT_ENV in str(info.value)
    assert failure(adapter, request("llamacpp/local")).kind == "auth"
    assert server.requests == []


def test_compatible_server_gets_strict_false_for_a_non_strict_schema(
    server: LoopbackServer,
) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    server.add(Reply.json(200, COMPLETION_OK))
    call(compatible_for(server), request("llamacpp/local", schema=schema))
    # The nested json_schema form: llama.cpp reportedly ignores the flat one.
    assert server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": False},
    }


def test_prompted_schema_mode_puts_the_schema_in_the_prompt(server: LoopbackServer) -> None:
    server.add(Reply.json(200, COMPLETION_OK))
    adapter = compatible_for(server, native_schema=False)
    req = request("llamacpp/local", prompt="Classify it.", schema=STRICT_SCHEMA)
    assert adapter.schema_mode(req) == "prompted"
    response = call(adapter, req)
    assert response.schema_mode == "prompted"
    body = server.requests[0].body
    assert "response_format" not in body
    content = body["messages"][0]["content"]
    assert content.startswith("Classify it.")
    assert json.dumps(STRICT_SCHEMA, sort_keys=True) in content


def test_adapters_of_different_servers_never_share_cache_keys() -> None:
    req = request("local/model")
    one = OpenAIAdapter(name="vllm", base_url="http://a", api_key_env=None)
    other = OpenAIAdapter(name="lmstudio", base_url="http://b", api_key_env=None)
    assert cache_key(one, req) != cache_key(other, req)


# --- response shapes -----------------------------------------------------------------------


def test_documented_response_is_parsed(server: LoopbackServer) -> None:
    server.add(Reply.json(200, COMPLETION_OK, headers={"x-request-id": "req_abc"}))
    response = call(openai_for(server), request())
    assert response.text == '{"label":"billing","note":null,"items":[]}'
    # prompt_tokens includes the cached tokens; completion_tokens includes reasoning.
    assert response.usage == Usage(input_tokens=476, output_tokens=120, cached_input_tokens=1024)
    assert response.finish_reason == "stop"
    assert response.provider_request_id == "req_abc"
    assert response.schema_mode is None


def test_cache_write_tokens_are_billed_once(server: LoopbackServer) -> None:
    usage = {
        "prompt_tokens": 3000,
        "completion_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 1500},
    }
    server.add(Reply.json(200, {**COMPLETION_OK, "usage": usage}))
    assert call(openai_for(server), request()).usage == Usage(
        input_tokens=500, output_tokens=10, cached_input_tokens=1000, cache_write_tokens=1500
    )


def test_body_id_stands_in_for_a_missing_request_id_header(server: LoopbackServer) -> None:
    server.add(Reply.json(200, COMPLETION_OK))
    assert call(openai_for(server), request()).provider_request_id == "chatcmpl-01"


def test_refusal_gives_empty_text_and_refusal_reason(server: LoopbackServer) -> None:
    choice = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    }
    server.add(Reply.json(200, {**COMPLETION_OK, "choices": [choice]}))
    response = call(openai_for(server), request(schema=STRICT_SCHEMA))
    assert (response.text, response.finish_reason) == ("", "refusal")


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("tool_calls", "tool_calls"),
        (None, "unknown"),
    ],
)
def test_finish_reason_is_normalized(
    server: LoopbackServer, raw: str | None, normalized: str
) -> None:
    choice = {**COMPLETION_OK["choices"][0], "finish_reason": raw}
    server.add(Reply.json(200, {**COMPLETION_OK, "choices": [choice]}))
    assert call(openai_for(server), request()).finish_reason == normalized


def test_missing_usage_is_estimated_and_marked_unreported(server: LoopbackServer) -> None:
    body = {key: value for key, value in COMPLETION_OK.items() if key != "usage"}
    server.add(Reply.json(200, body))
    response = call(compatible_for(server), request("llamacpp/local", prompt="p" * 10, system="s"))
    text = COMPLETION_OK["choices"][0]["message"]["content"]
    assert response.usage == Usage(
        input_tokens=math.ceil(11 / 4) + 8, output_tokens=math.ceil(len(text) / 4), reported=False
    )


def test_null_content_is_empty_text(server: LoopbackServer) -> None:
    # A reasoning model that spent max_completion_tokens thinking returns no content.
    choice = {
        "index": 0,
        "finish_reason": "length",
        "message": {"role": "assistant", "content": None, "refusal": None},
    }
    server.add(Reply.json(200, {**COMPLETION_OK, "choices": [choice]}))
    response = call(openai_for(server), request())
    assert (response.text, response.finish_reason) == ("", "length")


def test_unexpected_shape_is_a_malformed_response(server: LoopbackServer) -> None:
    server.add(Reply.json(200, {"id": "chatcmpl-01", "choices": []}))
    error = failure(openai_for(server), request())
    assert (error.kind, error.retryable) == ("malformed_response", True)


def test_error_inside_a_200_is_a_retryable_server_error(server: LoopbackServer) -> None:
    server.add(Reply.json(200, error_body("upstream failed", "server_error", None)))
    error = failure(compatible_for(server), request("llamacpp/local"))
    assert (error.kind, error.retryable) == ("server_error", True)
    assert "upstream failed" in str(error)


# --- errors --------------------------------------------------------------------------------


def test_rate_limit_carries_retry_after(server: LoopbackServer) -> None:
    message = "Rate limit reached for gpt-4.1. Please try again in 18.6s."
    server.add(
        Reply.json(
            429,
            error_body(message, "requests", "rate_limit_exceeded"),
            headers={"retry-after": "19"},
        )
    )
    error = failure(openai_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("rate_limit", True, 429)
    assert error.retry_after_s == 19.0
    assert message in str(error)


def test_insufficient_quota_is_not_retried(server: LoopbackServer) -> None:
    message = "You exceeded your current quota, please check your plan and billing details."
    server.add(Reply.json(429, error_body(message, "insufficient_quota", "insufficient_quota")))
    error = failure(openai_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("rate_limit", False, 429)


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_retryable(server: LoopbackServer, status: int) -> None:
    server.add(Reply.json(status, error_body("The server had an error", "server_error", None)))
    error = failure(openai_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("server_error", True, status)
    assert "The server had an error" in str(error)


def test_bad_request_keeps_the_providers_message(server: LoopbackServer) -> None:
    message = (
        "Unsupported value: 'temperature' does not support 0 with this model. "
        "Only the default (1) value is supported."
    )
    server.add(Reply.json(400, error_body(message, "invalid_request_error", "unsupported_value")))
    error = failure(openai_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("bad_request", False, 400)
    assert message in str(error)


@pytest.mark.parametrize(
    "body",
    [
        # vLLM, current and older builds; llama.cpp's integer code
        {"error": {"message": "model len exceeded", "type": "BadRequestError", "code": 400}},
        {"object": "error", "message": "model len exceeded", "type": "BadRequestError"},
        {"error": {"code": 400, "message": "model len exceeded", "type": "invalid_request"}},
    ],
    ids=["vllm", "vllm-flat", "llamacpp"],
)
def test_compatible_error_bodies_keep_their_message(
    server: LoopbackServer, body: dict[str, Any]
) -> None:
    server.add(Reply.json(400, body))
    error = failure(compatible_for(server), request("llamacpp/local"))
    assert (error.kind, error.retryable) == ("bad_request", False)
    assert "model len exceeded" in str(error)


def test_loading_model_503_is_retryable(server: LoopbackServer) -> None:
    body = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    server.add(Reply.json(503, body))
    error = failure(compatible_for(server), request("llamacpp/local"))
    assert (error.kind, error.retryable) == ("server_error", True)


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_are_not_retried(server: LoopbackServer, status: int) -> None:
    server.add(Reply.json(status, error_body("Incorrect API key", "invalid_request_error", None)))
    error = failure(openai_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("auth", False, status)


def test_slow_response_times_out(server: LoopbackServer) -> None:
    # The server would answer after 30 s; the stop of the fixture wakes it early.
    server.add(Reply(status=200, body=json.dumps(COMPLETION_OK).encode(), delay_s=30.0))
    error = failure(openai_for(server), request(timeout_s=0.2))
    assert (error.kind, error.retryable) == ("timeout", True)


@pytest.mark.parametrize(
    "body",
    [b"not json at all", json.dumps(COMPLETION_OK).encode()[:-7]],
    ids=["not-json", "truncated"],
)
def test_unparseable_success_body_is_malformed(server: LoopbackServer, body: bytes) -> None:
    server.add(Reply(status=200, body=body))
    error = failure(openai_for(server), request())
    assert (error.kind, error.retryable, error.status) == ("malformed_response", True, 200)


def test_dropped_connection_is_retryable(server: LoopbackServer) -> None:
    server.add(Reply(drop=True))
    error = failure(openai_for(server), request())
    assert (error.kind, error.retryable) == ("connection", True)


def test_refused_connection_is_retryable() -> None:
    with refused_url() as url:
        error = failure(OpenAIAdapter(base_url=url, api_key_env=ENV), request())
    assert (error.kind, error.retryable) == ("connection", True)


# --- secrets and readiness -----------------------------------------------------------------


@pytest.mark.parametrize("key", [KEY, PLAIN_KEY], ids=["key-shaped", "plain"])
@pytest.mark.parametrize("status", [400, 401, 429, 500])
def test_echoed_key_never_reaches_an_error_message(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, key: str, status: int
) -> None:
    monkeypatch.setenv(ENV, key)
    message = f"Incorrect API key provided: {key}. You can find your API key at ..."
    server.add(Reply.json(status, error_body(message, "invalid_request_error", "invalid_api_key")))
    error = failure(openai_for(server), request())
    assert server.requests[0].headers["authorization"] == f"Bearer {key}"
    assert key not in str(error)
    assert all(key not in str(arg) for arg in error.args)
    assert "[redacted]" in str(error)


def test_echoed_key_in_a_200_error_is_redacted(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, PLAIN_KEY)
    server.add(Reply.json(200, error_body(f"upstream rejected {PLAIN_KEY}", "x", None)))
    error = failure(openai_for(server), request())
    assert PLAIN_KEY not in str(error)


def test_check_ready_names_the_missing_variable_without_calling(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV)
    adapter = openai_for(server)
    with pytest.raises(AdapterError) as info:
        adapter.check_ready()
    assert (info.value.kind, info.value.retryable) == ("auth", False)
    assert ENV in str(info.value)
    assert failure(adapter, request()).kind == "auth"
    assert server.requests == []


def test_blank_variable_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "  ")
    with pytest.raises(AdapterError, match=ENV):
        OpenAIAdapter(api_key_env=ENV).check_ready()


def test_bearer_token_is_a_secret_with_and_without_its_scheme() -> None:
    # post_json redacts these from transport errors when an adapter passes no secrets.
    found = secrets_in({"Authorization": f"Bearer {PLAIN_KEY}", "Content-Type": "x"})
    assert found == [f"Bearer {PLAIN_KEY}", PLAIN_KEY]
