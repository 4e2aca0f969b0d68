"""The terminal summary as a person reads it (spec: "Terminal summary"): fitted to 80
columns, flags never split, colour through pytest's writer, and a last line that states the
evalmine outcome."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.plugin.terminal_summary import compact_failure
from pytest_evalmine.reports.labelling import nothing_to_label
from pytest_evalmine.reports.terminal import FLAG, OK, fit, fit_table, style_of
from pytest_evalmine.run.records import AnswerRecord

from .conftest import newest_run_dir
from .test_judge_run import JUDGED_SUITE

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FLAGGED_SUITE = JUDGED_SUITE.replace("min_labels: 3", "min_labels: 30")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def evalmine_section(output: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(output) if " evalmine " in line and "===" in line)
    return output[start + 1 :]


def test_fit_wraps_at_the_width_and_never_splits_a_flagged_rate() -> None:
    text = (
        "google/gemini-2.5-flash: 51.8% [42.0%, 61.6%]† UNCALIBRATED, over schema-passing "
        "pairs only, n=28; W/L/T 3/1/3, soft 8/10, flips 3; flip rate 10.7%"
    )
    for width in range(40, 90):
        lines = fit(text, width)
        joined = " ".join(line.strip() for line in lines)
        assert joined == text
        assert "51.8% [42.0%, 61.6%]† UNCALIBRATED" in "\n".join(lines), width
        assert all(len(line) <= width for line in lines if "UNCALIBRATED" not in line)
    assert fit("short", 80) == ["short"]
    assert fit("  indented " + "word " * 30, 40)[1].startswith("      ")


def test_a_wide_table_becomes_one_entry_per_row() -> None:
    headers = ("model", "passed", "schema native")
    rows = [("anthropic/claude-haiku-4-5 (baseline)", "28/28", "10/10 (100%)")]
    assert fit_table(headers, rows, 80)[0].startswith("model")
    assert fit_table(headers, rows, 55) == [
        "anthropic/claude-haiku-4-5 (baseline): passed 28/28;",
        "    schema native 10/10 (100%)",
    ]


def test_styles() -> None:
    assert style_of("x: 50.0%† UNCALIBRATED") == FLAG
    assert style_of("n=3 of 3 labels; status OK: kappa 0.70 >= 0.40") == OK
    assert style_of("n=3 of 3 labels; status BELOW_FLOOR: kappa 0.10") == FLAG
    assert style_of("calls: 6 made") is None


def test_the_example_summary_fits_80_columns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    result = pytester.runpytest("examples", "--evalmine-fake", "-p", "no:cacheprovider")
    section = evalmine_section(result.outlines)
    assert len(section) > 30
    # A path is never split: the page's (about 85 characters here) has a line of its own.
    paths = [line for line in section if " " not in line.strip()]
    assert [line for line in section if len(line) > 80 and line not in paths] == []
    assert [line.strip() for line in paths if len(line) > 80] == [
        f"{newest_run_dir(pytester.path, 'support-desk').relative_to(pytester.path)}/report.html"
    ]
    for line in section:
        if "UNCALIBRATED" in line or "†" in line:
            assert "† UNCALIBRATED" in line or "† not a headline" in line, line


def test_the_last_line_states_the_exit_code_and_why(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", judged=FLAGGED_SUITE)
    result = pytester.runpytest("--evalmine-fake", "--evalmine-fail-under-calibration")
    assert result.ret == 12
    assert result.outlines[-2].startswith("=") and "6 passed" in result.outlines[-2]
    assert result.outlines[-1] == (
        "evalmine: exit 12: calibration gate: a win rate is not headline-eligible"
    )
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == 0
    assert result.outlines[-1] == (
        "evalmine: exit 0: all items passed; win rate † UNCALIBRATED, not a headline"
    )


def test_the_last_line_of_a_refused_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)
    result = pytester.runpytest("--evalmine-fake", "--evalmine-max-cost=0.0000001")
    assert result.ret == 10
    # the refusal's own reason, not a generic one
    assert result.outlines[-1].startswith("evalmine: exit 10: refused before spending: 6 uncached")
    assert "over the $0.000000 left of the cap" in result.outlines[-1]


def test_a_plain_run_gets_no_evalmine_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest()
    assert not any(line.startswith("evalmine") for line in result.outlines)


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        (["--color=yes"], {}, True),
        (["--color=no"], {"FORCE_COLOR": "1"}, False),
        ([], {"FORCE_COLOR": "1"}, True),
        ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ],
)
def test_colour_follows_pytests_writer(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    coloured: bool,
) -> None:
    for name in ("PY_COLORS", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makefile(".eval.yaml", judged=FLAGGED_SUITE)
    result = pytester.runpytest("--evalmine-fake", *args)
    flagged = [line for line in result.outlines if "UNCALIBRATED" in line]
    assert flagged
    if coloured:
        # red and bold, from the first flagged line to the verdict
        assert all("\x1b[31m" in line for line in flagged), flagged
        status = next(line for line in result.outlines if "status " in line)
        assert "\x1b[31m" in status
    else:
        assert not any(ANSI.search(line) for line in result.outlines)


# The end of a run: short blocks for failed suite items, the summary last, both reports named,
# and why "Label next" lists nothing.
FAILING_SUITE = JUDGED_SUITE.replace(
    "tasks:",
    "tasks:\n  - {id: sums, kind: answer, prompt: "
    "'Add {{ n }}', judge: false, checks: [number], cases: [{id: one, vars: {n: 1}, gold: 7}]}",
)


def test_the_evalmine_summary_comes_last_before_pytests_final_line(
    pytester: pytest.Pytester,
) -> None:
    """After the suite items' failures, pytest's own (a plain test), its warnings and its
    short test summary; the summary ends naming report.md and report.html."""
    pytester.makefile(".eval.yaml", judged=FAILING_SUITE)
    pytester.makepyfile(
        test_plain="import warnings\n\ndef test_plain():\n    warnings.warn('w')\n"
        "    assert 1 == 2\n"
    )
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=3, passed=6)
    lines = result.outlines
    titles = [line.strip("= ").split(" (")[0] for line in lines if line.startswith("===")]
    assert titles[1:-1] == [
        "FAILURES",  # the suite items'
        "FAILURES",  # pytest's own
        "warnings summary",
        "short test summary info",
        "evalmine",
    ]
    # The plain test's warning; an installed copy of the plugin may add pytest's "already
    # imported" rewrite warnings (CI's editable install does).
    assert re.fullmatch(r"3 failed, 6 passed, \d+ warnings? in .*", titles[-1]), titles[-1]
    final = next(i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("==="))
    run_dir = newest_run_dir(pytester.path)
    relative = run_dir.relative_to(pytester.path).as_posix()
    # Paths that open from the working folder: the page, then the suite's index.
    page = f"report: {relative}/report.html"
    named = [page] if len(page) <= 80 else ["report:", f"    {relative}/report.html"]
    assert lines[final - 2 - len(named) : final] == [
        *named,
        "    (the page to open in a browser; report.md beside it)",
        "runs of this suite: reports/small/index.html",
    ]
    assert (pytester.path / "reports" / "small" / "index.html").is_file()
    assert (run_dir / "report.md").is_file() and (run_dir / "report.html").is_file()


def test_a_compact_block_from_an_answer_never_sent_or_without_checks() -> None:
    budget = AnswerRecord(
        "s", "s.eval.yaml", "t", "answer", "c", "fake/a", "not_run_budget", error="cap reached"
    )
    assert compact_failure(budget) == ["not_run_budget: cap reached"]
    long = AnswerRecord(
        "s", "s.eval.yaml", "t", "answer", "c", "fake/a", "failed", text="word\n " * 30,
        checks=[
            {"name": "answer", "passed": True, "message": "ok"},
            {"name": "mine", "passed": False, "message": "too plain", "expected": 1, "got": 2},
        ],
    )  # fmt: skip
    check, tail = compact_failure(long)
    assert check == "check 'mine' failed: too plain (expected: 1, got: 2)"
    assert tail == 'answer ends: "...' + " ".join(["word"] * 30)[-60:] + '"'


def judged_pair(task: str, label: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"task": task, "case": "c", "baseline": "a", "candidate": "b", "category": "tie",
            "label": label, "excluded": None, "flip": False, **extra}  # fmt: skip


def excluded_pair(reason: str) -> dict[str, Any]:
    return {**judged_pair("t"), "category": None, "excluded": reason}


@pytest.mark.parametrize(
    ("pairs", "min_labels", "said"),
    [
        ([], 3, "nothing to label: the run has no pairs to judge"),
        (
            [excluded_pair("judge_unparseable")] * 3,
            3,
            "nothing to label: no pair was judged, of 3: for every pair the judge's verdict "
            "was unparseable (judge_unparseable)",
        ),
        (
            [excluded_pair("judge_error")] * 2 + [excluded_pair("judge_not_run")],
            3,
            "nothing to label: no pair was judged, of 3: 2 pairs: the judge's call failed "
            "(judge_error); 1 pair: the judge was not run (the cap was reached, or Ctrl-C) "
            "(judge_not_run)",
        ),
        (
            [judged_pair("t", label="tie"), excluded_pair("judge_unparseable")],
            1,
            "nothing to label: every judged pair (1) is labelled and agrees with the judge",
        ),
        (
            [judged_pair("t", label="tie"), judged_pair("t")],
            1,
            "nothing to label: 1 of 2 judged pairs are unlabelled, but none is a flip or "
            "contradicts a check, every task has its 1 labels, and every label agrees with "
            "the judge",
        ),
    ],
    ids=["no-pairs", "all-unparseable", "calls-failed-and-capped", "all-labelled", "enough"],
)
def test_label_next_says_why_it_lists_nothing(
    pairs: list[dict[str, Any]], min_labels: int, said: str
) -> None:
    from pytest_evalmine.reports.labelling import label_next

    assert label_next(pairs, min_labels) == []
    assert nothing_to_label(pairs, min_labels) == said


def test_label_next_with_every_verdict_unparseable_says_so_in_all_three_places(
    pytester: pytest.Pytester,
) -> None:
    """0 judged pairs: not "every judged pair is labelled and agrees", which is only
    vacuously true; the same line in the terminal, report.md and report.html."""
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)
    fault = "--evalmine-fake-fault=malformed_json,phase=judge,count=99"
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider", fault)
    result.assert_outcomes(passed=6)
    said = (
        "nothing to label: no pair was judged, of 3: for every pair the judge's verdict was "
        "unparseable (judge_unparseable)"
    )
    section = evalmine_section(result.outlines)
    start = section.index("-- Label next --")
    assert " ".join(line.strip() for line in section[start + 1 : start + 3]) == said
    run_dir = newest_run_dir(pytester.path)
    assert f"## Label next\n\n{said}\n" in (run_dir / "report.md").read_text()
    page = (run_dir / "report.html").read_text()
    label_next = page[page.index('<section id="label-next">') :].split("</section>")[0]
    assert f"<p>{said}</p>" in html.unescape(label_next)
    assert "every judged pair" not in result.stdout.str()
