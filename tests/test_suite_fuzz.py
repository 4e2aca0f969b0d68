"""Property-based fuzzing of the suite loader: whatever the file holds, the loader returns a
``Suite`` or raises ``EvalmineError`` with one ``file: ...`` line per problem, and it never
hangs.

Suites are generated from the loader's own JSON Schema (so most of them get deep into the
loader), then mutated: keys deleted and inserted, values of the wrong type, odd numbers and
unicode, deep nesting, long strings, and, in the YAML text, anchors and aliases, tags,
duplicate keys and broken bytes. Seed and example count are fixed so CI is reproducible;
``EVALMINE_FUZZ_EXAMPLES`` raises the count for a longer local run.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.suite.loader import load_suite

SCHEMA: dict[str, Any] = json.loads(
    resources.files("pytest_evalmine.suite").joinpath("schema.json").read_text("utf-8")
)
EXAMPLES = int(os.environ.get("EVALMINE_FUZZ_EXAMPLES", "120"))

# Every property: seeded and repeatable, no example database, no deadline on a shared machine.
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None)
# Inputs drawn from everything (bytes, any JSON): most are filtered or slow, by design.
FUZZ_ANY_INPUT = settings(FUZZ, suppress_health_check=list(HealthCheck))
# A hang guard, not a speed requirement: the slowest inputs of issue 9 ran for minutes.
HANG_S = 30
SHOWN = "suites/fuzz.eval.yaml"
LINE = re.compile(r"^suites/[^\n]*: [^\n]+$")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        target: Any = SCHEMA
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def from_schema(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of the subset of JSON Schema the suite schema uses (validity is not
    guaranteed: constraints across keys are ignored, mutations break the rest anyway)."""
    schema = resolve(schema)
    if depth > 6:
        return scalars
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            return st.one_of([from_schema(option, depth + 1) for option in schema[combinator]])
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, depth) for k in kind])
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: len(s) < 60)
        return st.text(min_size=schema.get("minLength", 0), max_size=40)
    if kind == "integer":
        return st.integers(
            min_value=schema.get("minimum", -5), max_value=schema.get("maximum", 5000)
        )
    if kind == "number":
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        return st.floats(
            min_value=low,
            max_value=schema.get("maximum", 100),
            exclude_min="exclusiveMinimum" in schema,
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(
            from_schema(schema.get("items", {}), depth + 1),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 3), 3),
        )
    if kind == "object":
        properties = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in properties]
        optional = [k for k in properties if k not in required]
        return st.fixed_dictionaries(
            {k: from_schema(properties[k], depth + 1) for k in required},
            optional={k: from_schema(properties[k], depth + 1) for k in optional},
        )
    return json_values


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


@st.composite
def mutated_document(draw: st.DrawFn) -> Any:
    document = draw(from_schema(SCHEMA))
    for _ in range(draw(st.integers(0, 3))):
        places = list(paths(document))
        path = draw(st.sampled_from(places))
        parent_path, last = path[:-1], path[-1] if path else None
        action = draw(
            st.sampled_from(["delete", "insert", "replace", "nest", "long", "mixed_keys", "files"])
        )
        if not path:
            if action == "replace":
                document = draw(json_values)
            continue
        parent = at(document, parent_path)
        if action == "delete":
            del parent[last]
        elif action == "insert" and isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(json_values)
        elif action == "replace":
            parent[last] = draw(json_values)
        elif action == "nest":
            deep: Any = draw(scalars)
            for _ in range(draw(st.integers(1, 120))):
                deep = [deep]
            parent[last] = deep
        elif action == "long":
            parent[last] = draw(st.sampled_from(["{{", "x", "{{ a }}", "é"])) * draw(
                st.sampled_from([10, 5000, 70_000, 1_100_000])
            )
        elif action == "mixed_keys":
            parent[last] = {"q": "x", 1: "y", None: True}
        elif action == "files" and isinstance(document, dict):
            tasks = document.get("tasks")
            if isinstance(tasks, list) and tasks and isinstance(tasks[0], dict):
                tasks[0].pop("cases", None)
                tasks[0]["cases_path"] = "cases.jsonl"
                tasks[-1]["schema_path"] = "schema.json"
            document["labels_path"] = "labels.yaml"
    return document


TEXT_MUTATIONS = [
    "none",
    "alias_bomb",
    "alias_cycle",
    "tag",
    "duplicate_key",
    "flip_byte",
    "truncate",
    "tab",
    "merge",
    "date",
]
TAGS = [
    "!!set {a, b}",
    "!!binary aGVsbG8=",
    "!!timestamp foo",
    "!!python/name:os.system",
    "!!omap [a: 1]",
    "!custom x",
]


def mutate_text(text: str, action: str, position: int, tag: str) -> str:
    cut = position % (len(text) + 1)
    if action == "alias_bomb":
        bomb = ['b0: &b0 ["x","x","x","x","x","x","x","x","x"]']
        bomb += [f"b{i}: &b{i} [{','.join([f'*b{i - 1}'] * 9)}]" for i in range(1, 9)]
        return "\n".join(bomb) + "\n" + text
    if action == "alias_cycle":
        return "loop: &loop [*loop]\n" + text
    if action == "tag":
        return f"tagged: {tag}\n" + text
    if action == "duplicate_key":
        return text + "version: 1\n"
    if action == "flip_byte":
        return text[:cut] + chr((position * 7919) % 0x2FFF + 1) + text[cut + 1 :]
    if action == "truncate":
        return text[:cut]
    if action == "tab":
        return text[:cut] + "\t" + text[cut:]
    if action == "merge":
        return "base: &base {a: 1}\nmerged: {<<: *base, <<: [*base, 5]}\n" + text
    if action == "date":
        return "when: 2024-05-01\n" + text
    return text


class Hang(Exception):
    pass


@contextmanager
def hang_guard(seconds: int) -> Iterator[None]:
    def alarm(signum: int, frame: Any) -> None:
        raise Hang(f"loading took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def load_once(folder: Path, text: str, side_file: str | None) -> str:
    """``ok``, ``clean`` (one line per problem), or raises what the loader let escape."""
    (folder / "fuzz.eval.yaml").write_text(text, "utf-8", errors="surrogatepass")
    for name in ("cases.jsonl", "schema.json", "labels.yaml"):
        (folder / name).write_text(side_file or "", "utf-8", errors="surrogatepass")
    try:
        with hang_guard(HANG_S):
            load_suite(folder / "fuzz.eval.yaml", shown=SHOWN)
    except EvalmineError as exc:
        lines = str(exc).splitlines()
        assert lines, "an empty error message"
        for line in lines:
            assert LINE.match(line), f"not a one-line 'file: ...' problem: {line[:300]!r}"
            assert len(line) < 1000, f"an error line of {len(line)} characters"
        return "clean"
    return "ok"


def suite_text(document: Any) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    try:
        return yaml.dump(document, Dumper=dumper, allow_unicode=True, sort_keys=False)
    except Exception:  # e.g. a surrogate the emitter refuses: the JSON text is YAML too
        return json.dumps(document, default=str)


fuzz_inputs = st.tuples(
    mutated_document(),
    st.sampled_from(TEXT_MUTATIONS),
    st.integers(0, 10_000),
    st.sampled_from(TAGS),
    st.one_of(
        st.none(),
        st.sampled_from(
            [
                '{"id": "a"}\n{"id": "a"}\n',
                '{"$ref": "#"}',
                "{",
                "[1, 2]",
                '{"$ref": "http://127.0.0.1:9/x"}',
                "- {task: x}\n",
            ]
        ),
    ),
)


@pytest.mark.filterwarnings("ignore")
@seed(20261201)
@FUZZ_ANY_INPUT
@given(fuzz_inputs)
def test_any_suite_loads_or_is_refused_in_clean_lines(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[Any, str, int, str, str | None]
) -> None:
    document, action, position, tag, side_file = case
    folder = tmp_path_factory.mktemp("fuzz")
    text = mutate_text(suite_text(document), action, position, tag)
    load_once(folder, text, side_file)


# CSV cases --------------------------------------------------------------------------------
CSV_SUITE = """\
version: 1
suite: fuzz
models: [fake/a, fake/b]
tasks:
  - id: t
    kind: qa
    prompt: "Answer."
    cases_path: cases.csv
"""
# Any text a spreadsheet may hold: quotes, commas, line breaks of each kind, other scripts
# (no surrogates, which UTF-8 cannot encode, and no NUL, which Python 3.10's csv refuses).
cell_text = st.lists(
    st.sampled_from(['"', '""', ",", "\r\n", "\r", "\n", " ", "\ufeff", "\u2028", "é"])
    | st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=8,
).map("".join)
csv_tables = st.tuples(
    st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), max_size=4, unique=True).map(
        lambda names: [n for n in names if n not in ("id", "gold", "expected")]
    ),
    st.booleans(),  # a gold column
    st.lists(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True), unique=True),
    st.data(),
)


@seed(20261202)
@FUZZ
# Python's writer quotes a cell holding a line break only when the break is in its own line
# terminator: with "\n" it would leave a lone "\r" bare, which no reader takes as text.
@given(
    csv_tables,
    st.sampled_from([("\r\n", csv.QUOTE_MINIMAL), ("\r\n", csv.QUOTE_ALL), ("\n", csv.QUOTE_ALL)]),
    st.booleans(),
)
def test_any_csv_table_reads_back_as_its_cases_in_file_order(
    tmp_path_factory: pytest.TempPathFactory,
    table: tuple[list[str], bool, list[str], st.DataObject],
    dialect: tuple[str, int],
    bom: bool,
) -> None:
    variables, with_gold, ids, data = table
    columns = ["id", *variables] + (["gold"] if with_gold else [])
    rows = [[case_id, *(data.draw(cell_text) for _ in columns[1:])] for case_id in ids if ids]
    folder = tmp_path_factory.mktemp("csv")
    buffer = io.StringIO(newline="")
    line_end, quoting = dialect
    csv.writer(buffer, lineterminator=line_end, quoting=quoting).writerows([columns, *rows])
    (folder / "cases.csv").write_bytes(b"\xef\xbb\xbf" * bom + buffer.getvalue().encode())
    (folder / "fuzz.eval.yaml").write_text(CSV_SUITE, "utf-8")
    expected = []
    for row in rows:
        case: dict[str, Any] = {"id": row[0]}
        if variables:
            case["vars"] = dict(zip(variables, row[1 : 1 + len(variables)], strict=True))
        if with_gold and row[-1].strip():
            case["gold"] = row[-1]
        expected.append(case)
    if not rows:
        with pytest.raises(EvalmineError, match=re.escape("cases.csv holds no cases")):
            load_suite(folder / "fuzz.eval.yaml", shown=SHOWN)
        return
    suite = load_suite(folder / "fuzz.eval.yaml", shown=SHOWN)
    assert suite.document["tasks"][0]["cases"] == expected


CSV_BREAKS = [b'"', b",", b"\n", b"\r", b"\r\n", b"\xff", b"\xc3", b"\x00", b"\xef\xbb\xbf", b""]


@pytest.mark.filterwarnings("ignore")
@seed(20261203)
@FUZZ
@given(
    st.one_of(
        st.binary(max_size=300),
        st.tuples(
            st.lists(st.lists(cell_text, max_size=4), max_size=6),
            st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(CSV_BREAKS)), max_size=4),
            st.integers(0, 10_000),
        ),
    )
)
def test_any_bytes_in_a_csv_cases_file_load_or_are_refused_in_clean_lines(
    tmp_path_factory: pytest.TempPathFactory, content: Any
) -> None:
    if isinstance(content, bytes):
        raw = content
    else:  # a table with ``id`` first, then bytes inserted and the end cut off
        table, breaks, cut = content
        buffer = io.StringIO(newline="")
        csv.writer(buffer).writerows([["id", "q", "gold"], *table])
        raw = buffer.getvalue().encode()
        for position, inserted in breaks:
            at = position % (len(raw) + 1)
            raw = raw[:at] + inserted + raw[at:]
        raw = raw[: len(raw) - cut % (len(raw) + 1) // 4]
    folder = tmp_path_factory.mktemp("csvbytes")
    (folder / "cases.csv").write_bytes(raw)
    (folder / "fuzz.eval.yaml").write_text(CSV_SUITE, "utf-8")
    try:
        with hang_guard(HANG_S):
            load_suite(folder / "fuzz.eval.yaml", shown=SHOWN)
    except EvalmineError as exc:
        for line in str(exc).splitlines():
            assert LINE.match(line), f"not a one-line 'file: ...' problem: {line[:300]!r}"
            assert len(line) < 1000, f"an error line of {len(line)} characters"


# Task schemas ----------------------------------------------------------------------------
SCHEMA_SUITE = """\
version: 1
suite: fuzz
models: [fake/a]
tasks:
  - id: t
    kind: extract
    prompt: "Give JSON."
    schema_path: schema.json
    cases: [{id: c}]
"""
KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "additionalItems", "enum",
    "const", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref", "$defs",
    "definitions", "$anchor", "minItems", "maxItems", "minLength", "maxLength", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "additionalProperties",
    "patternProperties", "propertyNames", "contains", "minContains", "uniqueItems", "format",
    "pattern", "minProperties", "maxProperties", "title", "$schema", "tpye", "propetries",
]  # fmt: skip
schema_words = st.sampled_from(
    ["object", "array", "string", "integer", "number", "boolean", "null", "a", "b", "#",
     "#/$defs/a", "#/properties/a", "#a", "^a", "(", "date", "email",
     "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"]
)  # fmt: skip
schema_numbers = st.one_of(
    st.sampled_from([0, 1, 2, 3, -1, 0.5, 1e7, 10**7, 1e18, 10**18, 1e308, -1e308]),
    st.integers(-5, 5),
)
task_schemas = st.recursive(
    st.booleans() | schema_numbers | schema_words | st.none(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(schema_words, max_size=3)
        | st.dictionaries(schema_words, inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=5)
    ),
    max_leaves=16,
)


TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
NAMES = st.sampled_from(["a", "b", "c"])
BOUNDS = st.sampled_from([0, 1, 2, 3, 1e3, 10**7, 10**18])
NUMBERS = st.sampled_from([-1e308, -1, 0, 0.2, 0.8, 1, 2, 3, 1e308])


def shaped_schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas that mostly pass the metaschema: the generator's and the analysis's input."""
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1,
                                                      max_size=3, unique=True),
            "properties": st.dictionaries(NAMES, inner, max_size=3),
            "required": st.lists(NAMES, max_size=3, unique=True),
            "additionalProperties": inner,
            "patternProperties": st.dictionaries(st.sampled_from(["^a", "b+"]), inner, max_size=1),
            "items": inner,
            "prefixItems": st.lists(inner, min_size=1, max_size=2),
            "contains": inner,
            "enum": st.lists(scalars, max_size=3),
            "const": scalars,
            "anyOf": st.lists(inner, min_size=1, max_size=3),
            "oneOf": st.lists(inner, min_size=1, max_size=3),
            "allOf": st.lists(inner, min_size=1, max_size=3),
            "not": inner,
            "$ref": st.sampled_from(["#", "#/$defs/a", "#/$defs/b", "#/properties/a", "#x"]),
            "$defs": st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
            "$anchor": st.just("x"),
            "minItems": BOUNDS,
            "maxItems": BOUNDS,
            "minLength": BOUNDS,
            "maxLength": BOUNDS,
            "minimum": NUMBERS,
            "maximum": NUMBERS,
            "exclusiveMinimum": NUMBERS,
            "exclusiveMaximum": NUMBERS,
            "format": st.sampled_from(["date", "email", "uri"]),
            "uniqueItems": st.booleans(),
            "tpye": st.just("string"),
        },
    )  # fmt: skip


shaped = st.recursive(st.booleans() | st.just({}), shaped_schemas, max_leaves=12)


@pytest.mark.filterwarnings("ignore")
@seed(20261204)
@FUZZ_ANY_INPUT
@given(st.one_of(shaped, task_schemas, json_values))
def test_any_json_as_a_task_schema_is_refused_in_clean_lines_or_answered_without_a_crash(
    tmp_path_factory: pytest.TempPathFactory, schema: Any
) -> None:
    """Issue 20 item 2: whatever the schema file holds, the suite is refused in one line per
    problem, or it loads and the fake adapter answers (or refuses in one line naming the
    schema path), the answer check and every adapter's schema translation run, and nothing
    raises anything else or hangs."""
    from pytest_evalmine.adapters.anthropic import transform_schema
    from pytest_evalmine.adapters.base import AdapterError, Request
    from pytest_evalmine.adapters.fake import FakeAdapter
    from pytest_evalmine.adapters.gemini import translate_schema
    from pytest_evalmine.adapters.openai import strict_compatible
    from pytest_evalmine.scoring.checks import check_answer

    folder = tmp_path_factory.mktemp("schema")
    (folder / "schema.json").write_text(json.dumps(schema), "utf-8")
    (folder / "fuzz.eval.yaml").write_text(SCHEMA_SUITE, "utf-8")
    try:
        with hang_guard(HANG_S):
            suite = load_suite(folder / "fuzz.eval.yaml", shown=SHOWN)
    except EvalmineError as exc:
        for line in str(exc).splitlines():
            assert LINE.match(line), f"not a one-line 'file: ...' problem: {line[:300]!r}"
            assert len(line) < 1000, f"an error line of {len(line)} characters"
        return
    task = suite.task("t")
    assert isinstance(task.schema, dict)
    with hang_guard(HANG_S):
        translate_schema(task.schema)
        transform_schema(task.schema)
        strict_compatible(task.schema)
        for prompt in ("one", "two", "three"):
            request = Request(model="fake/a", prompt=prompt, schema=task.schema)
            try:
                text = asyncio.run(FakeAdapter().complete(request)).text
            except AdapterError as exc:
                assert exc.kind == "bad_request", exc
                message = str(exc)
                assert message.startswith("the fake adapter cannot answer this schema: $")
                assert "\n" not in message and len(message) < 400
                continue
            check_answer(text, task.schema, task.schema_refs)
