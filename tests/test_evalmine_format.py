"""evalmine v1 suites load unchanged: a suite written from the evalmine format sheet
(shared/reference/evalmine-suite-format.md) using every key it lists, each key's meaning
checked; the one key not honoured yet (execution ``check``) is refused with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evalmine.errors import SuiteError
from pytest_evalmine.judging.judge import judge_request
from pytest_evalmine.judging.pairs import BASELINE_FIRST, Pair
from pytest_evalmine.reports.compare import compare
from pytest_evalmine.suite.loader import load_suite

EVALMINE_SUITE = """\
suite: support-desk-v1
version: 1
description: Written from the evalmine v1 format sheet, every key used.
defaults:
  temperature: 0
  max_tokens: 700
  timeout_s: 60
  top_p: 0.9
  stop: ["###"]
  system: "You answer {{ customer }} politely."
limits:
  max_cost_usd: 2.5
report:
  mover_threshold: 0.2
judge:
  model: fake/judge
  rubric: Prefer the answer that solves the customer's problem.
  max_tokens: 400
  temperature: 0
  calibration:
    min_kappa: 0.4
    min_labels: 0
    on_below_floor: flag
models: [fake/alpha, fake/beta]
tasks:
  - id: triage
    kind: ticket-routing
    prompt: "Route this ticket: {{message}}"
    system: "You route tickets for {{ customer }}."
    schema:
      type: object
      properties: {queue: {enum: [billing, tech]}}
      required: [queue]
    rubric: The queue must be right.
    judge: false
    temperature: 0.3
    max_tokens: 50
    timeout_s: 20
    top_p: 0.5
    stop: ["END"]
    cases:
      - id: double-charge
        vars: {message: "I was charged twice", customer: Ada}
      - id: no-customer
        vars: {message: "App crashes", customer: null}
  - id: reply
    kind: answer
    prompt: "Reply to: {{ message }}"
    schema_path: schemas/reply.json
    cases:
      - id: refund
        vars: {message: "Where is my refund?", customer: Bo}
labels_path: labels.yaml
"""

LABELS = {
    "labels": [
        {
            "task": "reply",
            "case": "refund",
            "baseline": "fake/alpha",
            "candidate": "fake/beta",
            "prefer": "candidate",
            "note": "names the refund date",
        }
    ]
}

# Every key the sheet lists, as a JSON path: the test fails if the suite above drops one.
SHEET_KEYS = [
    "suite",
    "version",
    "description",
    "defaults.temperature",
    "defaults.max_tokens",
    "defaults.timeout_s",
    "defaults.top_p",
    "defaults.stop",
    "defaults.system",
    "limits.max_cost_usd",
    "report.mover_threshold",
    "judge.model",
    "judge.rubric",
    "judge.max_tokens",
    "judge.temperature",
    "judge.calibration.min_kappa",
    "judge.calibration.min_labels",
    "judge.calibration.on_below_floor",
    "tasks",
    "labels_path",
    "tasks[].id",
    "tasks[].prompt",
    "tasks[].system",
    "tasks[].kind",
    "tasks[].schema",
    "tasks[].schema_path",
    "tasks[].rubric",
    "tasks[].judge",
    "tasks[].cases",
    "tasks[].temperature",
    "tasks[].max_tokens",
    "tasks[].timeout_s",
    "tasks[].top_p",
    "tasks[].stop",
    "tasks[].cases[].id",
    "tasks[].cases[].vars",
    "labels[].task",
    "labels[].case",
    "labels[].baseline",
    "labels[].candidate",
    "labels[].prefer",
    "labels[].note",
]


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    (tmp_path / "schemas").mkdir()
    reply_schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    (tmp_path / "schemas" / "reply.json").write_text(json.dumps(reply_schema), "utf-8")
    (tmp_path / "labels.yaml").write_text(json.dumps(LABELS), "utf-8")
    path = tmp_path / "support.eval.yaml"
    path.write_text(EVALMINE_SUITE, "utf-8")
    return path


def used_keys(document: object, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    if isinstance(document, dict):
        for key, value in document.items():
            name = f"{prefix}.{key}" if prefix else key
            keys.add(name)
            keys |= used_keys(value, name)
    elif isinstance(document, list):
        for item in document:
            keys |= used_keys(item, prefix + "[]")
    return keys


def test_the_suite_uses_every_key_of_the_sheet() -> None:
    import yaml

    used = used_keys(yaml.safe_load(EVALMINE_SUITE)) | used_keys(LABELS)
    assert set(SHEET_KEYS) - used == set()


def test_evalmine_suite_loads_with_every_key_honoured(suite_file: Path) -> None:
    suite = load_suite(suite_file)
    triage, reply = suite.tasks
    assert suite.name == "support-desk-v1"
    assert suite.max_cost_usd == 2.5
    assert suite.mover_threshold == 0.2
    assert (suite.judge.max_tokens, suite.judge.temperature, suite.judge.min_labels) == (400, 0, 0)
    # kind is a free label; task-level params override the defaults key by key.
    assert triage.kind == "ticket-routing"
    assert triage.params.temperature == 0.3 and triage.params.max_tokens == 50
    assert triage.params.timeout_s == 20 and triage.params.top_p == 0.5
    assert triage.params.stop == ("END",)
    assert reply.params.max_tokens == 700 and reply.params.stop == ("###",)
    assert triage.judge is False and reply.judge is True
    assert reply.schema == {"type": "object", "properties": {"text": {"type": "string"}}}
    # labels_path as a {labels: [...]} mapping.
    assert [(label.task, label.note) for label in suite.labels] == [
        ("reply", "names the refund date")
    ]
    # The task's system wins over defaults.system; both are templated; null renders empty.
    rendered = suite.render(triage, triage.cases[1])
    assert (rendered.system, rendered.prompt) == (
        "You route tickets for .",
        "Route this ticket: App crashes",
    )
    assert suite.render(reply, reply.cases[0]).system == "You answer Bo politely."


def test_judge_max_tokens_and_temperature_reach_the_judge_request(suite_file: Path) -> None:
    suite = load_suite(suite_file)
    pair = Pair(suite.name, "reply", "refund", "fake/alpha", "fake/beta")
    answers = {"fake/alpha": "one", "fake/beta": "two"}
    request = judge_request("fake/judge", suite, pair, BASELINE_FIRST, answers)
    assert (request.max_tokens, request.temperature) == (400, 0.0)


def test_mover_threshold_decides_which_movements_are_movers() -> None:
    def report(rate: float) -> dict[str, object]:
        rows = [{"candidate": "fake/beta", "task": "t", "win_rate": rate}]
        return {"suite": {"hash": "h"}, "headline": {"win_rates_per_task": rows}}

    assert compare(report(0.6), report(0.5), mover_threshold=0.2)["movers"] == []
    movers = compare(report(0.8), report(0.5), mover_threshold=0.2)["movers"]
    assert [m["task"] for m in movers] == ["t"]


def test_labels_path_as_a_plain_list_and_as_json(suite_file: Path) -> None:
    (suite_file.parent / "labels.json").write_text(json.dumps(LABELS["labels"]), "utf-8")
    suite_file.write_text(EVALMINE_SUITE.replace("labels.yaml", "labels.json"), "utf-8")
    assert len(load_suite(suite_file).labels) == 1


@pytest.mark.parametrize(
    ("insert_after", "text", "where"),
    [
        (
            "    judge: false\n",
            "    check: {run: 'python -m pytest $ANSWER'}\n",
            "$.tasks[0].check",
        ),
        (
            '        vars: {message: "I was charged twice", customer: Ada}\n',
            "        check: {run: 'true', timeout_s: 5}\n",
            "$.tasks[0].cases[0].check",
        ),
    ],
)
def test_execution_check_is_refused_with_its_reason(
    suite_file: Path, insert_after: str, text: str, where: str
) -> None:
    suite_file.write_text(EVALMINE_SUITE.replace(insert_after, insert_after + text), "utf-8")
    with pytest.raises(SuiteError) as info:
        load_suite(suite_file)
    assert info.value.path == where
    assert (
        "'checks: [{exec: {run: ...}}]'; see spec section 2 'Reserved keys'" in info.value.problem
    )
    assert "\n" not in str(info.value)


def test_task_param_set_twice_is_refused(suite_file: Path) -> None:
    text = EVALMINE_SUITE.replace(
        "    max_tokens: 50\n", "    max_tokens: 50\n    params: {max_tokens: 60}\n"
    )
    suite_file.write_text(text, "utf-8")
    with pytest.raises(SuiteError) as info:
        load_suite(suite_file)
    assert (info.value.path, info.value.problem) == (
        "$.tasks[0].max_tokens",
        "set both here and in params.max_tokens; keep one",
    )
