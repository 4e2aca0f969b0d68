"""The short protocol of a suite item (spec section 3, "How an item runs"): it serves the
items nothing of the user's can reach, every other item keeps pytest's protocol, and the
reports pytest's consumers read are the same either way."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .conftest import SMALL_SUITE

FAKE = "--evalmine-fake"
ITEMS = 6  # SMALL_SUITE: 3 cases x 2 models, in 2 tasks
TASKS = 2

# Counts the items whose evalmine_answer fixture pytest set up, i.e. those that went through
# pytest's protocol (pytest_fixture_setup is no per-phase hook: it keeps nothing off the
# short protocol).
COUNTING = """\
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.argname == "evalmine_answer":
        with open("fixture_setups.log", "a") as log:
            log.write(request.node.nodeid + "\\n")
    return (yield)
"""

# A plugin hook of the user's on a phase: pytest's protocol for every item.
PHASE_HOOK = """
def pytest_runtest_call(item):
    pass
"""

FAILING_SUITE = SMALL_SUITE.replace(
    '    prompt: "Rewrite politely: {{ text }}"\n',
    '    prompt: "Rewrite politely: {{ text }}"\n'
    "    checks: [{contains: {value: never-in-a-fake-answer}}]\n",
)


def fixture_setups(root: Path) -> list[str]:
    log = root / "fixture_setups.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_short_protocol_serves_every_item_after_its_tasks_first(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.makeconftest(COUNTING)
    pytester.runpytest(FAKE).assert_outcomes(passed=ITEMS)
    setups = fixture_setups(pytester.path)
    assert len(setups) == TASKS  # the first item of each task sets its chain up
    assert {s.split("::")[1] for s in setups} == {"triage", "polite"}


@pytest.mark.parametrize(
    ("conftest_extra", "args"),
    [
        pytest.param(
            "\n@pytest.fixture(autouse=True)\ndef mine():\n    yield\n", [], id="autouse-fixture"
        ),
        pytest.param(PHASE_HOOK, [], id="a-phase-hook"),
        pytest.param(
            "\ndef pytest_evalmine_checks():\n    return {'short': lambda inp: True}\n",
            [],
            id="a-user-check",
        ),
        pytest.param("", ["--setup-show"], id="setup-show"),
    ],
)
def test_what_the_user_can_reach_keeps_pytests_protocol(
    pytester: pytest.Pytester, conftest_extra: str, args: list[str]
) -> None:
    suite = SMALL_SUITE
    if "pytest_evalmine_checks" in conftest_extra:
        # Every task uses the user's check, so every item may print or log.
        suite = SMALL_SUITE.replace("    cases:\n", "    checks: [short]\n    cases:\n")
    pytester.makefile(".eval.yaml", small=suite)
    pytester.makeconftest(COUNTING + conftest_extra)
    pytester.runpytest(FAKE, *args).assert_outcomes(passed=ITEMS)
    assert len(fixture_setups(pytester.path)) == ITEMS


def test_a_skip_mark_on_one_item_is_honoured(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.makeconftest(
        COUNTING
        + "\ndef pytest_collection_modifyitems(items):\n"
        + "    items[-1].add_marker(pytest.mark.skip(reason='mine'))\n"
    )
    result = pytester.runpytest(FAKE, "-rs")
    result.assert_outcomes(passed=ITEMS - 1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*mine*"])


def _portable_junit(path: Path) -> str:
    """junit.xml without what differs between two runs of the same items: times, the host,
    the run's id."""
    tree = ET.parse(path)
    for element in tree.iter():
        for name in ("time", "timestamp", "hostname"):
            element.attrib.pop(name, None)
        if element.get("name", "").endswith(".run_id"):
            element.set("value", "")
    return ET.tostring(tree.getroot(), encoding="unicode")


def _summary_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"(PASSED|FAILED|ERROR) ", line)]


def test_both_protocols_report_the_same(pytester: pytest.Pytester) -> None:
    """One warm cache, one run on each protocol: junit.xml (properties, failure texts), the
    -rA summary, the -x stop and --lf's selection agree. A failing check and a provider
    error (a setup error) are among the items."""
    pytester.makefile(".eval.yaml", small=FAILING_SUITE)
    pytester.makeconftest(COUNTING)
    fault = "--evalmine-fake-fault=server_error,prompt=Classify: The login,count=99"
    fault = [fault, "--evalmine-retries=0"]
    pytester.runpytest(FAKE, *fault)  # fills the cache; the faulted answers are never cached
    runs = {}
    for protocol, conftest in (("short", COUNTING), ("pytest", COUNTING + PHASE_HOOK)):
        pytester.makeconftest(conftest)
        (pytester.path / "fixture_setups.log").unlink(missing_ok=True)
        result = pytester.runpytest(FAKE, *fault, "-rA", f"--junitxml={protocol}.xml")
        result.assert_outcomes(passed=2, failed=2, errors=2)
        stopped = pytester.runpytest(FAKE, *fault, "-x")
        last_failed = pytester.runpytest(FAKE, "--lf", "--collect-only", "-q")
        runs[protocol] = (
            _portable_junit(pytester.path / f"{protocol}.xml"),
            _summary_lines(result.stdout.str()),
            stopped.parseoutcomes(),
            [line for line in last_failed.stdout.lines if "::" in line],
            len(fixture_setups(pytester.path)),
        )
    short, long = runs["short"], runs["pytest"]
    assert short[4] < long[4]  # the two runs did take different protocols
    assert short[0].splitlines() == long[0].splitlines()
    assert short[1:4] == long[1:4]
    junit, summary, stopped, last_failed, _ = short
    assert "provider error" in junit and "never-in-a-fake-answer" in junit
    assert len(summary) == ITEMS
    assert sum(stopped.get(k, 0) for k in ("failed", "errors")) == 1
    assert len(last_failed) == 4
