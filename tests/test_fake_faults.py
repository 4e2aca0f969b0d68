"""Injected fake faults (spec: "Fake adapter"): never cached, counted per phase, and applied
only to a request they can break."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_evalmine.adapters.base import Request
from pytest_evalmine.adapters.fake import FakeAdapter, FakeOptions, Fault, parse_faults
from pytest_evalmine.adapters.registry import AdapterRegistry
from pytest_evalmine.run.dispatch import ERROR, OK, Dispatcher
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.store import process_owner

from .conftest import latest_answers, latest_report, open_test_store
from .test_judge_run import JUDGED_SUITE

FAKE = "--evalmine-fake"
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
ANSWER = {"purpose": "answer"}
JUDGING = {"purpose": "judge"}


def complete(adapter: FakeAdapter, **fields: object) -> str:
    return asyncio.run(adapter.complete(Request(model="fake/a", **fields))).text  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["empty_answer", "malformed_json", "schema_violation"])
def test_an_injected_answer_is_never_cached_so_a_clean_rerun_gets_the_real_one(
    pytester: pytest.Pytester, small_suite: Path, kind: str
) -> None:
    """Before: the faulted answers were cached and a rerun without the fault replayed them
    (2 failed items again, 0 calls made)."""
    faulted = pytester.runpytest(FAKE, f"--evalmine-fake-fault={kind},prompt=Classify,count=99")
    faulted.assert_outcomes(passed=2, failed=4)
    assert latest_report(pytester.path)["calls"] == {"made": 6, "cached": 0}
    clean = pytester.runpytest(FAKE)
    clean.assert_outcomes(passed=6)
    assert latest_report(pytester.path)["calls"] == {"made": 4, "cached": 2}
    assert {r["task"] for r in latest_answers(pytester.path) if not r["cached"]} == {"triage"}


def test_schema_violation_waits_for_a_request_with_a_schema() -> None:
    """Before: it fired on a prose request (answering JSON there, which passes) and was
    used up."""
    fault = Fault("schema_violation", count=1)
    adapter = FakeAdapter(FakeOptions(faults=[fault]))
    prose = complete(adapter, prompt="no schema here", context=ANSWER)
    assert fault.fired == 0 and not prose.startswith('"')
    assert complete(adapter, prompt="with schema", schema=SCHEMA, context=ANSWER) == (
        '"not the expected shape"'
    )
    assert fault.fired == 1


def test_a_fault_fires_only_in_its_phase_and_counts_there() -> None:
    """Before: an answers fault with count=N fired N times for the answers and N more for the
    judge (each phase built its own fake with fresh counters, and nothing told them apart)."""
    answers, judging = parse_faults(["empty_answer,count=2", "empty_answer,count=1,phase=judge"])
    adapter = FakeAdapter(FakeOptions(faults=[answers, judging]))
    texts = [complete(adapter, prompt=f"a{i}", context=ANSWER) for i in range(3)]
    verdicts = [complete(adapter, prompt=f"j{i}", context=JUDGING) for i in range(3)]
    assert [t == "" for t in texts] == [True, True, False]
    assert [v == "" for v in verdicts] == [True, False, False]
    assert (answers.fired, judging.fired) == (2, 1)
    # A plain test's request (no context) is an answer.
    assert FakeAdapter(FakeOptions(faults=[Fault("empty_answer")])).options.faults[0].phase == (
        "answers"
    )


def test_an_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="phase 'verdicts': choose from answers, judge"):
        parse_faults(["empty_answer,phase=verdicts"])


def test_through_a_judged_run_an_answers_fault_never_reaches_the_judge(
    pytester: pytest.Pytester,
) -> None:
    """The judge prompt quotes the task prompt, so a prompt filter once matched judge
    requests too: before, the polite pair was excluded as judge_unparseable."""
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)
    fault = "--evalmine-fake-fault=malformed_json,prompt=policy,count=99"
    pytester.runpytest(FAKE, fault)
    report = latest_report(pytester.path)
    assert report["headline"]["exclusions"] == {}
    judged = pytester.runpytest(FAKE, "--evalmine-no-cache", f"{fault},phase=judge")
    judged.assert_outcomes(passed=6)
    exclusions = latest_report(pytester.path)["headline"]["exclusions"]
    assert exclusions == {"fake/beta": {"judge_unparseable": 1}}


def test_another_process_waiting_on_an_injected_answer_is_told_it_is_not_shared(
    store_location: str,
) -> None:
    """An uncached answer cannot travel to another xdist worker; the waiting one says so."""
    store = open_test_store(store_location)
    registry = AdapterRegistry()
    registry.register("fake", lambda: FakeAdapter(FakeOptions(faults=[Fault("empty_answer")])))

    def dispatcher(owner: str) -> Dispatcher:
        return Dispatcher(
            registry=registry,
            store=store,
            prices=load_prices(),
            run_token="run",
            cap_usd=1.0,
            owner=owner,
        )

    first = dispatcher(process_owner())
    planned = first.plan([Request(model="fake/a", prompt="hello")])
    assert first.run(planned)[planned[0].key].status == OK
    assert not store.has(planned[0].key)
    waiting = dispatcher("another-host:1").run(planned)[planned[0].key]
    assert (waiting.status, waiting.error_kind) == (ERROR, "not_shared")
    store.close()
