"""xdist equality, and the fixtures as a user's conftest.py and plain tests use them."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import (
    COUNTING_CONFTEST,
    SMALL_SUITE,
    RunStore,
    call_count,
    latest_answers,
    latest_report,
)

# Fields that legitimately differ between two runs of the same requests.
# width: the provider's width when the answer was sent, which depends on how the calls were
# spread over the processes, as latency_s does.
# How the calls were spread over the processes: the tries of a call another worker made are
# not known to the worker that reports it (its claim keeps attempts only: spec 11).
RUN_SPECIFIC = {
    "latency_s",
    "cached",
    "cost_usd",
    "attempts",
    "width",
    "sent_tries",
    "billed_tries",
}


def _stable(answers: list[dict]) -> list[dict]:
    return [{k: v for k, v in a.items() if k not in RUN_SPECIFIC} for a in answers]


def test_xdist_makes_the_same_calls_and_writes_the_same_answers(
    pytester: pytest.Pytester,
    small_suite: Path,
    counting: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_store: RunStore,
    request: pytest.FixtureRequest,
) -> None:
    serial = pytester.runpytest_subprocess("-p", "no:cacheprovider", *run_store.options)
    serial.assert_outcomes(passed=6)
    serial_calls = call_count(counting)
    serial_answers = latest_answers(pytester.path)
    serial_report = latest_report(pytester.path)

    counting.unlink()
    # A fresh cache and no evalmine option at all: the workers must still share one run
    # (and, on PostgreSQL, each worker find the store the environment names).
    if run_store.url is None:
        monkeypatch.setenv("EVALMINE_HOME", str(pytester.path / "second-home"))
    else:
        server = request.getfixturevalue("postgres_server")
        monkeypatch.setenv("EVALMINE_STORE", server.url(server.fresh_database()))
    parallel = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    parallel.assert_outcomes(passed=6)
    assert call_count(counting) == serial_calls == 6
    parallel_report = latest_report(pytester.path)
    assert parallel_report["run_id"] != serial_report["run_id"]
    assert _stable(latest_answers(pytester.path)) == _stable(serial_answers)
    assert parallel_report["calls"] == serial_report["calls"] == {"made": 6, "cached": 0}
    assert parallel_report["cost"]["spent_usd"] == pytest.approx(serial_report["cost"]["spent_usd"])


def test_xdist_refuses_over_cap_before_workers_spend(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    result = pytester.runpytest_subprocess("-n", "2", "--evalmine-max-cost=0.0001")
    assert result.ret == 10
    assert call_count(counting) == 0


def test_conftest_can_evaluate_its_own_application(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".eval.yaml",
        app="""
        version: 1
        suite: app
        models: [app/v1, app/v2]
        tasks:
          - id: shout
            kind: rewrite
            prompt: "{{ text }}"
            cases:
              - {id: one, vars: {text: hello}}
              - {id: two, vars: {text: bye}}
        """,
    )
    pytester.makefile(
        ".yaml",
        prices="""
        pinned: "2026-11-30"
        models:
          - {model: app/*, input: 0, output: 0, source: internal, read: "2026-11-30"}
        """,
    )
    pytester.makeconftest(
        """
        import pytest
        from pytest_evalmine.adapters.base import Response, Usage
        from pytest_evalmine.adapters.registry import AdapterRegistry

        class MyApp:
            name = "my-app"
            version = "1"
            def schema_mode(self, request):
                return None
            async def complete(self, request):
                text = request.prompt.upper() if request.model.endswith("v2") else ""
                return Response(text=text, usage=Usage(), latency_s=0.0)
            async def aclose(self):
                pass

        @pytest.fixture(scope="session")
        def evalmine_adapters():
            registry = AdapterRegistry()
            registry.register("app", MyApp)
            return registry
        """
    )
    result = pytester.runpytest("--evalmine-prices=prices.yaml", "-v")
    result.assert_outcomes(passed=2, failed=2)
    answers = {(a["case"], a["model"]): a for a in latest_answers(pytester.path, "app")}
    assert answers[("one", "app/v2")]["text"] == "HELLO"
    assert answers[("two", "app/v1")]["outcome"] == "failed"
    assert latest_report(pytester.path, "app")["cost"]["spent_usd"] == 0


def test_plain_tests_call_models_through_cache_and_budget(
    pytester: pytest.Pytester, counting: Path
) -> None:
    pytester.makepyfile(
        """
        def test_summary_mentions_refund(evalmine, evalmine_cost_limit):
            assert evalmine_cost_limit == 2.0
            first = evalmine.complete("fake/alpha", "Summarise the refund policy", max_tokens=50)
            again = evalmine.complete("fake/alpha", "Summarise the refund policy", max_tokens=50)
            assert first.text == again.text and first.text
            assert [o.cached for o in evalmine.outcomes] == [False, True]
            assert evalmine.outcomes[0].cost_usd > 0 and evalmine.outcomes[1].cost_usd == 0
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)
    assert call_count(counting) == 1
    pytester.runpytest().assert_outcomes(failed=1)  # the first call is now cached too
    assert call_count(counting) == 1


def test_a_plain_test_among_streaming_suite_items_waits_for_their_answers(
    pytester: pytest.Pytester, counting: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The suite's answers stream while its items run; a plain test's own call comes after
    # them on the same dispatcher, never beside them.
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.makepyfile(
        test_plain="""
        def test_plain(evalmine):
            answer = evalmine.complete("fake/alpha", "Another question", max_tokens=50)
            assert answer.text and [o.cached for o in evalmine.outcomes] == [False]
        """
    )
    pytester.makeconftest(
        COUNTING_CONFTEST
        + "\n\ndef pytest_collection_modifyitems(items):\n"
        + "    # the plain test between the suite's first and second item\n"
        + "    plain = [i for i in items if i.name == 'test_plain']\n"
        + "    rest = [i for i in items if i.name != 'test_plain']\n"
        + "    items[:] = rest[:1] + plain + rest[1:]\n"
    )
    monkeypatch.setenv("TEST_FAKE_LATENCY", "0.05")
    result = pytester.runpytest_subprocess(
        "--evalmine-fake", "--evalmine-concurrency=1", "-p", "no:cacheprovider", "-v"
    )
    names = [line.split("::")[-1].split()[0] for line in result.outlines if " PASSED" in line]
    assert names[1] == "test_plain"
    result.assert_outcomes(passed=7)
    calls = counting.read_text().splitlines()
    assert len(calls) == 7 and calls[-1] == "fake/alpha Another question"
    report = latest_report(pytester.path)
    assert report["calls"] == {"made": 6, "cached": 0}
