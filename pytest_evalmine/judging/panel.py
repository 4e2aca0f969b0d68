"""A panel of judges (spec: "Judge panel"): who sits on it, each juror calibrated like a
judge, the panel's gain over its best juror, the cost of each, and the cheapest panel (or
single juror) that passes the calibration floor on the labels given."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..stats.agreement import KappaDifference, kappa_difference
from ..stats.estimators import cohen_kappa, seed_from
from ..stats.proportions import Proportion
from ..stats.resample import kappa_interval
from ..suite.model import Label, Suite
from .calibration import Calibration, calibrate, calibrate_on_suite
from .pairs import Pair, majority
from .winrate import PositionBias, position_bias

# Every subset of at most this many jurors is tried for the cheapest passing panel; a larger
# panel tries each juror alone and the whole panel only (2^k subsets grow fast).
MAX_SUBSET_JURORS = 6


def jurors_by_task(suite: Suite, option: Sequence[str] = ()) -> dict[str, tuple[str, ...]]:
    """The jurors of each judged task, or {} when the suite has one judge and no panel: the
    option's (``--evalmine-judge A,B,C``) over the task's ``judge: {panel}``, over the suite's
    ``judge.panel``; a task without a panel in a suite with one is judged by the suite's
    ``judge.model`` as a panel of one."""
    if len(option) > 1:
        return {task.id: tuple(option) for task in suite.tasks if task.judge}
    if option or not (suite.judge.panel or any(task.panel for task in suite.tasks)):
        return {}
    single = (suite.judge.model,) if suite.judge.model else ()
    result = {}
    for task in suite.tasks:
        if task.judge:
            jurors = task.panel or suite.judge.panel or single
            if jurors:
                result[task.id] = jurors
    return result


def all_jurors(jurors: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """Every juror of a suite, in the order first seen."""
    return tuple(dict.fromkeys(j for task_jurors in jurors.values() for j in task_jurors))


@dataclass
class JurorReport:
    """One juror measured as a judge is: kappa against the labels (with its interval and
    per task), flips, position bias, and what it costs per judged pair."""

    juror: str
    calibration: Calibration
    bias: PositionBias
    flips: Proportion
    judged: int
    cost_per_pair_usd: float | None  # its calls as if uncached, over the pairs it judged

    @property
    def agrees(self) -> bool:
        """It passes the calibration floor on the labels given."""
        return self.calibration.passed

    def to_dict(self) -> dict[str, Any]:
        return {
            "juror": self.juror,
            "agrees_with_labels": self.agrees,
            "calibration": self.calibration.to_dict(),
            "position_bias": self.bias.to_dict(),
            "flip_rate": self.flips.value,
            "judged_pairs": self.judged,
            "cost_per_judged_pair_usd": self.cost_per_pair_usd,
        }


@dataclass
class PanelChoice:
    """A subset of the jurors and how it does on the labels: its kappa and its cost."""

    jurors: tuple[str, ...]
    n: int
    kappa: float | None
    cost_per_pair_usd: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "jurors": list(self.jurors),
            "n": self.n,
            "kappa": self.kappa,
            "cost_per_judged_pair_usd": self.cost_per_pair_usd,
        }


@dataclass
class PanelReport:
    vote: str
    jurors: list[JurorReport]
    best_juror: str | None  # the juror of highest kappa
    gain: KappaDifference | None  # the panel's kappa minus the best juror's, same labels
    cost_per_pair_usd: float | None
    cheapest: PanelChoice | None  # None: no subset passes the floor on these labels
    ties: int  # judged pairs whose jurors gave no majority
    disagreements: int  # judged pairs whose jurors did not all vote the same

    @property
    def disagreeing(self) -> list[str]:
        return [row.juror for row in self.jurors if not row.agrees]

    @property
    def biased(self) -> list[str]:
        return [row.juror for row in self.jurors if row.bias.flagged]

    def to_dict(self) -> dict[str, Any]:
        return {
            "vote": self.vote,
            "jurors": [row.to_dict() for row in self.jurors],
            "agree_with_labels": [row.juror for row in self.jurors if row.agrees],
            "disagree_with_labels": self.disagreeing,
            "position_biased": self.biased,
            "best_juror": self.best_juror,
            "gain_over_best_juror": self.gain.to_dict() if self.gain else None,
            "cost_per_judged_pair_usd": self.cost_per_pair_usd,
            "cheapest_passing": self.cheapest.to_dict() if self.cheapest else None,
            "no_majority_pairs": self.ties,
            "disagreement_pairs": self.disagreements,
        }


def panel_report(
    suite: Suite,
    pairs: Sequence[Pair],
    jurors: Sequence[str],
    panel: Calibration,
    *,
    gate_on: str,
) -> PanelReport:
    """Each juror calibrated on the pooled labels as a judge is, and the panel compared with
    them. ``panel``: the panel's pooled calibration (its matching set ``pair.label``)."""
    labels: Sequence[Label] = suite.labels
    rows = []
    for juror in jurors:
        views = [pair.juror_view(juror) for pair in pairs]
        judged = [view for view in views if view.judged]
        calls = [call for view in views for call in view.calls]
        rows.append(
            JurorReport(
                juror=juror,
                calibration=calibrate(
                    labels,
                    views,
                    min_kappa=panel.min_kappa,
                    min_labels=panel.min_labels,
                    gate_on=gate_on,
                    seed_text=f"{suite.hash}\x1fjuror\x1f{juror}",
                ),
                bias=position_bias(views),
                flips=Proportion(sum(view.flip for view in judged), len(judged)),
                judged=len(judged),
                cost_per_pair_usd=(
                    sum(c.cost_if_uncached_usd for c in calls) / len(judged) if judged else None
                ),
            )
        )
    # calibrate() on the views set their labels; the panel's own match set the pairs'.
    labelled = [pair for pair in pairs if pair.label is not None and pair.judged]
    best = max(
        (row for row in rows if row.calibration.kappa.value is not None),
        key=lambda row: row.calibration.kappa.value or 0.0,
        default=None,
    )
    gain = None
    if best is not None:
        triples = [
            (pair.label, pair.panel_category, view.category)
            for pair in labelled
            if (view := pair.juror_view(best.juror)).judged
        ]
        gain = kappa_difference(
            triples,  # type: ignore[arg-type]
            seed=seed_from(suite.hash, "panel_gain", best.juror),
        )
    costs = {row.juror: row.cost_per_pair_usd for row in rows}
    judged_pairs = [pair for pair in pairs if pair.judged]
    votes = [pair.votes for pair in judged_pairs]
    return PanelReport(
        vote=suite.judge.vote,
        jurors=rows,
        best_juror=best.juror if best else None,
        gain=gain,
        cost_per_pair_usd=_cost(jurors, costs),
        cheapest=cheapest_passing(labelled, jurors, costs, panel, seed_text=suite.hash),
        ties=sum(_no_majority(v) for v in votes),
        disagreements=sum(len(set(v.values())) > 1 for v in votes),
    )


def _no_majority(votes: Mapping[str, str | None]) -> bool:
    cast = [vote for vote in votes.values() if vote is not None]
    return bool(cast) and all(2 * cast.count(vote) <= len(cast) for vote in set(cast))


def _cost(jurors: Sequence[str], costs: Mapping[str, float | None]) -> float | None:
    known = [costs.get(juror) for juror in jurors]
    return None if any(cost is None for cost in known) else sum(known)  # type: ignore[misc]


def cheapest_passing(
    labelled: Sequence[Pair],
    jurors: Sequence[str],
    costs: Mapping[str, float | None],
    floor: Calibration,
    *,
    seed_text: str,
) -> PanelChoice | None:
    """The cheapest subset of the jurors (one juror alone, or a smaller panel voting by
    majority) whose verdicts on the labelled pairs pass ``floor``'s gate (at least
    ``min_labels`` labels, kappa, or its interval's lower bound, at least ``min_kappa``);
    the higher kappa breaks a tie in cost. None when none passes."""
    if len(jurors) <= MAX_SUBSET_JURORS:
        subsets = [
            combo
            for size in range(1, len(jurors) + 1)
            for combo in itertools.combinations(jurors, size)
        ]
    else:
        subsets = [(juror,) for juror in jurors] + [tuple(jurors)]
    views = {juror: [pair.juror_view(juror).category for pair in labelled] for juror in jurors}
    passing = []
    for subset in subsets:
        cost = _cost(subset, costs)
        if cost is None:
            continue
        ratings = []
        for number, pair in enumerate(labelled):
            verdict = majority([views[juror][number] for juror in subset])
            if verdict is not None and pair.label is not None:
                ratings.append((pair.label, verdict))
        kappa = cohen_kappa(ratings).value
        if kappa is None or len(ratings) < floor.min_labels:
            continue
        gated = kappa
        if floor.gate_on != "point":
            interval = kappa_interval(ratings, seed=seed_from(seed_text, "cheapest", *subset))
            gated = interval.low if interval else None
        if gated is not None and gated >= floor.min_kappa:
            passing.append(PanelChoice(subset, len(ratings), kappa, cost))
    passing.sort(key=lambda choice: (choice.cost_per_pair_usd or 0.0, -(choice.kappa or 0.0)))
    return passing[0] if passing else None


def panel_from_run(
    suite: Suite, pairs: Sequence[Pair], models: Sequence[str], *, gate_on: str
) -> PanelReport | None:
    """A stored run's panel measured again on the suite's labels as they are now (``evalmine
    plan``: the cheapest passing choice after labelling more): the report's own function
    on the run's baseline pairs. None when no juror judged the run (one judge)."""
    jurors = tuple(dict.fromkeys(juror for pair in pairs for juror in pair.jurors))
    if not jurors:
        return None
    baseline_pairs = [pair for pair in pairs if pair.baseline == models[0]]
    floor = calibrate_on_suite(suite, baseline_pairs, gate_on=gate_on)
    return panel_report(suite, baseline_pairs, jurors, floor, gate_on=gate_on)
