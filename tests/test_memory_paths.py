"""What a large run keeps in memory (issue 10): one marker per task and model, not per item;
one copy of an item's keywords and user properties for its three reports; no dict left on a
response by serialising it; no outcome kept once every answer has its record. Each holds the
same values as the long way."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from pytest_evalmine.adapters.base import Response, Usage
from pytest_evalmine.plugin.items import EvalItem
from pytest_evalmine.plugin.stash import eval_session

from .conftest import SMALL_SUITE


def test_the_items_of_one_task_and_model_share_one_marker(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    collected, _ = pytester.inline_genitems("--evalmine-fake", "-p", "no:cacheprovider")
    items = [item for item in collected if isinstance(item, EvalItem)]
    marks = {}
    for item in items:
        mark = item.get_closest_marker("evalmine")
        assert mark is not None
        assert mark.kwargs == {
            "suite": "small",
            "task": item.spec.task.id,
            "kind": item.spec.task.kind,
            "model": item.spec.model,
            "provider": "fake",
            "variant": None,  # a plain model; MODEL@VARIANT names its variant here
        }
        marks.setdefault((item.spec.task.id, item.spec.model), set()).add(id(mark))
    # 2 tasks x 2 models; the triage task has two cases, so two items per marker there.
    assert sorted(len(ids) for ids in marks.values()) == [1, 1, 1, 1]
    assert len({next(iter(ids)) for ids in marks.values()}) == 4
    assert len(items) == 6


def test_an_items_three_reports_share_one_copy_of_keywords_and_properties(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    recorder = pytester.inline_run("--evalmine-fake", "-p", "no:cacheprovider")
    reports = recorder.getreports("pytest_runtest_logreport")
    by_item: dict[str, list[pytest.TestReport]] = {}
    for report in reports:
        by_item.setdefault(report.nodeid, []).append(report)
    assert len(by_item) == 6
    first_keywords = []
    for nodeid, (setup, call, teardown) in by_item.items():
        assert [setup.when, call.when, teardown.when] == ["setup", "call", "teardown"]
        assert setup.keywords is call.keywords is teardown.keywords
        assert setup.user_properties is call.user_properties is teardown.user_properties
        # The values pytest gave each report: the item's keywords and our properties.
        name = nodeid.rsplit("::", 1)[1]
        assert {name, "evalmine", "small.eval.yaml"} <= set(call.keywords)
        model = dict(call.user_properties)["evalmine_model"]
        assert name.endswith(f"[{model}]")
        first_keywords.append(call.keywords)
    assert len({id(keywords) for keywords in first_keywords}) == 6


def test_an_item_whose_properties_change_between_reports_keeps_each_copy(
    pytester: pytest.Pytester,
) -> None:
    # Sharing is for equal copies only: a property added during the call is on the call's
    # and teardown's reports, never on the setup's.
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.makeconftest(
        "import pytest\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_runtest_call(item):\n"
        "    item.user_properties.append(('seen', 'call'))\n"
    )
    recorder = pytester.inline_run("--evalmine-fake", "-p", "no:cacheprovider")
    reports = recorder.getreports("pytest_runtest_logreport")
    setup, call, teardown = reports[:3]
    assert ("seen", "call") not in setup.user_properties
    assert ("seen", "call") in call.user_properties
    assert call.user_properties is teardown.user_properties
    assert setup.keywords is call.keywords


def test_serialising_a_response_leaves_nothing_on_it() -> None:
    # vars() gave every cached response and its usage a dict of their own, kept as long as
    # the response (2.6 MB at 20,000 answers).
    if tracemalloc.is_tracing():
        pytest.skip("tracemalloc is already tracing this process")
    responses = [
        Response(text=f"answer {i}", usage=Usage(i, 2 * i), latency_s=0.1) for i in range(2000)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        texts = [response.to_json() for response in responses]
        kept = tracemalloc.get_traced_memory()[0] - before - sum(map(len, texts)) * 1.2
    finally:
        tracemalloc.stop()
    assert json.loads(texts[7])["usage"]["output_tokens"] == 14
    assert kept < 2000 * 40  # a dict per response and usage was 2000 x 2 x 100+ bytes


def test_session_finish_lets_the_outcomes_go_once_every_answer_has_its_record(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    # -x stops after the first failing item: the items that never ran still get their
    # records (from the outcomes) before the outcomes go.
    recorder = pytester.inline_run(
        "--evalmine-fake", "-x", "-p", "no:cacheprovider", "--evalmine-fake-fault=empty_answer"
    )
    config = recorder.getcall("pytest_sessionfinish").session.config
    session = eval_session(config)
    assert session.outcomes == {} and session.specs == {}
    answers = next(Path(pytester.path, "reports", "small").glob("*/answers.jsonl"))
    records = [json.loads(line) for line in answers.read_text().splitlines()]
    assert len(records) == 6
    assert any(not record["item_ran"] for record in records)
