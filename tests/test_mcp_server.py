"""The MCP server (spec: "MCP server"): every tool and every refusal through the SDK's own
in-process client, and once end to end over real stdio."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.commands.mcp_server import (
    CEILING_ENV,
    MAX_COST_ENV,
    ROOT_ENV,
    Limits,
    Refusal,
    Tools,
    build_server,
)

from .test_judge_run import JUDGED_SUITE

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TOOLS = {"run_suite", "compare", "last_report", "list_suites", "list_runs", "show_run"}
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


def test_the_six_tools_are_listed_with_output_schemas(root: Path) -> None:
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


def test_run_suite_lists_failing_items_by_node_id(root: Path) -> None:
    (root / "failing.eval.yaml").write_text(FAILING_SUITE)
    result = call(root, "run_suite", suite="failing.eval.yaml", fake=True, max_cost=0.5)
    assert (result["status"], result["exit_code"]) == ("completed", 1)
    assert result["max_cost_usd"] == 0.5
    assert sorted(result["run"]["failing_node_ids"]) == [
        f"failing.eval.yaml::triage::{case}[{model}]"
        for case in ("charged-twice", "login-loop")
        for model in ("fake/alpha", "fake/beta")
    ]


def test_a_run_the_plugin_refuses_is_a_typed_refusal(root: Path) -> None:
    result = call(root, "run_suite", suite="judged.eval.yaml", fake=True, max_cost=0.000001)
    assert (result["status"], result["code"]) == ("refused", "refused_before_spending")
    assert result["reason"].startswith("refused before spending: ")
    assert not (root / "reports").exists()


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


def test_unknown_runs_and_suites_are_refusals(two_runs: Path) -> None:
    assert call(two_runs, "show_run", run="20990101T000000.000Z-x-y")["code"] == "not_found"
    assert call(two_runs, "last_report", suite="nosuch")["code"] == "not_found"
    assert call(two_runs, "list_runs", suite="nosuch")["runs"] == []
    assert call(two_runs, "compare", run_a="a", run_b="b")["code"] == "not_found"


def test_end_to_end_over_stdio_with_the_sdk_client(root: Path) -> None:
    """The real command, spawned over stdio: list the tools, run the example on the fake
    adapter, read the run back."""
    parameters = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "pytest_evalmine.commands.mcp_server"],
        env={ROOT_ENV: str(root), "PATH": os.environ.get("PATH", "")},
        cwd=str(root),
    )

    async def session() -> tuple[set[str], dict[str, Any], dict[str, Any]]:
        async with mcp.Client(parameters) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            ran = await client.call_tool(
                "run_suite", {"suite": "examples/support-desk.eval.yaml", "fake": True}
            )
            run_id = ran.structured_content["result"]["run"]["run_id"]
            shown = await client.call_tool("show_run", {"run": run_id})
            return listed, ran.structured_content["result"], shown.structured_content["result"]

    listed, ran, shown = anyio.run(session)
    assert listed == TOOLS
    assert (ran["status"], ran["exit_code"], ran["run"]["items"]) == ("completed", 0, 56)
    assert shown["run"] == ran["run"]
