"""What CI reads (spec: "CI"): --junitxml properties of items and of the run, progress lines
in a log that is not a terminal, one list of exit codes in every document and the workflow, and
docs/guide/ci-and-exit-codes.md's recipe (a replay that misses because of the adapter says so)."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from pytest_evalmine import exitcodes, plugin
from pytest_evalmine.options import OPTIONS
from pytest_evalmine.run.replay import NO_CACHED_ANSWER, ReplayMisses
from pytest_evalmine.run.store import Store

from .conftest import SMALL_SUITE, open_test_store
from .test_judge_run import JUDGED_SUITE

FLAGGED_SUITE = JUDGED_SUITE.replace("min_labels: 3", "min_labels: 30")


def properties(element: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in element.iter("property")}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_junit_items_carry_model_cost_latency_cache_and_checks(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makefile(".eval.yaml", small=FLAGGED_SUITE)
    result = pytester.runpytest("--evalmine-fake", "--junitxml=junit.xml", *workers)
    result.assert_outcomes(passed=6)
    root = ET.parse(pytester.path / "junit.xml").getroot()
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert len(cases) == 6
    case = properties(cases["charged-twice[fake/beta]"])
    assert case["evalmine_model"] == "fake/beta"
    assert case["evalmine_outcome"] == "passed"
    assert case["evalmine_cached"] == "false"
    assert float(case["evalmine_cost_usd"]) > 0
    assert float(case["evalmine_latency_s"]) >= 0
    assert case["evalmine_checks"] == "answer:pass,parse:pass,schema:pass"
    assert properties(cases["refund-no[fake/alpha]"])["evalmine_checks"] == "answer:pass"

    suite = properties(root.find("testsuite"))
    assert suite["evalmine.small.headline_eligible"] == "false"
    assert suite["evalmine.small.calibration"].startswith("insufficient_labels: only 3 matched")
    assert suite["evalmine.small.win_rate.fake/beta"].endswith("† UNCALIBRATED")
    assert (
        suite["evalmine.small.run_id"]
        == (pytester.path / "reports" / "small")
        .joinpath("latest.json")
        .read_text()
        .split('"run_id": "')[1]
        .split('"')[0]
    )


def test_junit_without_a_judge_says_why(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake", "--junitxml=junit.xml").assert_outcomes(passed=6)
    suite = properties(ET.parse(pytester.path / "junit.xml").getroot().find("testsuite"))
    assert suite["evalmine.small.judge_note"].startswith("no judge configured")
    assert "evalmine.small.calibration" not in suite


def test_a_log_gets_a_progress_line_every_interval(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    monkeypatch.setitem(plugin.PROGRESS_EVERY_S, False, 0.0)
    pytester.makefile(".eval.yaml", small=SMALL_SUITE + "judge: {model: fake/judge}\n")
    result = pytester.runpytest("--evalmine-fake", "--evalmine-concurrency=1")
    lines = [line for line in result.outlines if "judge verdicts," in line]
    assert [line.split()[1] for line in lines] == [f"{n}/6" for n in range(1, 7)]
    assert all(line.startswith("evalmine: ") for line in lines)
    # The answers stream while their items run (the items' own output is their progress):
    # one line gives their total.
    answers = [line for line in result.outlines if "answers," in line]
    assert [line.split()[1] for line in answers] == ["6/6"]


def test_the_interval_is_a_few_seconds_off_a_terminal() -> None:
    assert plugin.PROGRESS_EVERY_S == {True: 0.1, False: 5.0}


def test_suite_properties_only_with_junitxml(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.runpytest("--evalmine-fake").assert_outcomes(passed=6)
    assert not list(Path(pytester.path).glob("*.xml"))


def test_the_watcher_reports_calls_settled_by_any_process(store_location: str) -> None:
    from pytest_evalmine.adapters.base import Response, Usage
    from pytest_evalmine.run.store import CLAIMED, HELD
    from pytest_evalmine.run.watch import CallWatcher

    store = open_test_store(store_location)
    written: list[str] = []
    watcher = CallWatcher(store, "run-1", write=written.append, every_s=60)
    watcher.tick()
    for key in ("a", "b", "c"):
        assert store.claim("run-1", key, "host:1") == CLAIMED
    # Another run on the same cache waits for run-1's call: it makes no call of its own.
    assert store.claim("run-2", "a", "host:2") == HELD
    store.finish_claim("b", status="error", error="boom")
    reservation = store.reserve("run-1", "a", 0.5, cap=1.0)
    store.record_paid_answer(
        key="a",
        provider="fake",
        model="fake/a",
        response=Response(text="x", usage=Usage(1, 1), latency_s=0.1),
        cost_usd=0.25,
        reservation=reservation,
    )
    watcher.tick()
    watcher.tick()  # nothing changed: no line
    watcher.tick(final=True)
    store.close()
    assert written == [
        "evalmine: 0 calls made by workers, $0.0000 spent",
        "evalmine: 2 calls made by workers, $0.2500 spent",
        "evalmine: 2 calls made by workers, $0.2500 spent",
    ]


def test_under_xdist_the_controller_prints_the_workers_calls(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    result = pytester.runpytest("--evalmine-fake", "-n", "2")
    result.assert_outcomes(passed=6)
    lines = [line for line in result.outlines if "calls made by workers" in line]
    assert lines and lines[-1].startswith("evalmine: 6 calls made by workers, $0.0")
    rerun = pytester.runpytest("--evalmine-fake", "-n", "2")
    assert not [line for line in rerun.outlines if "calls made by workers" in line], "all cached"


# One list of exit codes everywhere (spec: "Exit codes", "CI"): exitcodes.MEANINGS, the
# workflow's `case` in docs/guide/ci-and-exit-codes.md, and the tables of that page and
# docs/spec.md.

ROOT = Path(__file__).resolve().parents[1]


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole line) up to the next heading of its level."""
    level = heading.split(" ", 1)[0] + " "
    body = text.split(f"\n{heading}\n", 1)[1]
    return body.split(f"\n{level}", 1)[0]


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the markdown table whose header line is ``header``."""
    lines = text.splitlines()
    assert lines.count(header) == 1, f"one table headed {header!r}"
    rows = []
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def codes_of(cells: list[str]) -> list[int]:
    """Every code a table's code column names, a range like ``0-6`` as each of its codes."""
    codes = []
    for cell in cells:
        low, _, high = cell.partition("-")
        codes.extend(range(int(low), int(high or low) + 1))
    return codes


def ci_workflow() -> dict:
    text = (ROOT / "docs" / "guide" / "ci-and-exit-codes.md").read_text("utf-8")
    blocks = text.split("```yaml\n")
    assert len(blocks) == 2, "docs/guide/ci-and-exit-codes.md holds one workflow"
    return yaml.safe_load(blocks[1].split("```", 1)[0])


def workflow_steps() -> list[dict]:
    return ci_workflow()["jobs"]["evals"]["steps"]


def case_arms(script: str) -> list[tuple[list[str], str]]:
    """The `case $code in ... esac` arms of a step's script: (patterns, action), one a line."""
    body = script.split("case $code in\n", 1)[1].split("esac", 1)[0]
    arms = []
    for line in body.strip().splitlines():
        pattern, _, action = line.strip().partition(")")
        assert action.rstrip().endswith(";;"), f"one arm a line: {line!r}"
        arms.append((pattern.split("|"), action))
    return arms


def test_meanings_are_pytests_codes_and_ours() -> None:
    ours = {
        value for name, value in vars(exitcodes).items() if name.isupper() and type(value) is int
    }
    assert set(exitcodes.MEANINGS) == {int(code) for code in pytest.ExitCode} | ours
    assert min(ours) == 10


def test_the_workflow_has_one_arm_per_exit_code() -> None:
    (evals,) = [step for step in workflow_steps() if step.get("id") == "evals"]
    arms = case_arms(evals["run"])
    patterns = [pattern for names, _action in arms for pattern in names]
    assert len(patterns) == len(set(patterns)), f"an arm no code reaches: {patterns}"
    assert arms[-1][0] == ["*"] and patterns.count("*") == 1, "the catch-all comes last"
    assert sorted(int(p) for p in patterns if p != "*") == sorted(exitcodes.MEANINGS)
    for names, action in arms[:-1]:
        (code,) = map(int, names)
        assert exitcodes.MEANINGS[code] in action, (code, action)
        assert ("exit 1" in action) == (code != 0), (code, action)
    assert "exit 1" in arms[-1][1]


def test_the_workflow_says_how_to_install_an_unpublished_package() -> None:
    installs = [
        step["run"] for step in workflow_steps() if "pytest-evalmine" in step.get("run", "")
    ]
    assert installs, "a step installs pytest-evalmine"
    for run in installs:
        assert "pip install pytest-evalmine " not in run, "not on the package index yet"
        assert re.search(r"pytest-evalmine @ git\+https://\S+|\.whl\b", run), run


@pytest.mark.parametrize(
    ("document", "heading", "header"),
    [
        ("docs/guide/ci-and-exit-codes.md", "## Exit codes", "| code | meaning | CI |"),
        (
            "docs/spec.md",
            "## 13. Exit codes",
            "| code | meaning | text of the last line (section 12) |",
        ),
    ],
)
def test_each_exit_code_table_lists_exactly_the_codes(
    document: str, heading: str, header: str
) -> None:
    rows = table_rows(section((ROOT / document).read_text("utf-8"), heading), header)
    codes = codes_of([row[0] for row in rows])
    assert len(codes) == len(set(codes)), f"{document}: a code listed twice: {codes}"
    assert sorted(codes) == sorted(exitcodes.MEANINGS), document
    if document == "docs/guide/ci-and-exit-codes.md":
        assert {row[0]: row[2] for row in rows} == {
            str(code): "pass" if code == 0 else "fail" for code in exitcodes.MEANINGS
        }
    if document == "docs/spec.md":
        assert {int(row[0]): row[2] for row in rows} == exitcodes.MEANINGS


def test_the_option_help_names_the_codes_it_exits_with() -> None:
    help_of = {option.name: option.help for option in OPTIONS}
    assert f"exit {exitcodes.CALIBRATION_GATE_FAILED} when" in help_of["fail_under_calibration"]
    assert (
        f"exit {exitcodes.RELEASE_GATE_BLOCKED} on Block, "
        f"{exitcodes.RELEASE_GATE_INVESTIGATE} on Investigate"
    ) in help_of["gate"]


# The CI recipe (docs/guide/ci-and-exit-codes.md): a recording made with --evalmine-fake replays
# only with it, and a replay without it says so instead of failing every item with no reason.

PROVIDER_SUITE = SMALL_SUITE.replace(
    "models: [fake/alpha, fake/beta]",
    "models: [anthropic/claude-haiku-4-5, google/gemini-2.5-flash]",
)
BESIDE = "--evalmine-recording=beside"
REPLAY = "--evalmine-record=none"


def test_a_fake_recording_replayed_without_fake_says_to_add_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=PROVIDER_SUITE)
    pytester.runpytest("--evalmine-fake", BESIDE).assert_outcomes(passed=6)
    shutil.rmtree(pytester.path / ".evalmine")  # a fresh checkout: the recording only
    missed = pytester.runpytest(BESIDE, REPLAY)
    missed.assert_outcomes(failed=6)
    assert missed.ret == exitcodes.REPLAY_MISSED
    errors = [line for line in missed.outlines if line.startswith("replay_miss: ")]
    assert len(errors) == 6
    for provider, model in [
        ("anthropic", "anthropic/claude-haiku-4-5"),
        ("google", "google/gemini-2.5-flash"),
    ]:
        assert (
            f"replay_miss: {NO_CACHED_ANSWER}; the cached answers of {model} (the "
            "recording's, or an earlier run's) were made with the fake adapter, and this run "
            f"sends it to the {provider} adapter: add --evalmine-fake to replay them"
        ) in errors
    # What the message says to do works.
    shutil.rmtree(pytester.path / ".evalmine")
    pytester.runpytest("--evalmine-fake", BESIDE, REPLAY).assert_outcomes(passed=6)


def test_a_stale_recording_misses_with_the_plain_reason(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=PROVIDER_SUITE)
    pytester.runpytest("--evalmine-fake", BESIDE).assert_outcomes(passed=6)
    shutil.rmtree(pytester.path / ".evalmine")
    pytester.makefile(
        ".eval.yaml", small=PROVIDER_SUITE.replace("Rewrite politely", "Rewrite kindly")
    )
    result = pytester.runpytest("--evalmine-fake", BESIDE, REPLAY)
    result.assert_outcomes(passed=4, failed=2)
    errors = [line for line in result.outlines if line.startswith("replay_miss: ")]
    assert errors == [f"replay_miss: {NO_CACHED_ANSWER}"] * 2


@pytest.mark.parametrize(
    ("made_by", "adapter", "advice"),
    [
        ({"fake"}, "anthropic", "add --evalmine-fake to replay them"),
        ({"anthropic"}, "fake", "drop --evalmine-fake to replay them"),
        (
            {"openai", "anthropic"},
            "local",
            "route the model as when they were recorded, or record them again",
        ),
    ],
)
def test_the_miss_names_the_adapters_and_what_to_do(
    tmp_path: Path, made_by: set[str], adapter: str, advice: str
) -> None:
    store = Store(tmp_path / "cache.sqlite")
    store.load_recorded(
        [
            {"key": f"k-{name}", "provider": name, "model": "acme/m", "response": {}, "cost_usd": 0}
            for name in made_by
        ],
        [],
    )
    misses = ReplayMisses(store)
    error = misses.error("acme/m", adapter)
    names = " and ".join(f"the {name} adapter" for name in sorted(made_by))
    assert error == (
        f"{NO_CACHED_ANSWER}; the cached answers of acme/m (the recording's, or an earlier "
        f"run's) were made with {names}, and this run sends it to the {adapter} adapter: {advice}"
    )
    assert misses.error("other/model", adapter) == NO_CACHED_ANSWER, "no answers of it at all"
    assert misses.error("acme/m", sorted(made_by)[0]) == NO_CACHED_ANSWER, "same adapter: stale"
    store.close()
