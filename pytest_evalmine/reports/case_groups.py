"""One run against another per group of cases (spec: "Compare", ``--by FIELD``): the cases
grouped by one of their fields (a ``vars`` key, the case's ``task`` or its ``gold``) and
each group's paired delta computed by the one paired comparison (``compare_answers`` over
``stats.paired``) on that group's cases alone, as evalpair's ``group`` stratifies by an item
field. Each group's interval is a 95 % interval of its own, not a joint one: with many groups
one of them lies off zero by chance now and then."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import EvalmineError
from ..scoring.paired import ALL_PASS, PairedAnswers, compare_answers
from ..stats.estimators import seed_from
from ..suite.model import NO_GOLD

# The case fields besides its vars (a var of the same name wins: it is the user's own name).
CASE_FIELDS = ("task", "gold")
NO_VALUE = None  # the group of the cases without the field (or no longer in the suite file)


@dataclass(frozen=True)
class CaseGroups:
    """Which group each case (task, case) is in, by ``field``; ``source`` says where the
    fields were read (the suite file and whether it changed since the run)."""

    field: str
    groups: Mapping[tuple[str, str], str]
    source: str

    def of(self, key: tuple[str, str]) -> str | None:
        return self.groups.get(key, NO_VALUE)


def case_fields(tasks: Iterable[Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each case's fields a comparison can be grouped by, from a loaded suite's tasks:
    ``task``, ``gold`` (when it has one) and every ``vars`` key."""
    fields: dict[tuple[str, str], dict[str, Any]] = {}
    for task in tasks:
        for case in task.cases:
            own: dict[str, Any] = {"task": task.id}
            if case.gold is not NO_GOLD:
                own["gold"] = case.gold
            own.update(case.vars)
            fields[(task.id, case.id)] = own
    return fields


def group_cases(
    field: str,
    fields: Mapping[tuple[str, str], Mapping[str, Any]],
    source: str,
    option: str = "--by",
) -> CaseGroups:
    """The cases by ``field``; a field no case has is an error naming the fields there are
    (and ``option``, how the user gave the field: ``--by``, ``--evalmine-compare-by``)."""
    if not any(field in own for own in fields.values()):
        known = [f for f in CASE_FIELDS if any(f in own for own in fields.values())]
        names = sorted({name for own in fields.values() for name in own} - set(CASE_FIELDS))
        raise EvalmineError(
            f"{option} {field}: no case of {source} has a field {field!r}; its fields: "
            f"{', '.join(known + names) or 'none'} (a vars key, task or gold)"
        )
    return CaseGroups(
        field,
        {key: _value(own[field]) for key, own in fields.items() if field in own},
        source,
    )


def _value(value: Any) -> str:
    """A field's value as a group's name: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def grouped(paired: PairedAnswers, metric: str, seed: int, by: CaseGroups) -> list[dict[str, Any]]:
    """Per group of the compared cases (sorted by value, the cases without one last): the
    group's paired comparison on ``metric``: cases, observations, each side's mean, the delta
    and its interval, worse/better/same and (all-pass) McNemar."""
    members: dict[str | None, list[Any]] = {}
    for case in paired.cases:
        members.setdefault(by.of((case.stratum, case.case)), []).append(case)
    ordered = sorted(members, key=lambda value: (value is None, value or ""))
    groups = []
    for value in ordered:
        part = PairedAnswers(members[value], paired.first, [], paired.repeats)
        result = compare_answers(
            part,
            metric,
            seed=seed_from(str(seed), "by", by.field, str(value)),
            baseline="A",
            candidate="B",
            examples=0,
        )
        c = result.comparison
        stored = c.to_dict()
        groups.append(
            {
                "value": value,
                "cases": stored["cases"],
                "observations": stored["observations"],
                "a_mean": c.mean_a,
                "b_mean": c.mean_b,
                "delta": c.delta,
                "interval": stored["interval"],
                "worse": stored["worse"],
                "better": stored["better"],
                "same": stored["same"],
                "mcnemar": stored["mcnemar"] if metric == ALL_PASS else None,
            }
        )
    return groups
