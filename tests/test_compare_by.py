"""One run against another per group of cases (issue 31, spec: "Compare", ``--by FIELD``):
each group's paired delta by hand on a small pair of runs, computed by the one paired
comparison; a field no case has named with the fields there are; and on real runs of the fake
adapter through ``evalmine compare --by``, ``--evalmine-compare-by`` and the MCP tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.commands.cli import main
from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.reports.case_groups import group_cases
from pytest_evalmine.reports.cross_run import RunSide, cross_run
from pytest_evalmine.reports.cross_run_text import cross_run_lines
from pytest_evalmine.stats.estimators import seed_from
from pytest_evalmine.stats.paired import PairedCase, compare_paired

from .conftest import latest_report
from .test_cross_run import MODEL, RUN_A, RUN_B, report

# t1/c1 and t1/c3 in eu, t1/c2 and t1/c4 in us, t2/d1 without a region (see test_cross_run's
# table of the two runs: c1 -1, c3 -0.5, c2 0, c4 +1, d1 0 per repeat on all-pass).
FIELDS = {
    ("t1", "c1"): {"task": "t1", "region": "eu"},
    ("t1", "c3"): {"task": "t1", "region": "eu"},
    ("t1", "c2"): {"task": "t1", "region": "us"},
    ("t1", "c4"): {"task": "t1", "region": "us"},
    ("t2", "d1"): {"task": "t2"},
}


def by_region() -> dict[str, Any]:
    groups = group_cases("region", FIELDS, "the test's cases")
    return cross_run(
        RunSide(report("run-a", "old"), RUN_A), RunSide(report("run-b", "new"), RUN_B), by=groups
    )


def test_each_group_paired_by_hand() -> None:
    data = by_region()
    assert data["by"] == {"field": "region", "source": "the test's cases"}
    all_pass, score = data["models"][0]["metrics"]
    eu, us, none = all_pass["groups"]
    assert (eu["value"], us["value"], none["value"]) == ("eu", "us", None)
    # eu: c1 A (1,1) B (0,0), c3 A (1,0) B (0,0): 4 paired repeats, (-2 - 1) / 4
    assert (eu["cases"], eu["observations"]) == (2, 4)
    assert eu["a_mean"] == pytest.approx(3 / 4) and eu["b_mean"] == pytest.approx(0.0)
    assert eu["delta"] == pytest.approx(-3 / 4)
    assert (eu["worse"], eu["better"], eu["same"]) == (2, 0, 0)
    # McNemar on the cases' pass/fail: c1 passed in A only; c3 passed in neither every time
    assert (eu["mcnemar"]["a_only"], eu["mcnemar"]["b_only"]) == (1, 0)
    # us: c2 A (1,1) B (1,1), c4 A (0,0) B (1,1): (0 + 2) / 4
    assert us["a_mean"] == pytest.approx(1 / 2) and us["b_mean"] == pytest.approx(1.0)
    assert us["delta"] == pytest.approx(2 / 4)
    assert (us["worse"], us["better"], us["same"]) == (0, 1, 1)
    assert (none["cases"], none["delta"], none["same"]) == (1, 0.0, 1)
    # the groups split the whole comparison: its delta is their observation-weighted mean
    assert sum(g["cases"] for g in all_pass["groups"]) == all_pass["cases"]
    weighted = sum(g["delta"] * g["observations"] for g in all_pass["groups"])
    assert weighted / all_pass["observations"] == pytest.approx(all_pass["delta"])
    # each interval is the one paired comparison's, on the group's cases, seeded by group
    seed = seed_from("suite-old", "suite-new", "cross_run", MODEL, MODEL, "all_pass")
    eu_cases = [PairedCase("t1", "c1", (1.0, 1.0), (0.0, 0.0)),
                PairedCase("t1", "c3", (1.0, 0.0), (0.0, 0.0))]  # fmt: skip
    expected = compare_paired(eu_cases, seed=seed_from(str(seed), "by", "region", "eu"))
    assert expected.interval is not None
    assert eu["interval"]["low"] == pytest.approx(expected.interval.low)
    assert eu["interval"]["high"] == pytest.approx(expected.interval.high)
    # two cases: the interval is wide, and includes 0
    assert -1 <= eu["interval"]["low"] <= eu["delta"] <= 0 <= eu["interval"]["high"] <= 1
    # the checker score covers t1 only (the scored task): no case without a region
    assert [g["value"] for g in score["groups"]] == ["eu", "us"]
    assert score["groups"][0]["delta"] == pytest.approx(-3 / 4)


def test_the_groups_in_words() -> None:
    lines, _ = cross_run_lines(by_region())
    out = "\n".join(lines)
    assert "grouped by region (as the test's cases gives it)" in out
    assert "each group's interval is a 95 % interval of its own, not a joint one" in out
    eu = next(line for line in lines if "region = eu" in line)
    assert eu.strip().startswith("region = eu: 2 cases, A 75.0%, B 0.0%; delta -75.0 pts [")
    assert eu.endswith("worse 2, better 0, same 0: cannot be told apart (the interval includes 0)")
    assert "(no region): 1 cases" in out
    assert "region" not in "\n".join(cross_run_lines(by_region() | {"by": None})[0][:3])


def test_a_field_no_case_has_names_the_fields_there_are() -> None:
    with pytest.raises(EvalmineError) as info:
        group_cases("regoin", FIELDS, "suite 's'")
    assert str(info.value) == (
        "--by regoin: no case of suite 's' has a field 'regoin'; its fields: task, region "
        "(a vars key, task or gold)"
    )


# --- on real runs of the fake adapter --------------------------------------------------------

FAKE = ("--evalmine-fake", "-p", "no:cacheprovider")
CASES = [("c1", "eu"), ("c2", "eu"), ("c3", "eu"), ("c4", "us"), ("c5", "us"), ("c6", "us")]


def region_suite(prompt: str) -> str:
    cases = "".join(
        f'      - {{id: {case}, vars: {{message: "message {case}", region: {region}}}, '
        f"gold: billing}}\n"
        for case, region in CASES
    )
    return (
        "version: 1\nsuite: regions\nmodels: [fake/alpha]\n"
        "defaults: {max_tokens: 64, temperature: 0}\ntasks:\n  - id: triage\n    kind: classify\n"
        f'    prompt: "{prompt}: {{{{ message }}}}"\n'
        "    schema:\n      type: object\n      properties:\n"
        "        category: {enum: [billing, bug, other]}\n"
        "      required: [category]\n      additionalProperties: false\n"
        '    checks: [{json_path: {path: "$.category"}}]\n'
        f"    cases:\n{cases}"
    )


def passed(run: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in (run / "answers.jsonl").read_text().splitlines()]
    return {row["case"]: float(row["outcome"] == "passed") for row in rows}


def test_compare_by_on_real_runs(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = pytester.makefile(".eval.yaml", regions=region_suite("Classify"))
    pytester.runpytest(*FAKE)
    suite.write_text(region_suite("Sort this message"))
    result = pytester.runpytest(*FAKE, "--evalmine-compare-by=region")
    first, second = sorted((pytester.path / "reports" / "regions").glob("2*"))
    a, b = passed(first), passed(second)
    # the plugin's "What changed" per region, by hand from the two runs' answers
    cases = latest_report(pytester.path, "regions")["changes"]["cases"]
    groups = cases["models"][0]["metrics"][0]["groups"]
    for group, region in zip(groups, ("eu", "us"), strict=True):
        chosen = [case for case, where in CASES if where == region]
        assert group["value"] == region and group["cases"] == 3
        by_hand = sum(b[c] - a[c] for c in chosen) / 3
        assert group["delta"] == pytest.approx(by_hand)
        assert group["worse"] == sum(b[c] < a[c] for c in chosen)
        assert group["better"] == sum(b[c] > a[c] for c in chosen)
    assert "region = eu: 3 cases" in result.stdout.str()
    # evalmine compare --by, the same numbers
    capsys.readouterr()
    args = ["compare", "--rootdir", str(pytester.path), first.name, second.name, "--by", "region"]
    assert main([*args, "--json"]) == 0
    cases = json.loads(capsys.readouterr().out)["cases"]
    assert cases["by"] == {"field": "region", "source": "suite file regions.eval.yaml"}
    assert cases["models"][0]["metrics"][0]["groups"] == groups
    assert main(args) == 0
    assert "region = us: 3 cases" in capsys.readouterr().out
    # a field no case has: one line naming the fields, before anything is compared or paid
    assert main([*args[:-1], "regoin"]) != 0
    err = capsys.readouterr().err
    assert "--by regoin: no case of suite file regions.eval.yaml has a field 'regoin'" in err
    assert "its fields: task, gold, message, region" in err
    refused = pytester.runpytest(*FAKE, "--evalmine-compare-by=regoin")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "--evalmine-compare-by regoin: no case of suite 'regions'" in refused.stderr.str()
    assert len(list((pytester.path / "reports" / "regions").glob("2*"))) == 2
    # the MCP compare tool's by
    from pytest_evalmine.commands.mcp.compare import CompareTool
    from pytest_evalmine.commands.mcp.limits import Limits
    from pytest_evalmine.commands.mcp.records import Comparison, Refusal

    tool = CompareTool(Limits(root=pytester.path.resolve()))
    answer = tool.compare(first.name, second.name, by="region")
    assert isinstance(answer, Comparison)
    metric = answer.cases.models[0].metrics[0]
    assert metric.groups is not None
    assert [g.value for g in metric.groups] == ["eu", "us"]
    assert metric.groups[0].delta_points == pytest.approx(100 * groups[0]["delta"], abs=0.05)
    refusal = tool.compare(first.name, second.name, by="regoin")
    assert isinstance(refusal, Refusal) and refusal.code == "bad_request"
    assert "its fields: task, gold, message, region" in refusal.reason
