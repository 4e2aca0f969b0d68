"""Calibration of the judge against the user's labels, and the headline gate
(spec: "Calibration")."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..stats.estimators import Interval, Kappa, cohen_kappa, interval_dict, seed_from
from ..stats.proportions import Proportion
from ..stats.resample import kappa_interval
from ..suite.model import Label, Suite
from .pairs import Pair

NO_LABELS, UNDEFINED, INSUFFICIENT, BELOW_FLOOR, OK = (
    "no_labels",
    "undefined",
    "insufficient_labels",
    "below_floor",
    "ok",
)
PER_TASK_MIN_LABELS = 5
MAX_FLIP_RATE = 0.30
INVERT = {"baseline": "candidate", "candidate": "baseline", "tie": "tie"}


@dataclass(frozen=True)
class Rating:
    """One labelled, judged pair: the human's category and the judge's."""

    task: str
    case: str
    human: str
    judge: str


@dataclass
class TaskKappa:
    task: str
    n: int
    agreed: int
    kappa: float | None  # suppressed (None) below PER_TASK_MIN_LABELS

    @property
    def agreement(self) -> Proportion:
        return Proportion(self.agreed, self.n)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "n": self.n,
            "agreement": self.agreement.value,
            "agreement_interval": interval_dict(self.agreement.interval),
            "kappa": self.kappa,
        }


@dataclass
class Calibration:
    status: str
    kappa: Kappa
    interval: Interval | None
    min_kappa: float
    min_labels: int
    gate_on: str
    labels_total: int
    ratings: list[Rating] = field(default_factory=list)
    inverted: int = 0
    unmatched: dict[str, int] = field(default_factory=dict)
    per_task: list[TaskKappa] = field(default_factory=list)
    unmatched_model_pairs: list[dict[str, Any]] = field(default_factory=list)
    # A candidate's own calibration: the suite's labels for other pairs of models, which it
    # does not read (None: the pooled calibration, whose labels_total is the suite's).
    labels_other_pairs: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == OK

    def reason(self) -> str:
        n = self.kappa.n
        if self.status == NO_LABELS:
            if self.labels_other_pairs is not None:
                return (
                    f"no label matches a judged pair: {self.labels_total} labels for this "
                    f"pair ({self.labels_other_pairs} for other pairs)"
                )
            return f"no label matches a judged pair ({self.labels_total} labels in the suite)"
        if self.status == UNDEFINED:
            return "kappa is undefined: every label and verdict falls in one category"
        if self.status == INSUFFICIENT:
            return f"only {n} matched labels; at least {self.min_labels} are needed"
        if self.status == BELOW_FLOOR:
            value = self.kappa.value if self.gate_on == "point" else self.interval_low
            which = "kappa" if self.gate_on == "point" else "the kappa interval's lower bound"
            return f"{which} {value:.2f} is below the floor {self.min_kappa:.2f}"
        return f"kappa {self.kappa.value:.2f} >= {self.min_kappa:.2f} on {n} labels"

    @property
    def interval_low(self) -> float | None:
        return self.interval.low if self.interval else None

    @property
    def agreement(self) -> Proportion:
        """Raw agreement: labels where the judge's category equals the human's."""
        return Proportion(sum(r.human == r.judge for r in self.ratings), len(self.ratings))

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason(),
            "n": self.kappa.n,
            "labels_total": self.labels_total,
            "labels_other_pairs": self.labels_other_pairs,
            "inverted_labels": self.inverted,
            "unmatched_labels": self.unmatched,
            "unmatched_model_pairs": self.unmatched_model_pairs,
            "kappa": self.kappa.value,
            "kappa_interval": interval_dict(self.interval),
            "band": self.kappa.band,
            "observed_agreement": self.kappa.observed_agreement,
            "observed_agreement_interval": interval_dict(self.agreement.interval),
            "chance_agreement": self.kappa.chance_agreement,
            "confusion": {
                "rows": "human",
                "columns": "judge",
                "categories": ["baseline", "tie", "candidate"],
                "matrix": [list(row) for row in self.kappa.confusion],
            },
            "min_kappa": self.min_kappa,
            "min_labels": self.min_labels,
            "gate_on": self.gate_on,
            "per_task": [row.to_dict() for row in self.per_task],
        }


def match_labels(
    labels: Sequence[Label], pairs: Sequence[Pair]
) -> tuple[list[Rating], int, dict[str, int]]:
    """Ratings for labels whose pair was judged. A label naming the run's candidate as its
    baseline (models swapped) is inverted, not dropped. Returns (ratings, inverted, unmatched
    counts by reason)."""
    by_pair = {(p.task, p.case, p.baseline, p.candidate): p for p in pairs}
    ratings: list[Rating] = []
    inverted = 0
    unmatched: Counter[str] = Counter()
    for label in labels:
        pair = by_pair.get((label.task, label.case, label.baseline, label.candidate))
        prefer = label.prefer
        if pair is None:
            pair = by_pair.get((label.task, label.case, label.candidate, label.baseline))
            if pair is not None:
                prefer = INVERT[prefer]
                inverted += 1
        if pair is None:
            unmatched["pair_not_in_run"] += 1
        elif not pair.judged:
            unmatched[f"pair_excluded:{pair.excluded}"] += 1
        else:
            assert pair.category is not None
            pair.label = prefer
            ratings.append(Rating(pair.task, pair.case, prefer, pair.category))
    return ratings, inverted, dict(sorted(unmatched.items()))


def unmatched_model_pairs(labels: Sequence[Label], pairs: Sequence[Pair]) -> list[dict[str, Any]]:
    """Labels comparing two models this run did not compare, grouped by model pair: the
    models a run needs (baseline first, as labelled) for those labels to count again."""
    compared = {frozenset((p.baseline, p.candidate)) for p in pairs}
    counts = Counter(
        (label.baseline, label.candidate)
        for label in labels
        if frozenset((label.baseline, label.candidate)) not in compared
    )
    return [
        {"baseline": baseline, "candidate": candidate, "labels": n}
        for (baseline, candidate), n in sorted(counts.items())
    ]


def calibrate(
    labels: Sequence[Label],
    pairs: Sequence[Pair],
    *,
    min_kappa: float,
    min_labels: int,
    gate_on: str,
    seed_text: str,
) -> Calibration:
    """Kappa of the judge against the labels that match ``pairs``, its interval and the gate.
    ``seed_text`` is the suite hash, plus the candidate when calibrating one candidate."""
    ratings, inverted, unmatched = match_labels(labels, pairs)
    kappa = cohen_kappa([(r.human, r.judge) for r in ratings])
    interval = kappa_interval(
        [(r.human, r.judge) for r in ratings], seed=seed_from(seed_text, "kappa")
    )
    result = Calibration(
        status=OK,
        kappa=kappa,
        interval=interval,
        min_kappa=min_kappa,
        min_labels=min_labels,
        gate_on=gate_on,
        labels_total=len(labels),
        ratings=ratings,
        inverted=inverted,
        unmatched=unmatched,
        per_task=_per_task(ratings),
        unmatched_model_pairs=unmatched_model_pairs(labels, pairs),
    )
    gated = kappa.value if gate_on == "point" else (interval.low if interval else None)
    if not ratings:
        result.status = NO_LABELS
    elif kappa.value is None:
        result.status = UNDEFINED
    elif kappa.n < min_labels:
        result.status = INSUFFICIENT
    elif gated is None or gated < min_kappa:
        result.status = BELOW_FLOOR
    return result


def calibrate_on_suite(suite: Suite, pairs: Sequence[Pair], *, gate_on: str) -> Calibration:
    """``calibrate`` against the suite's labels, at its floor (``judge.min_kappa``,
    ``judge.min_labels``), seeded by its hash: the report's calibration of these pairs."""
    return calibrate(
        suite.labels,
        pairs,
        min_kappa=suite.judge.min_kappa,
        min_labels=suite.judge.min_labels,
        gate_on=gate_on,
        seed_text=suite.hash,
    )


def calibrate_per_candidate(
    labels: Sequence[Label],
    pairs: Sequence[Pair],
    candidates: Sequence[str],
    pooled: Calibration,
    *,
    seed_text: str,
) -> dict[str, Calibration]:
    """One calibration per candidate, from the labels of its own pairs only (a label whose
    two models are the baseline and that candidate, in either order), with the pooled
    calibration's floors. A judge calibrated on one candidate's labels says nothing about its
    verdicts on another's answers. With one candidate the pooled calibration is its own."""
    if len(candidates) == 1:
        return {candidates[0]: pooled}
    result = {}
    for candidate in candidates:
        mine = [p for p in pairs if p.candidate == candidate]
        models = {mine[0].baseline, candidate} if mine else {candidate}
        own = [label for label in labels if {label.baseline, label.candidate} == models]
        result[candidate] = dataclasses.replace(
            calibrate(
                own,
                mine,
                min_kappa=pooled.min_kappa,
                min_labels=pooled.min_labels,
                gate_on=pooled.gate_on,
                seed_text=f"{seed_text}\x1f{candidate}",
            ),
            labels_other_pairs=len(labels) - len(own),
        )
    return result


def _per_task(ratings: Sequence[Rating]) -> list[TaskKappa]:
    rows = []
    for task in sorted({r.task for r in ratings}):
        mine = [(r.human, r.judge) for r in ratings if r.task == task]
        kappa = cohen_kappa(mine)
        rows.append(
            TaskKappa(
                task=task,
                n=len(mine),
                agreed=sum(human == judge for human, judge in mine),
                kappa=kappa.value if len(mine) >= PER_TASK_MIN_LABELS else None,
            )
        )
    return rows


def kappa_by_reference(suite: Suite, calibration: Calibration) -> dict[str, Any] | None:
    """kappa on the labelled pairs whose case has a reference answer and on those whose case
    has none (spec: "Reference answers"), each with its interval; None unless both exist."""
    split: dict[str, list[tuple[str, str]]] = {"with": [], "without": []}
    for rating in calibration.ratings:
        has = suite.case(rating.task, rating.case).reference_answer is not None
        split["with" if has else "without"].append((rating.human, rating.judge))
    if not split["with"] or not split["without"]:
        return None
    result = {}
    for name, ratings in split.items():
        kappa = cohen_kappa(ratings)
        interval = kappa_interval(ratings, seed=seed_from(suite.hash, "kappa", name))
        result[f"{name}_reference"] = {
            "n": kappa.n,
            "kappa": kappa.value,
            "kappa_interval": interval_dict(interval),
        }
    return result
