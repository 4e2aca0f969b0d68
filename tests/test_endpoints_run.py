"""Suites served by a declared endpoint, through the plugin, over real HTTP on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_evalmine import exitcodes

from .conftest import SMALL_SUITE, latest_report
from .http_server import LoopbackServer, Reply, running_server

ENDPOINT_SUITE = SMALL_SUITE.replace(
    "models: [fake/alpha, fake/beta]", "models: [local/a, local/b]"
)
TOKEN = "sk-" + "proj-" + "endpointtest" * 4


def chat_reply(content: str) -> Reply:
    return Reply.json(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "served",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26},
        },
    )


MODELS = {"object": "list", "data": [{"id": "served-model", "meta": {"n_params": 135}}]}


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """A compatible server; its first reply answers the plugin's ``GET /models`` look-up."""
    with running_server() as server:
        server.add(Reply.json(200, MODELS))
        yield server


def chat_requests(server: LoopbackServer) -> list:
    return [r for r in server.requests if r.method == "POST"]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> Path:
    return pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)


def test_an_endpoint_suite_runs_over_http_and_the_token_never_reaches_disk(
    pytester: pytest.Pytester,
    suite: Path,
    server: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOCAL_TOKEN", TOKEN)
    server.add(*(chat_reply('{"category": "bug"}') for _ in range(6)))
    result = pytester.runpytest(
        f"--evalmine-endpoint=local={server.url}/v1,free,key_env=LOCAL_TOKEN"
    )
    result.assert_outcomes(passed=6)
    assert [(r.method, r.path) for r in server.requests[:1]] == [("GET", "/v1/models")]
    assert len(chat_requests(server)) == 6
    for received in chat_requests(server):
        assert received.method == "POST" and received.path == "/v1/chat/completions"
        assert received.headers["authorization"] == f"Bearer {TOKEN}"
        assert received.body["model"] in ("a", "b")
    schema_requests = [r for r in chat_requests(server) if "response_format" in r.body]
    assert len(schema_requests) == 4
    assert schema_requests[0].body["response_format"]["type"] == "json_schema"
    report = latest_report(pytester.path)
    assert report["cost"]["spent_usd"] == 0
    assert {row["schema_native"]["n"] for row in report["scorecard"]} == {2}
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert TOKEN not in result.stdout.str()


def test_a_missing_token_is_reported_before_any_request(
    pytester: pytest.Pytester, suite: Path, server: LoopbackServer
) -> None:
    result = pytester.runpytest(f"--evalmine-endpoint=local={server.url}/v1,free,key_env=NO_SUCH")
    assert result.ret == exitcodes.REFUSED_BEFORE_SPENDING
    result.stdout.fnmatch_lines(["*NO_SUCH*"])
    assert server.requests == []


def test_an_endpoint_without_a_declared_cost_is_refused(
    pytester: pytest.Pytester, suite: Path, server: LoopbackServer
) -> None:
    result = pytester.runpytest(f"--evalmine-endpoint=local={server.url}/v1")
    assert result.ret == exitcodes.REFUSED_BEFORE_SPENDING
    result.stdout.fnmatch_lines(["*no price for model 'local/a'*"])
    assert server.requests == []


def test_endpoints_declared_in_the_suite(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    text = ENDPOINT_SUITE.replace(
        "tasks:",
        f"endpoints:\n  local: {{base_url: '{server.url}/v1', cost: {{input: 1, output: 2}}}}\n"
        "tasks:",
    )
    pytester.makefile(".eval.yaml", small=text)
    server.add(*(chat_reply('{"category": "other"}') for _ in range(6)))
    pytester.runpytest().assert_outcomes(passed=6)
    report = latest_report(pytester.path)
    # six answers of 20 input and 6 output tokens at $1 / $2 per million
    assert report["cost"]["spent_usd"] == pytest.approx(6 * (20 * 1 + 6 * 2) / 1e6)
    assert "authorization" not in chat_requests(server)[0].headers


def test_provider_errors_are_recorded_and_the_run_goes_on(
    pytester: pytest.Pytester, suite: Path, server: LoopbackServer
) -> None:
    error = {"error": {"message": "model 'b' is not loaded", "type": "invalid_request_error"}}
    for _ in range(6):
        server.add(Reply.json(400, error))
    result = pytester.runpytest(f"--evalmine-endpoint=local={server.url}/v1,free")
    result.assert_outcomes(errors=6)
    assert "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*provider error: bad_request: *not loaded*"])
    assert len(chat_requests(server)) == 6, "a 400 is not retried"
    answers_file = next((pytester.path / "reports" / "small").glob("*/answers.jsonl"))
    outcomes = {json.loads(line)["outcome"] for line in answers_file.read_text().splitlines()}
    assert outcomes == {"error"}


def test_an_answer_without_usage_is_costed_as_a_lower_bound(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    pytester.makefile(".eval.yaml", small=ENDPOINT_SUITE)
    for _ in range(6):
        reply = chat_reply('{"category": "bug"}')
        payload = json.loads(reply.body)
        del payload["usage"]
        server.add(Reply.json(200, payload))
    result = pytester.runpytest(f"--evalmine-endpoint=local={server.url}/v1,input=1,output=2")
    result.assert_outcomes(passed=6)
    report = latest_report(pytester.path)
    assert all(row["cost_lower_bound"] for row in report["scorecard"])
    assert report["cost"]["spent_usd"] > 0, "estimated from the text, never $0"
    result.stdout.fnmatch_lines(["*>=$0.0*"])


def test_endpoint_options_are_parsed_into_their_adapter() -> None:
    from pytest_evalmine.run.endpoints import parse_option

    endpoint = parse_option(
        "box=http://127.0.0.1:11434,kind=ollama,free,think=off,num_ctx=8192,seed=7,concurrency=2"
    )
    adapter = endpoint.factory()()
    assert (adapter.think, adapter.num_ctx, adapter.seed) == (False, 8192, 7)
    assert endpoint.concurrency == 2 and endpoint.price_row() is not None
    with pytest.raises(Exception, match="cannot read option 'think=maybe'"):
        parse_option("box=http://x,think=maybe")


def test_a_swapped_model_behind_the_same_name_is_not_served_from_cache(
    pytester: pytest.Pytester, suite: Path, server: LoopbackServer
) -> None:
    server.add(*(chat_reply('{"category": "bug"}') for _ in range(6)))
    option = f"--evalmine-endpoint=local={server.url}/v1,free"
    pytester.runpytest(option).assert_outcomes(passed=6)
    # Same server, same model: everything from the cache.
    server.add(Reply.json(200, MODELS))
    pytester.runpytest(option).assert_outcomes(passed=6)
    assert len(chat_requests(server)) == 6
    # The server now has another model loaded under the same request name: new answers.
    swapped = {"object": "list", "data": [{"id": "other-model", "meta": {"n_params": 360}}]}
    server.add(Reply.json(200, swapped), *(chat_reply('{"category": "other"}') for _ in range(6)))
    pytester.runpytest(option).assert_outcomes(passed=6)
    assert len(chat_requests(server)) == 12


def test_a_recorded_endpoint_run_replays_with_the_server_down_and_no_key(
    pytester: pytest.Pytester, suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The served-model listing that entered the keys is remembered in the cache database, so
    replay (record mode none) rebuilds the same keys without the server or the key."""
    monkeypatch.setenv("LOCAL_TOKEN", TOKEN)
    with running_server() as server:
        server.add(Reply.json(200, MODELS), *(chat_reply('{"category": "bug"}') for _ in range(6)))
        endpoint = f"--evalmine-endpoint=local={server.url}/v1,free,key_env=LOCAL_TOKEN"
        pytester.runpytest(endpoint).assert_outcomes(passed=6)
        assert len(chat_requests(server)) == 6
    monkeypatch.delenv("LOCAL_TOKEN")
    # The server is gone: any connection attempt would fail the items, not replay them.
    result = pytester.runpytest(endpoint, "--evalmine-record=none")
    result.assert_outcomes(passed=6)
    report = latest_report(pytester.path)
    assert report["outcomes"] == {"passed": 6}
    assert report["calls"] == {"made": 0, "cached": 6}


def test_replay_without_a_remembered_listing_misses(
    pytester: pytest.Pytester, suite: Path, server: LoopbackServer
) -> None:
    """Keys made with a listing cannot be rebuilt without it: an honest replay miss."""
    server.add(*(chat_reply('{"category": "bug"}') for _ in range(6)))
    endpoint = f"--evalmine-endpoint=local={server.url}/v1,free"
    pytester.runpytest(endpoint).assert_outcomes(passed=6)
    import sqlite3

    with sqlite3.connect(pytester.path / ".evalmine" / "cache.sqlite") as db:
        (state,) = db.execute("SELECT state FROM adapter_state WHERE adapter = 'local'").fetchone()
        assert json.loads(state) == {"served": [{"id": "served-model", "meta": {"n_params": 135}}]}
        db.execute("DELETE FROM adapter_state")
    result = pytester.runpytest(endpoint, "--evalmine-record=none")
    result.assert_outcomes(failed=6)
    assert len(server.requests) == 7, "replay sent nothing, not even GET /models"


def test_endpoints_declared_in_the_suite_serve_under_xdist(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    # Issue 28: -n 2 refused a suite's own endpoints ("no adapter for provider 'local' ... on
    # the xdist controller") while the same endpoint given as --evalmine-endpoint ran.
    text = ENDPOINT_SUITE.replace(
        "tasks:", f"endpoints:\n  local: {{base_url: '{server.url}/v1', cost: free}}\ntasks:"
    )
    pytester.makefile(".eval.yaml", small=text)
    # Each process looks the server's models up: the listing to every GET, whoever asks.
    server.respond = lambda received: (
        Reply.json(200, MODELS) if received.method == "GET" else chat_reply('{"category": "bug"}')
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    assert "no adapter for" not in result.stdout.str()
    result.assert_outcomes(passed=6)
    assert len(chat_requests(server)) == 6
