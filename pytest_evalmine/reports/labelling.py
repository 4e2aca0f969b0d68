"""Blind labelling and "label next" (spec: "report.html", "Label next").

Pure functions over pair records as pairs.jsonl holds them (dicts), so report.html renders the
same from a live run and from the files of an old one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..judging.audit import audit_rank
from ..suite.canonical import sha256_hex

# Why a pair is worth a label, most instructive first (the order of the list).
FLIP = "flip"
CHECK = "judge_vs_check"
FEW_LABELS = "few_labels"
DISAGREES = "disagrees_with_label"
KINDS = (FLIP, CHECK, FEW_LABELS, DISAGREES)
# How the page names a kind without telling which answer the judge preferred.
KIND_TAGS = {
    FLIP: "judge flipped",
    CHECK: "judge vs check",
    FEW_LABELS: "task short of labels",
    DISAGREES: "judge disagreed with your label",
}


@dataclass(frozen=True)
class Suggestion:
    """A judged pair worth labelling (or relabelling), and why."""

    task: str
    case: str
    baseline: str
    candidate: str
    kinds: tuple[str, ...]
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "case": self.case,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "kinds": list(self.kinds),
            "reasons": list(self.reasons),
        }

    def line(self) -> str:
        return f"- {self.task}/{self.case} ({self.candidate}): " + "; ".join(self.reasons)


def pair_id(pair: dict[str, Any]) -> str:
    """A short stable id of a pair: the same task, case and models give the same id in every
    run, so the A/B sides and saved progress stay put across reruns."""
    return sha256_hex([pair["task"], pair["case"], pair["baseline"], pair["candidate"]])[:16]


def a_side(identifier: str) -> str:
    """Which answer the page shows as A, from the pair's ``pair_id``: ``baseline`` or
    ``candidate`` (not its position in the run), so a labeller cannot learn that A is always
    the baseline."""
    return "baseline" if int(identifier, 16) % 2 == 0 else "candidate"


def is_judged(pair: dict[str, Any]) -> bool:
    return pair.get("excluded") is None and pair.get("category") is not None


def label_fields(pair: dict[str, Any]) -> str:
    """The fields that name a label's pair, as YAML flow-mapping text. Values are written as
    JSON strings, which YAML reads unchanged."""
    return ", ".join(
        f"{key}: {json.dumps(pair[key], ensure_ascii=False)}"
        for key in ("task", "case", "baseline", "candidate")
    )


def _contradiction(pair: dict[str, Any]) -> str | None:
    """The judge preferred an answer that failed a deterministic check over one that passed
    every check."""
    category = pair.get("category")
    if category not in ("baseline", "candidate"):
        return None
    other = "candidate" if category == "baseline" else "baseline"
    failed = [c for c in pair.get(f"{category}_checks") or [] if not c.get("passed")]
    if failed and all(c.get("passed") for c in pair.get(f"{other}_checks") or []):
        return (
            f"the judge preferred the {category} answer, which failed check "
            f"{failed[0].get('name')!r}, over one that passed every check"
        )
    return None


def label_next(pairs: Sequence[dict[str, Any]], min_labels: int) -> list[Suggestion]:
    """Judged pairs where a label would teach the most, in that order: unlabelled flips,
    unlabelled verdicts that contradict a check, unlabelled pairs of tasks with fewer than
    ``min_labels`` labels (taking turns between tasks), then labelled pairs the judge
    disagreed with."""
    judged = [p for p in pairs if is_judged(p)]
    labelled = Counter(p["task"] for p in judged if p.get("label"))
    turn: Counter[str] = Counter()
    ranked: list[tuple[tuple[Any, ...], Suggestion]] = []
    for pair in judged:
        kinds: list[str] = []
        reasons: list[str] = []
        task = pair["task"]
        if pair.get("label") is None:
            if pair.get("flip"):
                kinds.append(FLIP)
                reasons.append("flip: the verdict changed when the answers swapped places")
            contradiction = _contradiction(pair)
            if contradiction:
                kinds.append(CHECK)
                reasons.append(contradiction)
            if labelled[task] < min_labels:
                kinds.append(FEW_LABELS)
                reasons.append(f"task {task} has {labelled[task]} of {min_labels} labels")
        elif pair["label"] != pair["category"]:
            kinds.append(DISAGREES)
            reasons.append(f"your label says {pair['label']}, the judge {pair['category']}")
        if not kinds:
            continue
        tier = min(KINDS.index(kind) for kind in kinds)
        # Short tasks take turns, so every task gets its next label before any gets two.
        spread = turn[task] if tier == KINDS.index(FEW_LABELS) else 0
        turn[task] += tier == KINDS.index(FEW_LABELS)
        suggestion = Suggestion(
            task, pair["case"], pair["baseline"], pair["candidate"], tuple(kinds), tuple(reasons)
        )
        ranked.append(((tier, spread, labelled[task]), suggestion))
    ranked.sort(key=lambda entry: entry[0])
    return [suggestion for _, suggestion in ranked]


def audit_order(judged: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of the judged pairs in the audit sample, in the sample's own random order
    (the hash rank): labelled in this order, the labels at any point are a random sample of
    the pairs, which the estimate needs. ("next unlabelled" skips those already labelled.)"""
    sample = [i for i, p in enumerate(judged) if p.get("audit")]
    return sorted(
        sample,
        key=lambda i: audit_rank(judged[i]["task"], judged[i]["case"], judged[i]["candidate"]),
    )


# Why a pair was not judged, in words, for saying why "Label next" lists nothing.
NOT_JUDGED = {
    "judge_unparseable": "the judge's verdict was unparseable",
    "judge_error": "the judge's call failed",
    "judge_not_run": "the judge was not run (the cap was reached, or Ctrl-C)",
    "judge_replay_miss": "the verdict is not in the recording (record mode none)",
    "provider_error": "an answer is a provider error",
    "not_run": "an answer was not sent (the cap, a replay miss or Ctrl-C)",
    "missing_answer": "an answer is missing",
    "empty_answer": "an answer is empty",
    "parse_fail": "an answer is not JSON",
    "schema_fail": "an answer fails the schema",
}


def nothing_to_label(pairs: Sequence[dict[str, Any]], min_labels: int) -> str:
    """Why ``label_next`` suggests nothing, in the line that says so (the terminal, report.md
    and report.html): no pair at all, no pair judged (and why not, by reason), every judged
    pair labelled and agreeing, or unlabelled pairs none of which is worth a label yet.
    True only vacuously is never said: "every judged pair is labelled" needs one."""
    judged = [p for p in pairs if is_judged(p)]
    if not pairs:
        return "nothing to label: the run has no pairs to judge"
    if not judged:
        reasons = Counter(str(p.get("excluded")) for p in pairs)
        if len(reasons) == 1:
            reason = next(iter(reasons))
            why = f"for every pair {NOT_JUDGED.get(reason, reason)} ({reason})"
        else:
            why = "; ".join(
                f"{n} {'pair' if n == 1 else 'pairs'}: {NOT_JUDGED.get(r, r)} ({r})"
                for r, n in reasons.most_common()
            )
        return f"nothing to label: no pair was judged, of {len(pairs)}: {why}"
    unlabelled = sum(p.get("label") is None for p in judged)
    if not unlabelled:
        return (
            f"nothing to label: every judged pair ({len(judged)}) is labelled and agrees with "
            "the judge"
        )
    tasks = f", every task has its {min_labels} labels" if min_labels > 0 else ""
    return (
        f"nothing to label: {unlabelled} of {len(judged)} judged pairs are unlabelled, but "
        f"none is a flip or contradicts a check{tasks}, and every label agrees with the judge"
    )
