"""End-to-end runs under pytest: cache, replay, faults, outcomes, reports, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_evalmine import exitcodes

from .conftest import cached_keys, call_count, latest_answers, latest_report

FAKE = "--evalmine-fake"


def test_first_run_pays_second_run_replays_at_zero(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    result = pytester.runpytest(FAKE)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        # The items run as their answers arrive; the answers' total is said once they are in.
        ["small.eval.yaml ......*", "evalmine: 6/6 answers, 0 cached, $0.0* spent"]
    )
    first = latest_report(pytester.path)
    assert call_count(counting) == 6
    assert first["calls"] == {"made": 6, "cached": 0}
    assert first["cost"]["spent_usd"] > 0

    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    second = latest_report(pytester.path)
    assert call_count(counting) == 6, "the second run must not call the adapter"
    assert second["calls"] == {"made": 0, "cached": 6}
    assert second["cost"]["spent_usd"] == 0
    assert second["cost"]["if_uncached_usd"] == pytest.approx(first["cost"]["spent_usd"])
    # The report reproduces: the same scorecard apart from what this run paid.
    for a, b in zip(first["scorecard"], second["scorecard"], strict=True):
        a.pop("cost_usd"), b.pop("cost_usd"), a.pop("cached"), b.pop("cached")
        assert a == b


def test_no_cache_calls_again_and_still_writes(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    pytester.runpytest(FAKE, "--evalmine-no-cache").assert_outcomes(passed=6)
    assert call_count(counting) == 12
    assert latest_report(pytester.path)["calls"]["made"] == 6
    assert len(cached_keys(pytester.path)) == 6


def test_replay_only_fails_misses_without_calling(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    pytester.runpytest(FAKE, "-k", "alpha").assert_outcomes(passed=3)
    result = pytester.runpytest(FAKE, "--evalmine-record=none")
    result.assert_outcomes(passed=3, failed=3)
    assert call_count(counting) == 3
    result.stdout.fnmatch_lines(["*replay_miss: no cached answer*"])
    outcomes = latest_report(pytester.path)["outcomes"]
    assert outcomes == {"passed": 3, "replay_miss": 3}


def test_ini_keys_work_like_flags(pytester: pytest.Pytester, small_suite: Path) -> None:
    pytester.makeini("[pytest]\nevalmine_fake = true\nevalmine_models = fake/p,fake/q\n")
    pytester.runpytest().assert_outcomes(passed=6)
    assert latest_report(pytester.path)["models"] == ["fake/p", "fake/q"]


@pytest.mark.parametrize(
    ("fault", "outcomes", "report_outcome"),
    [
        ("rate_limit,count=1", {"passed": 6}, None),
        ("server_error,count=2", {"passed": 6}, None),
        ("timeout,model=fake/beta,prompt=loops,count=9", {"passed": 5, "errors": 1}, "error"),
        ("malformed_json,prompt=twice,count=2", {"passed": 4, "failed": 2}, "failed"),
        ("schema_violation,model=fake/alpha,prompt=twice", {"passed": 5, "failed": 1}, "failed"),
        ("empty_answer,prompt=politely,count=2", {"passed": 4, "failed": 2}, "failed"),
    ],
)
def test_fault_injection_outcomes(
    pytester: pytest.Pytester,
    small_suite: Path,
    fault: str,
    outcomes: dict[str, int],
    report_outcome: str | None,
) -> None:
    result = pytester.runpytest(FAKE, f"--evalmine-fake-fault={fault}")
    result.assert_outcomes(**outcomes)
    assert "Traceback" not in result.stdout.str()
    answers = latest_answers(pytester.path)
    bad = [a for a in answers if a["outcome"] != "passed"]
    assert {a["outcome"] for a in bad} == ({report_outcome} if report_outcome else set())
    if report_outcome == "error":
        assert bad[0]["attempts"] == 3  # one try and two retries
        assert bad[0]["key"] not in cached_keys(pytester.path), "errors are never cached"
    if fault.startswith("malformed_json"):
        assert {c["name"]: c["passed"] for c in bad[0]["checks"]}["parse"] is False
    if fault.startswith("schema_violation"):
        result.stdout.fnmatch_lines(["*check 'schema' failed*"])


def test_failure_report_is_readable(pytester: pytest.Pytester, small_suite: Path) -> None:
    result = pytester.runpytest(FAKE, "--evalmine-fake-fault=malformed_json,prompt=twice,count=1")
    result.stdout.fnmatch_lines(
        [
            "*triage::charged-twice*",
            "check 'parse' failed: the answer is not JSON and holds no fenced block",
            'answer ends: "{"answer": "cut off mid"',
        ]
    )
    assert "def run_eval_item" not in result.stdout.str()


def test_unknown_model_is_refused_before_any_call(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    result = pytester.runpytest("--evalmine-models=fake/alpha,mystery/model-9")
    assert result.ret == exitcodes.REFUSED_BEFORE_SPENDING
    result.stdout.fnmatch_lines(["*no price for model 'mystery/model-9'*known models:*fake/*"])
    assert call_count(counting) == 0


def test_over_cap_is_refused_before_any_call(
    pytester: pytest.Pytester, small_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(
        """
        import pytest
        from pytest_evalmine.adapters.registry import AdapterRegistry

        class MustNotBeCalled:
            name = "fake"
            version = "1"
            def schema_mode(self, request):
                return "native" if request.schema else None
            async def complete(self, request):
                pytest.fail("the adapter was called although the run is over its cap")
            async def aclose(self):
                pass

        @pytest.fixture(scope="session")
        def evalmine_adapters():
            registry = AdapterRegistry()
            registry.register("fake", MustNotBeCalled)
            return registry
        """
    )
    monkeypatch.setenv("EVALMINE_MAX_COST", "0.0001")
    result = pytester.runpytest()
    assert result.ret == exitcodes.REFUSED_BEFORE_SPENDING
    result.stdout.fnmatch_lines(
        ["*refused before spending*cap of $0.000100 (from EVALMINE_MAX_COST)*"]
    )
    assert not (pytester.path / "reports").exists()


def test_cap_precedence_option_over_env_over_suite(
    pytester: pytest.Pytester, small_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = small_suite.read_text().replace("tasks:", "limits: {max_cost_usd: 0.5}\ntasks:")
    small_suite.write_text(text)
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    assert latest_report(pytester.path)["cost"]["cap_usd"] == 0.5
    monkeypatch.setenv("EVALMINE_MAX_COST", "0.75")
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    assert latest_report(pytester.path)["cost"]["cap_source"] == "EVALMINE_MAX_COST"
    pytester.runpytest(FAKE, "--evalmine-max-cost=0.9").assert_outcomes(passed=6)
    assert latest_report(pytester.path)["cost"]["cap_usd"] == 0.9


def test_cap_reached_mid_run_stops_marks_partial_and_exits_11(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    # A tokenizer far less efficient than the estimate's four characters a token: the run
    # passes the estimate, then the real bills reach the cap part way through.
    pytester.makeconftest(
        """
        import dataclasses
        import pytest
        from pytest_evalmine.adapters.registry import AdapterRegistry
        from pytest_evalmine.adapters.fake import FakeAdapter

        class Verbose(FakeAdapter):
            async def complete(self, request):
                response = await super().complete(request)
                usage = dataclasses.replace(
                    response.usage,
                    input_tokens=len(request.prompt.encode()),
                    output_tokens=request.max_tokens,
                )
                return dataclasses.replace(response, usage=usage)

        @pytest.fixture(scope="session")
        def evalmine_adapters():
            registry = AdapterRegistry()
            registry.register("fake", Verbose)
            return registry
        """
    )
    cap = 0.00065
    result = pytester.runpytest(f"--evalmine-max-cost={cap}")
    assert result.ret == exitcodes.STOPPED_OVER_BUDGET
    report = latest_report(pytester.path)
    assert report["partial"] is True
    assert report["cost"]["estimate_usd"] <= cap
    not_run = report["outcomes"]["not_run_budget"]
    assert 0 < not_run < 6
    assert report["calls"]["made"] == 6 - not_run
    assert 0 < report["cost"]["spent_usd"] <= cap
    result.stdout.fnmatch_lines(["*not_run_budget: not run: the cost cap*", "*PARTIAL RUN*"])
    # The live line counts answers as answers (issue 28: "30/30 answers" when 23 never ran).
    result.stdout.fnmatch_lines([f"evalmine: {6 - not_run}/6 answers, {not_run} not run, *"])


def test_report_files(pytester: pytest.Pytester, small_suite: Path) -> None:
    pytester.runpytest(FAKE).assert_outcomes(passed=6)
    suite_dir = pytester.path / "reports" / "small"
    latest = suite_dir / "latest.json"
    assert latest.is_file() and not latest.is_symlink()
    pointer = json.loads(latest.read_text())
    run_dir = suite_dir / pointer["run_id"]
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "answers.jsonl",
        "report.html",
        "report.json",
        "report.md",
    ]
    assert not [p for p in suite_dir.rglob(".*")], "no temporary files left behind"
    report = json.loads((run_dir / "report.json").read_text())
    suite_hash = report["suite"]["hash"]
    assert pointer["run_id"] == report["run_id"]
    assert report["run_id"].split("-")[1] == suite_hash[:8]
    assert report["baseline"] == "fake/alpha"
    answers = latest_answers(pytester.path)
    assert [(a["task"], a["case"], a["model"]) for a in answers][:2] == [
        ("polite", "refund-no", "fake/alpha"),
        ("polite", "refund-no", "fake/beta"),
    ]
    for answer in answers:
        assert answer["text"] and answer["tokens"]["output_tokens"] > 0
        assert answer["cost_usd"] > 0 and answer["cached"] is False
    triage = [a for a in answers if a["task"] == "triage"]
    assert all(a["parsed"]["category"] in ("billing", "bug", "other") for a in triage)
    assert all(a["schema_mode"] == "native" for a in triage)
    markdown = (run_dir / "report.md").read_text()
    assert "## Scorecard" in markdown and "fake/alpha (baseline)" in markdown
    assert "## How to reproduce" in markdown


def test_interrupted_run_resumes_without_paying_twice(
    pytester: pytest.Pytester, small_suite: Path, counting: Path
) -> None:
    env = {**os.environ, "TEST_FAKE_LATENCY": "0.3"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        FAKE,
        "--evalmine-concurrency=1",
        "-p",
        "no:cacheprovider",
    ]
    process = subprocess.Popen(
        command, cwd=pytester.path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while call_count(counting) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    paid = cached_keys(pytester.path)
    assert 1 <= len(paid) < 6
    calls_before = call_count(counting)

    result = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    report = latest_report(pytester.path)
    assert report["calls"] == {"made": 6 - len(paid), "cached": len(paid)}
    assert call_count(counting) == calls_before + 6 - len(paid)
