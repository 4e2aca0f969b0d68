"""Checks in a pytest run: failure reports, answer records, the conftest hook and its
errors (spec: "Checks", "Your own checks")."""

from __future__ import annotations

import pytest

from .conftest import SCRIPTED_CONFTEST, latest_answers, latest_report

SUITE = """\
version: 1
suite: checked
models: [fake/a]
tasks:
  - id: math
    kind: answer
    prompt: "Q {{ reply }}"
    judge: false
    checks: [number, {max_words: {max: 40}}]
    cases:
      - {id: right, vars: {reply: "Working: 9 * 2 = 18.\\nAnswer: 18"}, gold: 18}
      - {id: wrong, vars: {reply: "Working: 9 * 2 = 17.\\nAnswer: 17"}, gold: 18}
"""


def test_a_failed_check_reads_like_an_assertion(scripted: pytest.Pytester) -> None:
    """pytest's full form (--tb=long): every failed check, 400 characters of the answer."""
    scripted.makefile(".eval.yaml", checked=SUITE)
    result = scripted.runpytest("--tb=long")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= FAILURES =*",
            "*_ math::wrong?fake/a? _*",
            "check 'number' failed: 17 (after 'Answer:') is not 18",
            "  expected: 18",
            "  got:      17",
            "answer (fake/a, last 31 characters):",
            "Working: 9 * 2 = 17.",
            "Answer: 17",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    answers = {a["case"]: a for a in latest_answers(scripted.path, "checked")}
    assert answers["right"]["score"] == 1.0
    assert answers["wrong"]["score"] == 0.5
    number = answers["wrong"]["checks"][1]
    assert number == {
        "name": "number",
        "passed": False,
        "message": "17 (after 'Answer:') is not 18",
        "score": 0.0,
        "expected": "18",
        "got": "17",
        "runs": [],
    }


def test_an_unknown_check_is_a_collection_error(scripted: pytest.Pytester) -> None:
    scripted.makefile(".eval.yaml", checked=SUITE.replace("[number,", "[nubmer,"))
    result = scripted.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["checked.eval.yaml: $.tasks?0?.checks?0?: unknown check 'nubmer' (built-in: *"]
    )
    assert "Traceback" not in result.stdout.str()


HOOKED = """\
version: 1
suite: hooked
models: [fake/a]
tasks:
  - id: tone
    kind: rewrite
    prompt: "Q {{ reply }}"
    judge: false
    checks: [polite, {starts_with: {prefix: "Dear"}}]
    cases:
      - {id: kind, vars: {reply: "Dear Sam, please accept our apology."}}
      - {id: curt, vars: {reply: "Dear Sam, no."}}
      - {id: broken, vars: {reply: "Hi"}}
"""

HOOK_CONFTEST = """
from pytest_evalmine import Verdict


def lookup_prefix(options):
    return options["prefix"]


def polite(answer):
    if answer.text == "Hi":
        return lookup_prefix({})  # the user's bug: KeyError
    return "please" in answer.text


def starts_with(answer):
    prefix = lookup_prefix(answer.options)
    return Verdict(answer.text.startswith(prefix), reason=f"starts with {prefix!r}")


def pytest_evalmine_checks():
    return {"polite": polite, "starts_with": starts_with}
"""


def test_checks_from_a_conftest_hook(scripted: pytest.Pytester) -> None:
    scripted.makepyfile(conftest=SCRIPTED_CONFTEST + HOOK_CONFTEST)
    scripted.makefile(".eval.yaml", hooked=HOOKED)
    result = scripted.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["check 'polite' failed: failed"])
    answers = {a["case"]: a for a in latest_answers(scripted.path, "hooked")}
    assert [c["name"] for c in answers["kind"]["checks"]] == ["answer", "polite", "starts_with"]
    assert answers["kind"]["checks"][2]["message"] == "starts with 'Dear'"
    assert answers["curt"]["outcome"] == "failed"
    assert answers["broken"]["outcome"] == "error"
    assert answers["broken"]["error"] == "check 'polite' raised KeyError: 'prefix'"


def test_an_exception_in_a_users_check_shows_the_users_traceback(
    scripted: pytest.Pytester,
) -> None:
    scripted.makepyfile(conftest=SCRIPTED_CONFTEST + HOOK_CONFTEST)
    scripted.makefile(".eval.yaml", hooked=HOOKED)
    result = scripted.runpytest("-k", "broken")
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of tone::broken?fake/a?*",
            "    def polite(answer):",
            "*return lookup_prefix({})*",
            "conftest.py:*",
            "    def lookup_prefix(options):",
            '>       return options["prefix"]',
            "E       KeyError: 'prefix'",
            "conftest.py:*: KeyError",
        ]
    )
    errors = output.split("ERROR at setup", 1)[1].split("\n=", 1)[0]  # up to the next section
    assert "pytest_evalmine" not in errors, errors


def test_a_hook_may_not_take_a_builtin_name(scripted: pytest.Pytester) -> None:
    scripted.makepyfile(
        conftest=SCRIPTED_CONFTEST
        + "\ndef number(answer):\n    return True\n\n"
        + "def pytest_evalmine_checks():\n    return [number]\n"
    )
    scripted.makefile(".eval.yaml", checked=SUITE)
    result = scripted.runpytest()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'number' is a built-in check name; choose another*"])


def test_report_lists_the_failed_check(scripted: pytest.Pytester) -> None:
    scripted.makefile(".eval.yaml", checked=SUITE)
    scripted.runpytest()
    report = latest_report(scripted.path, "checked")
    assert report["outcomes"] == {"failed": 1, "passed": 1}


TWO_FAIL = SUITE.replace("{max_words: {max: 40}}", "{max_words: {max: 3}}")


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_failed_item_is_a_short_block_by_default(
    scripted: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    """Without -v or --tb=long: pytest's header, the first failed check (the others named),
    the answer's tail on one line; none of pytest's full form. Under CI=true too, where
    pytest's short test summary shows each failure's whole message: one line an item."""
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    if ci:
        monkeypatch.setenv("CI", ci)
    else:
        monkeypatch.delenv("CI", raising=False)
    scripted.makefile(".eval.yaml", checked=TWO_FAIL)
    result = scripted.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*= FAILURES (suite items; -v or --tb=long for pytest's full form) =*",
            "*_ math::right?fake/a? _*",
            "check 'max_words' failed: 8 words, at most 3 allowed (expected: <= 3 words)",
            'answer ends: "Working: 9 * 2 = 18. Answer: 18"',
            "*_ math::wrong?fake/a? _*",
            "check 'number' failed: 17 (after 'Answer:') is not 18; also failed: 'max_words'",
            'answer ends: "Working: 9 * 2 = 17. Answer: 17"',
            "*= short test summary info =*",
            "FAILED checked.eval.yaml::math::right?fake/a? - *",
        ]
    )
    out = result.stdout.str()
    assert "= FAILURES =" not in out
    assert "last 31 characters" not in out
    summary = out.split("short test summary info")[1].split("= evalmine =")[0].splitlines()
    failed = [line for line in summary if line.startswith("FAILED")]
    assert len(failed) == 2 and len([line for line in summary if line.strip("= ")]) == 2


@pytest.mark.parametrize("args", [["--tb=long"], ["-v"], ["--tb=native"]])
def test_the_full_form_when_asked_for(scripted: pytest.Pytester, args: list[str]) -> None:
    scripted.makefile(".eval.yaml", checked=TWO_FAIL)
    result = scripted.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*= FAILURES =*",
            "check 'number' failed: 17 (after 'Answer:') is not 18",
            "  expected: 18",
            "  got:      17",
            "check 'max_words' failed: *",
            "answer (fake/a, last 31 characters):",
        ]
    )
    assert "FAILURES (suite items" not in result.stdout.str()


def test_tb_line_gives_one_line_an_item_and_tb_no_none(scripted: pytest.Pytester) -> None:
    scripted.makefile(".eval.yaml", checked=TWO_FAIL)
    result = scripted.runpytest("-p", "no:cacheprovider", "--tb=line")
    lines = result.stdout.str().splitlines()
    start = lines.index(next(line for line in lines if "FAILURES (suite items" in line))
    assert lines[start + 1 : start + 3] == [
        "math::right[fake/a]: check 'max_words' failed: 8 words, at most 3 allowed (expected: "
        "<= 3 words)",
        "math::wrong[fake/a]: check 'number' failed: 17 (after 'Answer:') is not 18; also "
        "failed: 'max_words'",
    ]
    assert lines[start + 3].startswith("===")  # the next section: nothing more per item
    quiet = scripted.runpytest("-p", "no:cacheprovider", "--tb=no")
    quiet.assert_outcomes(failed=2)
    assert "FAILURES" not in quiet.stdout.str()
    assert "answer ends" not in quiet.stdout.str()


def test_short_blocks_beside_pythons_own_failures_under_xdist(scripted: pytest.Pytester) -> None:
    """A plain test's failure keeps pytest's FAILURES section; the records crossing from
    xdist workers as dicts give the same blocks; the counts stay whole."""
    pytest.importorskip("xdist")
    scripted.makefile(".eval.yaml", checked=TWO_FAIL)
    scripted.makepyfile(test_plain="def test_plain():\n    assert 1 == 2\n")
    result = scripted.runpytest("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*= FAILURES (suite items;*",
            "*_ math::*fake/a? _*",
            "*_ math::*fake/a? _*",
            "*= FAILURES =*",
            "*_ test_plain _*",
            "*assert 1 == 2*",
            "*= short test summary info =*",
        ]
    )
    out = result.stdout.str()
    assert out.count('answer ends: "Working: 9 * 2 = 1') == 2
    summary = out[out.index("short test summary info") :]
    assert summary.count("FAILED ") == 3
