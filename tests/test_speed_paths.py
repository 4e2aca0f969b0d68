"""The shortcuts taken for speed give the answers of the long way (issue 10): the JSONL case
fast path accepts only what the schema accepts, the judge estimate from sizes equals the one
from built prompts, the session loop keeps one HTTP client across batches, and a response
serialises as before."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_evalmine.adapters.base import Request, Response, Usage
from pytest_evalmine.adapters.builtin import default_registry
from pytest_evalmine.adapters.http import ClientHolder
from pytest_evalmine.engine import finish
from pytest_evalmine.judging.judge import judge_request, judge_text_chars
from pytest_evalmine.judging.pairs import BASELINE_FIRST, CANDIDATE_FIRST, JudgePass, Pair
from pytest_evalmine.plugin import PRELOAD_NUMPY_MAX_ITEMS, preloaded_modules
from pytest_evalmine.run.dispatch import Dispatcher
from pytest_evalmine.run.loop import SessionLoop
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.run.store import Store
from pytest_evalmine.scoring.checks import Check
from pytest_evalmine.suite.loader import load_suite
from pytest_evalmine.suite.validate import _validator, plain_case

from .conftest import COUNTING_CONFTEST, SMALL_SUITE
from .http_server import Reply, running_server

CASE_LINES: list[Any] = [
    {"id": "a"},
    {"id": "case-1", "vars": {"n": 1, "text": "hi", "ok": True, "x": 1.5}},
    {"id": "A.b_c-9", "vars": {}},
    {"id": "x" * 80},
    {"id": "x" * 81},
    {"id": "-lead"},
    {"id": "a b"},
    {"id": "a\n"},
    {"id": ""},
    {"id": 7},
    {"vars": {"n": 1}},
    {"id": "a", "extra": 1},
    {"id": "a", "vars": {"9bad": 1}},
    {"id": "a", "vars": {"ok": None}},
    {"id": "a", "vars": {"ok": [1]}},
    {"id": "a", "vars": {"ok": {"x": 1}}},
    {"id": "a", "vars": []},
    ["id", "a"],
    "a",
    None,
]


@pytest.mark.parametrize("line", CASE_LINES, ids=range(len(CASE_LINES)))
def test_the_case_fast_path_accepts_only_what_the_schema_accepts(line: Any) -> None:
    if plain_case(line):
        assert not list(_validator("case").iter_errors(line))


def test_the_case_fast_path_takes_the_plain_lines() -> None:
    assert all(plain_case(line) for line in CASE_LINES[:4])


SUITE = """\
version: 1
suite: sized
models: [fake/a, fake/b]
judge: {model: fake/judge, rubric: "Prefer the shorter answer."}
defaults: {max_tokens: 50}
tasks:
  - id: reply
    kind: rewrite
    rubric: "Be kind."
    prompt: "Reply to: {{ msg }}"
    cases:
      - {id: late, vars: {msg: "my order is late"}}
      - {id: long, vars: {msg: "a much longer message, with ünïcödé in it"}}
"""


def test_the_judge_size_is_the_built_prompts_size(tmp_path: Path) -> None:
    path = tmp_path / "sized.eval.yaml"
    path.write_text(SUITE)
    suite = load_suite(path)
    for case in suite.tasks[0].cases:
        pair = Pair(suite.name, "reply", case.id, "fake/a", "fake/b")
        answers = {"fake/a": "x" * 17, "fake/b": "é" * 200}
        for order in (BASELINE_FIRST, CANDIDATE_FIRST):
            built = judge_request("fake/judge", suite, pair, order, answers)
            assert judge_text_chars(suite, pair, 217) == len(built.system or "") + len(built.prompt)


def test_an_estimate_by_size_prices_like_the_built_request(tmp_path: Path) -> None:
    dispatcher = Dispatcher(
        registry=default_registry(),
        store=Store(tmp_path / "cache.sqlite"),
        prices=load_prices(),
        run_token="run",
        cap_usd=10.0,
    )
    schema = {"type": "object", "properties": {"w": {"type": "string"}}}
    built = [Request(model="fake/m", prompt="p" * n, system="s", schema=schema) for n in (9, 4001)]
    planned = dispatcher.plan(built)
    by_size = dispatcher.estimate_by_size(planned[0], [10, 4002])
    assert by_size.cost_usd == pytest.approx(sum(p.estimated_cost_usd for p in planned))
    assert (by_size.calls, by_size.cached, by_size.uncached) == (2, 0, 2)


def test_the_session_loop_keeps_one_client_across_batches() -> None:
    holder = ClientHolder("http://127.0.0.1")
    loop = SessionLoop()

    async def client() -> httpx.AsyncClient:
        return holder.get()

    try:
        first, second = loop.run(client()), loop.run(client())
        assert first is second and not first.is_closed
    finally:
        loop.close()
    loop.close()  # twice is harmless


def test_connections_are_reused_across_batches_on_the_session_loop() -> None:
    with running_server() as server:
        server.add(*(Reply.json(200, {"ok": i}) for i in range(6)))
        holder = ClientHolder(server.url)
        loop = SessionLoop()

        async def batch() -> None:
            client = holder.get()
            await asyncio.gather(*(client.get(server.url) for _ in range(3)))

        try:
            loop.run(batch())
            loop.run(batch())
        finally:
            loop.run(holder.aclose())
            loop.close()
        assert len(server.requests) == 6
        assert server.connections <= 3


def test_a_response_serialises_as_its_dataclass_fields() -> None:
    response = Response(
        text="x", usage=Usage(1, 2, 3, 4, False), latency_s=0.5, schema_mode="native"
    )
    fields = dataclasses.asdict(response)
    del fields["rate_limit"]  # the reply's rate-limit headers: for the width, never cached
    assert response.to_json() == json.dumps(fields, sort_keys=True)
    assert Response.from_json(response.to_json()) == response


def test_a_compared_and_judged_run_never_imports_scipy(pytester: pytest.Pytester) -> None:
    # scipy.stats is about 80 MB of every run's peak memory; McNemar is exact integers now.
    pytester.makefile(".eval.yaml", small=SMALL_SUITE + "judge: {model: fake/judge}\n")
    pytester.makeconftest(
        "import sys\n"
        "def pytest_unconfigure():\n"
        "    print('scipy imported:', 'scipy' in sys.modules)\n"
    )
    result = pytester.runpytest_subprocess("--evalmine-fake", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*Paired comparison*", "scipy imported: False"])


def test_the_plain_dicts_equal_dataclasses_asdict() -> None:
    # to_dict skips asdict's deep copy; every field (present and future) must still appear.
    check = Check("exec", False, "exit 1", 0.0, "exit 0", "exit 1", ({"block": 1, "exit": 1},))
    assert check.to_dict() == dataclasses.asdict(check)
    usage = Usage(1, 2, 3, 4, False, "clamped")
    counts = dataclasses.asdict(usage)
    del counts["reported"], counts["anomaly"]
    assert usage.token_counts() == counts
    record = AnswerRecord(
        "s", "s.eval.yaml", "t", "answer", "c", "fake/a", "failed", text="x",
        parsed={"a": [1, {"b": 2}]}, checks=[check.to_dict()], score=0.5, tokens=counts,
        error="e", key="k", usage_anomaly="clamped",
    )  # fmt: skip
    assert record.to_dict() == dataclasses.asdict(record)
    # A copy of the record's __dict__: the fields in their order, and a record given another
    # attribute still gives its fields only.
    assert list(record.to_dict()) == [f.name for f in dataclasses.fields(AnswerRecord)]
    record.outcome = "passed"
    assert record.to_dict() == dataclasses.asdict(record)
    vars(record)["shown"] = "not a field"
    assert record.to_dict() == dataclasses.asdict(record)
    assert AnswerRecord.from_dict(json.loads(json.dumps(record.to_dict()))).to_dict() == (
        json.loads(json.dumps(dataclasses.asdict(record)))
    )
    pair = Pair("s", "t", "c", "fake/a", "fake/b", prompt="p", baseline_checks=[check.to_dict()])
    pair.passes = [
        JudgePass(BASELINE_FIRST, "2", "r", key="k1", cost_usd=0.1),
        JudgePass(CANDIDATE_FIRST, "tie", "r", key="k2", error="e"),
    ]
    expected = dataclasses.asdict(pair)
    for entry, verdict in zip(expected["passes"], ("win", "tie"), strict=True):
        entry["candidate_verdict"] = verdict
    expected.update(score=0.75, judge_score=0.75, category="candidate", flip=False)
    # A single judge's pair writes no jurors (pairs.jsonl as before the panel).
    assert expected.pop("jurors") == {}
    assert pair.to_dict() == {**expected, "outcome": "soft_win"}


FREEZE_PROBE = """
import gc
from pathlib import Path

def pytest_runtest_setup(item):
    with Path("frozen-at-setup.txt").open("a") as probe:
        probe.write(f"{gc.get_freeze_count()}\\n")
"""


def test_a_suite_run_freezes_what_start_up_left_before_its_first_item(
    pytester: pytest.Pytester,
) -> None:
    # The modules and items then stay out of the full collections made while items run and
    # the judge is waited for; a run without suite items leaves the collector alone.
    pytester.makeconftest(FREEZE_PROBE)
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    probe = pytester.path / "frozen-at-setup.txt"
    gc.unfreeze()
    pytester.runpytest("test_plain.py", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert probe.read_text().split() == ["0"]
    probe.unlink()
    pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider").assert_outcomes(passed=7)
    counts = [int(n) for n in probe.read_text().split()]
    assert len(counts) == 7 and min(counts) > 0
    gc.unfreeze()


IMPORT_PROBE = """
import sys
from pathlib import Path

def pytest_runtest_call(item):
    loaded = [name in sys.modules for name in ("numpy", "pytest_evalmine.engine.finish")]
    with Path("loaded-at-call.txt").open("a") as probe:
        probe.write(f"{loaded}\\n")
"""


def test_what_session_finish_imports_is_loaded_while_the_answers_are_awaited(
    pytester: pytest.Pytester,
) -> None:
    # Imported in a thread during the dispatch, so neither the items nor the judge wait for
    # them afterwards. A subprocess: this test process has imported both long ago.
    pytester.makeconftest(IMPORT_PROBE)
    pytester.makefile(".eval.yaml", small=SMALL_SUITE + "judge: {model: fake/judge}\n")
    result = pytester.runpytest_subprocess("--evalmine-fake", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    lines = (pytester.path / "loaded-at-call.txt").read_text().splitlines()
    # Items run as their answers arrive; the import is done when the last answer is.
    assert len(lines) == 6 and lines[-1] == "[True, True]"


def test_a_large_dispatch_leaves_numpy_to_session_finish() -> None:
    # numpy's pages would add to the memory peak of a large run's judging.
    small = preloaded_modules(PRELOAD_NUMPY_MAX_ITEMS)
    large = preloaded_modules(PRELOAD_NUMPY_MAX_ITEMS + 1)
    assert "numpy" in small and "..engine.finish" in small
    assert large == tuple(name for name in small if not name.startswith("numpy"))


def test_a_suite_run_freezes_its_survivors_and_the_next_run_frees_them(
    pytester: pytest.Pytester,
) -> None:
    # pytest's five closing collections then skip what the run keeps to the end; an
    # in-process run after it makes the earlier run's objects collectable again.
    gc.unfreeze()
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider").assert_outcomes(passed=6)
    assert gc.get_freeze_count() > 0
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    pytester.runpytest("test_plain.py", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert gc.get_freeze_count() == 0


def test_session_finish_judges_and_writes_with_what_was_alive_frozen(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Session finish's allocations set off full collections that walked every record and
    # report alive, to free nothing: those are frozen first, the collector stays on (the
    # cycles a judge's exchanges leave are still collected).
    seen: list[tuple[bool, int]] = []
    real = finish.finish_run

    def probed(*args: Any, **kwargs: Any) -> Any:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return real(*args, **kwargs)

    monkeypatch.setattr(finish, "finish_run", probed)
    pytester.makefile(".eval.yaml", small=SMALL_SUITE + "judge: {model: fake/judge}\n")
    pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider").assert_outcomes(passed=6)
    assert len(seen) == 1
    enabled, frozen = seen[0]
    assert enabled and frozen > 0
    assert gc.isenabled()
    gc.unfreeze()


CALLS_AT_EACH_ITEM = """
from pathlib import Path

def pytest_runtest_call(item):
    log = Path("calls.log")
    made = len(log.read_text().splitlines()) if log.exists() else 0
    with Path("calls-at-call.txt").open("a") as probe:
        probe.write(f"{made}\\n")
"""


def test_items_run_while_later_answers_are_still_on_their_way(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One call at a time, each taking 50 ms: the first item runs once its own answer and one
    # more are in, long before the sixth call is even made; the dispatch still ends first.
    pytester.makeconftest(COUNTING_CONFTEST + CALLS_AT_EACH_ITEM)
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    monkeypatch.setenv("TEST_FAKE_LATENCY", "0.05")
    result = pytester.runpytest_subprocess(
        "--evalmine-fake", "--evalmine-concurrency=1", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=6)
    made = [int(n) for n in (pytester.path / "calls-at-call.txt").read_text().split()]
    assert made[0] < 6 and made == sorted(made) and made[-1] == 6
    assert len((pytester.path / "calls.log").read_text().splitlines()) == 6
    assert result.stdout.lines.index(
        next(line for line in result.stdout.lines if line.startswith("small.eval.yaml"))
    ) < result.stdout.lines.index("evalmine: 6/6 answers, 0 cached, $0.0002 spent")


FAILING_STORE = """

from pytest_evalmine.run.store import Store

def pytest_configure(config):
    reserve_each = Store.reserve_each
    calls = []

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise OSError("disk full")
        return reserve_each(self, *args, **kwargs)

    Store.reserve_each = failing
"""


def test_a_dispatch_that_fails_while_streaming_errors_its_items_and_the_run_still_ends(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store fails after the first reservations: the items still waiting get the error,
    # and session finish ends the run with its report instead of an internal error.
    pytester.makeconftest(COUNTING_CONFTEST + FAILING_STORE)
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    monkeypatch.setenv("TEST_FAKE_LATENCY", "0.05")
    result = pytester.runpytest_subprocess(
        "--evalmine-fake", "--evalmine-concurrency=1", "-p", "no:cacheprovider"
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1 and outcomes.get("errors", 0) >= 1
    result.stdout.fnmatch_lines(["*evalmine: the dispatch failed: disk full*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_summary_copied_with_new_notes_keeps_the_figures_already_built() -> None:
    # Session finish replaces latest_note and changes after report.json built the ranking and
    # power (bootstraps, posterior draws): the copy reads those, and builds what was not built.
    from pytest_evalmine.reports.summary import RunSummary

    summary = RunSummary(
        "run", "suite", "s.eval.yaml", "h", ["fake/a"], "mh", [], [], 1.0, "default", None,
        "auto", "routing", "pinned", "pytest", {}, {},
    )  # fmt: skip
    unbuilt = finish._replaced(summary, latest_note="note")
    assert "ranking" not in unbuilt.__dict__ and unbuilt.ranking is None  # one model: built
    built = {"ranking": {"r": 1}, "power": {"p": 1}, "label_suggestions": ["s"]}
    summary.__dict__.update(built)
    copy = finish._replaced(summary, latest_note="note", changes={"cases": []})
    assert (copy.latest_note, copy.changes) == ("note", {"cases": []})
    assert {name: getattr(copy, name) for name in built} == built
    assert dataclasses.replace(summary, latest_note="x").ranking is None  # plain: rebuilt
