"""Small things a newcomer trips on (issue 18, items 9 and 15): a model listed twice, the
length of a clipped value, ``1 item``, a quoted version, numbers YAML 1.1 reads as text, a
comparison with a fake-routed run, and a test run without third-party warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.errors import SuiteError
from pytest_evalmine.reports.compare import compare, routing_note
from pytest_evalmine.reports.render import counted
from pytest_evalmine.reports.sections import changes_section
from pytest_evalmine.suite.loader import load_suite
from pytest_evalmine.suite.reading import path_key, quoted

from .conftest import SMALL_SUITE, latest_report
from .test_compare import report

PROJECT = Path(__file__).resolve().parents[1]
FAKE = "--evalmine-fake"
HEAD = "version: 1\nsuite: s\nmodels: [fake/a]\n"
TASK = (
    "tasks:\n- id: t\n  kind: answer\n  prompt: 'p {{{{ x }}}}'\n"
    "{extra}  cases: [{{id: c, vars: {{x: 1e3}}}}]\n"
)


def suite_text(head: str = HEAD, extra: str = "") -> str:
    return head + TASK.format(extra=extra)


def load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "x.eval.yaml"
    path.write_text(text, "utf-8")
    return load_suite(path, shown="suites/x.eval.yaml")


def refused(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SuiteError) as info:
        load(tmp_path, text)
    return str(info.value).splitlines()


# ------------------------------------------------------------------ a model listed twice


def test_a_model_listed_twice_in_the_suite_is_refused_at_its_path(tmp_path: Path) -> None:
    head = "version: 1\nsuite: s\nmodels: [fake/a, fake/b, fake/a]\n"
    assert refused(tmp_path, suite_text(head)) == [
        "suites/x.eval.yaml: $.models[2]: model 'fake/a' is listed twice (also at $.models[0])"
    ]


def test_a_model_listed_twice_in_the_suite_is_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(
        ".eval.yaml", small=SMALL_SUITE.replace("[fake/alpha, fake/beta]", "[fake/a, fake/a]")
    )
    result = pytester.runpytest(FAKE, "-p", "no:cacheprovider")
    assert result.ret == 2
    result.stdout.fnmatch_lines(
        ["small.eval.yaml: $.models[1]: model 'fake/a' is listed twice (also at $.models[0])"]
    )


def test_a_model_given_twice_on_the_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    result = pytester.runpytest(FAKE, "-p", "no:cacheprovider", "--evalmine-models=fake/a,fake/a")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--evalmine-models: fake/a is named more than once (fake/a,fake/a); name each model once"]
    )
    assert not (pytester.path / "reports").exists()


# ------------------------------------------------------------------ clipped values


def test_a_clipped_string_says_its_own_length_not_its_quotes() -> None:
    assert quoted("y" * 5000).endswith("… (5000 characters)")
    assert quoted("it's" * 1000).endswith("… (4000 characters)")  # repr escapes nothing here
    assert quoted("\x1c" * 100).endswith("… (100 characters)")  # each shown as 4 characters
    assert path_key("\x1c" * 50).endswith("… (50 characters)")
    assert quoted("short") == "'short'"


def test_a_long_value_in_a_suite_is_reported_with_its_length(tmp_path: Path) -> None:
    (line,) = refused(tmp_path, suite_text(extra=f"  judge: '{'y' * 5000}'\n"))
    # `judge` on a task is true/false or a panel: the value is shown cut, with its length.
    assert line.endswith("… (5000 characters) is not valid under any of the given schemas"), line
    assert "$.tasks[0].judge" in line


# ------------------------------------------------------------------ 1 item


@pytest.mark.parametrize(
    ("count", "shown"), [(0, "0 items"), (1, "1 item"), (2, "2 items"), (56, "56 items")]
)
def test_counts_take_the_number_of_their_noun(count: int, shown: str) -> None:
    assert counted(count, "item") == shown


def test_a_noun_with_its_own_plural() -> None:
    assert (counted(1, "query", "queries"), counted(3, "query", "queries")) == (
        "1 query",
        "3 queries",
    )


def test_validate_and_suites_say_1_item(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from pytest_evalmine.commands.cli import main

    (tmp_path / "one.eval.yaml").write_text(suite_text())
    assert main(["validate", "--rootdir", str(tmp_path), "one.eval.yaml"]) == 0
    assert capsys.readouterr().out.startswith("ok one.eval.yaml: suite s, 1 item, fake/a;")
    assert main(["suites", "--rootdir", str(tmp_path), "."]) == 0
    assert "one.eval.yaml: suite s, 1 task, 1 case, 0 labels;" in capsys.readouterr().out


# ------------------------------------------------------------------ version "1"


def test_a_quoted_version_is_refused_as_a_string(tmp_path: Path) -> None:
    head = HEAD.replace("version: 1", 'version: "1"')
    assert refused(tmp_path, suite_text(head)) == [
        "suites/x.eval.yaml: $.version: version '1' is a string (it is quoted): this plugin "
        "reads the number 1; write version: 1 without quotes"
    ]


def test_another_version_is_still_unsupported(tmp_path: Path) -> None:
    (line,) = refused(tmp_path, suite_text(HEAD.replace("version: 1", "version: 2")))
    assert line.endswith("$.version: unsupported version 2: this plugin reads version 1")


# ------------------------------------------------------------------ numbers written as text


def test_numbers_yaml_reads_as_text_are_numbers_where_the_schema_wants_one(
    tmp_path: Path,
) -> None:
    head = HEAD + "limits: {max_cost_usd: 1e308}\ndefaults: {top_p: '5e-1'}\n"
    extra = "  timeout_s: 3e1\n  checks: [{number: {tolerance: 1e-3}}]\n"
    suite = load(tmp_path, suite_text(head, extra))
    task = suite.tasks[0]
    assert suite.max_cost_usd == pytest.approx(1e308)
    assert task.params.timeout_s == pytest.approx(30.0)  # on the task itself (evalmine's form)
    assert task.params.top_p == pytest.approx(0.5)
    assert task.checks[0].options == {"tolerance": pytest.approx(0.001)}
    # Only number fields: a case variable stays the text written, and so does its prompt.
    assert task.cases[0].vars == {"x": "1e3"}
    assert suite.render(task, task.cases[0]).prompt == "p 1e3"


def test_a_number_from_text_hashes_as_the_number_written_with_a_dot(tmp_path: Path) -> None:
    as_text = load(tmp_path, suite_text(extra="  checks: [{number: {tolerance: 1e-3}}]\n"))
    with_dot = load(tmp_path, suite_text(extra="  checks: [{number: {tolerance: 0.001}}]\n"))
    assert as_text.hash == with_dot.hash


def test_a_number_from_text_inside_a_one_of(tmp_path: Path) -> None:
    head = HEAD + (
        "endpoints:\n  box:\n    base_url: http://127.0.0.1:9/v1\n    kind: openai-compatible\n"
        "    cost: {input: 1e-6, output: 2E-6}\n"
    )
    cost = load(tmp_path, suite_text(head)).endpoints["box"]["cost"]
    assert cost == {"input": pytest.approx(1e-6), "output": pytest.approx(2e-6)}


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ("1e999", "'1e999' is not a finite number"),
        ("-1e3", "-1000.0 is less than or equal to the minimum of 0"),
        ("nan", "'nan' is not of type 'number'"),
        ("'.inf'", "'.inf' is not of type 'number'"),
        ("1e3x", "'1e3x' is not of type 'number'"),
    ],
)
def test_numbers_from_text_keep_their_bounds(tmp_path: Path, limits: str, message: str) -> None:
    head = HEAD + f"limits: {{max_cost_usd: {limits}}}\n"
    assert refused(tmp_path, suite_text(head)) == [
        f"suites/x.eval.yaml: $.limits.max_cost_usd: {message}"
    ]


def test_an_integer_field_says_yaml_read_text(tmp_path: Path) -> None:
    head = HEAD + "defaults: {max_tokens: 1e3}\n"
    assert refused(tmp_path, suite_text(head)) == [
        "suites/x.eval.yaml: $.defaults.max_tokens: '1e3' is a string, not an integer (YAML "
        "1.1 reads a number with an exponent and no dot as text); write 1000"
    ]


# ------------------------------------------------------------------ fake-routed runs


def routed(run_id: str, routing: str) -> dict[str, Any]:
    return {**report(run_id, "h"), "adapter_routing": routing}


FAKE_ROUTING = "fake (every model routed to the fake adapter)"
REAL_ROUTING = "by provider prefix"


@pytest.mark.parametrize(
    ("now", "before", "said"),
    [
        (REAL_ROUTING, FAKE_ROUTING, "the previous run was fake-routed"),
        (FAKE_ROUTING, REAL_ROUTING, "this run is fake-routed"),
        (FAKE_ROUTING, FAKE_ROUTING, "both this run and the previous run were fake-routed"),
    ],
)
def test_what_changed_says_when_a_run_was_fake_routed(now: str, before: str, said: str) -> None:
    changes = compare(routed("run-2", now), routed("run-1", before))
    assert changes["adapter_routing"] == {
        "now": now,
        "before": before,
        "fake_now": now == FAKE_ROUTING,
        "fake_before": before == FAKE_ROUTING,
    }
    note = routing_note(changes)
    assert note is not None and note.startswith(said)
    assert changes_section(changes).lines[0] == note


def test_what_changed_between_real_runs_says_nothing_of_routing() -> None:
    changes = compare(routed("run-2", REAL_ROUTING), routed("run-1", REAL_ROUTING))
    assert routing_note(changes) is None
    assert not any("fake" in line for line in changes_section(changes).lines)
    # A report from before report.json recorded routing is not called fake either.
    assert routing_note(compare(report("run-2", "h"), report("run-1", "h"))) is None


def test_a_run_after_a_fake_run_says_so_in_what_changed(
    pytester: pytest.Pytester, small_suite: Path
) -> None:
    pytester.runpytest(FAKE, "-p", "no:cacheprovider").assert_outcomes(passed=6)
    # fake/ models route to the fake adapter by their prefix too: the same answers, but this
    # run is not --evalmine-fake, so its routing differs from the previous run's.
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*What changed since*", "*the previous run was fake-routed*"])
    assert latest_report(pytester.path)["changes"]["adapter_routing"]["fake_before"] is True


# ------------------------------------------------------------------ third-party warnings

TRIO_WARNING = (
    "It looks like `register_random` was passed an object that could be garbage collected "
    "immediately after `register_random` creates a weakref to it. This will prevent "
    "Hypothesis from managing this PRNG. See the docs for `register_random` for more details."
)


def test_the_project_filters_exactly_trios_hypothesis_warning(pytester: pytest.Pytester) -> None:
    """The warning as trio's Hypothesis plugin raises it (HypothesisWarning, from
    ``trio._core._run``) is ignored under the project's test configuration; the same message
    from another module, and another HypothesisWarning, still show."""
    pytester.makepyfile(
        test_warned=f"""
        import warnings
        from hypothesis.errors import HypothesisWarning

        MESSAGE = {TRIO_WARNING!r}

        def warn(message, module):
            warnings.warn_explicit(message, HypothesisWarning, "x.py", 1, module=module)

        def test_from_trio():
            warn(MESSAGE, "trio._core._run")

        def test_from_elsewhere():
            warn(MESSAGE, "mylib")

        def test_another_hypothesis_warning():
            warn("something else", "trio._core._run")
        """
    )
    result = pytester.runpytest_subprocess(
        "-c", str(PROJECT / "pyproject.toml"), "--rootdir", str(pytester.path), "test_warned.py"
    )
    result.assert_outcomes(passed=3, warnings=2)
    summary = result.stdout.str().split("warnings summary", 1)[1]
    assert "test_from_trio" not in summary
    assert "test_from_elsewhere" in summary and "test_another_hypothesis_warning" in summary
