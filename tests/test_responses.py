"""What a provider may send back and still be taken as an answer (spec: "Responses"): only a
200 whose body fits the response cap. A redirect, any other 2xx and an oversized body are
errors, never cached; a huge body is not read into memory. Real loopback HTTP throughout."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.adapters.base import (
    AdapterError,
    Request,
    Response,
    max_response_bytes,
    set_max_response_mb,
)
from pytest_evalmine.adapters.openai import OpenAIAdapter
from pytest_evalmine.options import DEFAULT_MAX_RESPONSE_MB

from .conftest import SMALL_SUITE
from .http_server import LoopbackServer, Reply, running_server

MB = 1024 * 1024
COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "served",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": '{"category": "bug"}'},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26},
}
BODY = json.dumps(COMPLETION).encode()


@pytest.fixture(autouse=True)
def _default_cap_afterwards() -> Iterator[None]:
    # The cap is process-wide; a test that lowers it must not change the next test.
    yield
    set_max_response_mb(DEFAULT_MAX_RESPONSE_MB)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with running_server() as server:
        yield server


def adapter_for(server: LoopbackServer) -> OpenAIAdapter:
    return OpenAIAdapter(name="local", base_url=server.url + "/v1", api_key_env=None)


def complete(server: LoopbackServer) -> Response:
    adapter = adapter_for(server)

    async def once() -> Response:
        try:
            return await adapter.complete(Request(model="local/m", prompt="Hi"))
        finally:
            await adapter.aclose()

    return asyncio.run(once())


def failure(server: LoopbackServer) -> AdapterError:
    with pytest.raises(AdapterError) as info:
        complete(server)
    return info.value


def test_the_default_cap_is_a_few_megabytes() -> None:
    assert max_response_bytes() == 8 * MB


def test_a_body_within_the_cap_is_an_answer(server: LoopbackServer) -> None:
    set_max_response_mb(1)
    server.add(Reply(200, BODY, filler_bytes=MB - len(BODY)))
    assert complete(server).text == '{"category": "bug"}'


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "until-close"])
def test_a_50_mb_body_is_an_error_and_never_sits_in_memory(
    server: LoopbackServer, announced: bool
) -> None:
    """Before: the whole body was read (peak over 50 MB) and accepted as an answer."""
    set_max_response_mb(1)
    server.add(Reply(200, BODY, filler_bytes=50 * MB, announce_length=announced))
    tracemalloc.start()
    try:
        error = failure(server)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (error.kind, error.retryable, error.status) == ("malformed_response", False, 200)
    assert "larger than the 1,048,576 bytes" in str(error)
    assert "--evalmine-max-response-mb" in str(error)
    assert peak < 8 * MB, f"peak {peak / MB:.1f} MB while refusing a 50 MB body"


def test_an_oversized_error_page_keeps_its_status(server: LoopbackServer) -> None:
    set_max_response_mb(1)
    server.add(Reply(503, b"<html>", filler_bytes=2 * MB))
    error = failure(server)
    assert (error.kind, error.retryable, error.status) == ("server_error", True, 503)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_carrying_a_completion_is_an_error_and_is_not_followed(
    server: LoopbackServer, status: int
) -> None:
    """Before: a 302 with a completion body was returned as the answer."""
    location = f"{server.url}/elsewhere?key=secret-in-the-query"
    server.add(Reply(status, BODY, headers={"Location": location}))
    server.add(Reply(200, BODY))  # would be the answer if the redirect were followed
    error = failure(server)
    assert (error.kind, error.retryable, error.status) == ("bad_request", False, status)
    assert f"HTTP {status}: redirect to {server.url} not followed" in str(error)
    assert "secret-in-the-query" not in str(error)
    assert [r.path for r in server.requests] == ["/v1/chat/completions"]


@pytest.mark.parametrize("status", [201, 202, 203, 204, 206])
def test_a_success_status_other_than_200_is_not_an_answer(
    server: LoopbackServer, status: int
) -> None:
    """Before: any status under 400 with a completion body was taken as the answer."""
    server.add(Reply(status, b"" if status == 204 else BODY))
    error = failure(server)
    assert (error.kind, error.retryable, error.status) == ("malformed_response", False, status)
    assert f"HTTP {status} is not an answer" in str(error)


def _answers_in_cache(root: Path) -> int:
    with sqlite3.connect(root / ".evalmine" / "cache.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]


def test_through_a_run_a_redirect_or_an_oversized_body_is_an_error_never_cached(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    pytester.makefile(
        ".eval.yaml",
        small=SMALL_SUITE.replace("models: [fake/alpha, fake/beta]", "models: [local/a]"),
    )
    server.add(Reply.json(404, {"error": {"message": "no /models here"}}))
    server.add(Reply(302, BODY, headers={"Location": server.url + "/v2"}))
    server.add(Reply(200, BODY, filler_bytes=3 * MB))
    server.add(Reply(200, BODY, filler_bytes=3 * MB, announce_length=False))
    result = pytester.runpytest(
        f"--evalmine-endpoint=local={server.url}/v1,free",
        "--evalmine-max-response-mb=2",
        "--evalmine-retries=0",
        "--evalmine-concurrency=1",
    )
    result.assert_outcomes(errors=3)
    output = result.stdout.str()
    assert "redirect to" in output and "not followed" in output
    assert output.count("larger than the 2,097,152 bytes") >= 2
    assert _answers_in_cache(pytester.path) == 0
    # The same 3 MB answer is accepted under the default cap of 8 MB.
    server.add(Reply.json(404, {"error": {"message": "no /models here"}}))
    server.add(Reply(200, BODY, filler_bytes=3 * MB))
    rerun = pytester.runpytest(f"--evalmine-endpoint=local={server.url}/v1,free", "-k", "refund-no")
    rerun.assert_outcomes(passed=1)


@pytest.mark.parametrize("value", ["0", "nan", "-1", "abc"])
def test_a_cap_that_is_no_cap_is_a_usage_error(
    pytester: pytest.Pytester, small_suite: Path, value: str
) -> None:
    result = pytester.runpytest("--evalmine-fake", f"--evalmine-max-response-mb={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--evalmine-max-response-mb" in result.stderr.str()
