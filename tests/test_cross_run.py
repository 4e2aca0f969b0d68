"""One run against another, case by case (spec: "Compare", `changes.cases`): a small pair of
runs built by hand whose prompts differ, every number worked out by hand; model pairing; the
words; and through the plugin, `evalmine compare` and an Ollama server on loopback that
records each build's digest."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import t as student_t

from pytest_evalmine.commands.cli import main
from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.reports.cross_run import (
    RunSide,
    cross_run,
    model_pairs,
    parsed_answer,
    recorded_builds,
)
from pytest_evalmine.reports.cross_run_text import NO_FLOOR, cross_run_lines
from pytest_evalmine.run.records import AnswerRecord
from pytest_evalmine.stats.estimators import seed_from
from pytest_evalmine.stats.paired import PairedCase, compare_paired
from pytest_evalmine.stats.proportions import wilson_interval

from .conftest import SMALL_SUITE, latest_report
from .http_server import Received, Reply, running_server

Z = 1.959963984540054
MODEL = "fake/m"


def rec(
    task: str,
    case: str,
    repeat: int,
    outcome: str,
    got: str | None = None,
    *,
    model: str = MODEL,
    text: str = "",
) -> AnswerRecord:
    """An answer record; ``got`` is what a number check read (task t1 has one)."""
    checks = (
        [{"name": "schema", "passed": True, "got": None}, {"name": "number", "got": got}]
        if task == "t1"
        else []
    )
    score = None if outcome not in ("passed", "failed") else float(outcome == "passed")
    return AnswerRecord(
        "s", "s.eval.yaml", task, "answer", case, model, outcome,
        text=text or f"answer {got}", checks=checks, score=score, repeat=repeat,
    )  # fmt: skip


def content(prompt: str) -> dict[str, str]:
    return {"hash": f"h-{prompt}", "prompt": prompt, "system": "s", "params": "p",
            "checks": "c", "schema": "x"}  # fmt: skip


def report(run_id: str, prompt: str, **extra: Any) -> dict[str, Any]:
    tasks = {"t1": content(prompt), "t2": content("same")}
    if run_id == "run-a":
        tasks["t0"] = content("gone")
    return {
        "run_id": run_id,
        "suite": {"name": "s", "hash": f"suite-{prompt}", "task_content": tasks},
        "models": [MODEL],
        "baseline": MODEL,
        "scored_tasks": ["t1"],
        **extra,
    }


# Run A and run B, two repeats each; t1's prompt changed between them. Per case, each
# repeat's all-pass score and the number the check read:
#   t1/c1  A 1 1 (18 18)  B 0 0 (19 19)  delta -1    worse, answer changed
#   t1/c2  A 1 1 (7 7)    B 1 1 (7 7)    delta 0
#   t1/c3  A 1 0 (3 2)    B 0 0 (4 4)    delta -0.5  worse, answer changed; A's repeats differ
#   t1/c4  A 0 0 (5 5)    B 1 1 (5 5)    delta +1    better (same number, now within the check)
#   t2/d1  A 1 1 (hello)  B 1 1 (hello)  delta 0
#   t2/d2  A 1 1          B error error  left out: no answer in B
#   t1/c5  only in A;  t2/d3 only in B
RUN_A = [
    *(rec("t1", "c1", r, "passed", "18") for r in (0, 1)),
    *(rec("t1", "c2", r, "passed", "7") for r in (0, 1)),
    rec("t1", "c3", 0, "passed", "3"),
    rec("t1", "c3", 1, "failed", "2"),
    *(rec("t1", "c4", r, "failed", "5") for r in (0, 1)),
    *(rec("t1", "c5", r, "passed", "1") for r in (0, 1)),
    *(rec("t2", "d1", r, "passed", text="hello") for r in (0, 1)),
    *(rec("t2", "d2", r, "passed", text="hi") for r in (0, 1)),
]
RUN_B = [
    *(rec("t1", "c1", r, "failed", "19") for r in (0, 1)),
    *(rec("t1", "c2", r, "passed", "7") for r in (0, 1)),
    *(rec("t1", "c3", r, "failed", "4") for r in (0, 1)),
    *(rec("t1", "c4", r, "passed", "5") for r in (0, 1)),
    *(rec("t2", "d1", r, "passed", text="hello") for r in (0, 1)),
    *(rec("t2", "d2", r, "error") for r in (0, 1)),
    *(rec("t2", "d3", r, "passed", text="new") for r in (0, 1)),
]


def compared(**extra_b: Any) -> dict[str, Any]:
    return cross_run(
        RunSide(report("run-a", "old"), RUN_A), RunSide(report("run-b", "new", **extra_b), RUN_B)
    )


def test_two_runs_whose_prompts_differ_by_hand() -> None:
    data = compared()
    assert data["tasks"] == {
        "compared_by": "task_content",
        "changed": [{"task": "t1", "fields": ["prompt"], "variants": {}}],
        "only_in_a": ["t0"],
        "only_in_b": [],
    }
    assert data["cases_only_in_a"] == [{"task": "t1", "case": "c5"}]
    assert data["cases_only_in_b"] == [{"task": "t2", "case": "d3"}]
    (pair,) = data["models"]
    assert (pair["model_a"], pair["model_b"]) == (MODEL, MODEL)
    assert pair["excluded"] == {"only_in_run_a": 1, "only_in_run_b": 1, "no_answer_in_b": 1}
    all_pass, score = pair["metrics"]
    assert (all_pass["metric"], score["metric"]) == ("all_pass", "score")
    # all-pass over c1-c4 and d1: 5 cases, 10 paired repeats
    assert (all_pass["cases"], all_pass["observations"]) == (5, 10)
    assert all_pass["a"]["mean"] == pytest.approx(7 / 10)
    assert all_pass["b"]["mean"] == pytest.approx(6 / 10)
    assert all_pass["delta"] == pytest.approx((-2 + 0 - 1 + 2 + 0) / 10)
    assert (all_pass["worse"], all_pass["better"], all_pass["same"]) == (2, 1, 2)
    assert [(e["task"], e["case"]) for e in all_pass["worse_examples"]] == [
        ("t1", "c1"),  # the largest drop first
        ("t1", "c3"),
    ]
    # The parsed answers the check read, A's -> B's (of the first repeat).
    assert [(e["a_answer"], e["b_answer"]) for e in all_pass["worse_examples"]] == [
        ("18", "19"),
        ("3", "4"),
    ]
    assert [(e["case"], e["a_answer"], e["b_answer"]) for e in all_pass["better_examples"]] == [
        ("c4", "5", "5")
    ]
    assert all_pass["mcnemar"]["a_only"] == 1 and all_pass["mcnemar"]["b_only"] == 1
    # The noise floor: A's c3 repeats differ (variance 1/2), every other case's agree, so
    # W = (1/2) / 5 over n = 5 cases, Student's t at 2 degrees of freedom (one case carries
    # the noise); B's repeats always agree: floor 0.
    floor_a = float(student_t.ppf(0.975, 2)) * math.sqrt(2 * (0.5 / 5) / 5)
    assert all_pass["noise_floor"]["a"] == pytest.approx(floor_a)
    assert all_pass["noise_floor"]["b"] == 0.0
    assert all_pass["noise_floor"]["floor"] == pytest.approx(floor_a)
    # Excess over the floor: |delta| - floor, the interval oriented as the drop, less the floor.
    interval = all_pass["interval"]
    assert all_pass["excess"]["value"] == pytest.approx(0.1 - floor_a)
    assert all_pass["excess"]["interval"]["low"] == pytest.approx(-interval["high"] - floor_a)
    assert all_pass["excess"]["interval"]["high"] == pytest.approx(-interval["low"] - floor_a)
    assert all_pass["beyond_noise"] is False
    # The parsed answer changed in c1 and c3 of the 5 cases (c4 kept its number).
    changed = pair["changed_answers"]
    assert (changed["successes"], changed["n"]) == (2, 5)
    low, high = wilson_interval(2, 5).low, wilson_interval(2, 5).high
    assert changed["interval"] == pytest.approx({"low": low, "high": high})
    # Within a run: A's c3 read 3 then 2, B never moved.
    churn = pair["changed_between_repeats"]
    assert (churn["a"]["successes"], churn["a"]["n"]) == (1, 5)
    assert (churn["b"]["successes"], churn["b"]["n"]) == (0, 5)
    # The checker score covers t1 only (the task with checks in both runs).
    assert (score["cases"], score["mcnemar"]) == (4, None)
    assert score["delta"] == pytest.approx((-2 - 1 + 2) / 8)


def test_the_interval_is_the_in_run_paired_statistic_on_the_same_cases() -> None:
    """One place computes the bootstrap: the cross-run comparison feeds it the two runs'
    cases under its documented seed."""
    (pair,) = compared()["models"]
    all_pass = pair["metrics"][0]
    cases = [
        PairedCase("t1", "c1", (1.0, 1.0), (0.0, 0.0)),
        PairedCase("t1", "c2", (1.0, 1.0), (1.0, 1.0)),
        PairedCase("t1", "c3", (1.0, 0.0), (0.0, 0.0)),
        PairedCase("t1", "c4", (0.0, 0.0), (1.0, 1.0)),
        PairedCase("t2", "d1", (1.0, 1.0), (1.0, 1.0)),
    ]
    seed = seed_from("suite-old", "suite-new", "cross_run", MODEL, MODEL, "all_pass")
    expected = compare_paired(cases, seed=seed).interval
    assert expected is not None
    assert all_pass["interval"]["low"] == pytest.approx(expected.low, rel=1e-9)
    assert all_pass["interval"]["high"] == pytest.approx(expected.high, rel=1e-9)
    assert compared()["models"][0]["metrics"][0]["interval"] == all_pass["interval"]  # seeded


def test_a_drop_beyond_the_floor_in_words() -> None:
    # 30 cases, two repeats: A passes all but case 0's second repeat; B fails cases 15-29.
    run_a = [rec("t2", f"c{i:02}", r, "failed" if (i, r) == (0, 1) else "passed")
             for i in range(30) for r in (0, 1)]  # fmt: skip
    run_b = [rec("t2", f"c{i:02}", r, "failed" if i >= 15 else "passed")
             for i in range(30) for r in (0, 1)]  # fmt: skip
    data = cross_run(RunSide(report("run-a", "p"), run_a), RunSide(report("run-b", "p"), run_b))
    (m,) = data["models"][0]["metrics"]
    assert m["delta"] == pytest.approx((30 - 59) / 60)
    assert (m["worse"], m["better"]) == (15, 1)  # case 0: B 1 1 against A 1 0
    floor = float(student_t.ppf(0.975, 2)) * math.sqrt(2 * (0.5 / 30) / 30)  # one flaky case
    assert m["noise_floor"]["floor"] == pytest.approx(floor)
    assert m["excess"]["value"] == pytest.approx(29 / 60 - floor)
    assert m["beyond_noise"] is True
    low, high = m["interval"]["low"], m["interval"]["high"]
    assert high < 0
    excess = m["excess"]["interval"]
    assert m["verdict"] == (
        f"B scores lower than A on all checks pass: {100 * m['delta']:+.1f} points "
        f"[{100 * low:+.1f}, {100 * high:+.1f}] over 30 cases; 15 worse, 1 better; beyond the "
        f"noise floor of {100 * floor:.1f} points by {100 * (29 / 60 - floor):.1f} points "
        f"[{100 * excess['low']:.1f}, {100 * excess['high']:.1f}]"
    )
    assert m["verdict"].startswith("B scores lower than A on all checks pass: -48.3 points [")
    assert ", beyond the noise floor of 14.3 points by 34.0 points [" in m["verdict"].replace(
        "; beyond", ", beyond"
    )


def test_the_floor_from_either_run_and_unknown_without_repeats() -> None:
    single_b = [r for r in RUN_B if r.repeat == 0]
    data = cross_run(RunSide(report("run-a", "p"), RUN_A), RunSide(report("run-b", "p"), single_b))
    m = data["models"][0]["metrics"][0]
    assert m["observations"] == 5  # one paired repeat per case
    assert m["noise_floor"]["a"] == pytest.approx(
        float(student_t.ppf(0.975, 2)) * math.sqrt(2 * (0.5 / 5) / 5)
    )
    assert m["noise_floor"]["b"] is None
    single_a = [r for r in RUN_A if r.repeat == 0]
    data = cross_run(
        RunSide(report("run-a", "p"), single_a), RunSide(report("run-b", "p"), single_b)
    )
    m = data["models"][0]["metrics"][0]
    assert m["noise_floor"] == {"a": None, "b": None, "floor": None}
    assert (m["excess"], m["beyond_noise"]) == (None, None)
    assert m["verdict"].endswith(NO_FLOOR)
    assert data["models"][0]["changed_between_repeats"] == {"a": None, "b": None}


def test_a_case_answered_by_neither_run_is_left_out_by_reason() -> None:
    run_a = [rec("t2", "d1", 0, "passed", text="x"), rec("t2", "d2", 0, "error"),
             rec("t2", "d3", 0, "replay_miss")]  # fmt: skip
    run_b = [rec("t2", "d1", 0, "passed", text="x"), rec("t2", "d2", 0, "not_run_budget"),
             rec("t2", "d3", 0, "passed", text="y")]  # fmt: skip
    data = cross_run(RunSide(report("run-a", "p"), run_a), RunSide(report("run-b", "p"), run_b))
    pair = data["models"][0]
    assert pair["excluded"] == {"no_answer_in_a": 1, "no_answer_in_either": 1}
    assert pair["metrics"][0]["cases"] == 1


def test_model_pairs() -> None:
    assert model_pairs(["a/x", "a/y"], ["a/y", "a/x", "a/z"]) == [("a/x", "a/x"), ("a/y", "a/y")]
    assert model_pairs(["a/x", "a/y"], ["a/y"], ["a/y"]) == [("a/y", "a/y")]
    assert model_pairs(["o/l:8b"], ["o/l:8b-q2_K"], ["A=o/l:8b,B=o/l:8b-q2_K"]) == [
        ("o/l:8b", "o/l:8b-q2_K")
    ]
    assert model_pairs(["o/x"], ["o/y"], ["b=o/y, a=o/x"]) == [("o/x", "o/y")]
    assert model_pairs(["a/x"], ["a/y"]) == []
    with pytest.raises(EvalmineError, match="run B has no model 'a/x'"):
        model_pairs(["a/x"], ["a/y"], ["a/x"])
    with pytest.raises(EvalmineError, match="give both sides"):
        model_pairs(["a/x"], ["a/x"], ["A=a/x"])
    with pytest.raises(EvalmineError, match="'C=a/x' is not A=MODEL or B=MODEL"):
        model_pairs(["a/x"], ["a/x"], ["A=a/x,C=a/x"])


def test_no_shared_model_is_a_note_and_pairs_of_other_builds_compare() -> None:
    b_records = [rec(r.task, r.case, r.repeat, r.outcome, model="fake/q2") for r in RUN_B]
    b_report = report("run-b", "new", models=["fake/q2"])
    a, b = RunSide(report("run-a", "old"), RUN_A), RunSide(b_report, b_records)
    data = cross_run(a, b)
    assert data["models"] == [] and "share no model" in data["note"]
    data = cross_run(a, b, [f"A={MODEL},B=fake/q2"])
    assert data["note"] is None
    assert data["models"][0]["metrics"][0]["delta"] == pytest.approx(-0.1)


def test_parsed_answer_is_what_the_check_read_else_the_json_else_the_text() -> None:
    assert parsed_answer(rec("t1", "c", 0, "passed", "42")) == "42"
    schema_answer = rec("t2", "c", 0, "passed", text='{"a": 1}')
    schema_answer.parsed = {"a": 1}
    assert parsed_answer(schema_answer) == {"a": 1}
    assert parsed_answer(rec("t2", "c", 0, "passed", text="plain")) == "plain"
    long = rec("t2", "c", 0, "passed", text="w" * 500)
    assert parsed_answer(long) == "w" * 500  # compared in full, cut only when shown


def test_win_rates_side_by_side_and_builds_in_the_text() -> None:
    def headline(rate: float, eligible: bool) -> dict[str, Any]:
        row = {"candidate": "fake/c", "win_rate": rate, "interval": {"low": 0.4, "high": 0.7},
               "n": 20, "headline_eligible": eligible}  # fmt: skip
        return {"win_rates": [row]}

    builds = {MODEL: {"adapter": "ollama", "digest": "sha256:" + "b" * 64}}
    data = cross_run(
        RunSide(report("run-a", "old", headline=headline(0.55, True)), RUN_A),
        RunSide(report("run-b", "new", headline=headline(0.48, False), model_builds=builds), RUN_B),
    )
    assert data["win_rates"] == [
        {
            "baseline": MODEL,
            "candidate": "fake/c",
            "a": {"win_rate": 0.55, "interval": {"low": 0.4, "high": 0.7}, "n": 20,
                  "headline_eligible": True},
            "b": {"win_rate": 0.48, "interval": {"low": 0.4, "high": 0.7}, "n": 20,
                  "headline_eligible": False},
        }
    ]  # fmt: skip
    lines, detail = cross_run_lines(data)
    assert lines[0] == "case by case: A = run run-a, B = run run-b"
    assert lines[1] == "tasks changed: t1 (prompt); only in A: t0; only in B: none"
    assert lines[2] == "cases only in A: 1 (t1/c5); only in B: 1 (t2/d3)"
    assert f"A {MODEL} -> B {MODEL} (digest sha256:bbbbbbbbbbbb):" in lines
    assert any(line.startswith("all checks pass: A 70.0% [") for line in lines)
    assert any(line.startswith("verdict: B cannot be told apart from A") for line in lines)
    assert "parsed answer changed: 2/5 40.0% [" in "\n".join(lines)
    assert (
        "left out: only in run A 1, only in run B 1, no answer in B (error, not run or replay "
        "miss) 1"
    ) in lines
    assert lines[-1] == (
        f"win rate of fake/c over {MODEL} (judge): A 55.0% [40.0%, 70.0%] (n=20), "
        "B 48.0% [40.0%, 70.0%] (n=20)† UNCALIBRATED"
    )
    assert not any(line.startswith("cases only") for line in detail)  # in the lines now
    assert 'worse (all_pass): t1/c1: "18" -> "19"' in detail
    assert 'better (all_pass): t1/c4: "5" -> "5"' in detail


def test_a_run_stored_before_task_content_is_compared_by_whole_task_hashes() -> None:
    a, b = report("run-a", "p"), report("run-b", "p")
    for side, hashes in ((a, {"t1": "1", "t2": "2"}), (b, {"t1": "1", "t2": "3"})):
        side["suite"] = {"name": "s", "hash": "h", "task_hashes": hashes}
    data = cross_run(RunSide(a, RUN_A), RunSide(b, RUN_B))
    assert data["tasks"]["compared_by"] == "task_hashes"
    assert data["tasks"]["changed"] == [{"task": "t2", "fields": None, "variants": {}}]


def test_recorded_builds_read_the_adapters_digests() -> None:
    class Prepared:
        name = "ollama"

        def prepared_state(self) -> dict[str, Any]:
            return {"digests": {"llama3.1:8b": "d1", "llama3.1:8b-q2_K": "d2"}}

    class Plain:
        name = "fake"

    def adapter_for(model: str) -> Any:
        if model.startswith("mine/"):
            raise EvalmineError("no adapter")
        return Plain() if model.startswith("fake/") else Prepared()

    models = ["ollama/llama3.1:8b", "ollama/llama3.1:8b-q2_K", "ollama/gone", "fake/a", "mine/x"]
    assert recorded_builds(models, adapter_for) == {
        "ollama/llama3.1:8b": {"adapter": "ollama", "digest": "d1"},
        "ollama/llama3.1:8b-q2_K": {"adapter": "ollama", "digest": "d2"},
    }
    # A prompt variant of a build is that build: its digest is the model's.
    contenders = ["ollama/llama3.1:8b@concise"]
    assert recorded_builds(contenders, adapter_for, lambda c: c.removesuffix("@concise")) == {
        "ollama/llama3.1:8b@concise": {"adapter": "ollama", "digest": "d1"}
    }


# --- through the plugin -------------------------------------------------------------------------


def run_dirs(root: Path) -> list[Path]:
    return sorted((root / "reports" / "small").glob("2*"))


def test_a_changed_prompt_between_two_stored_runs(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    fake = ("--evalmine-fake", "--evalmine-repeat=2", "-p", "no:cacheprovider")
    pytester.runpytest(*fake).assert_outcomes(passed=12)
    suite.write_text(SMALL_SUITE.replace("Rewrite politely:", "Rewrite kindly:"))
    result = pytester.runpytest(*fake)
    result.assert_outcomes(passed=12)
    first, second = run_dirs(pytester.path)
    result.stdout.fnmatch_lines(
        [
            "*tasks changed: polite (prompt); only in A: none; only in B: none*",
            "A fake/alpha -> B fake/alpha:",
            "all checks pass: A 100.0% *, B 100.0% *; delta +0.0",
        ]
    )
    cases = json.loads((second / "report.json").read_text())["changes"]["cases"]
    assert (cases["run_a"], cases["run_b"]) == (first.name, second.name)
    assert [p["model_a"] for p in cases["models"]] == ["fake/alpha", "fake/beta"]
    # The fake answers from the request: polite's one case now answers otherwise, triage's two
    # as before (repeat 0 of the same request, the same text).
    changed = cases["models"][0]["changed_answers"]
    assert (changed["successes"], changed["n"]) == (1, 3)
    assert cases["models"][0]["metrics"][0]["noise_floor"]["floor"] == 0.0
    capsys.readouterr()
    code = main(["compare", "--rootdir", str(pytester.path), first.name, second.name])
    out = capsys.readouterr().out
    assert code == 0
    assert "tasks changed: polite (prompt)" in out
    assert "parsed answer changed: 1/3 33.3% [" in out
    code = main(["compare", "--rootdir", str(pytester.path), first.name, second.name, "--json",
                 "--model", "A=fake/alpha,B=fake/beta"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(p["model_a"], p["model_b"]) for p in data["cases"]["models"]] == [
        ("fake/alpha", "fake/beta")
    ]
    code = main(["compare", "--rootdir", str(pytester.path), first.name, second.name,
                 "--model", "fake/gamma"])  # fmt: skip
    assert code == 4
    assert "run A has no model 'fake/gamma'" in capsys.readouterr().err


def test_evalmine_compare_names_the_run_and_a_missing_answers_file_is_a_note(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    fake = ("--evalmine-fake", "-p", "no:cacheprovider")
    pytester.runpytest(*fake).assert_outcomes(passed=6)
    pytester.runpytest(*fake).assert_outcomes(passed=6)
    first, second = run_dirs(pytester.path)
    pytester.runpytest(*fake, f"--evalmine-compare={first.name}").assert_outcomes(passed=6)
    third = run_dirs(pytester.path)[-1]
    changes = json.loads((third / "report.json").read_text())["changes"]
    assert changes["previous_run_id"] == first.name
    assert changes["cases"]["run_a"] == first.name and changes["cases_note"] is None
    (third / "answers.jsonl").unlink()  # the run latest.json now names
    pytester.runpytest(*fake).assert_outcomes(passed=6)
    changes = latest_report(pytester.path)["changes"]
    assert changes["previous_run_id"] == third.name
    assert changes["cases"] is None
    assert changes["cases_note"] == f"run {third.name} has no answers.jsonl to compare cases with"
    (second / "answers.jsonl").unlink()
    result = pytester.runpytest(*fake, f"--evalmine-compare={second.name}")
    note = f"run {second.name} has no answers.jsonl to compare cases with"
    assert latest_report(pytester.path)["changes"]["cases_note"] == note
    result.stdout.fnmatch_lines([f"case by case: run {second.name} has no*"])


OLLAMA_SUITE = SMALL_SUITE.replace(
    "models: [fake/alpha, fake/beta]", "models: [box/llama3.1:8b, box/llama3.1:8b-q2_K]"
)
DIGESTS = {"llama3.1:8b": "sha256:" + "1" * 64, "llama3.1:8b-q2_K": "sha256:" + "2" * 64}


def ollama(received: Received) -> Reply:
    """A loopback Ollama: its model listing (with each build's digest) and chat answers."""
    if received.method == "GET":
        models = [{"name": n, "model": n, "digest": d} for n, d in DIGESTS.items()]
        return Reply.json(200, {"models": models})
    answer = '{"category": "bug"}' if received.body.get("format") else "Sorry."
    return Reply.json(
        200,
        {
            "model": received.body["model"],
            "message": {"role": "assistant", "content": answer},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 11,
            "eval_count": 5,
        },
    )


def test_two_builds_of_one_model_are_told_apart_by_their_digest(
    pytester: pytest.Pytester,
) -> None:
    """The README's quantized build: two model strings of one Ollama server, each with its
    recorded digest in report.json, report.md and the terminal."""
    pytester.makefile(".eval.yaml", small=OLLAMA_SUITE)
    with running_server() as server:
        server.respond = ollama
        option = f"--evalmine-endpoint=box={server.url},kind=ollama,free"
        result = pytester.runpytest(option, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    report_json = latest_report(pytester.path)
    assert report_json["model_builds"] == {
        f"box/{name}": {"adapter": "ollama", "digest": digest} for name, digest in DIGESTS.items()
    }
    result.stdout.fnmatch_lines(
        ["builds: box/llama3.1:8b digest sha256:111111111111, box/llama3.1:8b-q2_K digest*"]
    )
    markdown = (run_dirs(pytester.path)[-1] / "report.md").read_text()
    assert "Builds: box/llama3.1:8b digest sha256:111111111111" in markdown
