"""The Ollama adapter against a real loopback HTTP server."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.adapters.base import AdapterError, Request, Response, cache_key
from pytest_evalmine.adapters.ollama import OllamaAdapter
from pytest_evalmine.adapters.registry import AdapterRegistry
from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.run.dispatch import OK, Dispatcher
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.store import Store
from tests.http_server import LoopbackServer, Reply, refused_url, running_server

MODEL = "ollama/qwen3:8b"
DIGEST_A = "a" * 64
DIGEST_B = "b" * 64


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with running_server() as srv:
        yield srv


def call(adapter: OllamaAdapter, request: Request) -> Response:
    async def run() -> Response:
        try:
            return await adapter.complete(request)
        finally:
            await adapter.aclose()

    return asyncio.run(run())


def fail(adapter: OllamaAdapter, request: Request) -> AdapterError:
    with pytest.raises(AdapterError) as info:
        call(adapter, request)
    return info.value


def chat_body(content: str = "Hello.", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "qwen3:8b",
        "created_at": "2026-11-29T10:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": "stop",
        "total_duration": 174560334,
        "load_duration": 101397084,
        "prompt_eval_count": 11,
        "prompt_eval_duration": 13074791,
        "eval_count": 18,
        "eval_duration": 52479709,
    }
    body.update(extra)
    return body


def tags(*entries: tuple[str, str]) -> dict[str, Any]:
    return {
        "models": [
            {
                "name": name,
                "model": name,
                "modified_at": "2026-11-01T10:00:00Z",
                "size": 5_200_000_000,
                "digest": digest,
                "details": {"family": "qwen3", "parameter_size": "8.2B"},
            }
            for name, digest in entries
        ]
    }


# --- requests on the wire ---------------------------------------------------------------------


def test_request_shape_with_every_parameter(server: LoopbackServer) -> None:
    schema = {
        "type": "object",
        "properties": {"label": {"type": "string", "enum": ["billing", "bug"]}},
        "required": ["label"],
    }
    server.add(Reply.json(200, chat_body('{"label": "billing"}')))
    adapter = OllamaAdapter(base_url=server.url, think=False, num_ctx=8192, seed=42)
    request = Request(
        model=MODEL,
        prompt="My invoice is wrong",
        system="Classify the ticket.",
        max_tokens=512,
        temperature=0.0,
        top_p=0.9,
        stop=("###",),
        schema=schema,
    )
    response = call(adapter, request)
    [received] = server.requests
    assert (received.method, received.path) == ("POST", "/api/chat")
    assert received.body == {
        "model": "qwen3:8b",
        "messages": [
            {"role": "system", "content": "Classify the ticket."},
            {"role": "user", "content": "My invoice is wrong"},
        ],
        "stream": False,
        "options": {
            "num_predict": 512,
            "temperature": 0.0,
            "top_p": 0.9,
            "stop": ["###"],
            "num_ctx": 8192,
            "seed": 42,
        },
        "think": False,
        "format": schema,
    }
    assert response.schema_mode == "native"
    assert adapter.schema_mode(request) == "native"
    assert "authorization" not in received.headers


def test_unset_parameters_are_not_sent(server: LoopbackServer) -> None:
    server.add(Reply.json(200, chat_body()))
    call(OllamaAdapter(base_url=server.url), Request(model=MODEL, prompt="Hi", max_tokens=64))
    assert server.requests[0].body == {
        "model": "qwen3:8b",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": False,
        "options": {"num_predict": 64},
    }


def test_think_level_is_sent_as_given(server: LoopbackServer) -> None:
    server.add(Reply.json(200, chat_body()))
    call(OllamaAdapter(base_url=server.url, think="high"), Request(model=MODEL, prompt="Hi"))
    assert server.requests[0].body["think"] == "high"


# --- responses --------------------------------------------------------------------------------


def test_documented_response_ignores_thinking(server: LoopbackServer) -> None:
    body = chat_body('{"label":"billing"}')
    body["message"]["thinking"] = "The customer mentions an invoice, so billing."
    server.add(Reply.json(200, body))
    response = call(OllamaAdapter(base_url=server.url), Request(model=MODEL, prompt="p"))
    assert response.text == '{"label":"billing"}'
    assert response.finish_reason == "stop"
    assert response.usage.input_tokens == 11
    assert response.usage.output_tokens == 18
    assert response.usage.cached_input_tokens == 0
    assert response.usage.reported is True
    assert response.schema_mode is None
    assert response.provider_request_id is None
    assert response.latency_s >= 0


@pytest.mark.parametrize(
    ("done_reason", "normalized"),
    [("stop", "stop"), ("length", "length"), ("load", "other"), ("unload", "other")],
)
def test_done_reasons(server: LoopbackServer, done_reason: str, normalized: str) -> None:
    server.add(Reply.json(200, chat_body(done_reason=done_reason)))
    response = call(OllamaAdapter(base_url=server.url), Request(model=MODEL, prompt="p"))
    assert response.finish_reason == normalized


@pytest.mark.parametrize("missing", ["prompt_eval_count", "eval_count", "both"])
def test_missing_counts_are_an_unreported_estimate(server: LoopbackServer, missing: str) -> None:
    body = chat_body("x" * 10)
    for field in ("prompt_eval_count", "eval_count"):
        if missing in (field, "both"):
            del body[field]
    server.add(Reply.json(200, body))
    request = Request(model=MODEL, prompt="p" * 30, system="s" * 10)
    usage = call(OllamaAdapter(base_url=server.url), request).usage
    assert usage.reported is False
    estimated_input = math.ceil(40 / 4) + 8
    assert usage.input_tokens == (11 if missing == "eval_count" else estimated_input)
    assert usage.output_tokens == (18 if missing == "prompt_eval_count" else math.ceil(10 / 4))


# --- prepare and the cache key ----------------------------------------------------------------


def test_prepare_reads_digests_from_api_tags_once(server: LoopbackServer) -> None:
    server.add(Reply.json(200, tags(("qwen3:8b", DIGEST_A), ("llama3.2:latest", DIGEST_B))))
    adapter = OllamaAdapter(base_url=server.url, think=True, num_ctx=4096, seed=7)
    asyncio.run(adapter.prepare([MODEL, "ollama/llama3.2", MODEL]))
    asyncio.run(adapter.prepare([MODEL]))
    [received] = server.requests
    assert (received.method, received.path) == ("GET", "/api/tags")
    assert adapter.key_extra(Request(model=MODEL, prompt="p")) == {
        "digest": DIGEST_A,
        "think": True,
        "num_ctx": 4096,
        "seed": 7,
    }
    assert adapter.key_extra(Request(model="ollama/llama3.2", prompt="p"))["digest"] == DIGEST_B


def prepared(server: LoopbackServer, digest: str, **options: Any) -> OllamaAdapter:
    server.add(Reply.json(200, tags(("qwen3:8b", digest))))
    adapter = OllamaAdapter(base_url=server.url, **options)
    asyncio.run(adapter.prepare([MODEL]))
    return adapter


def test_a_new_digest_changes_the_cache_key(server: LoopbackServer) -> None:
    request = Request(model=MODEL, prompt="p")
    before = cache_key(prepared(server, DIGEST_A), request)
    assert cache_key(prepared(server, DIGEST_A), request) == before
    assert cache_key(prepared(server, DIGEST_B), request) != before


@pytest.mark.parametrize("option", [{"think": False}, {"num_ctx": 2048}, {"seed": 1}])
def test_adapter_options_change_the_cache_key(
    server: LoopbackServer, option: dict[str, Any]
) -> None:
    request = Request(model=MODEL, prompt="p")
    assert cache_key(prepared(server, DIGEST_A), request) != cache_key(
        prepared(server, DIGEST_A, **option), request
    )


def test_a_missing_model_fails_in_prepare(server: LoopbackServer) -> None:
    server.add(Reply.json(200, tags(("llama3.2:latest", DIGEST_B))))
    adapter = OllamaAdapter(base_url=server.url)
    with pytest.raises(AdapterError) as info:
        asyncio.run(adapter.prepare([MODEL, "ollama/llama3.2"]))
    error = info.value
    assert (error.kind, error.retryable) == ("bad_request", False)
    assert "qwen3:8b" in str(error) and "ollama pull" in str(error)
    assert "llama3.2:latest" in str(error)


def test_prepare_when_the_server_is_down() -> None:
    with refused_url() as url:
        adapter = OllamaAdapter(base_url=url)
        with pytest.raises(AdapterError) as info:
            asyncio.run(adapter.prepare([MODEL]))
    assert (info.value.kind, info.value.retryable) == ("connection", True)
    assert "ollama serve" in str(info.value)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=200, body=b"not json"),
        Reply.json(200, {"tags": []}),
        Reply.json(500, {"error": "boom"}),
    ],
)
def test_prepare_with_a_bad_listing(server: LoopbackServer, reply: Reply) -> None:
    server.add(reply)
    with pytest.raises(AdapterError) as info:
        asyncio.run(OllamaAdapter(base_url=server.url).prepare([MODEL]))
    expected = "server_error" if reply.status == 500 else "malformed_response"
    assert info.value.kind == expected


def test_dispatcher_prepares_keys_and_calls(server: LoopbackServer, tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        'pinned: "2026-11-30"\nmodels:\n'
        '  - {model: "ollama/*", input: 0, output: 0, source: local, read: "2026-11-30"}\n'
    )

    def new_session() -> Dispatcher:
        # Digests are read once per session (per registry); a new run reads them again.
        registry = AdapterRegistry()
        registry.register("ollama", lambda: OllamaAdapter(base_url=server.url))
        return Dispatcher(
            registry=registry,
            store=Store(tmp_path / "cache.sqlite"),
            prices=load_prices(prices),
            run_token="run",
            cap_usd=1.0,
        )

    dispatcher = new_session()
    request = Request(model=MODEL, prompt="p", max_tokens=16)
    server.add(Reply.json(200, tags(("qwen3:8b", DIGEST_A))), Reply.json(200, chat_body("One.")))
    [planned] = dispatcher.plan([request])
    outcome = dispatcher.run([planned])[planned.key]
    assert outcome.status == OK and outcome.response is not None
    assert outcome.response.text == "One."
    # The same tag re-pulled before the next run: a new key, the cached answer is not served.
    server.add(Reply.json(200, tags(("qwen3:8b", DIGEST_B))), Reply.json(200, chat_body("Two.")))
    dispatcher = new_session()
    [replanned] = dispatcher.plan([request])
    assert replanned.key != planned.key
    again = dispatcher.run([replanned])[replanned.key]
    assert again.response is not None and again.response.text == "Two." and not again.cached
    # A model the server lacks stops planning before any chat call.
    server.add(Reply.json(200, tags(("qwen3:8b", DIGEST_B))))
    with pytest.raises(EvalmineError, match="gemma3:4b"):
        dispatcher.plan([Request(model="ollama/gemma3:4b", prompt="p")])
    assert [r.path for r in server.requests].count("/api/chat") == 2


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (404, "bad_request", False),
        (400, "bad_request", False),
        (429, "rate_limit", True),
        (500, "server_error", True),
        (502, "server_error", True),
        (503, "server_error", True),
    ],
)
def test_error_statuses(server: LoopbackServer, status: int, kind: str, retryable: bool) -> None:
    message = f"model 'qwen3:8b' not found ({status})"
    server.add(Reply.json(status, {"error": message}))
    error = fail(OllamaAdapter(base_url=server.url), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable, error.status) == (kind, retryable, status)
    assert message in str(error)


def test_error_under_a_200_status(server: LoopbackServer) -> None:
    server.add(Reply.json(200, {"error": "an error was encountered while running the model"}))
    error = fail(OllamaAdapter(base_url=server.url), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable) == ("server_error", True)
    assert "while running the model" in str(error)


def test_slow_answer_beyond_the_timeout(server: LoopbackServer) -> None:
    server.add(Reply(status=200, body=json.dumps(chat_body()).encode(), delay_s=5.0))
    error = fail(
        OllamaAdapter(base_url=server.url), Request(model=MODEL, prompt="p", timeout_s=0.2)
    )
    assert (error.kind, error.retryable) == ("timeout", True)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=200, body=b"<html>not json</html>"),
        Reply(status=200, body=b'{"message": {"role": "assistant", "content": "cut'),
        Reply.json(200, {"done": True}),
        Reply.json(200, {"message": {"content": 3}}),
        Reply.json(200, [1, 2]),
        Reply.json(200, chat_body(eval_count="many")),
    ],
)
def test_malformed_or_truncated_json(server: LoopbackServer, reply: Reply) -> None:
    server.add(reply)
    error = fail(OllamaAdapter(base_url=server.url), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable) == ("malformed_response", True)


def test_connection_refused() -> None:
    with refused_url() as url:
        error = fail(OllamaAdapter(base_url=url), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable) == ("connection", True)


def test_connection_dropped_without_an_answer(server: LoopbackServer) -> None:
    server.add(Reply(drop=True))
    error = fail(OllamaAdapter(base_url=server.url), Request(model=MODEL, prompt="p"))
    assert (error.kind, error.retryable) == ("connection", True)
