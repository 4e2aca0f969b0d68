"""Binary judges (spec: "Binary judges"): one PASS/FAIL call per answer per criterion,
through the one dispatcher, and the verdict records they leave."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..adapters.base import Request
from ..run.dispatch import OK, Dispatcher, Outcome
from ..run.records import FAILED, PASSED, AnswerRecord, CallAccounting
from ..suite.canonical import sha256_hex
from ..suite.model import Criterion, Suite
from .judge import parsed_verdict, task_prompt

CRITERION_TEMPLATE_VERSION = "1"
PASS, FAIL = "PASS", "FAIL"
# A verdict's status: "ok" with a label, this when the judge's text was no verdict, else the
# dispatcher's outcome (error, budget, replay_miss, interrupted).
UNPARSEABLE = "unparseable"
CRITERION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": [PASS, FAIL]},
        "critique": {"type": "string"},
    },
    "required": ["label", "critique"],
    "additionalProperties": False,
}
CRITERION_SYSTEM_PROMPT = (
    "You are a careful, strict evaluator. You decide whether one answer meets one criterion, "
    "judging that criterion only. Reply with JSON only."
)
CRITERION_TEMPLATE = """\
## Task given to the assistant
{task_prompt}

## The assistant's answer
{answer}

## Criterion: {name}
{criterion}

## Your verdict
Reply with exactly one JSON object: {{"label": "PASS" | "FAIL", "critique": "<one sentence>"}}.
PASS only when the answer meets the criterion; the critique says why, in one sentence."""


@dataclass
class CriterionVerdict(CallAccounting):
    """The judge's verdict on one answer for one criterion (a line of verdicts.jsonl)."""

    task: str
    case: str
    model: str
    criterion: str
    label: str | None = None  # PASS or FAIL; None when there is no usable verdict
    critique: str = ""
    status: str = OK
    error: str | None = None
    # The rendered task prompt the answer was given: report.html's criterion labelling shows
    # it beside the answer (the run's other files hold it only for judged pairs).
    prompt: str = ""
    # What the dispatcher clamped when the judge's provider reported impossible usage.
    usage_anomaly: str | None = None

    @property
    def answer(self) -> tuple[str, str, str]:
        return (self.task, self.case, self.model)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CriterionVerdict:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def criterion_texts(suite: Suite) -> dict[str, dict[str, str]]:
    """Each task with binary judges: its criteria's texts by name."""
    return {t.id: {j.name: j.criterion for j in t.judges} for t in suite.tasks if t.judges}


def criteria_record(suite: Suite, model: str) -> dict[str, str]:
    """What identifies the binary judge as an instrument: its model, the criteria's hash,
    the prompt template version and the verdict schema's hash."""
    return {
        "model": model,
        "criteria_hash": sha256_hex(criterion_texts(suite)),
        "prompt_template_version": CRITERION_TEMPLATE_VERSION,
        "verdict_schema_hash": sha256_hex(CRITERION_SCHEMA),
    }


def judged(record: AnswerRecord) -> bool:
    """An answer arrived and is not empty: the binary judges see it."""
    return record.outcome in (PASSED, FAILED) and bool((record.text or "").strip())


def criterion_request(
    judge_model: str,
    suite: Suite,
    task: str,
    case: str,
    criterion: Criterion,
    answer: str,
    *,
    asked: str | None = None,
) -> Request:
    """One criterion's call on one answer. The model that answered is never named to the
    judge; ``context`` is for adapters only (fake faults with phase=judge), never rendered.
    ``asked``: the case's ``task_prompt`` when the caller has it (every answer and criterion
    of a case share it)."""
    prompt = CRITERION_TEMPLATE.format(
        task_prompt=task_prompt(suite, task, case) if asked is None else asked,
        answer=answer,
        name=criterion.name,
        criterion=criterion.criterion,
    )
    return Request(
        model=judge_model,
        prompt=prompt,
        system=CRITERION_SYSTEM_PROMPT,
        max_tokens=suite.judge.max_tokens,
        temperature=suite.judge.temperature,
        schema=CRITERION_SCHEMA,
        context={"purpose": "judge", "task": task, "case": case, "criterion": criterion.name},
    )


def parse_criterion_verdict(text: str) -> tuple[str | None, str]:
    """(label, critique) from the judge's text; label None and the reason when unusable."""
    verdict, why = parsed_verdict(text, CRITERION_SCHEMA)
    return (None, why) if verdict is None else (verdict["label"], verdict["critique"])


def judge_criteria(
    suite: Suite,
    records: Sequence[AnswerRecord],
    judge_model: str,
    dispatcher: Dispatcher,
) -> list[CriterionVerdict]:
    """Every criterion of its task on every answer that arrived, as one concurrent batch.
    A provider's trouble becomes the verdict's status, never an exception."""
    prompts: dict[tuple[str, str], str] = {}  # rendered once per case, not per answer
    asked: list[tuple[AnswerRecord, Criterion, Request]] = []
    for record in records:
        criteria = suite.task(record.task).judges if judged(record) else ()
        if not criteria:
            continue
        case = (record.task, record.case)
        if case not in prompts:
            prompts[case] = task_prompt(suite, record.task, record.case)
        text = record.text or ""
        asked += [
            (record, criterion, criterion_request(
                judge_model, suite, record.task, record.case, criterion, text, asked=prompts[case]
            ))
            for criterion in criteria
        ]  # fmt: skip
    if not asked:
        return []
    planned = dispatcher.plan(request for _, _, request in asked)
    outcomes = dispatcher.run_each(planned)
    verdicts = [
        _verdict(record, criterion, outcome)
        for (record, criterion, _), outcome in zip(asked, outcomes, strict=True)
    ]
    for verdict in verdicts:
        verdict.prompt = prompts[(verdict.task, verdict.case)]
    return verdicts


def _verdict(record: AnswerRecord, criterion: Criterion, outcome: Outcome) -> CriterionVerdict:
    verdict = CriterionVerdict(
        task=record.task,
        case=record.case,
        model=record.model,
        criterion=criterion.name,
        **outcome.accounting(),
    )
    if outcome.status != OK or outcome.response is None:
        verdict.status, verdict.error = outcome.status, outcome.error
        return verdict
    verdict.usage_anomaly = outcome.response.usage.anomaly
    label, critique = parse_criterion_verdict(outcome.response.text)
    if label is None:
        verdict.status, verdict.error = UNPARSEABLE, critique
    else:
        verdict.label, verdict.critique = label, critique
    return verdict
