"""Answer checks (spec: "Item outcomes"): did an answer arrive, parse and fit its schema."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..suite.bounded_validation import SchemaCheckTimeout, bounded_check
from ..suite.refs import SchemaRefs, offline_validator

ANSWER_CHECKS = ("answer", "parse", "schema")
FENCED = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\r?\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Check:
    """One check's verdict. ``score`` is in [0, 1] (None for the answer-level checks);
    ``expected`` and ``got`` are short renderings for failure reports; ``runs`` records an
    execution check's earlier blocks."""

    name: str
    passed: bool
    message: str = ""
    score: float | None = None
    expected: str | None = None
    got: str | None = None
    runs: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """As answers.jsonl and the judge prompt hold it (once per check of every answer:
        plain, without dataclasses.asdict's deep copy; ``runs`` is shared)."""
        return {
            "name": self.name,
            "passed": self.passed,
            "message": self.message,
            "score": self.score,
            "expected": self.expected,
            "got": self.got,
            "runs": self.runs,
        }


@dataclass(frozen=True)
class CheckResult:
    checks: tuple[Check, ...]
    parsed: Any = None

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def failed(self) -> Check | None:
        return next((check for check in self.checks if not check.passed), None)

    @property
    def score(self) -> float:
        """The item's score in [0, 1]: 0 when the answer is empty, does not parse or misses
        its schema; else the mean of the configured checks' scores; else 1."""
        if any(not c.passed for c in self.checks if c.name in ANSWER_CHECKS):
            return 0.0
        scores = [c.score for c in self.checks if c.score is not None]
        return sum(scores) / len(scores) if scores else 1.0

    def status(self, name: str) -> bool | None:
        """True/False for a check that ran, None for one that did not."""
        return next((c.passed for c in self.checks if c.name == name), None)


def parse_json_answer(text: str) -> Any:
    """The whole text as JSON, else the first fenced block. Raises ``ValueError``."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    match = FENCED.search(text)
    if match is None:
        raise ValueError("the answer is not JSON and holds no fenced block")
    try:
        return json.loads(match.group(1))
    except ValueError as exc:
        raise ValueError(f"the first fenced block is not JSON: {exc}") from None


def check_answer(
    text: str, schema: dict[str, Any] | None, refs: SchemaRefs | None = None
) -> CheckResult:
    """``refs``: the files the schema's ``$ref``s point to, as the suite loader found them;
    nothing is ever fetched from elsewhere."""
    if not text.strip():
        return CheckResult((Check("answer", False, "the answer is empty"),))
    checks = [Check("answer", True)]
    if schema is None:
        return CheckResult(tuple(checks))
    try:
        parsed = parse_json_answer(text)
    except ValueError as exc:
        checks.append(Check("parse", False, str(exc)))
        return CheckResult(tuple(checks))
    checks.append(Check("parse", True))
    from jsonschema.exceptions import best_match

    try:
        with bounded_check():
            error = best_match(offline_validator(schema, refs).iter_errors(parsed))
    except SchemaCheckTimeout as exc:
        message = f"{exc}: not decided, counted as failed"
        checks.append(Check("schema", False, message))
        return CheckResult(tuple(checks), parsed)
    except Exception as exc:  # incl. RecursionError: a paid answer's report must be written
        message = f"the schema could not be checked: {type(exc).__name__}: {exc}"
        checks.append(Check("schema", False, message[:300]))
        return CheckResult(tuple(checks), parsed)
    if error is None:
        checks.append(Check("schema", True))
    else:
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        checks.append(Check("schema", False, f"{where}: {error.message}"))
    return CheckResult(tuple(checks), parsed)
