"""The judge's cached prefix (issue 23, "prompt caching for the judge"; spec sections 8 and 14):
everything constant comes first as the system text, the same bytes for every pair of a task;
Anthropic's requests mark it with ``cache_control``; cached input is costed at each provider's
cache rates; the worst case still bounds every call; the report counts the hits. Against
loopback servers that report cached tokens in each provider's wire shape
(tests/prompt_cache_server.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evalmine.adapters.base import Request, Usage
from pytest_evalmine.judging.judge import (
    SYSTEM_PROMPT,
    judge_pairs,
    judge_request,
    judge_system,
)
from pytest_evalmine.judging.pairs import BASELINE_FIRST, CANDIDATE_FIRST, Pair, plan_pairs
from pytest_evalmine.reports.sections import prompt_cache_line
from pytest_evalmine.run.dispatch import Dispatcher
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.run.store import Store
from pytest_evalmine.run.usage import Bounds, checked_usage
from pytest_evalmine.suite.loader import Suite, load_suite

from .conftest import clear_proxies, latest_report, newest_run_dir
from .dispatchers import loopback_registry
from .prompt_cache_server import (
    MIN_PREFIX_TOKENS,
    PromptCacheServer,
    prompt_cache_server,
    reported_cost,
)
from .test_judge_run import JUDGED_SUITE

ENV = "EVALMINE_TEST_CACHE_KEY"
KEY = "sk-" + "ant-" + "c" * 40
BASE, CAND = "fake/base", "fake/cand"
# A rubric long enough for every provider's cache (MIN_PREFIX_TOKENS tokens of four chars).
LONG_RUBRIC = " ".join(["Prefer the answer that states the fix, the cause and the next step."] * 70)
CASES = 6
SUITE = f"""\
version: 1
suite: cached
models: [{BASE}, {CAND}]
judge:
  model: fake/judge
  rubric: "{LONG_RUBRIC}"
tasks:
  - id: reply
    kind: rewrite
    prompt: "Reply to the customer: {{{{ msg }}}}"
    rubric: "Be kind."
    cases:
{"".join(f'      - {{id: c{i}, vars: {{msg: "message {i}"}}}}' + chr(10) for i in range(CASES))}\
  - id: fact
    kind: answer
    prompt: "Answer briefly: {{{{ q }}}}"
    cases:
{"".join(f'      - {{id: q{i}, vars: {{q: "question {i}"}}}}' + chr(10) for i in range(CASES))}\
"""
# The judge model per wire shape; each one's shipped price row has a cache-read rate.
JUDGES = {
    "anthropic": "anthropic/claude-haiku-4-5",
    "openai": "openai/gpt-5-mini",
    "gemini": "google/gemini-2.5-flash",
}


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv(ENV, KEY)


def make_suite(directory: Path) -> Suite:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "cached.eval.yaml"
    path.write_text(SUITE)
    return load_suite(path)


def records_of(suite: Suite) -> list[AnswerRecord]:
    return [
        AnswerRecord(
            suite="cached",
            suite_file="cached.eval.yaml",
            task=task.id,
            kind=task.kind,
            case=case.id,
            model=model,
            outcome="passed",
            text=f"{model} answers {task.id}/{case.id}: " + "details " * 40,
            checks=[{"name": "answer", "passed": True, "message": ""}],
        )
        for task in suite.tasks
        for case in task.cases
        for model in (BASE, CAND)
    ]


def dispatcher_for(tmp_path: Path, url: str, **kwargs: Any) -> Dispatcher:
    return Dispatcher(
        registry=loopback_registry(url, ENV),
        store=Store(tmp_path / "cache.sqlite"),
        prices=load_prices(),
        run_token="run",
        **{"cap_usd": 10.0, "retries": 0, "backoff_s": 0.0, **kwargs},
    )


def judged(tmp_path: Path, shape: str, **kwargs: Any) -> tuple[list[Pair], PromptCacheServer]:
    suite = make_suite(tmp_path)
    records = records_of(suite)
    pairs = plan_pairs(records, [BASE, CAND], {"reply", "fact"})
    with prompt_cache_server(shape) as cache:
        dispatcher = dispatcher_for(tmp_path, cache.url, **kwargs)
        judge_pairs(pairs, records, suite, JUDGES[shape], dispatcher)
    return pairs, cache


def rates(model: str) -> tuple[float, float, float, float]:
    row = load_prices().lookup(model)
    write = row.input if row.cache_write is None else row.cache_write
    return row.input, row.output, row.cached_input or row.input, write


def posts(cache: PromptCacheServer) -> list[dict[str, Any]]:
    return [r.body for r in cache.server.requests if r.method == "POST"]


# --- the prefix ----------------------------------------------------------------------------


def test_the_prefix_is_byte_identical_across_pairs(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    expected = {task: judge_system(suite, task).encode() for task in ("reply", "fact")}
    assert expected["reply"] != expected["fact"]  # the task's own rubric is in it
    assert expected["fact"].startswith(SYSTEM_PROMPT.encode())
    assert len(expected["fact"]) // 4 >= MIN_PREFIX_TOKENS

    @settings(max_examples=60, deadline=None)
    @given(
        task=st.sampled_from(["reply", "fact"]),
        case=st.integers(0, CASES - 1),
        order=st.sampled_from([BASELINE_FIRST, CANDIDATE_FIRST]),
        repeat=st.sampled_from([0, 1]),
        texts=st.tuples(st.text(max_size=200), st.text(max_size=200)),
        models=st.sampled_from([(BASE, CAND), (CAND, BASE), ("fake/x", "fake/y")]),
    )
    def check(
        task: str,
        case: int,
        order: str,
        repeat: int,
        texts: tuple[str, str],
        models: tuple[str, str],
    ) -> None:
        case_id = f"c{case}" if task == "reply" else f"q{case}"
        pair = Pair("cached", task, case_id, *models)
        answers = {models[0]: "<<A>>" + texts[0], models[1]: "<<B>>" + texts[1]}
        request = judge_request("anthropic/claude-haiku-4-5", suite, pair, order, answers, repeat)
        assert (request.system or "").encode() == expected[task]
        assert request.cache_system
        # Everything that varies is in the prompt, after the prefix.
        assert "<<A>>" in request.prompt and "<<B>>" in request.prompt
        assert request.prompt.startswith("## Task given to the assistant\n")

    check()


# --- Anthropic: the marker, the cost at the cache rates, the hits ----------------------------


def test_an_anthropic_judge_marks_the_prefix_and_pays_the_cache_rates(tmp_path: Path) -> None:
    pairs, cache = judged(tmp_path, "anthropic")
    bodies = posts(cache)
    assert len(bodies) == 2 * 2 * CASES  # two tasks, both orders of every pair
    suite = make_suite(tmp_path / "again")
    for body in bodies:
        [block] = body["system"]
        assert block["cache_control"] == {"type": "ephemeral"}
        assert block["text"] in (judge_system(suite, "reply"), judge_system(suite, "fact"))
    # One write per task's prefix, a read for every other call.
    passes = [p for pair in pairs for p in pair.calls]
    writes = [p for p in passes if p.cache_write_tokens]
    reads = [p for p in passes if p.cached_input_tokens]
    assert len(writes) == 2 and len(reads) == len(passes) - 2
    assert sum(p.cached_input_tokens for p in passes) == sum(r[1] for r in cache.reported)
    assert sum(p.cache_write_tokens for p in passes) == sum(r[2] for r in cache.reported)
    # The judge's cost is the provider's bill at the cache rates: read 0.1x, write 1.25x.
    model = JUDGES["anthropic"]
    assert rates(model) == (1.0, 5.0, 0.1, 1.25)
    spent = sum(p.cost_usd for p in passes)
    assert spent == pytest.approx(reported_cost(cache, rates(model)), rel=1e-9)
    uncached = sum(sum(r[:3]) for r in cache.reported) * 1.0 + sum(r[3] for r in cache.reported) * 5
    assert spent < 0.5 * uncached / 1e6
    assert all(pair.judged for pair in pairs)


def test_the_key_never_reaches_the_cache_database(tmp_path: Path) -> None:
    judged(tmp_path, "anthropic")
    for path in tmp_path.glob("cache.sqlite*"):
        assert KEY.encode() not in path.read_bytes()


# --- OpenAI and Gemini: no marker, cached tokens read from their own fields -------------------


@pytest.mark.parametrize("shape", ["openai", "gemini"])
def test_providers_that_cache_on_their_own_get_no_marker(tmp_path: Path, shape: str) -> None:
    pairs, cache = judged(tmp_path, shape)
    raws = [r.raw for r in cache.server.requests if r.method == "POST"]
    assert raws and all(b"cache_control" not in raw for raw in raws)
    passes = [p for pair in pairs for p in pair.calls]
    assert sum(1 for p in passes if p.cached_input_tokens) >= len(passes) - 2
    assert sum(p.cached_input_tokens for p in passes) == sum(r[1] for r in cache.reported)
    spent = sum(p.cost_usd for p in passes)
    assert spent == pytest.approx(reported_cost(cache, rates(JUDGES[shape])), rel=1e-9)


# --- the worst case: a cache write may cost more than input, and the cap holds ----------------


def test_the_reservation_of_a_marked_request_covers_a_cache_write(tmp_path: Path) -> None:
    dispatcher = dispatcher_for(tmp_path, "http://127.0.0.1:9")
    plain = Request("anthropic/claude-haiku-4-5", "hello", system="constant", max_tokens=100)
    marked = dataclasses.replace(plain, cache_system=True)
    planned_plain, planned_marked = dispatcher.plan([plain, marked])
    # The marker changes the bill, never the answer: the same cache key.
    assert planned_plain.key == planned_marked.key
    bound = len("constanthello") + 64
    assert planned_plain.max_cost_usd == pytest.approx((bound * 1.0 + 100 * 5.0) / 1e6)
    assert planned_marked.max_cost_usd == pytest.approx((bound * 1.25 + 100 * 5.0) / 1e6)
    # Every input token written to the cache: believed for the marked call (within what it
    # reserved), clamped for the unmarked one (it asked for no cache).
    written = Usage(cache_write_tokens=bound, output_tokens=100)
    assert planned_marked.checked_usage(written, "x") == written
    clamped = planned_plain.checked_usage(written, "x")
    assert clamped.anomaly is not None and "costs more than the reservation" in clamped.anomaly
    # A judge call known only by size (its answers not yet cached) reserves at the write rate.
    by_size = dispatcher.estimate_by_size(planned_marked, [len("constanthello")])
    assert by_size.worst_case_usd == pytest.approx(planned_marked.max_cost_usd)
    # The estimate assumes no cache: plain input (its tokens at four characters).
    assert by_size.cost_usd == pytest.approx(planned_plain.estimated_cost_usd)


def test_bounds_price_the_dearer_of_input_and_cache_write() -> None:
    row = load_prices().lookup("anthropic/claude-haiku-4-5")
    bounds = Bounds(1000, 10, writes_cache=True)
    assert bounds.worst_case(row) == Usage(cache_write_tokens=1000, output_tokens=10)
    cheap_write = dataclasses.replace(row, cache_write=0.5)
    assert bounds.worst_case(cheap_write) == Usage(input_tokens=1000, output_tokens=10)
    assert Bounds(1000, 10).worst_case(row) == Usage(input_tokens=1000, output_tokens=10)
    # Impossible counts of a marked call are priced at its (write-rate) reservation.
    negative = checked_usage(Usage(input_tokens=-1, output_tokens=3), "x", bounds, row)
    assert row.cost(negative) == pytest.approx(row.cost(bounds.worst_case(row)))


def test_the_cap_holds_while_the_judge_writes_its_prefix(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    records = records_of(suite)
    pairs = plan_pairs(records, [BASE, CAND], {"reply", "fact"})
    probe = dispatcher_for(tmp_path / "probe", "http://127.0.0.1:9")
    texts = {BASE: records[0].text or "", CAND: records[1].text or ""}
    one = judge_request(JUDGES["anthropic"], suite, pairs[0], BASELINE_FIRST, texts)
    # Room for one reservation and a few settled calls, not for all 24.
    cap = 1.6 * probe.plan([one])[0].max_cost_usd
    with prompt_cache_server("anthropic") as cache:
        dispatcher = dispatcher_for(tmp_path, cache.url, cap_usd=cap)
        judge_pairs(pairs, records, suite, JUDGES["anthropic"], dispatcher)
    passes = [p for pair in pairs for p in pair.calls]
    assert 2 <= len(cache.reported) < len(passes)
    assert any(r[2] for r in cache.reported)  # a prefix was written under the cap
    assert dispatcher.store.committed("run") <= cap
    assert dispatcher.store.spent("run") == pytest.approx(sum(p.cost_usd for p in passes))
    assert {pair.excluded for pair in pairs} >= {"judge_not_run"}


# --- the report ----------------------------------------------------------------------------


def test_the_report_counts_the_calls_that_read_the_cached_prefix(
    pytester: pytest.Pytester,
) -> None:
    rubric = "rubric: Prefer the answer a customer would find most helpful."
    assert rubric in JUDGED_SUITE
    pytester.makefile(".eval.yaml", small=JUDGED_SUITE.replace(rubric, f'rubric: "{LONG_RUBRIC}"'))
    with prompt_cache_server("openai") as cache:
        options = (
            f"--evalmine-endpoint=cachedjudge={cache.url}/v1,input=1,output=2,cached_input=0.1",
            "--evalmine-judge=cachedjudge/judge",
        )
        first = pytester.runpytest(*options)
        first.assert_outcomes(passed=6)
        report = latest_report(pytester.path)
        markdown = (newest_run_dir(pytester.path) / "report.md").read_text()
        pytester.runpytest(*options).assert_outcomes(passed=6)
        rerun = latest_report(pytester.path)
        rerun_markdown = (newest_run_dir(pytester.path) / "report.md").read_text()
    made = report["headline"]["judge_calls"]["made"]
    stats = report["headline"]["judge_prompt_cache"]
    assert made == 6 and stats["calls"] == made
    # Both tasks share the suite's rubric: one prefix, written by the first call, read after.
    assert stats["read"] == made - 1
    assert stats["cached_input_tokens"] == sum(r[1] for r in cache.reported) > 0
    assert report["cost"]["judge_spent_usd"] == pytest.approx(
        reported_cost(cache, (1.0, 2.0, 0.1, 1.0)), rel=1e-9
    )
    assert prompt_cache_line(stats) in markdown
    assert f"prompt cache: judge: {made - 1} of {made} calls read the cached prefix" in markdown
    # The terminal prints the scorecard's footer too (wrapped: compared word by word).
    assert " ".join(prompt_cache_line(stats).split()) in " ".join(first.stdout.str().split())
    # A rerun pays nothing: its verdicts come from the answer cache, none from the provider's.
    assert rerun["headline"]["judge_prompt_cache"]["calls"] == 0
    assert "prompt cache:" not in rerun_markdown
    assert len(cache.reported) == made


def test_the_prompt_cache_line() -> None:
    stats = {"calls": 2000, "read": 1840, "cached_input_tokens": 2_944_000, "cache_write_tokens": 0}
    assert prompt_cache_line(stats) == (
        "prompt cache: judge: 1,840 of 2,000 calls read the cached prefix (2,944,000 input "
        "tokens at the cache-read rate, 0 written at the cache-write rate)"
    )
