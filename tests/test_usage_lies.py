"""Issue 20, "Usage a server misreports": a compatible server that lies about usage (negative
counts, no output tokens for an answer, counts up to twice the bounds) never makes a call
cost less than nothing or more than its reservation, and never pushes a run past its cap,
at concurrency 32 or under ``-n 2``. Real loopback servers speaking the Chat Completions
wire format."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine import exitcodes
from pytest_evalmine.adapters.base import Request
from pytest_evalmine.run.dispatch import OK, Dispatcher

from .conftest import SMALL_SUITE, latest_report, newest_run_dir
from .dispatchers import endpoint_dispatcher
from .http_server import Received, Reply, running_server
from .test_endpoints_run import MODELS

ANSWER = '{"category": "bug"}'
# A price whose input dominates: a lie about input moves the cost the most.
PRICES = "input=100,output=1"


def bounds_of(received: Received) -> tuple[int, int]:
    """What the dispatcher reserves for this request, read off the wire: every input byte a
    token plus 64, and max_tokens (the schema is sent natively and counts too)."""
    body = received.body
    text = "".join(str(m["content"]) for m in body["messages"])
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
    schema_bytes = len(str(schema).encode()) if schema is not None else 0
    return len(text.encode()) + schema_bytes + 64, int(body["max_tokens"])


def double(received: Received) -> dict[str, int]:
    """Just inside what the clamp used to believe: twice the input bound, and max_tokens
    plus max(64, max_tokens)."""
    max_input, max_tokens = bounds_of(received)
    return {"prompt_tokens": 2 * max_input, "completion_tokens": max_tokens + max(64, max_tokens)}


LIES: dict[str, Callable[[Received], dict[str, Any]]] = {
    "negative-prompt": lambda r: {"prompt_tokens": -1_000, "completion_tokens": 6},
    "negative-completion": lambda r: {"prompt_tokens": 20, "completion_tokens": -7},
    "negative-cached": lambda r: {
        "prompt_tokens": 20,
        "completion_tokens": 6,
        "prompt_tokens_details": {"cached_tokens": -500_000},
    },
    "zero-output": lambda r: {"prompt_tokens": 20, "completion_tokens": 0},
    "no-output-count": lambda r: {"prompt_tokens": 20},
    "twice-the-bounds": double,
}


def liar(lie: Callable[[Received], dict[str, Any]], content: str = ANSWER) -> Callable:
    def respond(received: Received) -> Reply:
        if received.method == "GET":
            return Reply.json(200, MODELS)
        return Reply.json(
            200,
            {
                "id": "chatcmpl-lie",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": lie(received),
            },
        )

    return respond


def dispatcher_for(tmp_path: Path, url: str, **kwargs: Any) -> Dispatcher:
    return endpoint_dispatcher(tmp_path, f"local={url}/v1,{PRICES}", **kwargs)


SCHEMA = {"type": "object", "properties": {"category": {"type": "string"}}}


@pytest.mark.parametrize("lie", list(LIES))
def test_a_lie_about_usage_is_an_anomaly_and_never_cheaper_than_the_truth_could_be(
    tmp_path: Path, lie: str
) -> None:
    with running_server() as server:
        server.respond = liar(LIES[lie])
        dispatcher = dispatcher_for(tmp_path, server.url)
        [plan] = dispatcher.plan(
            [Request("local/a", "Classify: I was charged twice", max_tokens=100, schema=SCHEMA)]
        )
        [outcome] = dispatcher.run_each([plan])
    assert outcome.status == OK and outcome.response is not None
    usage = outcome.response.usage
    assert usage.anomaly is not None and usage.anomaly.startswith("clamped: ")
    assert min(usage.token_counts().values()) >= 0
    # Never above the reservation, so never past the cap.
    assert outcome.cost_usd <= plan.max_cost_usd
    if lie != "twice-the-bounds":
        # Nothing the server said can be believed: the call is priced at its worst case.
        assert outcome.cost_usd == pytest.approx(plan.max_cost_usd, rel=1e-12)
        assert "priced at the reservation" in usage.anomaly
    assert dispatcher.store.spent("run") == pytest.approx(outcome.cost_usd, rel=1e-12)
    cached = dispatcher.store.hit(plan.key)
    assert cached is not None and cached.answer.response.usage == usage


@pytest.mark.parametrize(
    ("usage", "content"),
    [
        ({"prompt_tokens": 20, "completion_tokens": 6}, ANSWER),
        ({"prompt_tokens": 20, "completion_tokens": 0}, ""),  # nothing said, nothing billed
        ({"prompt_tokens": 20, "completion_tokens": 100}, ANSWER),  # exactly max_tokens
    ],
    ids=["honest", "empty-answer", "at-max-tokens"],
)
def test_honest_usage_is_believed(tmp_path: Path, usage: dict[str, int], content: str) -> None:
    with running_server() as server:
        server.respond = liar(lambda r: usage, content)
        dispatcher = dispatcher_for(tmp_path, server.url)
        [plan] = dispatcher.plan([Request("local/a", "hello", max_tokens=100)])
        [outcome] = dispatcher.run_each([plan])
    assert outcome.response is not None and outcome.response.usage.anomaly is None
    expected = (20 * 100 + usage["completion_tokens"] * 1) / 1e6
    assert outcome.cost_usd == pytest.approx(expected, rel=1e-12)


def test_at_concurrency_32_a_lying_server_never_pushes_spend_past_the_cap(
    tmp_path: Path,
) -> None:
    with running_server() as server:
        server.respond = liar(double)
        probe = dispatcher_for(tmp_path / "probe", server.url)
        requests = [Request("local/a", f"question {i:03d}", max_tokens=100) for i in range(200)]
        reservation = probe.plan(requests[:1])[0].max_cost_usd
        cap = 40.5 * reservation
        dispatcher = dispatcher_for(tmp_path, server.url, cap_usd=cap, concurrency=32)
        outcomes = dispatcher.run_each(dispatcher.plan(requests))
    answered = sum(o.status == OK for o in outcomes)
    spent = dispatcher.store.spent("run")
    overshoot = spent / cap - 1
    assert answered > 0 and dispatcher.budget_exhausted
    assert spent <= cap * (1 + 1e-9), f"spent {spent} over the cap {cap}: {overshoot:+.1%}"
    assert dispatcher.store.committed("run") <= cap * (1 + 1e-9)


# Forty cases of one model, each its own call: more than the cap lets through.
MANY = """\
version: 1
suite: small
models: [local/a]
defaults: {max_tokens: 64, temperature: 0}
tasks:
  - id: polite
    kind: rewrite
    prompt: "Rewrite politely: {{ text }}"
    cases:
""" + "".join(f'      - {{id: c{i:02d}, vars: {{text: "ticket {i:02d}"}}}}\n' for i in range(40))


def test_under_xdist_a_lying_server_never_pushes_spend_past_the_cap(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=MANY)
    with running_server() as server:
        server.respond = liar(double)
        option = f"--evalmine-endpoint=local={server.url}/v1,{PRICES}"
        # The worst case of one call, from a run of one item (then thrown away with its cache).
        probe = pytester.runpytest(option, "-k", "c00", "--evalmine-no-cache")
        assert probe.ret == 0
        one = latest_report(pytester.path)["cost"]["worst_case_usd"]
        cap = 12.5 * one
        result = pytester.runpytest_subprocess(
            option,
            "-n",
            "2",
            "--evalmine-no-cache",
            f"--evalmine-max-cost={cap}",
            "-p",
            "no:cacheprovider",
        )
    assert result.ret == exitcodes.STOPPED_OVER_BUDGET, result.stdout.str()
    report = latest_report(pytester.path)
    token = report["run_id"].rsplit("-", 2)[0]
    with sqlite3.connect(pytester.path / ".evalmine" / "cache.sqlite") as db:
        (spent,) = db.execute(
            "SELECT COALESCE(SUM(spent_usd), 0) FROM ledger WHERE run_token = ? "
            "AND state = 'spent'",
            (token,),
        ).fetchone()
    overshoot = spent / cap - 1
    assert spent > 0
    assert spent <= cap * (1 + 1e-9), f"spent {spent} over the cap {cap}: {overshoot:+.1%}"
    assert report["cost"]["spent_usd"] == pytest.approx(spent, rel=1e-9)


def run_with_liar(
    pytester: pytest.Pytester, suite: str, lie: str, content: str = ANSWER
) -> pytest.RunResult:
    """``suite`` run in process with its ``local`` endpoint at a server answering ``content``
    with usage as ``LIES[lie]`` reports it, priced at ``PRICES``."""
    pytester.makefile(".eval.yaml", small=suite)
    with running_server() as server:
        server.respond = liar(LIES[lie], content=content)
        return pytester.runpytest(f"--evalmine-endpoint=local={server.url}/v1,{PRICES}")


ENDPOINT_SUITE = SMALL_SUITE.replace(
    "models: [fake/alpha, fake/beta]", "models: [local/a, local/b]"
)


@pytest.mark.parametrize("lie", ["negative-prompt", "zero-output"])
def test_the_report_counts_lies_and_prices_them_at_the_worst_case(
    pytester: pytest.Pytester, lie: str
) -> None:
    result = run_with_liar(pytester, ENDPOINT_SUITE, lie)
    result.assert_outcomes(passed=6)
    report = latest_report(pytester.path)
    assert len(report["usage_anomalies"]) == 6
    assert all("priced at the reservation" in a["anomaly"] for a in report["usage_anomalies"])
    cost = report["cost"]
    # Every call priced at its reservation: the spend is the worst case the estimate named.
    assert cost["spent_usd"] == pytest.approx(cost["worst_case_usd"], rel=1e-9)
    assert cost["spent_usd"] > 0


JUDGED_SUITE = SMALL_SUITE.replace(
    "defaults: {max_tokens: 64, temperature: 0}",
    "defaults: {max_tokens: 64, temperature: 0}\njudge: {model: local/judge}",
)


def test_a_judge_that_lies_about_usage_is_listed_with_the_answers_anomalies(
    pytester: pytest.Pytester,
) -> None:
    # Honest answers (the fake adapter), a judge whose server says it read -1,000 tokens:
    # each judge call is clamped and costed at its reservation, and now listed too.
    verdict = '{"winner": "tie", "reason": "both fine"}'
    result = run_with_liar(pytester, JUDGED_SUITE, "negative-prompt", content=verdict)
    result.assert_outcomes(passed=6)
    report = latest_report(pytester.path)
    judged = [a for a in report["usage_anomalies"] if a["call"] == "judge"]
    assert len(judged) == 2 * 3  # three pairs, both orders
    assert {a["model"] for a in judged} == {"local/judge"}
    assert all(a["anomaly"].startswith("clamped: input_tokens -1000 < 0") for a in judged)
    assert [a for a in report["usage_anomalies"] if a["call"] == "answer"] == []
    markdown = (newest_run_dir(pytester.path) / "report.md").read_text()
    assert "impossible usage from the provider, clamped and costed at the clamp: 6 call(s)" in (
        markdown
    )
    assert "(local/judge, judge)" in markdown


CRITERION_SUITE = """\
version: 1
suite: small
models: [fake/alpha]
defaults: {max_tokens: 64}
judge: {model: local/judge}
tasks:
  - id: reply
    kind: rewrite
    prompt: "Reply politely to: {{ text }}"
    judges:
      - {name: polite, criterion: "The reply is polite."}
    cases:
      - {id: one, vars: {text: "message one"}}
      - {id: two, vars: {text: "message two"}}
"""


def test_a_binary_judge_that_lies_about_usage_is_listed_too(pytester: pytest.Pytester) -> None:
    verdict = '{"label": "PASS", "critique": "polite enough"}'
    result = run_with_liar(pytester, CRITERION_SUITE, "negative-prompt", content=verdict)
    result.assert_outcomes(passed=2)
    anomalies = latest_report(pytester.path)["usage_anomalies"]
    assert [(a["case"], a["model"], a["call"]) for a in anomalies] == [
        ("one", "local/judge", "criterion"),
        ("two", "local/judge", "criterion"),
    ]
    verdicts = (newest_run_dir(pytester.path) / "verdicts.jsonl").read_text()
    assert verdicts.count('"usage_anomaly": "clamped: input_tokens -1000 < 0') == 2
