"""Text from a model or a check never acts on a terminal (issue 28 section 4): every sink
shows escape sequences, C1 controls and bidirectional overrides as escapes.

Before: an answer ending in a window title, a screen clear, hidden text and an OSC 52
clipboard write reached the terminal as is in ``answer ends: "..."``, in an exec check's
stderr line, in pytest's short test summary, in the long failure form and in report.md.
"""

from __future__ import annotations

import pytest

from pytest_evalmine.redaction import printable

from .conftest import newest_run_dir

HOSTILE = "\x1b]0;PWNED\x07 \x1b[2J\x1b[8mhidden\x1b[0m \x1b]52;c;cHduZWQ=\x07"
SHOWN = r"\x1b]0;PWNED\x07 \x1b[2J\x1b[8mhidden\x1b[0m \x1b]52;c;cHduZWQ=\x07"
# What may not reach a terminal from our text: ESC, BEL, CSI (C1), a right-to-left override.
ACTING = ("\x1b", "\x07", "\x9b", "\u202e")


def test_printable_shows_every_acting_character_as_its_escape() -> None:
    assert printable(HOSTILE) == SHOWN
    assert printable("a\x9b2Jb\u202ec\r\x00") == r"a\x9b2Jb\u202ec\r\x00"
    assert printable("line one\n\tline two") == "line one\n\tline two"
    assert printable("line one\n\tline two", one_line=True) == r"line one\n\tline two"
    plain = "plain text, accents é, CJK 漢字, emoji 🙂"
    assert printable(plain) is plain


# Answers scripted per case; the exec check's block writes the sequence to its stderr.
SUITE = r"""
version: 1
suite: hostile
models: [fake/a]
tasks:
  - id: say
    kind: echo
    prompt: "Say it"
    judge: false
    checks:
      - exact: {value: never}
    cases:
      - {id: c1, vars: {reply: "ok \e]0;PWNED\a \e[2J\e[8mhidden\e[0m \e]52;c;cHduZWQ=\a"}}
  - id: run
    kind: code
    prompt: "Code"
    judge: false
    checks:
      - exec: {run: "sh $ANSWER"}
    cases:
      - id: c2
        vars:
          reply: "```sh\nprintf 'boom \\033]0;PWNED\\007\\033[2J \\342\\200\\256x\\n' >&2
            \nexit 1\n```"
"""


@pytest.fixture
def hostile_suite(scripted: pytest.Pytester) -> pytest.Pytester:
    scripted.makefile(".eval.yaml", hostile=SUITE)
    return scripted


def acting(text: str) -> list[str]:
    return [char for char in ACTING if char in text]


def test_the_terminal_shows_the_answer_and_the_checks_output_as_escapes(
    hostile_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # the short test summary's lines whole
    result = hostile_suite.runpytest("-p", "no:cacheprovider", "-rf")
    output = result.stdout.str()
    assert result.ret == 1
    assert acting(output) == []
    lines = result.outlines
    # the short block: the answer's tail, and the exec check's last stderr line
    assert f'answer ends: "ok {SHOWN}"' in lines
    assert any(
        r"exit 1 (block 1 of 1): boom \x1b]0;PWNED\x07\x1b[2J \u202ex" in line for line in lines
    )
    # pytest's short test summary, one line an item
    summary = [line for line in lines if line.startswith("FAILED ")]
    assert len(summary) == 2 and all(r"\x1b]0;" in line for line in summary), summary


def test_the_long_failure_form_shows_them_as_escapes(hostile_suite: pytest.Pytester) -> None:
    result = hostile_suite.runpytest("-p", "no:cacheprovider", "--tb=long")
    output = result.stdout.str()
    assert acting(output) == []
    assert f"ok {SHOWN}" in result.outlines  # the answer's tail, on its own line


def test_report_md_shows_them_as_escapes(hostile_suite: pytest.Pytester) -> None:
    hostile_suite.runpytest("-p", "no:cacheprovider")
    report = (newest_run_dir(hostile_suite.path, "hostile") / "report.md").read_text("utf-8")
    assert acting(report) == []
    assert r"boom \x1b]0;PWNED\x07" in report
