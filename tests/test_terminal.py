"""The terminal summary as a person reads it (spec: "Terminal summary"): fitted to 80
columns, flags never split, colour through pytest's writer, and a last line that states the
evalmine outcome."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_evalmine.reports.terminal import FLAG, OK, fit, fit_table, style_of

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
    assert [line for line in section if len(line) > 80] == []
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
