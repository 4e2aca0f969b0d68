"""The loader builds JSON values from YAML nodes itself (faster than PyYAML's constructor)
and validates plain inline cases without jsonschema: both must give exactly what PyYAML
and the validator give, checked here against them as independent implementations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_evalmine.errors import SuiteError
from pytest_evalmine.suite import reading
from pytest_evalmine.suite.loader import load_suite

# Spellings where YAML 1.1 resolution is subtle: booleans, nulls, octal, hex, sexagesimal,
# underscores, signs, floats without digits before the point, dates (kept as strings).
TRICKY_SCALARS = [
    "yes", "No", "on", "OFF", "y", "~", "null", "Null", "", "0x1F", "0o17", "017", "0b101",
    "1_000", "1:30", "190:20:30", "+12", "-0", "1e3", "1.5e3", "1.0e+3", ".5", "-.5", "1.",
    "2024-05-01", "'quoted # not a comment'", '"esc\\u00e9\\t"', "0.1_0",
    "true", "False", "'yes'", "!!str 12", "!!int '7'", "!!float 3", "<<x", "a b",
]  # fmt: skip
KEYS = ["a", "b", "id", "'1'", "'yes'", "k_2", '"x y"']


@st.composite
def yaml_documents(draw: st.DrawFn) -> str:
    """Flow-style YAML text with anchors, aliases (only to anchors already defined) and
    merge keys."""
    anchors: list[tuple[str, bool]] = []  # (name, is a mapping), once its node is complete
    names = iter(range(1_000_000))

    def value(depth: int) -> str:
        choice = draw(st.integers(0, 6 if depth < 4 else 1))
        if choice == 6:
            choice = 5  # aliases twice as likely: they are what the construction shares
        if choice == 0 or (choice == 5 and not anchors):
            return draw(st.sampled_from(TRICKY_SCALARS))
        if choice == 1:
            return '"' + draw(st.text(alphabet="ab z:#,é-[]{}&*!", max_size=6)) + '"'
        if choice == 5:
            return "*" + draw(st.sampled_from(anchors))[0]
        anchor = f"a{next(names)}" if draw(st.booleans()) else None
        if choice == 2:
            items = [value(depth + 1) for _ in range(draw(st.integers(0, 3)))]
            text = "[" + ", ".join(items) + "]"
        else:
            keys = draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True))
            parts = []
            mappings = [name for name, is_mapping in anchors if is_mapping]
            # Chosen before the values, whose anchors would come after it in the text.
            if mappings and draw(st.booleans()):
                merged = draw(st.lists(st.sampled_from(mappings), min_size=1, max_size=2))
                aliases = ["*" + name for name in merged]
                target = aliases[0] if len(aliases) == 1 else "[" + ", ".join(aliases) + "]"
                parts.append(f"<<: {target}")
            parts += [f"{key}: {value(depth + 1)}" for key in keys]
            text = "{" + ", ".join(parts) + "}"
        if anchor is None:
            return text
        anchors.append((anchor, choice != 2))
        return f"&{anchor} {text}"

    return "doc: " + value(0) + "\n"


def typed(value: Any) -> str:
    # True == 1 in Python; the JSON text tells a boolean from a number.
    return json.dumps(value, sort_keys=True, allow_nan=True)


@settings(
    max_examples=300, derandomize=True, database=None, deadline=None,
    suppress_health_check=list(HealthCheck),
)  # fmt: skip
@given(yaml_documents())
def test_values_are_what_pyyaml_constructs(text: str) -> None:
    try:
        ours = reading.parse_yaml(text, "x.yaml")
    except SuiteError:
        return  # refused before construction (e.g. a tag or a non-string key): not compared
    theirs = yaml.load(text, Loader=reading._loader_class())  # the safe loader
    assert typed(ours) == typed(theirs), text


def test_merge_keys_and_aliases_by_hand() -> None:
    text = (
        "base: &b {x: 1, y: 'two'}\n"
        "more: &m {y: 3, z: yes}\n"
        "one: {<<: *b, x: 9}\n"
        "two: {<<: [*m, *b]}\n"
        "same: [*b, *b]\n"
        "when: 1:30\n"
    )
    value = reading.parse_yaml(text, "x.yaml")
    assert value["one"] == {"x": 9, "y": "two"}
    assert value["two"] == {"x": 1, "y": 3, "z": True}  # the first mapping listed wins
    assert value["same"][0] is value["same"][1]  # an alias is the same object, as in PyYAML
    assert value["when"] == 90  # YAML 1.1 sexagesimal


def test_errors_in_cases_between_plain_ones_keep_their_own_index(tmp_path: Path) -> None:
    cases = [{"id": f"c{i}", "vars": {"q": f"question {i}"}} for i in range(8)]
    cases[2]["refrence"] = "unknown key"
    cases[5]["vars"] = {"bad name": 1}
    cases[7]["id"] = "-starts-with-a-dash"
    suite = {
        "version": 1,
        "suite": "s",
        "models": ["fake/a"],
        "tasks": [
            {"id": "plain", "kind": "answer", "prompt": "{{ q }}", "cases": cases[:2]},
            {"id": "mixed", "kind": "answer", "prompt": "{{ q }}", "cases": cases},
        ],
    }
    path = tmp_path / "s.eval.yaml"
    path.write_text(yaml.safe_dump(suite), "utf-8")
    with pytest.raises(SuiteError) as info:
        load_suite(path, shown="s.eval.yaml")
    lines = str(info.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "$.tasks[1].cases[2]",
        "$.tasks[1].cases[5].vars",
        "$.tasks[1].cases[7].id",
    ], lines
    assert "unknown key 'refrence'" in lines[0]


def test_a_suite_of_plain_cases_only_still_loads_every_case(tmp_path: Path) -> None:
    cases = "".join(f"  - {{id: c{i}, vars: {{q: 'question {i}', n: {i}}}}}\n" for i in range(50))
    path = tmp_path / "s.eval.yaml"
    path.write_text(
        "version: 1\nsuite: s\nmodels: [fake/a]\ntasks:\n"
        "- id: t\n  kind: answer\n  prompt: '{{ q }} {{ n }}'\n  cases:\n" + cases,
        "utf-8",
    )
    (task,) = load_suite(path).tasks
    assert [case.id for case in task.cases] == [f"c{i}" for i in range(50)]
    assert task.cases[49].vars == {"q": "question 49", "n": 49}
