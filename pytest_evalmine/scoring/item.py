"""Scoring one item (spec: "Checks"): the answer-level checks, then the task's configured
checks against the case's reference values; and the load-time check of a suite's checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SuiteError
from ..suite.model import Case, CheckSpec, Suite
from ..suite.refs import SchemaRefs
from .checkers import BUILTIN, CheckerInfo, CheckInput, validate_check
from .checks import Check, CheckResult, check_answer

EXEC = "exec"
NOT_EXECUTED = Check(
    EXEC,
    False,
    "not run: the run was interrupted (Ctrl-C) before this answer's execution check ran",
    score=0.0,
    expected="exit 0",
    got="not run",
)


def score_answer(
    text: str,
    schema: dict[str, Any] | None,
    checks: Sequence[CheckSpec],
    case: Case,
    checkers: Mapping[str, CheckerInfo],
    *,
    task: str = "",
    model: str = "",
    executed: Mapping[int, Check] | None = None,
    refs: SchemaRefs | None = None,
) -> CheckResult:
    """Every check of one answer. An empty answer stops at the ``answer`` check; otherwise
    each configured check runs (a schema failure does not hide a right number). Execution
    checks are run beforehand, for the whole selection at once, and handed in as
    ``executed`` by their index in ``checks``. A user's check that raises propagates as
    ``UserCheckError``."""
    base = check_answer(text, schema, refs)
    if base.status("answer") is False:
        return base
    results = list(base.checks)
    for index, spec in enumerate(checks):
        if spec.name == EXEC:
            # None only when a Ctrl-C stopped the execution checks before this one ran
            results.append((executed or {}).get(index) or NOT_EXECUTED)
            continue
        inp = CheckInput(
            text=text,
            reference=case.reference(spec),
            options=spec.options,
            parsed=base.parsed,
            vars=case.vars,
            task=task,
            case=case.id,
            model=model,
        )
        results.append(checkers[spec.name].function(inp))
    return CheckResult(tuple(results), base.parsed)


def validate_checks(suite: Suite, checkers: Mapping[str, CheckerInfo], shown: str) -> None:
    """Refuse, as a suite error, a check no checker answers to or one that cannot run on
    some case (a missing gold, a regex that does not compile)."""
    for task in suite.tasks:
        for spec in task.checks:
            if spec.name == EXEC:
                continue  # its options are the schema's to check; it needs no reference
            info = checkers.get(spec.name)
            if info is None:
                raise SuiteError(shown, spec.where, unknown_check(spec.name, checkers))
            problem = validate_check(spec, info, [case.reference(spec) for case in task.cases])
            if problem:
                raise SuiteError(shown, spec.where, problem)


def unknown_check(name: str, checkers: Mapping[str, CheckerInfo]) -> str:
    builtin = ", ".join(sorted([*BUILTIN, EXEC]))
    own = ", ".join(sorted(n for n, i in checkers.items() if not i.builtin)) or "none"
    return f"unknown check {name!r} (built-in: {builtin}; from pytest_evalmine_checks hooks: {own})"
