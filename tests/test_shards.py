"""Shards and merge (docs/spec.md "Shards", "Merge"): --evalmine-shard=K/N keeps a stable
slice of the items, each shard writes a partial run under --evalmine-run-name, and
`evalmine merge NAME` builds the one run, equal to a single process's over the same answers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evalmine import exitcodes
from pytest_evalmine.engine.shards import shard_of, split
from pytest_evalmine.options import SHARD_INDEX_ENV, Shard, run_name_from, shard_from

from .floats import RERUN_TOLERANCE

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

SHARDY_SUITE = """\
version: 1
suite: shardy
models: [fake/alpha, fake/beta]
defaults: {max_tokens: 64}
judge:
  model: fake/judge
  rubric: Prefer the reply a customer would find most helpful.
  calibration: {min_kappa: 0.4, min_labels: 3, min_pairs: 3, on_below_floor: flag}
  criteria: {min_labels_per_class: 1, min_recall: 0.0}
tasks:
  - id: reply
    kind: rewrite
    prompt: "Reply politely to: {{ text }}"
    judges:
      - {name: polite, criterion: "The reply is polite."}
    cases:
      - {id: c0, vars: {text: my parcel is late}}
      - {id: c1, vars: {text: I was charged twice}}
      - {id: c2, vars: {text: the app crashes}}
      - {id: c3, vars: {text: how do I reset my password}}
      - {id: c4, vars: {text: cancel my order}}
      - {id: c5, vars: {text: where is my refund}}
      - {id: c6, vars: {text: change my address}}
      - {id: c7, vars: {text: the invoice is wrong}}
  - id: tag
    kind: answer
    prompt: "One word for: {{ text }}"
    checks: [{contains: {value: a}}]
    cases:
      - {id: t0, vars: {text: billing}}
      - {id: t1, vars: {text: shipping}}
      - {id: t2, vars: {text: login}}
      - {id: t3, vars: {text: refund}}
labels:
  - {task: reply, case: c0, baseline: fake/alpha, candidate: fake/beta, prefer: candidate}
  - {task: reply, case: c1, baseline: fake/alpha, candidate: fake/beta, prefer: baseline}
  - {task: reply, case: c2, baseline: fake/alpha, candidate: fake/beta, prefer: candidate}
  - {task: tag, case: t0, baseline: fake/alpha, candidate: fake/beta, prefer: baseline}
"""
# The tag task a regression task whose check no answer passes: every run exits 14.
FAILING_SUITE = SHARDY_SUITE.replace(
    "    kind: answer\n", "    kind: answer\n    regression: true\n"
).replace("{contains: {value: a}}", "{contains: {value: zzzz-never}}")

# What a run owns and a merged run of the same answers may differ in: its id and time, the
# command, the name and the partials it came from, and the widths its processes used.
RUN_OWN = {"run_id", "created_utc", "command", "run_name", "merged_from", "concurrency"}
RUN_ID = re.compile(r"\d{8}T\d{6}\.\d{3}Z_[0-9a-f]{6}-[0-9a-f]{8}-[0-9a-f]{8}")


def masked(value: Any) -> Any:
    """report.json without what belongs to the run itself (``RUN_OWN``), run ids masked in
    every string (the power section names the run it measured)."""
    if isinstance(value, dict):
        return {k: masked(v) for k, v in value.items() if k not in RUN_OWN}
    if isinstance(value, list):
        return [masked(v) for v in value]
    if isinstance(value, str):
        return RUN_ID.sub("<run id>", value)
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, floats within the rerun tolerance."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [
            d
            for k in keys
            for d in differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return [] if abs(a - b) <= RERUN_TOLERANCE * max(1.0, abs(a)) else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r:.80} != {b!r:.80}"]


def run_pytest(root: Path, home: Path, *args: str, env: dict[str, str] | None = None) -> int:
    """One pytest process over the project ``root`` (a separate process, as a shard is)."""
    environment = {**os.environ, "EVALMINE_HOME": str(home)}
    environment.pop(SHARD_INDEX_ENV, None)
    environment.update(env or {})
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--evalmine-fake"]
    done = subprocess.run(
        [*command, *args], cwd=root, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode not in (3, 4), done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode


def run_shards(
    root: Path, home: Path, target: str, *args: str, name: str, shards: Sequence[int], of: int
) -> list[int]:
    """Each shard ``K/of`` of ``shards`` as its own pytest process over ``target``, a partial
    run named ``name``: their exit codes, in order."""
    return [
        run_pytest(
            root, home, target, *args, f"--evalmine-shard={k}/{of}", f"--evalmine-run-name={name}"
        )
        for k in shards
    ]


def evalmine(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_evalmine.commands.cli", *args, "--rootdir", str(root)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def reports(root: Path, report_dir: str, suite: str) -> list[dict[str, Any]]:
    folder = root / report_dir / suite
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*/report.json"))]


def merged(root: Path, report_dir: str, suite: str) -> dict[str, Any]:
    (report,) = [r for r in reports(root, report_dir, suite) if r["merged_from"]]
    return report


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES, root / "examples")
    (root / "examples" / "shardy.eval.yaml").write_text(SHARDY_SUITE)
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


# selection ----------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(
        st.tuples(st.text(max_size=8), st.text(max_size=8), st.text(max_size=8)), max_size=40
    ),
    count=st.integers(min_value=1, max_value=8),
)
def test_the_shards_partition_the_items_and_agree_on_every_call(
    keys: list[tuple[str, str, str]], count: int
) -> None:
    kept = [split(keys, lambda key: key, Shard(index, count))[0] for index in range(1, count + 1)]
    assert sorted(k for shard in kept for k in shard) == sorted(keys), "each item in one shard"
    for index, shard in enumerate(kept, start=1):
        assert all(shard_of(key, count) == index for key in shard)
        assert split(keys, lambda key: key, Shard(index, count))[0] == shard, "stable"


def test_the_shard_is_sha256_of_suite_task_and_case_not_pythons_hash() -> None:
    import hashlib

    digest = hashlib.sha256(b'["shardy","reply","c0"]').digest()
    assert shard_of(("shardy", "reply", "c0"), 7) == int.from_bytes(digest, "big") % 7 + 1
    # In a process with another hash seed, the same shard.
    code = "from pytest_evalmine.engine.shards import shard_of; print(shard_of(('s','t','c'), 5))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": ":".join(sys.path)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert seen == {str(shard_of(("s", "t", "c"), 5))}


@pytest.mark.parametrize(
    ("spec", "environ", "message"),
    [
        ("0/3", {}, "shard 0 is not between 1 and 3"),
        ("4/3", {}, "shard 4 is not between 1 and 3"),
        ("1/0", {}, "N must be at least 1"),
        ("a/3", {}, "is not K/N or auto/N"),
        ("1/x", {}, "is not K/N or auto/N"),
        ("2", {}, "is not K/N or auto/N"),
        ("-1/3", {}, "is not K/N or auto/N"),
        ("auto/3", {}, "auto needs JOB_COMPLETION_INDEX"),
        ("auto/3", {SHARD_INDEX_ENV: "3"}, "shard 4 is not between 1 and 3"),
        ("auto/3", {SHARD_INDEX_ENV: "one"}, "is not a whole number"),
    ],
)
def test_bad_shard_specs_are_refused_naming_the_option(
    spec: str, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        shard_from(spec, "nightly", environ)


def test_auto_reads_the_zero_based_job_completion_index() -> None:
    assert shard_from("auto/4", "n", {SHARD_INDEX_ENV: "0"}) == Shard(1, 4)
    assert shard_from("auto/4", "n", {SHARD_INDEX_ENV: "3"}) == Shard(4, 4)
    assert shard_from(" 2/4 ", "n", {}) == Shard(2, 4)
    assert shard_from(None, None, {}) is None


def test_a_shard_needs_a_run_name_and_a_run_name_is_a_slug() -> None:
    with pytest.raises(ValueError, match="needs --evalmine-run-name"):
        shard_from("1/2", None, {})
    for bad in ("", "has space", "-lead", "a/b", "x" * 65, "nightly~1"):
        with pytest.raises(ValueError, match="--evalmine-run-name"):
            run_name_from(bad)
    assert run_name_from("nightly-2024.06_01") == "nightly-2024.06_01"


def test_bad_options_stop_pytest_with_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", shardy=SHARDY_SUITE)
    for args, message in [
        (["--evalmine-shard=4/3", "--evalmine-run-name=n"], "shard 4 is not between 1 and 3"),
        (["--evalmine-shard=1/3"], "needs --evalmine-run-name"),
        (["--evalmine-run-name=no good"], "is not a run name"),
    ]:
        result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider", *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert message in result.stderr.str()


# partial runs -------------------------------------------------------------------------------
def test_a_shard_runs_its_slice_and_writes_a_partial_run(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    code = run_pytest(
        project,
        home,
        "examples/shardy.eval.yaml",
        "--evalmine-run-name=n1",
        "--evalmine-shard=auto/3",
        env={SHARD_INDEX_ENV: "1"},
    )
    assert code == 0
    (report,) = reports(project, "reports", "shardy")
    assert report["run_name"] == "n1" and report["shard"] == {"index": 2, "count": 3}
    assert report["merged_from"] is None
    expected = {
        (task, case)
        for task, cases in (
            ("reply", [f"c{i}" for i in range(8)]),
            ("tag", [f"t{i}" for i in range(4)]),
        )
        for case in cases
        if shard_of(("shardy", task, case), 3) == 2
    }
    answers = (project / "reports" / "shardy").glob("*/answers.jsonl")
    rows = [json.loads(line) for path in answers for line in path.read_text().splitlines()]
    assert {(r["task"], r["case"]) for r in rows} == expected
    assert sorted(r["model"] for r in rows) == sorted(["fake/alpha", "fake/beta"] * len(expected))
    assert not (project / "reports" / "shardy" / "latest.json").exists(), "a partial is no run"
    assert "shard 2/3 of run n1" in report["latest_note"]
    run_dir = next((project / "reports" / "shardy").glob("*/report.md")).read_text()
    assert "SHARD 2 OF 3" in run_dir


def test_xdist_workers_and_the_controller_agree_on_the_slice(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makefile(".eval.yaml", shardy=SHARDY_SUITE)
    args = ["--evalmine-fake", "-p", "no:cacheprovider", "--evalmine-run-name=x"]
    alone = pytester.runpytest(*args, "--evalmine-shard=1/3")
    alone_answers = _answer_cases(pytester.path)
    shutil.rmtree(pytester.path / "reports")
    spread = pytester.runpytest_subprocess(*args, "--evalmine-shard=1/3", "-n", "2")
    assert alone.ret == spread.ret == 0
    assert _answer_cases(pytester.path) == alone_answers
    passed = alone.parseoutcomes()["passed"]
    assert spread.parseoutcomes()["passed"] == passed == len(alone_answers)


def _answer_cases(root: Path) -> list[tuple[str, str, str]]:
    rows = [
        json.loads(line)
        for path in (root / "reports" / "shardy").glob("*/answers.jsonl")
        for line in path.read_text().splitlines()
    ]
    return sorted((r["task"], r["case"], r["model"]) for r in rows)


# merge --------------------------------------------------------------------------------------
def test_a_merged_run_equals_a_single_process_run_over_the_same_answers(
    project: Path, tmp_path: Path
) -> None:
    """Both from the cache one cold run filled: the single run's report.json and the merged
    run's agree on every figure, run ids, times, command and widths masked."""
    home = tmp_path / "home"
    assert run_pytest(project, home, "examples", "--evalmine-report-dir=cold") == 0
    assert run_pytest(project, home, "examples", "--evalmine-report-dir=single") == 0
    sharded = "--evalmine-report-dir=sharded"
    codes = run_shards(project, home, "examples", sharded, name="nightly", shards=(1, 2, 3), of=3)
    assert codes == [0, 0, 0]
    done = evalmine(project, "merge", "nightly", "--report-dir=sharded", "--junitxml=junit.xml")
    assert done.returncode == 0, done.stderr
    for suite in ("support-desk", "shardy"):
        (single,) = reports(project, "single", suite)
        whole = merged(project, "sharded", suite)
        partials = [r for r in reports(project, "sharded", suite) if r["shard"]]
        assert whole["merged_from"] == [p["run_id"] for p in partials]
        assert whole["run_name"] == "nightly" and whole["shard"] is None
        assert whole["items"] == sum(p["items"] for p in partials) == single["items"]
        assert differences(masked(single), masked(whole)) == [], suite
        pointer = json.loads((project / "sharded" / suite / "latest.json").read_text())
        assert pointer["run_id"] == whole["run_id"], "the merged run is the latest"
    # Spend: the cold run paid; the shards' partials sum to what the merged run says.
    cold = reports(project, "cold", "shardy")[0]
    assert cold["cost"]["spent_usd"] > 0
    assert single["cost"]["spent_usd"] == pytest.approx(0.0)
    junit = (project / "junit.xml").read_text()
    assert junit.count("<testcase ") == 56 + 24
    assert 'name="evalmine.shardy.run_id"' in junit


def test_merge_sums_what_the_shards_spent(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    suite = "examples/shardy.eval.yaml"
    assert run_shards(project, home, suite, name="paid", shards=(1, 2), of=2) == [0, 0]
    partials = reports(project, "reports", "shardy")
    assert evalmine(project, "merge", "paid").returncode == 0
    whole = merged(project, "reports", "shardy")
    spent = sum(p["cost"]["spent_usd"] for p in partials)
    assert spent > 0 and whole["cost"]["spent_usd"] == pytest.approx(spent, rel=1e-9)
    assert whole["cost"]["judge_spent_usd"] == pytest.approx(
        sum(p["cost"]["judge_spent_usd"] for p in partials), rel=1e-9
    )


def test_merge_refuses_naming_the_missing_shard_then_merges_once_it_ran(
    project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    suite = "examples/shardy.eval.yaml"
    run_shards(project, home, suite, name="n", shards=(1, 3), of=3)
    refused = evalmine(project, "merge", "n")
    assert refused.returncode == exitcodes.MERGE_REFUSED
    assert "missing shard(s) 2/3" in refused.stderr and "found 1/3, 3/3" in refused.stderr
    assert not (project / "reports" / "shardy" / "latest.json").exists()
    assert "no partial run named 'other'" in evalmine(project, "merge", "other").stderr
    run_shards(project, home, suite, name="n", shards=(2,), of=3)
    assert evalmine(project, "merge", "n").returncode == 0


def test_merge_refuses_partials_that_disagree_naming_what_differs(
    project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    suite = "examples/shardy.eval.yaml"
    run_shards(project, home, suite, name="d", shards=(1, 2), of=2)
    second = sorted((project / "reports" / "shardy").glob("*/report.json"))[1]
    original = second.read_text()
    for key, value, named in [
        ("repeats", 2, "differ in repeat"),
        ("models_hash", "0" * 64, "differ in models_hash"),
        ("record_mode", "none", "differ in record mode"),
    ]:
        report = json.loads(original)
        report[key] = value
        second.write_text(json.dumps(report))
        refused = evalmine(project, "merge", "d")
        assert refused.returncode == exitcodes.MERGE_REFUSED, refused.stderr
        assert named in refused.stderr and "shard 1/2" in refused.stderr, refused.stderr
    report = json.loads(original)
    report["shard"]["count"] = 3
    second.write_text(json.dumps(report))
    assert "disagree on the shard count" in evalmine(project, "merge", "d").stderr
    # A different suite file: the second shard ran another version of it.
    second.write_text(original)
    suite_file = project / suite
    suite_file.write_text(SHARDY_SUITE.replace("One word for", "A word for"))
    run_shards(project, home, suite, name="d", shards=(2,), of=2)
    refused = evalmine(project, "merge", "d")
    assert refused.returncode == exitcodes.MERGE_REFUSED
    assert "differ in suite hash" in refused.stderr


def test_a_merged_run_with_a_failing_item_exits_as_the_single_run(
    project: Path, tmp_path: Path
) -> None:
    (project / "examples" / "shardy.eval.yaml").write_text(FAILING_SUITE)
    home = tmp_path / "home"
    suite = "examples/shardy.eval.yaml"
    single = run_pytest(project, home, suite, "--evalmine-report-dir=single")
    assert single == exitcodes.REGRESSION_FAILED
    run_shards(
        project, home, suite, "--evalmine-report-dir=sharded", name="f", shards=(1, 2, 3), of=3
    )
    done = evalmine(project, "merge", "f", "--report-dir=sharded")
    assert done.returncode == single, done.stdout + done.stderr
    whole = merged(project, "sharded", "shardy")
    (alone,) = reports(project, "single", "shardy")
    assert len(whole["regressions"]["failed"]) == len(alone["regressions"]["failed"]) == 8


def test_the_merge_run_tool_over_stdio_and_its_refusal(project: Path, tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from .test_mcp_server import call, over_stdio

    home = tmp_path / "home"
    suite = "examples/shardy.eval.yaml"
    run_shards(project, home, suite, name="m", shards=(1,), of=2)
    refused = call(project, "merge_run", name="m")
    assert (refused["status"], refused["code"]) == ("refused", "merge_refused")
    assert "missing shard(s) 2/2" in refused["reason"]
    assert call(project, "merge_run", name="not a name")["code"] == "bad_request"
    run_shards(project, home, suite, name="m", shards=(2,), of=2)
    tools, (result,) = over_stdio(project, [("merge_run", {"name": "m"})])
    assert "merge_run" in {tool.name for tool in tools}
    assert (result["status"], result["exit_code"]) == ("completed", 0)
    (view,) = result["runs"]
    assert view["run"]["items"] == 24 and len(result["merged_from"]) == 2
    assert view["run"]["run_id"] == merged(project, "reports", "shardy")["run_id"]


# the examples of docs/guide/team-scale.md ---------------------------------------------------
SHARD_EXAMPLES = (
    EXAMPLES / "ci" / "github-actions-shards.yml",
    EXAMPLES / "k8s" / "indexed-job.yaml",
)


def command_lines(value: Any) -> list[list[str]]:
    """Every `pytest` or `evalmine` command of a parsed YAML document, as words: a string
    (a workflow step's `run`) or a list (a container's `command`), `${{ ... }}` as `1`."""
    import shlex

    found: list[list[str]] = []
    if isinstance(value, dict):
        for inner in value.values():
            found += command_lines(inner)
    elif isinstance(value, list):
        if value and value[0] in ("pytest", "evalmine"):
            found.append([re.sub(r"\$\{\{[^}]*\}\}", "1", str(word)) for word in value])
        else:
            for inner in value:
                found += command_lines(inner)
    elif isinstance(value, str):
        for line in value.replace("\\\n", " ").splitlines():
            words = shlex.split(re.sub(r"\$\{\{[^}]*\}\}", "1", line), comments=True)
            if len(words) > 1 and words[0] in ("pytest", "evalmine"):  # not a user's name
                found.append(words)
    return found


def check_pytest_flags(words: list[str]) -> list[str]:
    """The evalmine flags of a pytest command line, each parsed by the real option table."""
    from pytest_evalmine.options import OPTIONS

    by_name = {option.name: option for option in OPTIONS if option.cli}
    values: dict[str, str] = {}
    checked = []
    for word in words[1:]:
        if not word.startswith("--evalmine-"):
            continue
        flag, _, value = word.partition("=")
        name = flag.removeprefix("--evalmine-").replace("-", "_")
        assert name in by_name, f"{flag}: no such option"
        option = by_name[name]
        assert (option.kind == "bool") == (value == ""), f"{word}: a value where none goes"
        option.parse(value or True)
        values[name] = value
        checked.append(flag)
    if "shard" in values:
        shard_from(values["shard"], run_name_from(values.get("run_name")), {SHARD_INDEX_ENV: "0"})
    return checked


@pytest.mark.parametrize("path", SHARD_EXAMPLES, ids=lambda p: p.name)
def test_the_examples_commands_are_ones_the_tool_accepts(path: Path) -> None:
    import yaml

    from pytest_evalmine.commands.cli import build_parser

    commands = command_lines(yaml.safe_load(path.read_text("utf-8")))
    pytests = [c for c in commands if c[0] == "pytest"]
    assert pytests, f"{path.name}: no pytest command"
    for words in pytests:
        flags = check_pytest_flags(words)
        assert {"--evalmine-run-name", "--evalmine-shard"} <= set(flags), words
    for words in (c for c in commands if c[0] == "evalmine"):
        args = build_parser().parse_args(words[1:])  # SystemExit(4) on a flag it lacks
        assert args.command == "merge"


def test_the_workflow_has_a_shard_matrix_a_postgres_service_and_a_merge_job() -> None:
    import yaml

    workflow = yaml.safe_load(SHARD_EXAMPLES[0].read_text("utf-8"))
    shard, merge = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    assert shard["strategy"]["matrix"]["shard"] == [1, 2, 3]
    assert shard["services"]["postgres"]["image"].startswith("postgres")
    (run,) = [c for c in command_lines(shard) if c[0] == "pytest"]
    assert "--evalmine-shard=1/3" in run
    # The store comes from the environment (the option would beat it): the team's database
    # when the secret is set, else the job's own service container.
    (step,) = [s for s in shard["steps"] if "--evalmine-shard" in s.get("run", "")]
    store = step["env"]["EVALMINE_STORE"]
    assert "secrets.EVALMINE_STORE" in store and "postgresql://evalmine@localhost:5432" in store
    assert any("upload-artifact" in step.get("uses", "") for step in shard["steps"])
    assert merge["needs"] == "shard"
    assert any("download-artifact" in step.get("uses", "") for step in merge["steps"])
    merging = [step for step in merge["steps"] if "evalmine merge" in step.get("run", "")]
    assert merging and not merging[0].get("continue-on-error"), "its exit code is the workflow's"
    job = yaml.safe_load(SHARD_EXAMPLES[1].read_text("utf-8"))
    assert job["kind"] == "Job" and job["spec"]["completionMode"] == "Indexed"
    (command,) = command_lines(job)
    assert f"--evalmine-shard=auto/{job['spec']['completions']}" in command


def test_a_command_with_an_unknown_flag_is_caught() -> None:
    with pytest.raises(AssertionError, match="no such option"):
        check_pytest_flags(["pytest", "--evalmine-shards=1/3"])
    with pytest.raises(ValueError, match="between 1 and 3"):
        check_pytest_flags(["pytest", "--evalmine-run-name=n", "--evalmine-shard=4/3"])
    from pytest_evalmine.commands.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["merge", "n", "--no-such-flag"])


def test_the_yaml_under_examples_ci_and_k8s_is_not_collected(pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    result = pytester.runpytest("examples", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0
    collected = [line for line in result.outlines if "::" in line]
    assert collected and all(
        line.startswith("examples/support-desk.eval.yaml") for line in collected
    )
