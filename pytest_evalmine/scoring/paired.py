"""Paired comparison of each candidate with the baseline on the deterministic checks
(spec: "Paired comparison"): per case, 1 when the answer passed every check, else 0
(``all_pass``, every task), and the item's fractional checker score (``score``, tasks with
checks); the statistic itself lives in ``stats.paired``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..run.records import FAILED, PASSED, AnswerRecord
from ..stats.estimators import seed_from
from ..stats.paired import PairedCase, PairedComparison, compare_paired

ALL_PASS, SCORE = "all_pass", "score"
EXAMPLES = 3  # worse and better cases shown, each
EXAMPLE_CHARS = 200


@dataclass(frozen=True)
class Example:
    task: str
    case: str
    baseline_answer: Any
    candidate_answer: Any

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "case": self.case,
            "baseline_answer": self.baseline_answer,
            "candidate_answer": self.candidate_answer,
        }


@dataclass
class ModelComparison:
    baseline: str
    candidate: str
    metric: str
    comparison: PairedComparison
    excluded: int  # cases where either side has no answer (error, not run, missing)
    worse: list[Example] = field(default_factory=list)
    better: list[Example] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "metric": self.metric,
            **self.comparison.to_dict(),
            "excluded_cases": self.excluded,
            "worse_examples": [e.to_dict() for e in self.worse],
            "better_examples": [e.to_dict() for e in self.better],
        }


def all_pass_score(record: AnswerRecord) -> float | None:
    """1 when the answer passed every check, 0 when it failed one; None without an answer."""
    if record.outcome not in (PASSED, FAILED):
        return None
    return 1.0 if record.outcome == PASSED else 0.0


def checker_score(record: AnswerRecord) -> float | None:
    """The item score (spec: "Checks") of an answer that arrived; None without one (or in a
    run stored before item scores existed)."""
    return record.score if record.outcome in (PASSED, FAILED) else None


def shown_answer(record: AnswerRecord) -> Any:
    """The parsed answer when there is one, else the text, cut for the report."""
    if record.parsed is not None:
        return record.parsed
    text = record.text or ""
    return text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + "..."


def compare_models(
    records: Sequence[AnswerRecord],
    models: Sequence[str],
    seed_text: str,
    scored_tasks: Sequence[str] = (),
) -> list[ModelComparison]:
    """Each candidate against the baseline over the cases both answered (outcome passed or
    failed), stratified by task: on all-pass over every task, then on the checker score over
    ``scored_tasks`` (the tasks with checks) when the run has any of them."""
    baseline = models[0]
    by_key = {(r.task, r.case, r.model): r for r in records}
    cases = sorted({(r.task, r.case) for r in records})
    scored = sorted({(task, case) for task, case in cases if task in set(scored_tasks)})
    result = []
    for candidate in models[1:]:
        result.append(
            _compare(by_key, cases, baseline, candidate, ALL_PASS, all_pass_score, seed_text)
        )
        if scored:
            result.append(
                _compare(by_key, scored, baseline, candidate, SCORE, checker_score, seed_text)
            )
    return result


def _compare(
    by_key: dict[tuple[str, str, str], AnswerRecord],
    cases: Sequence[tuple[str, str]],
    baseline: str,
    candidate: str,
    metric: str,
    score: Callable[[AnswerRecord], float | None],
    seed_text: str,
) -> ModelComparison:
    paired: list[PairedCase] = []
    answers: dict[tuple[str, str], tuple[AnswerRecord, AnswerRecord]] = {}
    excluded = 0
    for task, case in cases:
        a, b = by_key.get((task, case, baseline)), by_key.get((task, case, candidate))
        a_score = None if a is None else score(a)
        b_score = None if b is None else score(b)
        if a is None or b is None or a_score is None or b_score is None:
            excluded += 1
            continue
        paired.append(PairedCase(task, case, (a_score,), (b_score,)))
        answers[(task, case)] = (a, b)
    comparison = compare_paired(
        paired,
        seed=seed_from(seed_text, "paired", candidate, metric),
        with_mcnemar=metric == ALL_PASS,
    )
    return ModelComparison(
        baseline=baseline,
        candidate=candidate,
        metric=metric,
        comparison=comparison,
        excluded=excluded,
        worse=_examples(comparison.worse, answers),
        better=_examples(comparison.better, answers),
    )


def _examples(
    chosen: Sequence[PairedCase], answers: dict[tuple[str, str], tuple[AnswerRecord, AnswerRecord]]
) -> list[Example]:
    shown = []
    for case in chosen[:EXAMPLES]:
        a, b = answers[(case.stratum, case.case)]
        shown.append(Example(case.stratum, case.case, shown_answer(a), shown_answer(b)))
    return shown
