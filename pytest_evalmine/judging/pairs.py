"""Candidate-vs-baseline pairs: which are judged, which are excluded, and how a pair scores
(spec: "Pairs and scoring")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ..run.records import (
    ERROR,
    FAILED,
    NOT_RUN_BUDGET,
    NOT_RUN_INTERRUPTED,
    PASSED,
    REPLAY_MISS,
    AnswerRecord,
    CallAccounting,
)

BASELINE_FIRST = "baseline_first"
CANDIDATE_FIRST = "candidate_first"
WIN, LOSS, TIE = "win", "loss", "tie"
TIE_CATEGORY = "tie"
CATEGORY_SCORES = {"candidate": 1.0, "baseline": 0.0, TIE_CATEGORY: 0.5}

# Candidate's verdicts in the two passes (order-free) -> score.
SCORES = {
    frozenset([WIN]): 1.0,
    frozenset([LOSS]): 0.0,
    frozenset([TIE]): 0.5,
    frozenset([WIN, TIE]): 0.75,
    frozenset([LOSS, TIE]): 0.25,
    frozenset([WIN, LOSS]): 0.5,
}
EXCLUSION_REASONS = (
    "provider_error",
    "not_run",
    "empty_answer",
    "parse_fail",
    "schema_fail",
    "missing_answer",
    "judge_error",
    "judge_not_run",
    "judge_replay_miss",
    "judge_unparseable",
)


@dataclass
class JudgePass(CallAccounting):
    order: str
    winner_slot: str | None = None  # "1", "2", "tie"; None when no usable verdict
    reason: str = ""
    error: str | None = None
    error_kind: str | None = None
    # The provider's prompt cache, for a call made this run (0 when served from the answer
    # cache): input tokens read from it, and written to it (spec: "Judge", "Prompt cache").
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    # What the dispatcher clamped when the judge's provider reported impossible usage.
    usage_anomaly: str | None = None

    @property
    def candidate_verdict(self) -> str | None:
        """The verdict from the candidate's side: its answer sat in slot 2 when the baseline
        went first, in slot 1 otherwise."""
        if self.winner_slot is None:
            return None
        if self.winner_slot == "tie":
            return TIE
        candidate_slot = "2" if self.order == BASELINE_FIRST else "1"
        return WIN if self.winner_slot == candidate_slot else LOSS


@dataclass
class JurorVerdicts:
    """One juror's calls on a pair of a panel (spec: "Judge panel"): its two passes, the
    verdicts it was asked again, and why it gave no verdict (None: it judged the pair)."""

    passes: list[JudgePass] = field(default_factory=list)
    asked_again: list[JudgePass] = field(default_factory=list)
    excluded: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "passes": [_pass_dict(judge_pass) for judge_pass in self.passes],
            "asked_again": [_pass_dict(judge_pass) for judge_pass in self.asked_again],
            "excluded": self.excluded,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JurorVerdicts:
        return cls(
            passes=_read_passes(data.get("passes", [])),
            asked_again=_read_passes(data.get("asked_again", [])),
            excluded=data.get("excluded"),
        )


def _read_passes(entries: list[dict[str, Any]]) -> list[JudgePass]:
    known = JudgePass.__dataclass_fields__
    return [JudgePass(**{k: v for k, v in e.items() if k in known}) for e in entries]


def _juror_verdicts(own: JurorVerdicts) -> list[str]:
    return [v for p in own.passes if (v := p.candidate_verdict) is not None]


def _category(score: float | None) -> str | None:
    if score is None:
        return None
    return "candidate" if score > 0.5 else "baseline" if score < 0.5 else TIE_CATEGORY


def majority(votes: Sequence[str | None]) -> str | None:
    """The panel's category from its jurors' (None: that juror gave none): the category more
    than half of the votes cast give, else a tie; None when no more than half the jurors
    voted (the panel did not judge the pair)."""
    cast = [vote for vote in votes if vote is not None]
    if not cast or 2 * len(cast) <= len(votes):
        return None
    top, count = Counter(cast).most_common(1)[0]
    return top if 2 * count > len(cast) else TIE_CATEGORY


@dataclass
class Pair:
    suite: str
    task: str
    case: str
    baseline: str
    candidate: str
    excluded: str | None = None
    passes: list[JudgePass] = field(default_factory=list)
    # Unusable verdicts that were asked once more (spec: "Judge"): no verdict, but calls made
    # and paid for, so the judge's spend and call counts include them.
    asked_again: list[JudgePass] = field(default_factory=list)
    # What a person labelling the pair needs (report.html): the rendered task prompt, both
    # answers and their checks, and the matched human label in this pair's orientation.
    prompt: str = ""
    baseline_text: str = ""
    candidate_text: str = ""
    baseline_checks: list[dict[str, Any]] = field(default_factory=list)
    candidate_checks: list[dict[str, Any]] = field(default_factory=list)
    label: str | None = None
    # M19: the judge preferred the side whose checks failed over one whose checks passed.
    check_override: bool = False
    # In the audit sample (judging/audit.py): its label, if any, enters the PPI estimate.
    audit: bool = False
    # A panel's pair (spec: "Judge panel"): each juror's calls, by juror; ``passes`` stays
    # empty and the verdict is the jurors' vote. Empty: one judge, whose are ``passes``.
    jurors: dict[str, JurorVerdicts] = field(default_factory=dict)

    @property
    def calls(self) -> list[JudgePass]:
        """Every judge call of the pair: its passes and the verdicts asked again (every
        juror's, for a panel)."""
        own = [*self.passes, *self.asked_again]
        return own + [j for v in self.jurors.values() for j in (*v.passes, *v.asked_again)]

    @property
    def all_passes(self) -> list[JudgePass]:
        """The passes that hold verdicts: the judge's, or every juror's."""
        return [*self.passes, *(j for v in self.jurors.values() for j in v.passes)]

    def juror_view(self, juror: str) -> Pair:
        """The pair as ``juror`` alone judged it: a single judge's pair, which calibration,
        flips and position bias read as they read any judge's."""
        view = Pair(self.suite, self.task, self.case, self.baseline, self.candidate)
        own = self.jurors.get(juror)
        if own is None:  # excluded before any juror was asked (an answer's fault)
            view.excluded = self.excluded or "judge_not_run"
        else:
            view.excluded = own.excluded
            view.passes, view.asked_again = own.passes, own.asked_again
        view.audit = self.audit
        return view

    @property
    def votes(self) -> dict[str, str | None]:
        """Each juror's order-consistent verdict: the category its two passes give (a flip
        or two ties is a tie), None when it gave none. Read from the passes, not through
        ``juror_view`` (a Pair built per juror per access: a 10,000-pair panel's statistics
        ask for the votes some 150,000 times; benchmarks/bench_panel.py)."""
        result = {}
        for juror, own in self.jurors.items():
            verdicts = _juror_verdicts(own) if own.excluded is None else []
            score = SCORES[frozenset(verdicts)] if len(verdicts) == 2 else None
            result[juror] = _category(score)
        return result

    @property
    def panel_category(self) -> str | None:
        return majority(list(self.votes.values())) if self.excluded is None else None

    @property
    def judged(self) -> bool:
        if self.jurors:
            return self.panel_category is not None
        return self.excluded is None and len(self.verdicts) == 2

    @property
    def verdicts(self) -> list[str]:
        return [v for p in self.passes if (v := p.candidate_verdict) is not None]

    @property
    def judge_score(self) -> float | None:
        """The score the judge's two verdicts give, before any check override."""
        # The verdicts are read once (``judged`` would read them again): the statistics at
        # session finish ask a 10,000-pair run's scores some 150,000 times.
        if self.excluded is not None:
            return None
        if self.jurors:
            category = self.panel_category
            return None if category is None else CATEGORY_SCORES[category]
        verdicts = self.verdicts
        return SCORES[frozenset(verdicts)] if len(verdicts) == 2 else None

    @property
    def score(self) -> float | None:
        """The candidate's score: the judge's, unless overridden to the side whose checks
        passed (1 for the candidate, 0 for the baseline)."""
        score = self.judge_score
        if score is None or not self.check_override:
            return score
        return 0.0 if score > 0.5 else 1.0

    @property
    def flip(self) -> bool:
        if self.jurors:  # a panel flips when most of its jurors flipped
            flips = [
                own.excluded is None and set(_juror_verdicts(own)) == {WIN, LOSS}
                for own in self.jurors.values()
            ]
            return self.judged and 2 * sum(flips) > len(flips)
        return self.judged and set(self.verdicts) == {WIN, LOSS}

    @property
    def bias_passes(self) -> list[JudgePass]:
        """The passes position bias reads: the judge's, or for a panel one per order whose
        slot is the one most of the jurors' verdicts in that order chose (None without a
        strict majority), so the panel's slot preference is measured like a judge's."""
        if not self.jurors:
            return self.passes
        result = []
        for order in (BASELINE_FIRST, CANDIDATE_FIRST):
            slots = [
                next((p.winner_slot for p in verdicts.passes if p.order == order), None)
                for verdicts in self.jurors.values()
            ]
            result.append(JudgePass(order=order, winner_slot=majority(slots)))
        return result

    @property
    def outcome(self) -> str | None:
        """win / loss / tie (both passes agree), soft_win / soft_loss (one tie), flip."""
        if not self.judged:
            return None
        if self.check_override:
            return WIN if self.score == 1.0 else LOSS
        if self.jurors:
            category = self.panel_category
            if self.flip:
                return "flip"
            return {"candidate": WIN, "baseline": LOSS}.get(category or "", TIE)
        verdicts = set(self.verdicts)
        if len(verdicts) == 1:
            return verdicts.pop()
        if self.flip:
            return "flip"
        return "soft_win" if WIN in verdicts else "soft_loss"

    @property
    def category(self) -> str | None:
        """The judge's preference for kappa: candidate above 0.5, baseline below, else tie.
        Calibration measures the judge, so a check override does not change it."""
        score = self.judge_score
        if score is None:
            return None
        return "candidate" if score > 0.5 else "baseline" if score < 0.5 else "tie"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pair:
        """A pair as pairs.jsonl stores it (the derived keys are recomputed, not read)."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(
            **{
                **fields,
                "passes": _read_passes(data.get("passes", [])),
                "asked_again": _read_passes(data.get("asked_again", [])),
                # absent from pairs.jsonl before panels: a single judge's pair
                "jurors": {
                    juror: JurorVerdicts.from_dict(entry)
                    for juror, entry in data.get("jurors", {}).items()
                },
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """The pair as pairs.jsonl holds it, with the derived keys. Shares the checks lists
        with the pair (no deep copy): for serialising, not for editing."""
        data = {name: getattr(self, name) for name in _PAIR_FIELDS}
        data.update(
            passes=[_pass_dict(judge_pass) for judge_pass in self.passes],
            asked_again=[_pass_dict(judge_pass) for judge_pass in self.asked_again],
            score=self.score,
            judge_score=self.judge_score,
            category=self.category,
            flip=self.flip,
            outcome=self.outcome,
        )
        if self.jurors:
            votes = self.votes
            cast = [vote for vote in votes.values() if vote is not None]
            data["jurors"] = {juror: v.to_dict() for juror, v in self.jurors.items()}
            data["panel"] = {
                "votes": votes,
                "verdict": self.panel_category,
                "unanimous": len(set(cast)) == 1 and len(cast) == len(votes),
                # the jurors that voted disagreed, and no category had more than half
                "no_majority": bool(cast) and 2 * Counter(cast).most_common(1)[0][1] <= len(cast),
            }
        else:
            del data["jurors"]
        return data


_PASS_FIELDS = tuple(f.name for f in fields(JudgePass))
_PAIR_FIELDS = tuple(f.name for f in fields(Pair))


def _pass_dict(judge_pass: JudgePass) -> dict[str, Any]:
    return {
        **{name: getattr(judge_pass, name) for name in _PASS_FIELDS},
        "candidate_verdict": judge_pass.candidate_verdict,
    }


def exclusion_reason(record: AnswerRecord | None) -> str | None:
    """Why one side makes its pair unjudgeable, or None when the answer can be judged."""
    if record is None:
        return "missing_answer"
    if record.outcome == ERROR:
        return "provider_error"
    if record.outcome in (NOT_RUN_BUDGET, REPLAY_MISS, NOT_RUN_INTERRUPTED):
        return "not_run"
    if record.outcome == PASSED:
        return None
    if record.outcome == FAILED:
        for name, reason in (
            ("answer", "empty_answer"),
            ("parse", "parse_fail"),
            ("schema", "schema_fail"),
        ):
            if record.check_passed(name) is False:
                return reason
        return None  # only the task's own checks failed: judged, and M19 applies
    return "missing_answer"


def apply_check_overrides(pairs: Sequence[Pair], records: Sequence[AnswerRecord]) -> None:
    """M19, in code: a judged pair where the judge prefers the answer whose checks failed
    over the one whose checks passed is overridden to the passing side."""
    passed = {(r.task, r.case, r.model): r.outcome == PASSED for r in records}
    for pair in pairs:
        score = pair.judge_score
        if score is None or score == 0.5:
            continue
        baseline_ok = passed[(pair.task, pair.case, pair.baseline)]
        candidate_ok = passed[(pair.task, pair.case, pair.candidate)]
        preferred_ok, other_ok = (
            (candidate_ok, baseline_ok) if score > 0.5 else (baseline_ok, candidate_ok)
        )
        pair.check_override = other_ok and not preferred_ok


def model_pairs(models: Sequence[str], which: str = "baseline") -> list[tuple[str, str]]:
    """The (baseline slot, candidate slot) model pairs judged: each candidate against the
    baseline, or with ``judge.pairs: all`` every two models, the earlier in ``models`` in
    the baseline's slot (both orders are judged either way)."""
    if which == "all":
        return [(a, b) for i, a in enumerate(models) for b in models[i + 1 :]]
    return [(models[0], candidate) for candidate in models[1:]]


def plan_pairs(
    records: Sequence[AnswerRecord],
    models: Sequence[str],
    judged_tasks: set[str],
    which: str = "baseline",
) -> list[Pair]:
    """Every (task, case, model pair) of the run whose task is judged, in report order, with
    its exclusion decided before any judge spend."""
    by_key = {(r.task, r.case, r.model): r for r in records}
    cases = sorted({(r.task, r.case) for r in records if r.task in judged_tasks})
    pairs = []
    for task, case in cases:
        for baseline, candidate in model_pairs(models, which):
            mine = by_key.get((task, case, candidate))
            theirs = by_key.get((task, case, baseline))
            if mine is None and theirs is None:
                continue
            suite = (mine or theirs).suite  # type: ignore[union-attr]
            pair = Pair(suite, task, case, baseline, candidate)
            if theirs is not None:
                pair.baseline_text, pair.baseline_checks = theirs.text or "", theirs.checks
            if mine is not None:
                pair.candidate_text, pair.candidate_checks = mine.text or "", mine.checks
            pair.excluded = exclusion_reason(theirs) or exclusion_reason(mine)
            pairs.append(pair)
    return pairs
