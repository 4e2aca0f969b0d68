"""Paired comparison of each candidate with the baseline on the deterministic checks
(spec: "Paired comparison"): per case, 1 when the answer passed every check, else 0
(``all_pass``, every task), and the item's fractional checker score (``score``, tasks with
checks); the statistic itself lives in ``stats.paired``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..run.records import FAILED, PASSED, AnswerRecord
from ..stats.estimators import seed_from
from ..stats.paired import PairedCase, PairedComparison, compare_paired

ALL_PASS, SCORE = "all_pass", "score"
METRIC_WORDS = {ALL_PASS: "all checks pass", SCORE: "the checker score"}
NO_FLOOR = (
    "the noise floor is unknown: no case has two repeats of both models "
    "(--evalmine-repeat=2 or more measures it)"
)
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
            "verdict": self.verdict,
        }

    @property
    def verdict(self) -> str:
        """The comparison in plain words, in points (spec: "Paired comparison")."""
        p = self.comparison
        b, a, what = self.candidate, self.baseline, METRIC_WORDS[self.metric]
        if p.delta is None or p.interval is None:
            return f"{b} and {a}: no case answered by both on {what}"
        floor = p.noise_floor
        low, high = 100 * p.interval.low, 100 * p.interval.high
        if low <= 0 <= high:
            text = (
                f"{b} cannot be told apart from {a} on {what}: {100 * p.delta:+.1f} points "
                f"[{low:+.1f}, {high:+.1f}], an interval that includes 0"
            )
            if floor is None or p.excess is None:
                return f"{text}; {NO_FLOOR}"
            return f"{text}; {excess_words(p)}"
        better = low > 0
        size = abs(100 * p.delta)
        ends = (low, high) if better else (-high, -low)
        text = (
            f"{b} is {'better' if better else 'worse'} than {a} on {what} by {size:.1f} "
            f"points [{ends[0]:.1f}, {ends[1]:.1f}]"
        )
        if floor is None or p.excess is None:
            return f"{text}; {NO_FLOOR}"
        return f"{text}, {excess_words(p)}"


def excess_words(p: PairedComparison) -> str:
    """The floor's clause: beyond it only when the excess's interval lies above 0; the excess
    over the floor with its interval either way (spec: "Paired comparison")."""
    floor, excess = p.noise_floor or 0.0, p.excess
    assert excess is not None
    if p.beyond_noise:
        return (
            f"beyond the noise floor of {100 * floor:.1f} points by {100 * excess.value:.1f} "
            f"points [{100 * excess.interval.low:.1f}, {100 * excess.interval.high:.1f}]"
        )
    return (
        f"not beyond the noise floor of {100 * floor:.1f} points: excess "
        f"{100 * excess.value:+.1f} points [{100 * excess.interval.low:+.1f}, "
        f"{100 * excess.interval.high:+.1f}], an interval that does not lie above 0"
    )


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


# (task, case) -> repeat index -> that repeat's answer, of one model in one run.
Answers = dict[tuple[str, str], dict[int, AnswerRecord]]


def answers_by_case(records: Sequence[AnswerRecord], model: str) -> Answers:
    """One model's answers, by case and repeat."""
    answers: Answers = {}
    for r in records:
        if r.model == model:
            answers.setdefault((r.task, r.case), {})[r.repeat] = r
    return answers


def compare_models(
    records: Sequence[AnswerRecord],
    models: Sequence[str],
    seed_text: str,
    scored_tasks: Sequence[str] = (),
) -> list[ModelComparison]:
    """Each candidate against the baseline over the cases both answered (outcome passed or
    failed), stratified by task, each case a cluster of its repeats: on all-pass over every
    task, then on the checker score over ``scored_tasks`` (the tasks with checks) when the
    run has any of them."""
    baseline = models[0]
    theirs = answers_by_case(records, baseline)
    cases = sorted({(r.task, r.case) for r in records})
    scored = sorted({(task, case) for task, case in cases if task in set(scored_tasks)})
    result = []
    for candidate in models[1:]:
        mine = answers_by_case(records, candidate)
        for metric, chosen in ((ALL_PASS, cases), (SCORE, scored)):
            if metric == SCORE and not scored:
                continue
            result.append(
                compare_answers(
                    pair_answers(theirs, mine, chosen, METRIC_SCORES[metric]),
                    metric,
                    seed=seed_from(seed_text, "paired", candidate, metric),
                    baseline=baseline,
                    candidate=candidate,
                )
            )
    return result


METRIC_SCORES: dict[str, Callable[[AnswerRecord], float | None]] = {
    ALL_PASS: all_pass_score,
    SCORE: checker_score,
}


@dataclass(frozen=True)
class PairedAnswers:
    """The cases of two sides paired by repeat index: each case's paired scores, the first
    paired repeat's two answers (what examples show), and the cases with none left."""

    cases: list[PairedCase]
    first: dict[tuple[str, str], tuple[AnswerRecord, AnswerRecord]]
    excluded: list[tuple[str, str]]
    # every paired repeat's two answers, in the order of the case's scores
    repeats: dict[tuple[str, str], list[tuple[AnswerRecord, AnswerRecord]]] = field(
        default_factory=dict
    )


def pair_answers(
    a: Answers,
    b: Answers,
    cases: Sequence[tuple[str, str]],
    score: Callable[[AnswerRecord], float | None],
) -> PairedAnswers:
    """A case's repeats are paired by repeat index; a repeat either side has no score for is
    left out of the case, and a case with none left is excluded."""
    paired: list[PairedCase] = []
    first: dict[tuple[str, str], tuple[AnswerRecord, AnswerRecord]] = {}
    repeats: dict[tuple[str, str], list[tuple[AnswerRecord, AnswerRecord]]] = {}
    excluded = []
    for task, case in cases:
        theirs, mine = a.get((task, case), {}), b.get((task, case), {})
        a_scores: list[float] = []
        b_scores: list[float] = []
        for repeat in sorted(set(mine) & set(theirs)):
            score_a, score_b = score(theirs[repeat]), score(mine[repeat])
            if score_a is not None and score_b is not None:
                a_scores.append(score_a)
                b_scores.append(score_b)
                first.setdefault((task, case), (theirs[repeat], mine[repeat]))
                repeats.setdefault((task, case), []).append((theirs[repeat], mine[repeat]))
        if not a_scores:
            excluded.append((task, case))
            continue
        paired.append(PairedCase(task, case, tuple(a_scores), tuple(b_scores)))
    return PairedAnswers(paired, first, excluded, repeats)


def compare_answers(
    paired: PairedAnswers,
    metric: str,
    *,
    seed: int,
    baseline: str,
    candidate: str,
    examples: int = EXAMPLES,
    shown: Callable[[AnswerRecord], Any] = shown_answer,
    floors: tuple[float | None, float | None] | None = None,
) -> ModelComparison:
    """B (``candidate``'s answers) against A (``baseline``'s) on ``metric`` over the paired
    cases: the one paired comparison, whether the two sides are two models of one run or one
    model in two runs (``reports.cross_run``). ``shown`` renders an example's answer;
    ``floors`` replaces the noise floors of the paired repeats by each side's own (a run's
    repeats measure its noise even when the other run has none to pair them with)."""
    comparison = compare_paired(paired.cases, seed=seed, with_mcnemar=metric == ALL_PASS)
    if floors is not None:
        comparison = dataclasses.replace(comparison, floor_a=floors[0], floor_b=floors[1])
    return ModelComparison(
        baseline=baseline,
        candidate=candidate,
        metric=metric,
        comparison=comparison,
        excluded=len(paired.excluded),
        worse=_examples(comparison.worse[:examples], paired, shown),
        better=_examples(comparison.better[:examples], paired, shown),
    )


def _examples(
    chosen: Sequence[PairedCase], paired: PairedAnswers, show: Callable[[AnswerRecord], Any]
) -> list[Example]:
    """Each case's answers of the repeat that changed the way the case did (B below A for a
    worse case, above for a better one; the first such repeat): with repeats, the first
    paired repeat may be one where nothing changed."""
    shown = []
    for case in chosen:
        key = (case.stratum, case.case)
        pairs = paired.repeats.get(key) or [paired.first[key]]
        moved = [
            i
            for i, (score_a, score_b) in enumerate(zip(case.a, case.b, strict=True))
            if (score_b - score_a) * case.delta > 0
        ]
        a, b = pairs[moved[0]] if moved and moved[0] < len(pairs) else pairs[0]
        shown.append(Example(case.stratum, case.case, show(a), show(b)))
    return shown
