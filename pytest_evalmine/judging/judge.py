"""The pairwise judge (spec: "Judge"): prompt, verdict schema, and judging every pair in both
orders through the one dispatcher.

The judge is an instrument: its model, rubric hash, prompt template version and verdict schema
hash are recorded with every result, so a change to any of them is visible.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..adapters.base import Request
from ..run.dispatch import BUDGET, INTERRUPTED, OK, REPLAY_MISS, Dispatcher, Outcome, Progress
from ..run.records import AnswerRecord
from ..scoring.checks import check_answer
from ..suite.canonical import sha256_hex
from ..suite.model import Suite
from .pairs import BASELINE_FIRST, CANDIDATE_FIRST, JudgePass, JurorVerdicts, Pair

# 3: everything constant (instructions, reply format, rubric) moved into the system text, one
# prefix shared word for word by every pair of a task, for the providers' prompt caches.
PROMPT_TEMPLATE_VERSION = "3"
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "winner": {"type": "string", "enum": ["1", "2", "tie"]},
        "reason": {"type": "string"},
    },
    "required": ["winner", "reason"],
    "additionalProperties": False,
}
WINNERS = frozenset(VERDICT_SCHEMA["properties"]["winner"]["enum"])
VERDICT_KEYS = VERDICT_SCHEMA["properties"].keys()
SYSTEM_PROMPT = (
    "You are a careful, impartial evaluator. You compare two answers to the same task and "
    "decide which one serves the user better according to the rubric. The order of the "
    "answers is arbitrary and must not influence you; neither must their length. Reply with "
    "JSON only."
)
# The judge's system text: the instructions, the reply format, then the rubric (the suite's
# before the task's), so the part shared by the most requests comes first. Nothing in it
# depends on the case, the answers or their order: it is the prefix a provider caches.
SYSTEM_TEMPLATE = """\
{system_prompt}

## Reply format
Reply with exactly one JSON object: {{"winner": "1" | "2" | "tie", "reason": "<one sentence>"}}.
Say "tie" when neither answer is clearly better.

## Rubric
{rubric}"""
PROMPT_TEMPLATE = """\
## Task given to the assistant
{task_prompt}

{reference}## Answer 1
{answer_1}

## Answer 2
{answer_2}

## Your verdict
Reply with the JSON object only."""
# A case's reference answer, between the task and the answers (spec: "Reference answers");
# a case without one leaves nothing there, so its prompt is the same bytes as before.
REFERENCE_TEMPLATE = """\
## Reference answer (from the suite's author; judge the answers against it)
{reference}

"""
UNPARSEABLE = "unparseable"
# Judge calls sent as one concurrent batch; a larger phase goes out in parts of this size
# (spec: "Judge"), so its requests are never all in memory at once.
JUDGE_BATCH_PASSES = 4_000
DEFAULT_RUBRIC = "Prefer the answer that is correct, complete and useful for the task."


@dataclass(frozen=True)
class JudgeRecord:
    """What identifies the judge as an instrument (A7)."""

    model: str
    rubric_hash: str
    prompt_template_version: str
    verdict_schema_hash: str
    # The cases' reference answers (None: no case has one), and a panel's jurors and vote
    # rule: each is part of the instrument, so a changed one means a new calibration.
    reference_hash: str | None = None
    jurors: tuple[str, ...] = ()
    vote: str | None = None

    @property
    def models(self) -> tuple[str, ...]:
        """The models that judge: the panel's jurors, or the one judge."""
        return self.jurors or (self.model,)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "model": self.model,
            "rubric_hash": self.rubric_hash,
            "prompt_template_version": self.prompt_template_version,
            "verdict_schema_hash": self.verdict_schema_hash,
        }
        # Only when there are: a report of a run without them keeps the keys it had.
        if self.reference_hash is not None:
            data["reference_hash"] = self.reference_hash
        if self.jurors:
            data.update(jurors=list(self.jurors), vote=self.vote)
        return data


def panel_name(jurors: Sequence[str]) -> str:
    """How reports name a panel where they name the judge."""
    return f"panel({', '.join(jurors)})"


def judge_record(suite: Suite, model: str, jurors: Sequence[str] = ()) -> JudgeRecord:
    rubrics = {"suite": suite.judge.rubric, "tasks": {t.id: t.rubric for t in suite.tasks}}
    references = {
        f"{task.id}\x1f{case.id}": case.reference_answer
        for task in suite.tasks
        for case in task.cases
        if case.reference_answer is not None
    }
    return JudgeRecord(
        model=panel_name(jurors) if jurors else model,
        rubric_hash=sha256_hex(rubrics),
        prompt_template_version=PROMPT_TEMPLATE_VERSION,
        verdict_schema_hash=sha256_hex(VERDICT_SCHEMA),
        reference_hash=sha256_hex(references) if references else None,
        jurors=tuple(jurors),
        vote=suite.judge.vote if jurors else None,
    )


def reference_block(suite: Suite, task_id: str, case_id: str) -> str:
    """The prompt's reference answer section for a case ("" when it has none)."""
    reference = suite.case(task_id, case_id).reference_answer
    return "" if reference is None else REFERENCE_TEMPLATE.format(reference=reference)


def rubric_for(suite: Suite, task_id: str) -> str:
    task = suite.task(task_id)
    parts = [part for part in (suite.judge.rubric, task.rubric) if part]
    return "\n\n".join(parts) or DEFAULT_RUBRIC


def judge_system(suite: Suite, task_id: str) -> str:
    """The judge's constant prefix for every pair of a task: the same bytes whatever the
    case, the answers, their order or the repeat."""
    return SYSTEM_TEMPLATE.format(system_prompt=SYSTEM_PROMPT, rubric=rubric_for(suite, task_id))


def task_prompt(suite: Suite, task_id: str, case_id: str) -> str:
    """The task's prompt as the models were asked it for one case."""
    return suite.render(suite.task(task_id), suite.case(task_id, case_id)).prompt


def judge_request(
    judge_model: str,
    suite: Suite,
    pair: Pair,
    order: str,
    answers: dict[str, str],
    repeat: int = 0,
    *,
    asked: str | None = None,
    system: str | None = None,
) -> Request:
    """The judge call for one pass. Model names, prices and latencies never reach the judge;
    ``context`` is for adapters only (scripted test judges), never rendered. ``asked`` and
    ``system``: the pair's ``task_prompt`` and ``judge_system`` when the caller has them (a
    pair's passes share both, and every pair of a task its system)."""
    first, second = (
        (pair.baseline, pair.candidate)
        if order == BASELINE_FIRST
        else (pair.candidate, pair.baseline)
    )
    prompt = PROMPT_TEMPLATE.format(
        task_prompt=task_prompt(suite, pair.task, pair.case) if asked is None else asked,
        reference=reference_block(suite, pair.task, pair.case),
        answer_1=answers[first],
        answer_2=answers[second],
    )
    return Request(
        model=judge_model,
        prompt=prompt,
        system=judge_system(suite, pair.task) if system is None else system,
        cache_system=True,
        max_tokens=suite.judge.max_tokens,
        temperature=suite.judge.temperature,
        schema=VERDICT_SCHEMA,
        repeat=repeat,
        context={
            "purpose": "judge",
            "task": pair.task,
            "case": pair.case,
            "order": order,
            "baseline": pair.baseline,
            "candidate": pair.candidate,
        },
    )


def judge_text_chars(
    suite: Suite, pair: Pair, answer_chars: int, *, system: str | None = None
) -> int:
    """The length of ``judge_request``'s system and prompt for answers of ``answer_chars``
    characters together, without building it (the template is filled by plain
    substitution, so lengths add up). ``system``: the task's ``judge_system`` when the
    caller has it (every pair of a task shares it)."""
    skeleton = PROMPT_TEMPLATE.format(task_prompt="", reference="", answer_1="", answer_2="")
    asked = task_prompt(suite, pair.task, pair.case)
    if system is None:
        system = judge_system(suite, pair.task)
    reference = reference_block(suite, pair.task, pair.case)
    return len(system) + len(skeleton) + len(asked) + len(reference) + answer_chars


def with_check_outcome(record: AnswerRecord) -> str:
    """The answer as the judge sees it: its text, then (for a task with checks) the checks'
    outcome, so the judge knows which answer is verifiably right (M19)."""
    return judged_text(record.text or "", record.checks)


def judged_text(text: str, checks: Sequence[Mapping[str, Any]]) -> str:
    """``with_check_outcome`` from an answer's text and its checks (``Check.to_dict``)."""
    own = [c for c in checks if c.get("score") is not None]
    if not own:
        return text
    failed = [f"{c['name']}: {c['message']}" for c in own if not c["passed"]]
    outcome = (
        "FAILED: " + "; ".join(failed)
        if failed
        else "passed (" + ", ".join(c["name"] for c in own) + ")"
    )
    return f"{text}\n\n[Deterministic checks of this answer: {outcome}]"


def parsed_verdict(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A judge's JSON verdict, read like a schema answer (whole text, else the first fenced
    block); (None, why) when it is not one."""
    result = check_answer(text, schema)
    if not result.passed:
        failed = result.failed
        return None, failed.message if failed else "unusable verdict"
    return result.parsed, ""


def parse_verdict(text: str) -> tuple[str | None, str]:
    """(winner, reason) from a judge answer; winner None when it is unusable."""
    plain = _plain_verdict(text)
    if plain is not None:
        return plain
    verdict, why = parsed_verdict(text, VERDICT_SCHEMA)
    return (None, why) if verdict is None else (verdict["winner"], verdict["reason"])


def _plain_verdict(text: str) -> tuple[str, str] | None:
    """The verdict of an answer that is exactly a valid verdict object, read without the
    schema validator (a third of reading a verdict, which every judged pair does twice);
    None for anything else, which then takes the validator's way (and its messages)."""
    try:
        verdict = json.loads(text)
    except ValueError:
        return None
    if not isinstance(verdict, dict) or verdict.keys() != VERDICT_KEYS:
        return None
    winner, reason = verdict["winner"], verdict["reason"]
    if isinstance(winner, str) and winner in WINNERS and isinstance(reason, str):
        return winner, reason
    return None


def judge_pairs(
    pairs: Sequence[Pair],
    records: Sequence[AnswerRecord],
    suite: Suite,
    judge_model: str,
    dispatcher: Dispatcher,
) -> None:
    """Judge every non-excluded pair in both orders, filling ``pair.passes`` in place.

    The passes go out concurrently, in batches of JUDGE_BATCH_PASSES. An unparseable verdict
    is asked once more as a distinct request (repeat 1, cached like any call, so a rerun
    reproduces it); still unusable, the pair is excluded as judge_unparseable. A provider
    error excludes it as judge_error. Nothing raises past this function for a provider's
    sake. A pair's ``prompt``, when set, is its task prompt (``run_headline`` sets it), asked
    as it is instead of rendered again.
    """
    judge_each([(pair, judge_model) for pair in pairs], records, suite, dispatcher)


def judge_panel(
    pairs: Sequence[Pair],
    records: Sequence[AnswerRecord],
    suite: Suite,
    jurors: Mapping[str, Sequence[str]],
    dispatcher: Dispatcher,
) -> None:
    """Every juror of a pair's task (``jurors``: task id -> jurors) judges every
    non-excluded pair in both orders, all jurors' calls in the same batches as one judge's
    (spec: "Judge panel"); each juror's calls land in ``pair.jurors``. A pair no majority of
    its jurors judged is excluded with the reason most of them gave."""
    views: list[tuple[Pair, str, Pair]] = []
    for pair in pairs:
        if pair.excluded is not None:
            continue
        for juror in jurors[pair.task]:
            view = Pair(pair.suite, pair.task, pair.case, pair.baseline, pair.candidate)
            view.prompt = pair.prompt
            views.append((pair, juror, view))
    judge_each([(view, juror) for _, juror, view in views], records, suite, dispatcher)
    for pair, juror, view in views:
        pair.jurors[juror] = JurorVerdicts(view.passes, view.asked_again, view.excluded)
    for pair in pairs:
        if pair.jurors and pair.panel_category is None:
            reasons = Counter(v.excluded for v in pair.jurors.values() if v.excluded)
            pair.excluded = reasons.most_common(1)[0][0] if reasons else "judge_error"


def judge_each(
    jobs: Sequence[tuple[Pair, str]],
    records: Sequence[AnswerRecord],
    suite: Suite,
    dispatcher: Dispatcher,
) -> None:
    """``judge_pairs`` for (pair, judge model) jobs: one judge, or a panel's jurors."""
    pairs = [pair for pair, _ in jobs]
    model_of = {id(pair): model for pair, model in jobs}
    answers = {(r.task, r.case, r.model): with_check_outcome(r) for r in records}
    orders = (BASELINE_FIRST, CANDIDATE_FIRST)
    todo = [p for p in pairs if p.excluded is None]
    # Rendered once: every pair of a task has the same system, and a pair planned for a
    # headline holds its task prompt (each rendered per pass was most of building them).
    systems = {task: judge_system(suite, task) for task in {p.task for p in todo}}
    for repeat in (0, 1):
        wanted = [
            (pair, order)
            for pair in todo
            for order in orders
            if repeat == 0 or _needs_retry(pair, order)
        ]
        if not wanted:
            break
        progress = Progress(total=len(wanted))
        # In parts: the requests (prompts holding both answers) of 10,000 pairs were the
        # largest thing in memory while judging. Every call still reserves before it is sent,
        # and a Ctrl-C stops every later part from sending.
        for start in range(0, len(wanted), JUDGE_BATCH_PASSES):
            part = wanted[start : start + JUDGE_BATCH_PASSES]
            requests = [
                judge_request(
                    model_of[id(pair)], suite, pair, order, _texts(pair, answers), repeat,
                    asked=pair.prompt or None, system=systems[pair.task],
                )
                for pair, order in part
            ]  # fmt: skip
            outcomes = dispatcher.run_each(dispatcher.plan(requests), progress)
            for (pair, order), outcome in zip(part, outcomes, strict=True):
                _record_pass(pair, order, outcome)
        todo = [p for p in todo if any(_needs_retry(p, o) for o in orders)]
    for pair in pairs:
        if pair.excluded is None and not pair.judged:
            kinds = {p.error_kind for p in pair.passes if p.winner_slot is None}
            if kinds <= {UNPARSEABLE}:
                pair.excluded = "judge_unparseable"
            elif REPLAY_MISS in kinds:
                pair.excluded = "judge_replay_miss"
            elif kinds & {BUDGET, INTERRUPTED}:
                pair.excluded = "judge_not_run"
            else:
                pair.excluded = "judge_error"


def _texts(pair: Pair, answers: dict[tuple[str, str, str], str]) -> dict[str, str]:
    return {
        pair.baseline: answers[(pair.task, pair.case, pair.baseline)],
        pair.candidate: answers[(pair.task, pair.case, pair.candidate)],
    }


def _needs_retry(pair: Pair, order: str) -> bool:
    return any(p.order == order and p.error_kind == UNPARSEABLE for p in pair.passes)


def _record_pass(pair: Pair, order: str, outcome: Outcome) -> None:
    judge_pass = JudgePass(order=order, **outcome.accounting())
    if outcome.response is not None:
        judge_pass.usage_anomaly = outcome.response.usage.anomaly
    if outcome.response is not None and not outcome.cached:
        usage = outcome.response.usage
        judge_pass.cached_input_tokens = usage.cached_input_tokens
        judge_pass.cache_write_tokens = usage.cache_write_tokens
    if outcome.status == OK and outcome.response is not None:
        winner, reason = parse_verdict(outcome.response.text)
        judge_pass.winner_slot = winner
        judge_pass.reason = reason if winner else ""
        if winner is None:
            judge_pass.error, judge_pass.error_kind = reason, UNPARSEABLE
    else:
        judge_pass.error, judge_pass.error_kind = outcome.error, outcome.status
    # A verdict asked again leaves the passes, but its call was made and paid for: it is
    # kept in ``asked_again``, so the judge's spend and call counts include it.
    unusable = [p for p in pair.passes if p.order == order and p.winner_slot is None]
    pair.asked_again.extend(unusable)
    pair.passes = [p for p in pair.passes if all(p is not u for u in unusable)]
    pair.passes.append(judge_pass)
