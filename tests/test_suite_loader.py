"""Suite loader: validation, inlining, rendering, key refusal and the suite hash."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_evalmine.errors import SuiteError
from pytest_evalmine.suite.canonical import sha256_hex
from pytest_evalmine.suite.loader import Case, Label, Suite, load_suite

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE_SUITE = EXAMPLES / "support-desk.eval.yaml"
HEX64 = re.compile(r"[0-9a-f]{64}")

# Built by concatenation so that no key-shaped literal sits in this file.
FAKE_KEYS: dict[str, tuple[str, str]] = {
    "anthropic": ("Anthropic", "sk-" + "ant-" + "api03-" + "Q7x" * 12),
    "openai-project": ("OpenAI", "sk-" + "proj-" + "b8K" * 12),
    "openai-plain": ("OpenAI", "sk-" + "T4m" * 12),
    "google": ("Google", "AI" + "za" + "S9y" * 11 + "ab"),
}


def base_suite() -> dict[str, Any]:
    """A small valid suite touching every section, so each test can break one thing."""
    return {
        "version": 1,
        "suite": "unit",
        "description": "Loader tests.",
        "models": ["fake/alpha", "fake/beta"],
        "defaults": {"max_tokens": 200, "temperature": 0.2, "timeout_s": 30, "stop": ["END"]},
        "limits": {"max_cost_usd": 1.5},
        "judge": {
            "model": "fake/judge",
            "rubric": "Prefer accurate answers.",
            "calibration": {"min_kappa": 0.5, "min_labels": 2, "on_below_floor": "fail"},
        },
        "tasks": [
            {
                "id": "greet",
                "kind": "rewrite",
                "prompt": "Greet {{ customer }} about {{ topic }}.",
                "params": {"max_tokens": 50, "temperature": 0.7},
                "cases": [
                    {"id": "first", "vars": {"customer": "Ada", "topic": "billing"}},
                    {"id": "second", "vars": {"customer": "Bo", "topic": "labels"}},
                ],
            },
            {
                "id": "triage",
                "kind": "classify",
                "prompt": "Classify: {{ message }}",
                "cases": [{"id": "first", "vars": {"message": "I was charged twice"}}],
            },
        ],
        "labels": [
            {
                "task": "greet",
                "case": "first",
                "baseline": "fake/alpha",
                "candidate": "fake/beta",
                "prefer": "tie",
                "note": "Both fine.",
            }
        ],
    }


def label(**changes: Any) -> dict[str, Any]:
    row = {
        "task": "greet",
        "case": "second",
        "baseline": "fake/alpha",
        "candidate": "fake/beta",
        "prefer": "candidate",
    }
    row.update(changes)
    return row


def dump_suite(directory: Path, document: Any, name: str = "suite.eval.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), "utf-8")
    return path


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    return path


def at(document: Any, keys: tuple[str | int, ...]) -> Any:
    for key in keys:
        document = document[key]
    return document


def place(document: dict[str, Any], keys: tuple[str | int, ...], value: Any) -> None:
    at(document, keys[:-1])[keys[-1]] = value


def use_cases_file(document: dict[str, Any], relative: str = "cases.jsonl") -> None:
    """Move the first task's cases out to a JSONL file reference."""
    task = document["tasks"][0]
    del task["cases"]
    task["cases_path"] = relative


def expect_error(
    suite: Path, path: str, problem: str, file: str | Path | None = None
) -> SuiteError:
    with pytest.raises(SuiteError) as info:
        load_suite(suite)
    err = info.value
    assert err.file == str(suite if file is None else file)
    assert err.path == path
    assert problem in err.problem
    assert "\n" not in str(err)
    return err


def load(directory: Path, document: dict[str, Any]) -> Suite:
    return load_suite(dump_suite(directory, document))


def hash_of(directory: Path, document: dict[str, Any]) -> str:
    return load(directory, document).hash


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


# ---------------------------------------------------------------- the example suite


@pytest.fixture(scope="module")
def example() -> Suite:
    return load_suite(EXAMPLE_SUITE)


def test_example_suite_name_and_tasks(example: Suite) -> None:
    assert example.name == "support-desk"
    assert len(example.tasks) == 9
    assert example.models == ("anthropic/claude-haiku-4-5", "google/gemini-2.5-flash")


def test_example_cases_path_keeps_file_order(example: Suite) -> None:
    task = example.task("summarize-thread")
    lines = (EXAMPLES / "cases" / "summarize-thread.jsonl").read_text("utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    assert len(rows) >= 2
    assert [case.id for case in task.cases] == [row["id"] for row in rows]
    assert [case.vars for case in task.cases] == [row["vars"] for row in rows]
    assert "cases_path" not in example.document["tasks"][5]


def test_example_schema_path_is_inlined(example: Suite) -> None:
    schema_file = EXAMPLES / "schemas" / "ticket-triage.schema.json"
    expected = json.loads(schema_file.read_text("utf-8"))
    assert example.task("ticket-triage").schema == expected
    raw_task = next(t for t in example.document["tasks"] if t["id"] == "ticket-triage")
    assert "schema_path" not in raw_task
    assert raw_task["schema"] == expected


def test_example_labels_all_loaded(example: Suite) -> None:
    raw = yaml.safe_load(EXAMPLE_SUITE.read_text("utf-8"))
    assert len(raw["labels"]) > 0
    assert len(example.labels) == len(raw["labels"])
    assert all(isinstance(item, Label) for item in example.labels)
    assert example.labels[0].task == raw["labels"][0]["task"]


def test_example_hash_is_hex_and_stable(example: Suite) -> None:
    assert HEX64.fullmatch(example.hash)
    assert load_suite(EXAMPLE_SUITE).hash == example.hash


def test_example_every_case_renders_without_braces(example: Suite) -> None:
    for task in example.tasks:
        for case in task.cases:
            rendered = example.render(task, case)
            assert "{{" not in rendered.prompt
            assert rendered.system is not None and "Parcelwise" in rendered.system


# ---------------------------------------------------------------- a valid small suite


def test_base_suite_loads_every_section(tmp_path: Path) -> None:
    suite = load(tmp_path, base_suite())
    assert suite.name == "unit"
    assert suite.description == "Loader tests."
    assert suite.models == ("fake/alpha", "fake/beta")
    assert suite.max_cost_usd == 1.5
    assert suite.judge.model == "fake/judge"
    assert suite.judge.min_kappa == 0.5
    assert suite.judge.min_labels == 2
    assert suite.judge.on_below_floor == "fail"
    assert [task.id for task in suite.tasks] == ["greet", "triage"]
    assert suite.tasks[0].cases == (
        Case(id="first", vars={"customer": "Ada", "topic": "billing"}),
        Case(id="second", vars={"customer": "Bo", "topic": "labels"}),
    )
    assert suite.labels == (
        Label("greet", "first", "fake/alpha", "fake/beta", "tie", "Both fine."),
    )


def test_same_case_id_in_two_tasks_is_allowed(tmp_path: Path) -> None:
    suite = load(tmp_path, base_suite())
    assert suite.task("greet").cases[0].id == suite.task("triage").cases[0].id == "first"


# ---------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("keys", "where"),
    [
        ((), "$"),
        (("defaults",), "$.defaults"),
        (("limits",), "$.limits"),
        (("judge",), "$.judge"),
        (("judge", "calibration"), "$.judge.calibration"),
        (("tasks", 1), "$.tasks[1]"),
        (("tasks", 0, "params"), "$.tasks[0].params"),
        (("tasks", 0, "cases", 1), "$.tasks[0].cases[1]"),
        (("labels", 0), "$.labels[0]"),
    ],
)
def test_unknown_key_is_named_with_its_path(
    tmp_path: Path, keys: tuple[str | int, ...], where: str
) -> None:
    document = base_suite()
    at(document, keys)["surprise_key"] = 1
    suite = dump_suite(tmp_path, document)
    expect_error(suite, where, "unknown key 'surprise_key'")


def test_unknown_key_in_cases_file_names_file_and_line(tmp_path: Path) -> None:
    document = base_suite()
    use_cases_file(document)
    cases = write_jsonl(
        tmp_path / "cases.jsonl",
        [{"id": "first", "vars": {}}, {"id": "second", "vars": {}, "refrence": "x"}],
    )
    err = expect_error(
        dump_suite(tmp_path, document), "line 2", "unknown key 'refrence'", file=cases.resolve()
    )
    assert "cases.jsonl" in str(err)


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl"])
def test_unknown_key_in_labels_file_names_file_and_entry(tmp_path: Path, suffix: str) -> None:
    document = base_suite()
    del document["labels"]
    document["labels_path"] = "labels" + suffix
    rows = [label(), label(case="first", reviewer="me")]
    target = tmp_path / ("labels" + suffix)
    if suffix == ".jsonl":
        write_jsonl(target, rows)
    else:
        target.write_text(yaml.safe_dump(rows), "utf-8")
    where = "line 2" if suffix == ".jsonl" else "$[1]"
    expect_error(
        dump_suite(tmp_path, document), where, "unknown key 'reviewer'", file=target.resolve()
    )


# ---------------------------------------------------------------- version and required keys


def test_missing_version_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    del document["version"]
    expect_error(dump_suite(tmp_path, document), "$", "missing required key 'version'")


def test_version_two_is_unsupported(tmp_path: Path) -> None:
    document = base_suite()
    document["version"] = 2
    expect_error(dump_suite(tmp_path, document), "$.version", "unsupported version 2")


@pytest.mark.parametrize(
    ("keys", "where"),
    [
        (("suite",), "$"),
        (("tasks",), "$"),
        (("tasks", 0, "prompt"), "$.tasks[0]"),
        (("tasks", 0, "cases", 1, "id"), "$.tasks[0].cases[1]"),
        (("labels", 0, "prefer"), "$.labels[0]"),
    ],
)
def test_missing_required_key(tmp_path: Path, keys: tuple[str | int, ...], where: str) -> None:
    document = base_suite()
    del at(document, keys[:-1])[keys[-1]]
    expect_error(dump_suite(tmp_path, document), where, f"missing required key {keys[-1]!r}")


def test_schema_and_schema_path_together_are_refused(tmp_path: Path) -> None:
    document = base_suite()
    (tmp_path / "out.json").write_text('{"type": "object"}', "utf-8")
    document["tasks"][1]["schema"] = {"type": "object"}
    document["tasks"][1]["schema_path"] = "out.json"
    expect_error(
        dump_suite(tmp_path, document), "$.tasks[1]", "use either schema or schema_path, not both"
    )


def test_cases_and_cases_path_together_are_refused(tmp_path: Path) -> None:
    document = base_suite()
    write_jsonl(tmp_path / "cases.jsonl", [{"id": "first"}])
    document["tasks"][1]["cases_path"] = "cases.jsonl"
    expect_error(
        dump_suite(tmp_path, document), "$.tasks[1]", "use either cases or cases_path, not both"
    )


def test_task_without_cases_or_cases_path_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    del document["tasks"][1]["cases"]
    expect_error(dump_suite(tmp_path, document), "$.tasks[1]", "needs one of: cases, cases_path")


def test_labels_and_labels_path_together_are_refused(tmp_path: Path) -> None:
    document = base_suite()
    (tmp_path / "labels.yaml").write_text(yaml.safe_dump([label()]), "utf-8")
    document["labels_path"] = "labels.yaml"
    expect_error(dump_suite(tmp_path, document), "$", "use either labels or labels_path, not both")


# ---------------------------------------------------------------- models


@pytest.mark.parametrize(
    ("keys", "where"),
    [
        (("models", 1), "$.models[1]"),
        (("labels", 0, "candidate"), "$.labels[0].candidate"),
        (("labels", 0, "baseline"), "$.labels[0].baseline"),
        (("judge", "model"), "$.judge.model"),
    ],
)
def test_model_without_provider_is_refused(
    tmp_path: Path, keys: tuple[str | int, ...], where: str
) -> None:
    document = base_suite()
    place(document, keys, "gpt4")
    expect_error(dump_suite(tmp_path, document), where, "model 'gpt4' is not 'provider/model'")


# ---------------------------------------------------------------- duplicates


def test_duplicate_task_id_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    document["tasks"][1]["id"] = "greet"
    expect_error(dump_suite(tmp_path, document), "$.tasks[1].id", "duplicate task id 'greet'")


def test_duplicate_case_id_within_a_task_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    document["tasks"][0]["cases"][1]["id"] = "first"
    expect_error(
        dump_suite(tmp_path, document),
        "$.tasks[0].cases[1].id",
        "duplicate case id 'first' in task 'greet'",
    )


def test_duplicate_case_id_in_cases_file_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    use_cases_file(document)
    rows = [{"id": "first", "vars": {"customer": "A", "topic": "t"}}]
    cases = write_jsonl(tmp_path / "cases.jsonl", rows * 2)
    expect_error(
        dump_suite(tmp_path, document),
        "line 2",
        "duplicate case id 'first' in task 'greet'",
        file=cases,
    )


# ---------------------------------------------------------------- templating


def one_task_suite(
    prompt: str, variables: dict[str, Any], system: str | None = None
) -> dict[str, Any]:
    document = base_suite()
    document["tasks"] = [
        {
            "id": "echo",
            "kind": "answer",
            "prompt": prompt,
            "cases": [{"id": "only", "vars": variables}],
        }
    ]
    if system is not None:
        document["tasks"][0]["system"] = system
    del document["labels"]
    return document


def render_only(suite: Suite) -> tuple[str | None, str]:
    task = suite.tasks[0]
    rendered = suite.render(task, task.cases[0])
    return rendered.system, rendered.prompt


def test_placeholders_with_and_without_spaces_are_substituted(tmp_path: Path) -> None:
    document = one_task_suite("A={{ a }} B={{b}} C={{  a  }}", {"a": "one", "b": "two"})
    _, prompt = render_only(load(tmp_path, document))
    assert prompt == "A=one B=two C=one"


def test_each_case_renders_its_own_values(tmp_path: Path) -> None:
    suite = load(tmp_path, base_suite())
    task = suite.task("greet")
    prompts = [suite.render(task, case).prompt for case in task.cases]
    assert prompts == ["Greet Ada about billing.", "Greet Bo about labels."]


def test_missing_variable_names_task_case_and_variable(tmp_path: Path) -> None:
    document = base_suite()
    del document["tasks"][0]["cases"][1]["vars"]["topic"]
    err = expect_error(
        dump_suite(tmp_path, document),
        "$.tasks[0].cases[1]",
        "placeholder {{ topic }} in the prompt has no variable 'topic'",
    )
    assert "(task 'greet', case 'second')" in err.problem


def test_substituted_values_are_not_substituted_again(tmp_path: Path) -> None:
    document = one_task_suite(
        "Say {{ text }} to {{ other }}", {"text": "{{ other }} and {{other}}", "other": "Bo"}
    )
    _, prompt = render_only(load(tmp_path, document))
    assert prompt == "Say {{ other }} and {{other}} to Bo"


def test_value_with_placeholder_for_missing_variable_is_kept_literal(tmp_path: Path) -> None:
    document = one_task_suite("Say {{ text }}", {"text": "{{ nowhere }}"})
    _, prompt = render_only(load(tmp_path, document))
    assert prompt == "Say {{ nowhere }}"


@pytest.mark.parametrize(
    "expression", ["{{ name | upper }}", "{{ a + b }}", "{{ name() }}", "{{ 1 }}", "{{}}"]
)
def test_expressions_are_refused(tmp_path: Path, expression: str) -> None:
    document = one_task_suite("Hello " + expression, {"name": "x", "a": 1, "b": 2})
    expect_error(
        dump_suite(tmp_path, document), "$.tasks[0].prompt", f"{expression!r} is not a placeholder"
    )


def test_default_system_prompt_is_rendered(tmp_path: Path) -> None:
    document = one_task_suite("Q {{ q }}", {"q": "why", "who": "Ada"})
    document["defaults"]["system"] = "You help {{ who }}."
    system, prompt = render_only(load(tmp_path, document))
    assert (system, prompt) == ("You help Ada.", "Q why")


def test_task_system_prompt_overrides_default_and_is_rendered(tmp_path: Path) -> None:
    document = one_task_suite("Q", {"who": "Ada"}, system="Task system for {{who}}.")
    document["defaults"]["system"] = "Default system."
    system, _ = render_only(load(tmp_path, document))
    assert system == "Task system for Ada."


def test_task_without_any_system_prompt_renders_none(tmp_path: Path) -> None:
    system, _ = render_only(load(tmp_path, one_task_suite("Q", {})))
    assert system is None


def test_missing_variable_in_default_system_prompt_is_a_load_error(tmp_path: Path) -> None:
    document = one_task_suite("Q", {})
    document["defaults"]["system"] = "You help {{ who }}."
    expect_error(dump_suite(tmp_path, document), "$.tasks[0].cases[0]", "has no variable 'who'")


def test_expression_in_task_system_prompt_is_refused(tmp_path: Path) -> None:
    document = one_task_suite("Q", {"a": 1, "b": 2}, system="Sum {{ a + b }}")
    expect_error(
        dump_suite(tmp_path, document), "$.tasks[0].system", "'{{ a + b }}' is not a placeholder"
    )


def test_numbers_and_booleans_render_with_str(tmp_path: Path) -> None:
    values = {"n": 3, "x": 2.5, "yes": True, "no": False}
    document = one_task_suite("{{ n }}|{{ x }}|{{ yes }}|{{ no }}", values)
    _, prompt = render_only(load(tmp_path, document))
    assert prompt == "|".join(str(value) for value in values.values())
    assert prompt == "3|2.5|True|False"


# ---------------------------------------------------------------- API keys


@pytest.mark.parametrize("key_name", sorted(FAKE_KEYS))
@pytest.mark.parametrize(
    ("keys", "where"),
    [
        (("tasks", 0, "prompt"), "$.tasks[0].prompt"),
        (("tasks", 0, "cases", 1, "vars", "token"), "$.tasks[0].cases[1].vars.token"),
        (("labels", 0, "note"), "$.labels[0].note"),
        (("defaults", "system"), "$.defaults.system"),
        (("judge", "rubric"), "$.judge.rubric"),
        (("description",), "$.description"),
    ],
)
def test_api_key_is_refused_where_it_sits(
    tmp_path: Path, key_name: str, keys: tuple[str | int, ...], where: str
) -> None:
    provider, key = FAKE_KEYS[key_name]
    document = base_suite()
    place(document, keys, f"use {key} for this")
    err = expect_error(dump_suite(tmp_path, document), where, "API key")
    assert provider in err.problem
    assert key not in str(err)
    assert key[-12:] not in str(err)


def test_api_key_in_cases_file_is_refused_without_echo(tmp_path: Path) -> None:
    _, key = FAKE_KEYS["anthropic"]
    document = base_suite()
    use_cases_file(document)
    write_jsonl(
        tmp_path / "cases.jsonl",
        [
            {"id": "first", "vars": {"customer": "Ada", "topic": "t"}},
            {"id": "second", "vars": {"customer": "Bo", "topic": "t", "token": key}},
        ],
    )
    with pytest.raises(SuiteError) as info:
        load_suite(dump_suite(tmp_path, document))
    err = info.value
    assert "API key" in err.problem and "Anthropic" in err.problem
    assert key not in str(err)
    assert "\n" not in str(err)
    # The key sits in cases.jsonl, line 2: that file and line are its exact location.
    assert "cases.jsonl" in str(err)
    assert "line 2" in str(err)


@pytest.mark.parametrize(
    ("keys", "where"),
    [(("models", 0), "$.models[0]"), (("labels", 0, "baseline"), "$.labels[0].baseline")],
)
def test_api_key_pasted_as_model_is_not_echoed(
    tmp_path: Path, keys: tuple[str | int, ...], where: str
) -> None:
    _, key = FAKE_KEYS["openai-project"]
    document = base_suite()
    place(document, keys, key)
    with pytest.raises(SuiteError) as info:
        load_suite(dump_suite(tmp_path, document))
    assert info.value.path == where
    assert key not in str(info.value)


def test_ordinary_text_with_sk_prefix_is_not_a_key(tmp_path: Path) -> None:
    document = base_suite()
    document["tasks"][0]["cases"][0]["vars"]["topic"] = "the sk-learn and AIza tickets"
    assert load(tmp_path, document).tasks[0].cases[0].vars["topic"].startswith("the sk-")


# ---------------------------------------------------------------- labels


def test_label_for_unknown_task_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    document["labels"].append(label(task="ghost"))
    expect_error(dump_suite(tmp_path, document), "$.labels[1].task", "no task 'ghost'")


def test_label_for_unknown_case_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    document["labels"].append(label(task="triage", case="second"))
    expect_error(
        dump_suite(tmp_path, document), "$.labels[1].case", "task 'triage' has no case 'second'"
    )


def test_label_comparing_a_model_with_itself_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    document["labels"].append(label(candidate="fake/alpha"))
    expect_error(
        dump_suite(tmp_path, document), "$.labels[1]", "baseline and candidate are the same model"
    )


@pytest.mark.parametrize("swapped", [False, True], ids=["same-order", "swapped"])
def test_duplicate_label_is_refused(tmp_path: Path, swapped: bool) -> None:
    document = base_suite()
    first = label(prefer="baseline")
    second = label(prefer="tie")
    if swapped:
        second["baseline"], second["candidate"] = second["candidate"], second["baseline"]
    document["labels"] = [first, label(case="first"), second]
    expect_error(dump_suite(tmp_path, document), "$.labels[2]", "duplicate label")


def test_labels_for_different_model_pairs_are_not_duplicates(tmp_path: Path) -> None:
    document = base_suite()
    document["labels"] = [label(), label(candidate="fake/gamma")]
    assert len(load(tmp_path, document).labels) == 2


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl"])
def test_labels_path_is_read(tmp_path: Path, suffix: str) -> None:
    document = base_suite()
    del document["labels"]
    document["labels_path"] = "labels" + suffix
    rows = [label(), label(case="first", prefer="baseline", note="crisper")]
    target = tmp_path / ("labels" + suffix)
    if suffix == ".jsonl":
        write_jsonl(target, rows)
    else:
        target.write_text(yaml.safe_dump(rows), "utf-8")
    suite = load(tmp_path, document)
    assert suite.labels == (
        Label("greet", "second", "fake/alpha", "fake/beta", "candidate", ""),
        Label("greet", "first", "fake/alpha", "fake/beta", "baseline", "crisper"),
    )
    assert "labels_path" not in suite.document
    assert suite.document["labels"] == rows


def test_labels_path_gives_same_hash_as_inline_labels(tmp_path: Path) -> None:
    inline = base_suite()
    inline["labels"] = [label()]
    from_file = base_suite()
    del from_file["labels"]
    from_file["labels_path"] = "labels.yaml"
    (tmp_path / "labels.yaml").write_text(yaml.safe_dump([label()]), "utf-8")
    assert hash_of(tmp_path, inline) == hash_of(tmp_path, from_file)


def test_labels_file_that_is_not_a_list_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    del document["labels"]
    document["labels_path"] = "labels.yaml"
    target = tmp_path / "labels.yaml"
    target.write_text(yaml.safe_dump(label()), "utf-8")
    expect_error(
        dump_suite(tmp_path, document), "$", "holds a list of labels", file=target.resolve()
    )


def test_missing_labels_file_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    del document["labels"]
    document["labels_path"] = "nowhere.yaml"
    expect_error(dump_suite(tmp_path, document), "$.labels_path", "nowhere.yaml: file not found")


def test_malformed_line_in_labels_jsonl_is_a_suite_error(tmp_path: Path) -> None:
    document = base_suite()
    del document["labels"]
    document["labels_path"] = "labels.jsonl"
    target = tmp_path / "labels.jsonl"
    target.write_text(json.dumps(label()) + "\n{not json\n", "utf-8")
    with pytest.raises(SuiteError) as info:
        load_suite(dump_suite(tmp_path, document))
    assert "labels.jsonl" in str(info.value)
    assert "line 2" in str(info.value)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- referenced files


def test_missing_schema_file_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    document["tasks"][1]["schema_path"] = "schemas/absent.json"
    expect_error(
        dump_suite(tmp_path, document),
        "$.tasks[1].schema_path",
        "schemas/absent.json: file not found",
    )


def test_schema_file_paths_are_relative_to_the_suite(tmp_path: Path) -> None:
    (tmp_path / "suites" / "schemas").mkdir(parents=True)
    schema = {"type": "object", "required": ["category"]}
    (tmp_path / "suites" / "schemas" / "out.json").write_text(json.dumps(schema), "utf-8")
    document = base_suite()
    document["tasks"][1]["schema_path"] = "schemas/out.json"
    suite = load_suite(dump_suite(tmp_path / "suites", document))
    assert suite.task("triage").schema == schema


def test_schema_file_with_bad_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text('{"type": ', "utf-8")
    document = base_suite()
    document["tasks"][1]["schema_path"] = "out.json"
    expect_error(dump_suite(tmp_path, document), "$", "not valid JSON", file=tmp_path / "out.json")


def test_inline_schema_that_is_not_json_schema_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    document["tasks"][1]["schema"] = {"type": 5}
    expect_error(
        dump_suite(tmp_path, document), "$.tasks[1].schema.type", "not a valid JSON Schema"
    )


def test_schema_file_that_is_not_json_schema_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text('{"type": 5}', "utf-8")
    document = base_suite()
    document["tasks"][1]["schema_path"] = "out.json"
    expect_error(
        dump_suite(tmp_path, document),
        "$.type",
        "not a valid JSON Schema",
        file=tmp_path / "out.json",
    )


def test_malformed_json_line_in_cases_file_names_the_line(tmp_path: Path) -> None:
    document = base_suite()
    use_cases_file(document)
    target = tmp_path / "cases.jsonl"
    good = json.dumps({"id": "first", "vars": {"customer": "A", "topic": "t"}})
    target.write_text(good + '\n\n{"id": "second",\n', "utf-8")
    expect_error(dump_suite(tmp_path, document), "line 3", "not valid JSON", file=target.resolve())


def test_cases_line_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    use_cases_file(document)
    target = tmp_path / "cases.jsonl"
    target.write_text('["first"]\n', "utf-8")
    expect_error(
        dump_suite(tmp_path, document), "line 1", "not of type 'object'", file=target.resolve()
    )


@pytest.mark.parametrize("content", ["", "\n   \n\n"], ids=["empty", "blank-lines"])
def test_cases_file_without_cases_is_refused(tmp_path: Path, content: str) -> None:
    document = base_suite()
    use_cases_file(document)
    (tmp_path / "cases.jsonl").write_text(content, "utf-8")
    expect_error(
        dump_suite(tmp_path, document), "$.tasks[0].cases_path", "cases.jsonl holds no cases"
    )


def test_missing_cases_file_is_refused(tmp_path: Path) -> None:
    document = base_suite()
    use_cases_file(document, "data/cases.jsonl")
    expect_error(
        dump_suite(tmp_path, document), "$.tasks[0].cases_path", "data/cases.jsonl: file not found"
    )


def test_cases_file_skips_blank_lines_and_keeps_order(tmp_path: Path) -> None:
    document = base_suite()
    use_cases_file(document)
    ids = ["zeta", "alpha", "first", "mid"]
    rows = [{"id": case_id, "vars": {"customer": case_id, "topic": "t"}} for case_id in ids]
    text = "\n".join(json.dumps(row) for row in rows[:2]) + "\n\n" + json.dumps(rows[2])
    (tmp_path / "cases.jsonl").write_text(text + "\n" + json.dumps(rows[3]) + "\n", "utf-8")
    suite = load(tmp_path, document)
    assert [case.id for case in suite.task("greet").cases] == ids
    assert suite.document["tasks"][0]["cases"] == rows


# ---------------------------------------------------------------- YAML shape


def test_yaml_syntax_error_is_one_line_with_line_number(tmp_path: Path) -> None:
    suite = tmp_path / "broken.eval.yaml"
    suite.write_text("version: 1\nsuite: demo\ntasks: [\n  {id: a\n", "utf-8")
    err = expect_error(suite, "", "not valid YAML at line ")
    assert re.search(r"line \d+ column \d+", err.problem)
    assert str(err).startswith(f"{suite}: not valid YAML")


def test_yaml_indentation_error_reports_its_line(tmp_path: Path) -> None:
    suite = tmp_path / "broken.eval.yaml"
    suite.write_text("version: 1\n  suite: demo\n", "utf-8")
    expect_error(suite, "", "not valid YAML at line 2")


@pytest.mark.parametrize("text", ["- version: 1\n- suite: x\n", "", "just a string\n"])
def test_suite_that_is_not_a_mapping_is_refused(tmp_path: Path, text: str) -> None:
    suite = tmp_path / "list.eval.yaml"
    suite.write_text(text, "utf-8")
    expect_error(suite, "$", "a suite must be a mapping")


def test_missing_suite_file_is_refused(tmp_path: Path) -> None:
    expect_error(tmp_path / "absent.eval.yaml", "", "cannot read")


def test_suite_file_that_is_not_utf8_is_a_suite_error(tmp_path: Path) -> None:
    suite = tmp_path / "latin1.eval.yaml"
    suite.write_bytes("version: 1\nsuite: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(SuiteError) as info:
        load_suite(suite)
    assert info.value.file == str(suite)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- params


def test_task_params_override_defaults(tmp_path: Path) -> None:
    suite = load(tmp_path, base_suite())
    greet, triage = suite.task("greet").params, suite.task("triage").params
    assert (greet.max_tokens, greet.temperature) == (50, 0.7)
    assert (triage.max_tokens, triage.temperature) == (200, 0.2)
    assert greet.timeout_s == triage.timeout_s == 30.0
    assert greet.stop == triage.stop == ("END",)


def test_params_defaults_when_nothing_is_set(tmp_path: Path) -> None:
    document = base_suite()
    del document["defaults"]
    del document["tasks"][0]["params"]
    suite = load(tmp_path, document)
    for task in suite.tasks:
        assert task.params.temperature is None
        assert task.params.top_p is None
        assert task.params.max_tokens == 1024
        assert task.params.timeout_s == 60.0
        assert task.params.stop == ()
        assert task.judge is True


def test_top_p_and_temperature_stay_unset_unless_given(tmp_path: Path) -> None:
    document = base_suite()
    document["defaults"] = {"max_tokens": 10}
    document["tasks"][1]["params"] = {"top_p": 0.9}
    suite = load(tmp_path, document)
    assert (suite.task("greet").params.temperature, suite.task("greet").params.top_p) == (
        0.7,
        None,
    )
    assert (suite.task("triage").params.temperature, suite.task("triage").params.top_p) == (
        None,
        0.9,
    )


def test_task_judge_flag(tmp_path: Path) -> None:
    document = base_suite()
    document["tasks"][1]["judge"] = False
    suite = load(tmp_path, document)
    assert suite.task("greet").judge is True
    assert suite.task("triage").judge is False


def test_judge_calibration_defaults(tmp_path: Path) -> None:
    document = base_suite()
    del document["judge"]
    judge = load(tmp_path, document).judge
    assert (judge.model, judge.rubric) == (None, "")
    assert (judge.min_kappa, judge.min_labels, judge.on_below_floor) == (0.40, 10, "flag")


# ---------------------------------------------------------------- suite hash


def test_hash_is_sha256_of_canonical_document_without_models_and_limits(tmp_path: Path) -> None:
    suite = load(tmp_path, base_suite())
    assert HEX64.fullmatch(suite.hash)
    assert "models" in suite.document and "limits" in suite.document
    content = {k: v for k, v in suite.document.items() if k not in ("models", "limits")}
    assert suite.hash == sha256_hex(content)
    assert suite.hash != sha256_hex(suite.document)


def test_hash_document_has_referenced_files_inlined(tmp_path: Path) -> None:
    document = base_suite()
    use_cases_file(document)
    rows = [{"id": "first", "vars": {"customer": "A", "topic": "t"}}]
    write_jsonl(tmp_path / "cases.jsonl", rows)
    (tmp_path / "out.json").write_text('{"type": "object"}', "utf-8")
    document["tasks"][1]["schema_path"] = "out.json"
    suite = load(tmp_path, document)
    greet, triage = suite.document["tasks"]
    assert "cases_path" not in greet and greet["cases"] == rows
    assert "schema_path" not in triage and triage["schema"] == {"type": "object"}


def test_hash_ignores_key_order(tmp_path: Path) -> None:
    first = dump_suite(tmp_path, base_suite(), "a.eval.yaml")
    second = dump_suite(tmp_path, reversed_keys(base_suite()), "b.eval.yaml")
    assert first.read_text("utf-8") != second.read_text("utf-8")
    assert load_suite(first).hash == load_suite(second).hash


@pytest.mark.parametrize(
    ("keys", "value"),
    [
        (("models",), ["fake/gamma"]),
        (("models", 1), "fake/delta"),
        (("limits",), {"max_cost_usd": 99.0}),
        (("limits",), {}),
    ],
)
def test_hash_ignores_models_and_limits(
    tmp_path: Path, keys: tuple[str | int, ...], value: Any
) -> None:
    document = base_suite()
    place(document, keys, value)
    assert hash_of(tmp_path, document) == hash_of(tmp_path, base_suite())


def test_hash_ignores_removing_models_and_limits(tmp_path: Path) -> None:
    document = base_suite()
    del document["models"], document["limits"]
    assert hash_of(tmp_path, document) == hash_of(tmp_path, base_suite())


@pytest.mark.parametrize(
    ("keys", "value"),
    [
        (("tasks", 0, "prompt"), "Greet {{ customer }} warmly about {{ topic }}."),
        (("tasks", 0, "cases", 1, "vars", "topic"), "returns"),
        (("labels", 0, "prefer"), "baseline"),
        (("labels", 0, "note"), "Baseline is shorter."),
        (("defaults", "system"), "Be brief."),
        (("judge", "rubric"), "Prefer short answers."),
    ],
)
def test_hash_changes_with_content(tmp_path: Path, keys: tuple[str | int, ...], value: Any) -> None:
    document = base_suite()
    before = hash_of(tmp_path, copy.deepcopy(document))
    place(document, keys, value)
    assert hash_of(tmp_path, document) != before


def test_hash_changes_when_cases_file_changes(tmp_path: Path) -> None:
    document = base_suite()
    use_cases_file(document)
    suite = dump_suite(tmp_path, document)
    rows = [
        {"id": "first", "vars": {"customer": "Ada", "topic": "billing"}},
        {"id": "second", "vars": {"customer": "Bo", "topic": "labels"}},
    ]
    write_jsonl(tmp_path / "cases.jsonl", rows)
    before = load_suite(suite).hash
    rows[1]["vars"]["topic"] = "returns"
    write_jsonl(tmp_path / "cases.jsonl", rows)
    assert load_suite(suite).hash != before


def test_hash_changes_when_schema_file_changes(tmp_path: Path) -> None:
    document = base_suite()
    document["tasks"][1]["schema_path"] = "out.json"
    suite = dump_suite(tmp_path, document)
    schema_file = tmp_path / "out.json"
    schema_file.write_text('{"type": "object"}', "utf-8")
    before = load_suite(suite).hash
    schema_file.write_text('{"type": "object", "required": ["category"]}', "utf-8")
    assert load_suite(suite).hash != before


def test_schema_file_and_inline_schema_hash_alike(tmp_path: Path) -> None:
    schema = {"type": "object", "required": ["category"]}
    (tmp_path / "out.json").write_text(json.dumps(schema), "utf-8")
    by_file = base_suite()
    by_file["tasks"][1]["schema_path"] = "out.json"
    inline = base_suite()
    inline["tasks"][1]["schema"] = schema
    assert hash_of(tmp_path, by_file) == hash_of(tmp_path, inline)
