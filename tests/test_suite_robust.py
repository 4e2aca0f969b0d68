"""Bad suite files: one line per problem, bounded time and size, never a traceback.

The regression corpus holds the inputs that crashed or hung the loader (issue 9); each is
generated here, small, rather than kept as a file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_evalmine.errors import SuiteError
from pytest_evalmine.scoring.checks import check_answer
from pytest_evalmine.suite import reading
from pytest_evalmine.suite.loader import load_suite
from pytest_evalmine.suite.problems import MAX_ERRORS
from pytest_evalmine.suite.reading import looks_like_api_key

HEAD = "version: 1\nsuite: s\nmodels: [fake/a]\n"
LINE = re.compile(r"^[^\n]+: [^\n]+$")


def task(prompt: str = "p", extra: str = "", cases: str = "[{id: c}]") -> str:
    return f"tasks:\n- id: t\n  kind: answer\n  prompt: {prompt}\n{extra}  cases: {cases}\n"


def alias_bomb(levels: int = 8) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]")
    return HEAD + "\n".join(lines) + "\n" + task()


CORPUS: dict[str, tuple[str, str]] = {
    # name: (suite text, a fragment of the expected message)
    "mixed key types": (HEAD + task(cases="[{id: c, vars: {q: x, 1: y}}]"), "is not a string"),
    "boolean key": (HEAD + task(cases="[{id: c, vars: {on: x}}]"), "as booleans"),
    "set in a schema": (
        HEAD + task(extra="  schema: {type: object, enum: !!set {a, b}}\n"),
        "YAML tag tag:yaml.org,2002:set is not allowed",
    ),
    "binary in a schema": (
        HEAD + task(extra="  schema: {type: object, const: !!binary aGVsbG8=}\n"),
        "YAML tag tag:yaml.org,2002:binary",
    ),
    # found by tests/test_suite_fuzz.py: the name printed as nothing ("$.labels_path: : ...")
    "labels_path of a carriage return": (
        HEAD + 'labels_path: "\\r"\n' + task(),
        "'\\r': file not found",
    ),
    # found by tests/test_suite_fuzz.py: '¹' passes str.isdigit() but int() refuses it
    "superscript digit as a key among problems": (
        HEAD + task(cases='[{id: c, gold: {"\u00b9": 1' + "0" * 19 + ', "2": 1' + "0" * 19 + "}}]"),
        "gold.\u00b9: an integer of more than 19 digits",
    ),
    "timestamp tag": (HEAD.replace("suite: s", "suite: !!timestamp foo"), "timestamp"),
    "python tag": (HEAD + task(prompt="!!python/name:os.system x"), "python/name"),
    "5,000-digit integer": (
        HEAD + task(extra=f"  params: {{max_tokens: {'9' * 5000}}}\n"),
        "an integer of more than 19 digits",
    ),
    "timeout 1e400": (
        HEAD + task(extra="  params: {timeout_s: 1.0e+400}\n"),
        "is not a finite number",
    ),
    "timeout 1e400 (a string in YAML 1.1)": (
        HEAD + task(extra="  params: {timeout_s: 1e400}\n"),
        "'1e400' is not a finite number",
    ),
    "nan": (HEAD + task(extra="  params: {temperature: .nan}\n"), "is not a finite number"),
    "500 levels of nesting": (HEAD + "x: " + "[" * 500 + "]" * 500 + "\n" + task(), "nested"),
    "alias bomb": (alias_bomb(), "alias bomb"),
    "alias cycle": (HEAD + "x: &x [*x]\n" + task(), "refers to a node that contains it"),
    "duplicate key": (
        HEAD + "tasks:\n- id: t\n  kind: answer\n  prompt: a\n  prompt: b\n  cases: [{id: c}]\n",
        "duplicate key 'prompt' (lines 7 and 8)",
    ),
    "64 KB of opening braces": (
        HEAD + task(prompt="'" + "{{" * 32768 + "'"),
        "opens a placeholder that is never closed",
    ),
    "unclosed placeholder": (HEAD + task(prompt="'Hi {{ x }'"), "never closed"),
    "4 MB string": (HEAD + task(prompt="'" + "x" * 4_000_000 + "'"), "the limit is 1000000"),
    "schema_path with NUL": (
        HEAD + task(extra='  schema_path: "a\\0b.json"\n'),
        ": not a usable file path (",
    ),
    "schema_path of 5,000 characters": (
        HEAD + task(extra=f"  schema_path: {'a' * 5000}.json\n"),
        ": not a usable file path (",
    ),
    "two documents": (HEAD + task() + "---\nx: 1\n", "not valid YAML"),
    "tab indentation": (HEAD + "tasks:\n\t- id: t\n", "not valid YAML at line"),
    "scalar suite": ("just text\n", "a suite must be a mapping"),
    "list suite": ("- 1\n- 2\n", "a suite must be a mapping"),
    "empty file": ("", "a suite must be a mapping"),
    "remote $ref": (
        HEAD + task(extra="  schema: {$ref: 'http://127.0.0.1:9/x.json'}\n"),
        "is remote; references resolve only inside the suite",
    ),
    "self $ref": (HEAD + task(extra="  schema: {$ref: '#'}\n"), "loops without descending"),
    "dangling $ref": (HEAD + task(extra="  schema: {$ref: '#/$defs/none'}\n"), "points to nothing"),
    "file $ref outside the suite": (
        HEAD + task(extra="  schema: {$ref: '../elsewhere.json'}\n"),
        "points outside the suite's folder",
    ),
}


def write(tmp_path: Path, text: str, name: str = "x.eval.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def refused(path: Path, shown: str | None = None) -> SuiteError:
    with pytest.raises(SuiteError) as info:
        load_suite(path, shown=shown)
    for line in str(info.value).splitlines():
        assert LINE.match(line), line
        assert len(line) < 400, line
    return info.value


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_input_is_refused_in_clean_lines(tmp_path: Path, name: str) -> None:
    text, expected = CORPUS[name]
    error = refused(write(tmp_path, text), shown="suites/x.eval.yaml")
    assert expected in str(error)
    assert all(line.startswith("suites/x.eval.yaml: ") for line in str(error).splitlines())


def test_alias_bomb_is_refused_without_expanding(tmp_path: Path) -> None:
    # 9^12 values if expanded: only a walk over distinct nodes can answer at all.
    error = refused(write(tmp_path, alias_bomb(levels=12)))
    assert "alias bomb" in str(error)


def test_aliases_within_the_bound_still_work(tmp_path: Path) -> None:
    text = HEAD + (
        "defaults: &d {max_tokens: 40}\n"
        "tasks:\n"
        "- id: t\n  kind: answer\n  prompt: p\n  params: *d\n  cases: &cs [{id: c}]\n"
        "- id: u\n  kind: answer\n  prompt: p\n  params: {<<: *d, timeout_s: 5}\n  cases: *cs\n"
    )
    suite = load_suite(write(tmp_path, text))
    assert [t.params.max_tokens for t in suite.tasks] == [40, 40]
    assert suite.task("u").params.timeout_s == 5


def test_dates_stay_strings(tmp_path: Path) -> None:
    text = HEAD + task(prompt="'Due {{ due }}'", cases="[{id: c, vars: {due: 2024-05-01}}]")
    suite = load_suite(write(tmp_path, text))
    assert suite.render(suite.tasks[0], suite.tasks[0].cases[0]).prompt == "Due 2024-05-01"


def test_oversized_file_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "MAX_FILE_BYTES", 100)
    error = refused(write(tmp_path, HEAD + task() + "#" * 200))
    assert "the limit is 100 bytes" in str(error)


def test_parser_exceptions_of_any_class_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PyYAML raised AttributeError on '!!timestamp foo'; whatever it raises is one line.
    def broken(self: object) -> None:
        raise AttributeError("'NoneType' object has no attribute 'group'")

    monkeypatch.setattr(reading._loader_class(), "get_single_node", broken)
    error = refused(write(tmp_path, HEAD + task()))
    assert "not valid YAML" in str(error)


# ---------------------------------------------------------------- templating


def test_escaped_braces_are_literal(tmp_path: Path) -> None:
    text = HEAD + task(prompt=r"'Write \{{ name }} for {{ x }}'", cases="[{id: c, vars: {x: 1}}]")
    suite = load_suite(write(tmp_path, text))
    assert suite.render(suite.tasks[0], suite.tasks[0].cases[0]).prompt == "Write {{ name }} for 1"


def test_closing_braces_alone_are_literal(tmp_path: Path) -> None:
    text = HEAD + task(prompt='\'JSON like {"a": {"b": 1}}\'')
    suite = load_suite(write(tmp_path, text))
    assert suite.tasks[0].prompt.endswith("}}")


def test_null_variable_renders_empty(tmp_path: Path) -> None:
    text = HEAD + task(prompt="'[{{ x }}]'", cases="[{id: c, vars: {x: null}}]")
    suite = load_suite(write(tmp_path, text))
    assert suite.render(suite.tasks[0], suite.tasks[0].cases[0]).prompt == "[]"


# ---------------------------------------------------------------- all errors at once


def test_several_mistakes_are_all_reported_sorted_by_path(tmp_path: Path) -> None:
    text = HEAD + (
        "tasks:\n"
        "- id: t\n  kind: answer\n  prompt: p\n  promt: q\n  cases: [{id: c}]\n"
        "- id: u\n  kind: answer\n  prompt: p\n  cases: [{id: c, vars: {x: [1]}}]\n"
    )
    text = text.replace("models: [fake/a]", "models: [nomodel]")
    lines = str(refused(write(tmp_path, text))).splitlines()
    assert len(lines) == 3
    assert [line.split(": ")[1] for line in lines] == [
        "$.models[0]",
        "$.tasks[0]",
        "$.tasks[1].cases[0].vars.x",
    ]
    assert "model 'nomodel' is not 'provider/model'" in lines[0]
    assert "unknown key 'promt'" in lines[1]


def test_many_mistakes_are_capped(tmp_path: Path) -> None:
    cases = ", ".join(f"{{id: c{i}, extra: 1}}" for i in range(50))
    lines = str(refused(write(tmp_path, HEAD + task(cases=f"[{cases}]")))).splitlines()
    assert len(lines) == MAX_ERRORS + 1
    assert lines[-1].endswith(f"{50 - MAX_ERRORS} more problem(s) not shown")
    assert "$.tasks[0].cases[2]" in lines[2]  # numeric order, not text order


def test_quoted_values_are_clipped(tmp_path: Path) -> None:
    text = HEAD + task(extra="  judge: '" + "y" * 100_000 + "'\n")
    error = refused(write(tmp_path, text))
    assert len(str(error)) < 300
    assert "(100000 characters)" in str(error)  # the value's own length, not its quotes


# ---------------------------------------------------------------- referenced files


def test_duplicate_id_in_jsonl_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    rows = [{"id": "a"}, {"id": "b"}, {"id": "a"}]
    (tmp_path / "data" / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows), "utf-8")
    text = HEAD + "tasks:\n- id: t\n  kind: answer\n  prompt: p\n  cases_path: data/c.jsonl\n"
    error = refused(write(tmp_path, text), shown="suites/x.eval.yaml")
    assert str(error) == "suites/data/c.jsonl: line 3: duplicate case id 'a' in task 't'"


def test_jsonl_duplicate_keys_and_constants_are_refused(tmp_path: Path) -> None:
    lines = ['{"id": "a", "id": "b"}', '{"id": "c", "vars": {"x": NaN}}']
    (tmp_path / "c.jsonl").write_text("\n".join(lines), "utf-8")
    text = HEAD + "tasks:\n- id: t\n  kind: answer\n  prompt: p\n  cases_path: c.jsonl\n"
    message = str(refused(write(tmp_path, text)))
    assert "line 1: not valid JSON: duplicate key 'id'" in message
    assert "line 2: not valid JSON: NaN is not a finite number" in message


def test_api_key_inside_schema_file_is_refused(tmp_path: Path) -> None:
    key = "sk-" + "proj-" + "Ab3" * 20
    schema = {"type": "object", "description": f"use {key}"}
    (tmp_path / "s.json").write_text(json.dumps(schema), "utf-8")
    error = refused(write(tmp_path, HEAD + task(extra="  schema_path: s.json\n")))
    assert "s.json: $.description: looks like an API key (OpenAI format)" in str(error)
    assert key not in str(error)


def test_file_refs_resolve_inside_the_suite_only(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    defs = {"$defs": {"label": {"enum": ["bug", "billing"]}}}
    (tmp_path / "schemas" / "defs.json").write_text(json.dumps(defs), "utf-8")
    root = {
        "type": "object",
        "properties": {"label": {"$ref": "defs.json#/$defs/label"}},
        "required": ["label"],
    }
    (tmp_path / "schemas" / "answer.json").write_text(json.dumps(root), "utf-8")
    suite = load_suite(write(tmp_path, HEAD + task(extra="  schema_path: schemas/answer.json\n")))
    found = suite.tasks[0]
    assert check_answer('{"label": "bug"}', found.schema, found.schema_refs).passed
    failed = check_answer('{"label": "x"}', found.schema, found.schema_refs).failed
    assert failed is not None and failed.name == "schema"


def test_a_schema_check_error_never_stops_the_run() -> None:
    # A schema the loader would refuse, given directly: the check fails, nothing is raised.
    result = check_answer('{"a": 1}', {"$ref": "#"})
    assert result.failed is not None and "could not be checked" in result.failed.message
    remote = check_answer('{"a": 1}', {"$ref": "http://127.0.0.1:9/never.json"})
    assert remote.failed is not None and "could not be checked" in remote.failed.message


# ---------------------------------------------------------------- key shapes


@pytest.mark.parametrize(
    ("text", "provider"),
    [
        ("sk-" + "ant-" + "api03-" + "Zx9" * 31, "Anthropic"),
        ("sk-" + "proj-" + "Ab3_" * 30, "OpenAI"),
        ("sk-" + "Qw7" * 16, "OpenAI"),
        ("sk-" + "svcacct-" + "Jk2" * 20, "OpenAI"),
        ("AI" + "za" + "Sy" + "B3k" * 11, "Google"),
        ("see sk-" + "Qw7" * 16 + " here", "OpenAI"),
    ],
)
def test_real_key_shapes_are_recognised(text: str, provider: str) -> None:
    assert looks_like_api_key(text) == provider


@pytest.mark.parametrize(
    "text",
    [
        "sk-learn-pipeline-with-gridsearch-cv",
        "sk-learn-pipeline-with-gridsearch-cv-and-standard-scaler-v2",
        "sk-" + "ant-colony-optimisation-for-routing-problems",  # built: a near miss, not a key
        "sk-" + "a" * 40,  # one character class: not random
        "sk-" + "Ab3" * 5,  # too short
        "AIza" + "Sy" + "B3k" * 11 + "X",  # 36 characters after AIza: not a Google key
        "AIzaSyShort",
        "task-" + "Qw7" * 16,  # no sk- prefix
    ],
)
def test_near_misses_are_not_keys(text: str) -> None:
    assert looks_like_api_key(text) is None
