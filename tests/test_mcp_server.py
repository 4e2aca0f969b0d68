"""The MCP server (spec: "MCP server"): every tool and every refusal through the SDK's own
in-process client; the tool listing, the plugin's refusals and a run end to end over real
stdio."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine import exitcodes
from pytest_evalmine.commands.mcp.limits import CEILING_ENV, MAX_COST_ENV, ROOT_ENV, Limits
from pytest_evalmine.commands.mcp.records import NO_GATE_NOTE, Refusal
from pytest_evalmine.commands.mcp.rounding import dollars, kappa, points, seconds, share
from pytest_evalmine.commands.mcp.run_suite import refusal_line
from pytest_evalmine.commands.mcp.server import Tools, build_server
from pytest_evalmine.reports.render import money

from .test_judge_run import JUDGED_SUITE

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TOOLS = {
    "run_suite",
    "compare",
    "last_report",
    "list_suites",
    "list_runs",
    "show_run",
    "merge_run",
}
# The fake never honours `pattern`: every answer fails this schema, so items fail.
FAILING_SUITE = JUDGED_SUITE.replace(
    "category: {enum: [billing, bug, other]}", "category: {type: string, pattern: '^zzz$'}"
)


async def _call(server: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with mcp.Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content["result"]


def call(root: Path, tool: str, **arguments: Any) -> dict[str, Any]:
    return anyio.run(_call, build_server(Limits(root=root.resolve())), tool, arguments)


def over_stdio(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    """The real command, spawned over stdio with the SDK's client: its tool listing and the
    structured results of ``calls``, in order. Its environment holds no provider key (the
    client passes only PATH, HOME and the like), so no call can reach a provider."""
    parameters = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "pytest_evalmine.commands.mcp.server"],
        # PYTHONPATH when set: the package under test, not whichever one is installed.
        env={ROOT_ENV: str(root), "PATH": os.environ.get("PATH", "")}
        | {name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ},
        cwd=str(root),
    )

    async def session() -> tuple[Any, list[Any]]:
        async with mcp.Client(parameters) as client:
            tools = (await client.list_tools()).tools
            results = []
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result.content
                results.append(result.structured_content["result"])
            return tools, results

    return anyio.run(session)


def floats_in(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in floats_in(v)]
    if isinstance(value, list):
        return [f for v in value for f in floats_in(v)]
    return []


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


def assert_rounded(result: dict[str, Any]) -> None:
    """No float carries more than the six decimals of the smallest sum of money the terminal
    prints ($0.000123): none has the tail of an unrounded sum (0.04908990000000001)."""
    numbers = floats_in(result)
    assert numbers
    for number in numbers:
        assert len(repr(number).partition(".")[2]) <= 6, number


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLES, project / "examples")
    (project / "judged.eval.yaml").write_text(JUDGED_SUITE)
    (project / "broken.eval.yaml").write_text("version: 1\nsuite: broken\ntasks: []\n")
    (tmp_path / "outside.eval.yaml").write_text(JUDGED_SUITE)
    return project


@pytest.fixture
def two_runs(pytester: pytest.Pytester) -> Path:
    """Two stored runs of the judged suite, made by the plugin itself (in process)."""
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)
    for _ in range(2):
        pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider").assert_outcomes(passed=6)
    return pytester.path


def test_the_tools_are_listed_with_output_schemas(root: Path) -> None:
    async def listing() -> Any:
        async with mcp.Client(build_server(Limits(root=root))) as client:
            return await client.list_tools()

    tools = anyio.run(listing).tools
    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:
        assert tool.description and tool.output_schema, tool.name
    run_suite = next(t for t in tools if t.name == "run_suite")
    assert set(run_suite.input_schema["properties"]) == {
        "suite",
        "models",
        "max_cost",
        "baseline",
        "no_cache",
        "fake",
    }


def test_run_suite_returns_numbers_and_flags_never_answer_text(root: Path) -> None:
    result = call(root, "run_suite", suite="examples/support-desk.eval.yaml", fake=True)
    assert result["status"] == "completed"
    assert (result["exit_code"], result["exit_meaning"]) == (0, "all items passed")
    # No max_cost: the smaller of the suite's limit ($2.00) and the server default ($1.00).
    assert result["max_cost_usd"] == 1.0
    run = result["run"]
    assert run["cap_usd"] == 1.0
    assert (root / run["report_json"]).is_file() and (root / run["report_md"]).is_file()
    assert run["items"] == 56 and run["outcomes"] == {"passed": 56}
    assert run["failing_node_ids"] == []
    assert [m["model"] for m in run["models"]] == [
        "anthropic/claude-haiku-4-5",
        "google/gemini-2.5-flash",
    ]
    # The fake judge disagrees with the example's labels: flagged, with the reason.
    assert run["headline_eligible"] is False
    assert run["calibration"]["status"] == "below_floor"
    assert {"kappa", "band", "interval"} <= set(run["calibration"])
    assert "below the floor" in run["headline_reason"]
    (rate,) = run["win_rates"]
    assert rate["dagger"] is True and rate["flag"] == "UNCALIBRATED"
    answers = (root / run["report_json"]).parent / "answers.jsonl"
    texts = [json.loads(line)["text"] for line in answers.read_text().splitlines()]
    flat = json.dumps(result)
    assert texts and not any(text in flat for text in texts)
    # The numbers as report.md (the terminal's sections) prints them, digit for digit.
    assert_rounded(result)
    printed = (root / run["report_md"]).read_text()
    assert f"cost: ${run['spent_usd']:.4f} this run" in printed
    assert f"kappa {run['calibration']['kappa']:.2f} [" in printed
    low, high = rate["interval"]
    assert f"{100 * rate['win_rate']:.1f}% [{100 * low:.1f}%, {100 * high:.1f}%]†" in printed
    for model in run["models"]:
        assert f"| ${model['cost_usd']:.4f} | ${model['cost_if_uncached_usd']:.4f} |" in printed
    # The paired comparison in words and numbers, as report.json has it; no gate in this suite.
    stored = json.loads((root / run["report_json"]).read_text())
    (paired,) = result["paired"]
    (want,) = stored["paired"]
    assert (paired["candidate"], paired["baseline"], paired["metric"]) == (
        "google/gemini-2.5-flash",
        "anthropic/claude-haiku-4-5",
        "all_pass",
    )
    assert paired["verdict"] == want["verdict"] and "cannot be told apart" in paired["verdict"]
    assert (paired["cases"], paired["same"], paired["beyond_noise"]) == (28, 28, None)
    assert paired["delta_points"] == pytest.approx(100 * want["delta"], abs=0.05)
    assert paired["interval_points"] == pytest.approx(
        [100 * want["interval"]["low"], 100 * want["interval"]["high"]], abs=0.05
    )
    # Both ends as the verdict line prints them.
    assert "[{:+.1f}, {:+.1f}]".format(*paired["interval_points"]) in paired["verdict"]
    assert paired["noise_floor_points"] is None, "one repeat: the floor is unknown"
    assert "worse_examples" not in paired, "examples hold answers"
    assert result["gate"] == {
        "verdict": "not_applicable",
        "note": NO_GATE_NOTE,
        "metric": None,
        "indifference_points": None,
        "minor_regression_points": None,
        "regression_failures": 0,
        "candidates": [],
    }


def test_run_suite_lists_failing_items_by_node_id_and_returns_the_gate(root: Path) -> None:
    (root / "failing.eval.yaml").write_text(FAILING_SUITE + "gate: {metric: all_pass}\n")
    result = call(root, "run_suite", suite="failing.eval.yaml", fake=True, max_cost=0.5)
    assert result["status"] == "completed"
    assert result["max_cost_usd"] == 0.5
    assert sorted(result["run"]["failing_node_ids"]) == [
        f"failing.eval.yaml::triage::{case}[{model}]"
        for case in ("charged-twice", "login-loop")
        for model in ("fake/alpha", "fake/beta")
    ]
    stored = json.loads((root / result["run"]["report_json"]).read_text())["gate"]
    gate = result["gate"]
    # Both models fail the same two cases: no change, over three cases too few to tell.
    assert gate["verdict"] == stored["verdict"] == "hold"
    assert result["exit_code"] == 1, "a Hold keeps pytest's code"
    assert (gate["note"], gate["metric"], gate["regression_failures"]) == (None, "all_pass", 0)
    assert (gate["indifference_points"], gate["minor_regression_points"]) == (1.0, 2.0)
    (row,) = gate["candidates"]
    (want,) = stored["candidates"]
    assert (row["candidate"], row["verdict"], row["trusted"]) == ("fake/beta", "hold", True)
    assert row["reason"] == want["reason"]
    assert row["delta_points"] == 0.0
    low, high = row["interval_points"]
    assert (low, high) == pytest.approx(
        (want["interval_points"]["low"], want["interval_points"]["high"]), abs=0.05
    )
    assert low < -1 <= high, "the Hold row of the decision table"
    (paired,) = result["paired"]
    assert (paired["cases"], paired["worse"], paired["better"], paired["same"]) == (3, 0, 0, 3)
    assert paired["interval_points"] == [low, high], "the gate reads the paired interval"


def test_a_gate_without_a_candidate_does_not_apply_and_says_why(root: Path) -> None:
    (root / "gated.eval.yaml").write_text(JUDGED_SUITE + "gate: {metric: all_pass}\n")
    result = call(root, "run_suite", suite="gated.eval.yaml", fake=True, models=["fake/alpha"])
    stored = json.loads((root / result["run"]["report_json"]).read_text())["gate"]
    assert result["gate"]["verdict"] == stored["verdict"] == "not_applicable"
    assert result["gate"]["note"] == stored["note"] and "one model" in stored["note"]
    assert (result["gate"]["metric"], result["gate"]["candidates"]) == ("all_pass", [])
    assert result["paired"] == [], "no candidate: nothing to pair"


EXAMPLE = "examples/support-desk.eval.yaml"


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        pytest.param(
            {"suite": "judged.eval.yaml", "fake": True, "max_cost": 0.000001},
            "refused before spending: 6 uncached answer call(s) and 6 judge call(s) of this "
            "selection are estimated at $",
            id="over-the-cap",
        ),
        pytest.param(
            {"suite": EXAMPLE, "fake": True, "models": ["anthropic/claude-nonexistent-9"]},
            "refused before spending: no price for model 'anthropic/claude-nonexistent-9' in "
            "the price table pinned ",
            id="unknown-model",
        ),
        pytest.param(
            # Not the fake adapter: the real providers, whose keys the server does not have.
            {"suite": EXAMPLE},
            "refused before spending: anthropic: environment variable ANTHROPIC_API_KEY is not "
            "set (it holds the API key); google: environment variable GEMINI_API_KEY is not set",
            id="missing-keys",
        ),
    ],
)
def test_each_refusal_before_spending_returns_the_plugins_own_line_over_stdio(
    root: Path, arguments: dict[str, Any], reason: str
) -> None:
    _, (result,) = over_stdio(root, [("run_suite", arguments)])
    assert (result["status"], result["code"]) == ("refused", "refused_before_spending")
    assert result["reason"].startswith(reason), result["reason"]
    assert result["reason"] != exitcodes.meaning(exitcodes.REFUSED_BEFORE_SPENDING)
    assert "\n" not in result["reason"] and not result["reason"].endswith("!")
    assert not (root / "reports").exists(), "nothing ran"


def test_the_refusal_is_read_from_the_runs_last_line() -> None:
    output = (
        "no tests ran in 0.51s\n"
        "! evalmine: refused before spending: over the cap, as pytest.exit says it !\n"
        "evalmine: exit 10: refused before spending: over the cap, as the last line says it\n"
    )
    assert refusal_line(output) == "refused before spending: over the cap, as the last line says it"
    assert refusal_line("no tests ran\n") == exitcodes.meaning(exitcodes.REFUSED_BEFORE_SPENDING)
    assert refusal_line("evalmine: exit 11: stopped over budget\n") == exitcodes.meaning(10)


def test_numbers_are_rounded_as_the_terminal_prints_them() -> None:
    assert dollars(0.04908990000000001) == 0.0491
    assert dollars(0.000123456) == 0.000123, "six decimals below a tenth of a cent"
    assert dollars(0.0) == 0.0 and dollars(None) is None
    assert share(0.51843217) == 0.518 and share(0.07) == 0.07
    assert kappa(-0.33333) == -0.33
    assert seconds(0.1234567) == 0.123
    assert points(0.06597837694040132) == 6.6 and points(-0.0234) == -2.3


@pytest.mark.parametrize(
    ("max_cost", "code"), [(5.01, "over_ceiling"), (0, "bad_request"), (-1, "bad_request")]
)
def test_a_cap_above_the_ceiling_is_refused_not_clamped(
    root: Path, max_cost: float, code: str
) -> None:
    result = call(root, "run_suite", suite="judged.eval.yaml", fake=True, max_cost=max_cost)
    assert (result["status"], result["code"]) == ("refused", code)
    assert not (root / "reports").exists(), "nothing ran"


def test_caps_default_to_the_smaller_limit_and_requests_up_to_the_ceiling(root: Path) -> None:
    tools = Tools(Limits(root=root, max_cost_usd=1.0, ceiling_usd=5.0))
    assert tools.cap_for(2.0, None) == 1.0
    assert tools.cap_for(0.25, None) == 0.25
    assert tools.cap_for(None, None) == 1.0
    assert tools.cap_for(0.25, 5.0) == 5.0, "a request up to the ceiling wins over the suite"
    assert isinstance(tools.cap_for(None, 5.000001), Refusal)


def test_limits_come_from_the_environment(root: Path) -> None:
    limits = Limits.from_env({ROOT_ENV: str(root), MAX_COST_ENV: "0.3", CEILING_ENV: "2"})
    assert (limits.root, limits.max_cost_usd, limits.ceiling_usd) == (root.resolve(), 0.3, 2.0)
    assert Limits.from_env({}).root == Path.cwd().resolve()


def test_suite_errors_are_refusals_with_the_loaders_line(root: Path) -> None:
    result = call(root, "run_suite", suite="broken.eval.yaml", fake=True)
    assert result == {
        "status": "refused",
        "code": "suite_error",
        "reason": "broken.eval.yaml: $.tasks: [] should be non-empty",
    }
    missing = call(root, "run_suite", suite="nope.eval.yaml")
    assert missing["code"] == "not_found"


def traversal_attempts(root: Path) -> list[str]:
    outside = root.parent / "outside.eval.yaml"
    (root / "link.eval.yaml").symlink_to(outside)
    (root / "linked-folder").symlink_to(root.parent)
    return [
        "../outside.eval.yaml",
        "examples/../../outside.eval.yaml",
        str(outside),
        "link.eval.yaml",
        "linked-folder/outside.eval.yaml",
    ]


def test_paths_outside_the_root_are_refused_after_resolving_symlinks(root: Path) -> None:
    for given in traversal_attempts(root):
        for tool, arguments in [
            ("run_suite", {"suite": given, "fake": True}),
            ("list_runs", {"suite": given}),
            ("last_report", {"suite": given}),
        ]:
            result = call(root, tool, **arguments)
            assert (result["status"], result["code"]) == ("refused", "path_outside_root"), (
                tool,
                given,
            )
    for folder in ("..", str(root.parent), "linked-folder"):
        assert call(root, "list_suites", folder=folder)["code"] == "path_outside_root"
    assert not (root / "reports").exists()


def test_run_references_outside_the_root_are_refused(two_runs: Path, tmp_path: Path) -> None:
    root = tmp_path / "empty-root"
    root.mkdir()
    run_dir = sorted((two_runs / "reports" / "small").glob("2*"))[0]
    (root / "escape").symlink_to(run_dir)
    for reference in (str(run_dir), str(run_dir / "report.json"), "escape", "../x"):
        assert call(root, "show_run", run=reference)["code"] == "path_outside_root", reference
        result = call(root, "compare", run_a=reference, run_b=reference)
        assert result["code"] == "path_outside_root"


def test_list_suites_describes_each_and_shows_a_broken_one(root: Path) -> None:
    result = call(root, "list_suites")
    by_path = {s["path"]: s for s in result["suites"]}
    assert set(by_path) == {
        "broken.eval.yaml",
        "examples/support-desk.eval.yaml",
        "judged.eval.yaml",
    }
    example = by_path["examples/support-desk.eval.yaml"]
    assert (example["name"], example["tasks"], example["cases"], example["labels"]) == (
        "support-desk",
        9,
        28,
        18,
    )
    assert by_path["broken.eval.yaml"]["error"].endswith("should be non-empty")
    assert [s["path"] for s in call(root, "list_suites", folder="examples")["suites"]] == [
        "examples/support-desk.eval.yaml"
    ]


def test_list_runs_show_run_last_report_and_compare_read_stored_runs(two_runs: Path) -> None:
    first, second = (p.name for p in sorted((two_runs / "reports" / "small").glob("2*")))
    runs = call(two_runs, "list_runs", suite="small")
    assert [r["run_id"] for r in runs["runs"]] == [first, second]
    assert runs["runs"][0]["items"] == 6
    assert call(two_runs, "list_runs", suite="judged.eval.yaml")["runs"] == runs["runs"]

    last = call(two_runs, "last_report", suite="small")["run"]
    assert last["run_id"] == second
    assert last["calls_cached"] == 6, "the second run replayed the first's answers"
    shown = call(two_runs, "show_run", run=first)["run"]
    assert shown["run_id"] == first and shown["calls_made"] == 6
    by_path = call(two_runs, "show_run", run=f"reports/small/{first}/report.json")["run"]
    assert by_path == shown

    compared = call(two_runs, "compare", run_a=first, run_b=second)
    assert (compared["run_a"], compared["run_b"]) == (first, second)
    assert compared["changes"]["previous_run_id"] == first
    assert compared["changes"]["same_suite"] is True
    assert_rounded(compared)
    assert_rounded(shown)
    cost = compared["changes"]["cost"]["if_uncached_usd"]
    printed = (two_runs / last["report_md"]).read_text()
    # The fake's cost is a fraction of a cent, printed as the terminal prints it (six decimals
    # below a tenth of a cent, four from there).
    assert 0 < cost["now"] < 0.01
    assert f"cost if uncached: {money(cost['before'])} -> {money(cost['now'])}" in printed


def test_compare_pairs_each_model_case_by_case_in_numbers_and_ids(two_runs: Path) -> None:
    first, second = (p.name for p in sorted((two_runs / "reports" / "small").glob("2*")))
    compared = call(two_runs, "compare", run_a=first, run_b=second)
    cases = compared["cases"]
    assert (cases["run_a"], cases["run_b"]) == (first, second)
    assert cases["tasks_changed"] == [] and cases["cases_only_in_a"] == 0
    assert [(m["model_a"], m["model_b"]) for m in cases["models"]] == [
        ("fake/alpha", "fake/alpha"),
        ("fake/beta", "fake/beta"),
    ]
    pair = cases["models"][0]
    # The second run replayed the first's answers: nothing changed, case by case.
    assert (pair["changed_answers"], pair["changed_answers_of"]) == (0, 3)
    (metric,) = pair["metrics"]
    assert (metric["metric"], metric["cases"], metric["delta_points"]) == ("all_pass", 3, 0.0)
    assert metric["verdict"].startswith("B cannot be told apart from A on all checks pass: +0.0")
    assert metric["noise_floor_points"] is None and metric["beyond_noise"] is None
    stored = json.loads((two_runs / "reports" / "small" / second / "report.json").read_text())
    in_report = stored["changes"]["cases"]["models"][0]["metrics"][0]
    assert metric["interval_points"] == [points(in_report["interval"][k]) for k in ("low", "high")]
    assert_rounded(compared)
    answers = (two_runs / "reports" / "small" / second / "answers.jsonl").read_text()
    texts = {json.loads(line)["text"] for line in answers.splitlines()} - {None, ""}
    assert texts and not texts & set(strings_in(compared)), "an answer's text reached the agent"
    across = call(
        two_runs, "compare", run_a=first, run_b=second, models=["A=fake/alpha,B=fake/beta"]
    )
    assert [(m["model_a"], m["model_b"]) for m in across["cases"]["models"]] == [
        ("fake/alpha", "fake/beta")
    ]
    refused = call(two_runs, "compare", run_a=first, run_b=second, models=["fake/gamma"])
    assert (refused["status"], refused["code"]) == ("refused", "bad_request")
    assert "run A has no model 'fake/gamma'" in refused["reason"]


def test_unknown_runs_and_suites_are_refusals(two_runs: Path) -> None:
    assert call(two_runs, "show_run", run="20990101T000000.000Z-x-y")["code"] == "not_found"
    assert call(two_runs, "last_report", suite="nosuch")["code"] == "not_found"
    # A suite no run of which is stored here is a refusal, never an ok with no runs.
    assert call(two_runs, "list_runs", suite="nosuch")["code"] == "not_found"
    assert call(two_runs, "compare", run_a="a", run_b="b")["code"] == "not_found"


def test_end_to_end_over_stdio_with_the_sdk_client(root: Path) -> None:
    """The real command, spawned over stdio: list the tools, every argument described; run the
    example on the fake adapter, read the run back."""
    tools, (ran,) = over_stdio(root, [("run_suite", {"suite": EXAMPLE, "fake": True})])
    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:
        properties = tool.input_schema["properties"]
        assert properties, tool.name
        for name, schema in properties.items():
            assert schema.get("description", "").strip(), f"{tool.name}({name})"
            assert schema["description"] != schema.get("title"), f"{tool.name}({name})"
    assert (ran["status"], ran["exit_code"], ran["run"]["items"]) == ("completed", 0, 56)
    assert ran["paired"] and ran["gate"]["verdict"] == "not_applicable"
    _, (shown,) = over_stdio(root, [("show_run", {"run": ran["run"]["run_id"]})])
    assert {key: shown[key] for key in ("run", "paired", "gate")} == {
        key: ran[key] for key in ("run", "paired", "gate")
    }
