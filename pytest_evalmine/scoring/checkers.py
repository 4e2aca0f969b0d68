"""Deterministic checkers (spec: "Checks"): each turns an answer and a reference value into a
score in [0, 1], a pass/fail verdict and one line saying why.

A checker is a function ``(CheckInput) -> Check``. The built-in ones are in ``BUILTIN``; a
conftest adds its own through the ``pytest_evalmine_checks`` hook, wrapped by ``user_checker``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from ..suite.model import NO_GOLD, CheckSpec
from .checks import Check, parse_json_answer

CHECKED_VALUE_CHARS = 80

# A number as people write it: optional sign, optional currency sign, thousands commas.
NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-\u2212]?)\s?[$\u20ac\u00a3\u00a5]?\s?(?P<sign2>[-\u2212]?)"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?P<frac>\.\d+)?"
)
ANSWER_MARK = re.compile(r"\banswer\b\s*\**\s*(?:is\s*)?[:\uff1a]\s*\**", re.IGNORECASE)
BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
TRAILING_PUNCTUATION = ".!?;:,"


@dataclass(frozen=True)
class CheckInput:
    """What a checker sees. ``reference`` is ``NO_GOLD`` when the case gives no value."""

    text: str
    reference: Any
    options: Mapping[str, Any]
    parsed: Any = None  # the answer's JSON when the task has a schema and it parsed
    vars: Mapping[str, Any] = field(default_factory=dict)
    task: str = ""
    case: str = ""
    model: str = ""

    def json(self) -> Any:
        """The answer as JSON (the schema parse when there was one). Raises ``ValueError``."""
        return self.parsed if self.parsed is not None else parse_json_answer(self.text)


@dataclass(frozen=True)
class Verdict:
    """What a user's check may return instead of a bool or a score."""

    passed: bool
    score: float | None = None
    reason: str = ""


Checker = Callable[[CheckInput], Check]


def shown(value: Any) -> str:
    """A value as a failure line shows it: JSON, clipped."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = repr(text) if isinstance(value, str) else text
    if len(text) > CHECKED_VALUE_CHARS:
        text = text[: CHECKED_VALUE_CHARS - 3] + "..."
    return text


def _result(name: str, passed: bool, message: str, expected: Any, got: Any) -> Check:
    return Check(
        name,
        passed,
        message,
        score=1.0 if passed else 0.0,
        expected=None if expected is None else shown(expected),
        got=None if got is None else shown(got),
    )


# --- number ----------------------------------------------------------------------------------
def parse_number(match: re.Match[str]) -> Decimal:
    negative = bool(match.group("sign") or match.group("sign2"))
    digits = match.group("int").replace(",", "") + (match.group("frac") or "")
    value = Decimal(digits)
    return -value if negative else value


def extract_number(text: str) -> tuple[Decimal, str] | None:
    """The answer's number and where it was found: the first number after the last
    "Answer:" on its line, else inside the last ``\\boxed{}``, else the last number."""
    marks = list(ANSWER_MARK.finditer(text))
    if marks:
        line = text[marks[-1].end() :].split("\n", 1)[0]
        found = NUMBER.search(line)
        if found:
            return parse_number(found), "after 'Answer:'"
    boxes = BOXED.findall(text)
    if boxes:
        found = NUMBER.search(boxes[-1])
        if found:
            return parse_number(found), "in \\boxed{}"
    numbers = list(NUMBER.finditer(text))
    if numbers:
        return parse_number(numbers[-1]), "the last number"
    return None


def reference_number(value: Any) -> Decimal:
    """A gold number given as a number or as text ("70,000", "$18")."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    found = NUMBER.fullmatch(str(value).strip())
    if found is None:
        raise ValueError(f"{value!r} is not a number")
    return parse_number(found)


def check_number(inp: CheckInput) -> Check:
    want = reference_number(inp.reference)
    found = extract_number(inp.text)
    if found is None:
        message = f"no number in the answer; expected {want}"
        return _result("number", False, message, _plain(want), None)
    got, where = found
    tolerance = Decimal(str(inp.options.get("tolerance", 0)))
    passed = abs(got - want) <= tolerance
    within = f" (tolerance {tolerance})" if tolerance else ""
    verb = "equals" if passed else "is not"
    message = f"{got} ({where}) {verb} {want}{within}"
    return _result("number", passed, message, _plain(want), _plain(got))


def _plain(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


# --- choice ----------------------------------------------------------------------------------
def extract_choice(text: str, letters: str) -> tuple[str, str] | None:
    """The chosen letter and where: after the last "Answer:", else "answer is (X)", else the
    last "(X)", else a line that is only "X" / "X." / "X)"."""
    letter = f"[{re.escape(letters)}]"
    marks = list(ANSWER_MARK.finditer(text))
    if marks:
        rest = text[marks[-1].end() :]
        found = re.match(rf"\s*\(?({letter})(?![A-Za-z])", rest, re.IGNORECASE)
        if found:
            return found.group(1).upper(), "after 'Answer:'"
    found_all = re.findall(rf"answer is\s*\**\s*\(?({letter})\b", text, re.IGNORECASE)
    if found_all:
        return found_all[-1].upper(), "after 'answer is'"
    found_all = re.findall(rf"\(({letter})\)", text)
    if found_all:
        return found_all[-1], "the last '(X)'"
    found_all = re.findall(rf"(?m)^\s*\**({letter})[.)]?\**\s*$", text)
    if found_all:
        return found_all[-1], "a line holding only the letter"
    return None


def check_choice(inp: CheckInput) -> Check:
    letters = str(inp.options.get("letters", "ABCD")).upper()
    want = str(inp.reference).strip().upper()
    if want not in letters or len(want) != 1:
        raise ValueError(f"choice gold {inp.reference!r} is not one of the letters {letters}")
    found = extract_choice(inp.text, letters)
    if found is None:
        return _result("choice", False, f"no choice among {letters}; expected {want}", want, None)
    got, where = found
    verb = "is" if got == want else "is not"
    return _result("choice", got == want, f"{got} ({where}) {verb} {want}", want, got)


# --- exact, contains, regex ------------------------------------------------------------------
def normalise(text: str, case_sensitive: bool = False) -> str:
    """Whitespace collapsed, trailing punctuation dropped, case folded unless asked not to."""
    text = " ".join(str(text).split()).rstrip(TRAILING_PUNCTUATION).rstrip()
    return text if case_sensitive else text.casefold()


def _alternatives(reference: Any) -> list[Any]:
    return list(reference) if isinstance(reference, list) else [reference]


def check_exact(inp: CheckInput) -> Check:
    sensitive = bool(inp.options.get("case_sensitive", False))
    wanted = _alternatives(inp.reference)
    got = normalise(inp.text, sensitive)
    passed = any(got == normalise(str(w), sensitive) for w in wanted)
    expected = wanted[0] if len(wanted) == 1 else wanted
    message = "matches" if passed else f"{shown(got)} matches none of {shown(expected)}"
    return _result("exact", passed, message, expected, got)


def _phrase_pattern(phrase: str, whole_word: bool, case_sensitive: bool) -> re.Pattern[str]:
    body = re.escape(phrase)
    if whole_word:
        body = rf"(?<!\w){body}(?!\w)"
    return re.compile(body, 0 if case_sensitive else re.IGNORECASE)


def _phrases(inp: CheckInput) -> list[str]:
    return [str(p) for p in _alternatives(inp.reference)]


def _found_phrases(inp: CheckInput) -> tuple[list[str], list[str]]:
    whole = bool(inp.options.get("whole_word", False))
    sensitive = bool(inp.options.get("case_sensitive", False))
    found, missing = [], []
    for phrase in _phrases(inp):
        target = found if _phrase_pattern(phrase, whole, sensitive).search(inp.text) else missing
        target.append(phrase)
    return found, missing


def check_contains(inp: CheckInput) -> Check:
    found, missing = _found_phrases(inp)
    total = len(found) + len(missing)
    passed = bool(found) if inp.options.get("any") else not missing
    score = 1.0 if passed and inp.options.get("any") else len(found) / total
    message = (
        f"found {', '.join(map(shown, found))}"
        if passed
        else f"missing {', '.join(map(shown, missing))}"
    )
    return Check("contains", passed, message, score=score, expected=shown(_phrases(inp)), got=None)


def check_not_contains(inp: CheckInput) -> Check:
    found, missing = _found_phrases(inp)
    total = len(found) + len(missing)
    message = "none present" if not found else f"present: {', '.join(map(shown, found))}"
    return Check(
        "not_contains",
        not found,
        message,
        score=len(missing) / total,
        expected=f"none of {shown(_phrases(inp))}",
        got=shown(found) if found else None,
    )


# A suite's pattern meets answers nobody has read: one that backtracks catastrophically
# (``(a|aa)+$`` on forty a's and a b) would hold the whole run in ``re``, which has no limit
# and keeps the interpreter's lock. The ``regex`` module runs the same syntax (version 0)
# with a deadline.
REGEX_TIMEOUT_S = 1.0


def compile_regex(options: Mapping[str, Any]) -> Any:
    """The check's pattern as a ``regex`` pattern (``re``'s syntax; imported here, so only
    suites with a regex check pay for it). Raises ``regex.error`` (a ``re.error`` kind of
    problem) when it does not compile."""
    import regex

    flags = regex.IGNORECASE if options.get("ignore_case") else 0
    return regex.compile(str(options["pattern"]), flags | regex.MULTILINE | regex.VERSION0)


def check_regex(inp: CheckInput) -> Check:
    pattern = compile_regex(inp.options)
    try:
        matches = list(pattern.finditer(inp.text, timeout=REGEX_TIMEOUT_S))
    except TimeoutError:
        return _result(
            "regex",
            False,
            f"/{pattern.pattern}/ timed out after {REGEX_TIMEOUT_S:g} s on this answer "
            "(catastrophic backtracking): not decided, counted as failed",
            None,
            None,
        )
    if not matches:
        return _result("regex", False, f"no match for /{pattern.pattern}/", None, None)
    if inp.reference is NO_GOLD:
        return _result("regex", True, f"matches /{pattern.pattern}/", None, matches[-1].group(0))
    group = inp.options.get("group", 1 if pattern.groups else 0)
    got = matches[-1].group(group) or ""
    wanted = _alternatives(inp.reference)
    sensitive = not inp.options.get("ignore_case")
    passed = any(normalise(got, sensitive) == normalise(str(w), sensitive) for w in wanted)
    expected = wanted[0] if len(wanted) == 1 else wanted
    verb = "matches" if passed else "does not match"
    return _result("regex", passed, f"last match {shown(got)} {verb} the gold", expected, got)


# --- JSON ------------------------------------------------------------------------------------
def same_value(got: Any, want: Any) -> bool:
    """JSON equality for checks: numbers by value (18 == 18.0, never a bool), strings after
    ``normalise``, null only equal to null, containers element by element."""
    if want is None or got is None:
        return got is None and want is None
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(got, want, rel_tol=0, abs_tol=1e-9)
    if isinstance(want, str) and isinstance(got, str):
        return normalise(got) == normalise(want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(map(same_value, got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in want)
    return False


MISSING_FIELD = object()


def check_json_fields(inp: CheckInput) -> Check:
    gold = inp.reference
    if not isinstance(gold, dict):
        raise ValueError(f"json_fields needs an object as gold, got {shown(gold)}")
    try:
        answer = inp.json()
    except ValueError as exc:
        return Check("json_fields", False, str(exc), score=0.0, expected=shown(gold))
    if not isinstance(answer, dict):
        return Check(
            "json_fields", False, "the answer is not a JSON object", score=0.0, got=shown(answer)
        )
    fields = list(inp.options.get("fields") or gold)
    wrong = []
    for name in fields:
        got = answer.get(name, MISSING_FIELD)
        want = gold.get(name)
        if got is MISSING_FIELD or not same_value(got, want):
            shown_got = "missing" if got is MISSING_FIELD else shown(got)
            wrong.append(f"{name}: expected {shown(want)}, got {shown_got}")
    score = (len(fields) - len(wrong)) / len(fields) if fields else 1.0
    threshold = float(inp.options.get("threshold", 1.0))
    passed = score >= threshold
    right = f"{len(fields) - len(wrong)}/{len(fields)} fields right"
    message = right + (f" (threshold {threshold:g})" if threshold < 1 else "")
    if wrong:
        message += "; " + "; ".join(wrong)
    return Check(
        "json_fields",
        passed,
        message,
        score=score,
        expected=shown({k: gold.get(k) for k in fields}),
        got=shown({k: answer.get(k) for k in fields if k in answer}),
    )


JSON_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[[\"']([^\"']*)[\"']\]")


def parse_json_path(path: str) -> list[str | int]:
    """``$.a.b[0]["c d"]`` (the ``$`` optional) into steps. Raises ``ValueError``."""
    rest = path[1:] if path.startswith("$") else "." + path if path[:1] != "[" else path
    steps: list[str | int] = []
    position = 0
    while position < len(rest):
        step = JSON_PATH_STEP.match(rest, position)
        if step is None:
            raise ValueError(f"json_path {path!r}: cannot read it at {rest[position:]!r}")
        key, index, quoted = step.groups()
        steps.append(int(index) if index is not None else key if key is not None else quoted)
        position = step.end()
    return steps


def check_json_path(inp: CheckInput) -> Check:
    path = str(inp.options["path"])
    try:
        value = inp.json()
    except ValueError as exc:
        return _result("json_path", False, str(exc), inp.reference, None)
    for step in parse_json_path(path):
        container_ok = isinstance(value, list) if isinstance(step, int) else isinstance(value, dict)
        if not container_ok or (
            step not in value if isinstance(value, dict) else step >= len(value)
        ):
            return _result("json_path", False, f"no value at {path}", inp.reference, None)
        value = value[step]
    passed = same_value(value, inp.reference)
    verb = "equals" if passed else "is not"
    message = f"{path} = {shown(value)} {verb} {shown(inp.reference)}"
    return _result("json_path", passed, message, inp.reference, value)


# --- length ----------------------------------------------------------------------------------
def _at_most(name: str, count: int, limit: int, unit: str) -> Check:
    passed = count <= limit
    message = f"{count} {unit}, at most {limit} allowed"
    return Check(
        name, passed, message, float(passed), expected=f"<= {limit} {unit}", got=f"{count} {unit}"
    )


def check_max_words(inp: CheckInput) -> Check:
    return _at_most("max_words", len(inp.text.split()), int(inp.options["max"]), "words")


def check_max_chars(inp: CheckInput) -> Check:
    return _at_most("max_chars", len(inp.text), int(inp.options["max"]), "characters")


# --- registry --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckerInfo:
    function: Checker
    needs_reference: bool
    builtin: bool = True
    source: Any = None  # a conftest check: the user's own function


BUILTIN: dict[str, CheckerInfo] = {
    "number": CheckerInfo(check_number, True),
    "choice": CheckerInfo(check_choice, True),
    "exact": CheckerInfo(check_exact, True),
    "contains": CheckerInfo(check_contains, True),
    "not_contains": CheckerInfo(check_not_contains, True),
    "regex": CheckerInfo(check_regex, False),
    "json_fields": CheckerInfo(check_json_fields, True),
    "json_path": CheckerInfo(check_json_path, True),
    "max_words": CheckerInfo(check_max_words, False),
    "max_chars": CheckerInfo(check_max_chars, False),
}
# Answer-level checks every item has (spec: "Item outcomes") and the sandboxed one: names no
# conftest may take.
RESERVED = frozenset({"answer", "parse", "schema", "exec"})


class UserCheckError(Exception):
    """A user's check raised. Carries the user's exception and the traceback from the
    user's own frame down, so the item can re-raise it without ours."""

    def __init__(self, name: str, error: BaseException, traceback: Any) -> None:
        super().__init__(f"check {name!r} raised {type(error).__name__}: {error}")
        self.name = name
        self.error = error
        self.traceback = traceback


def user_checker(name: str, function: Callable[..., Any]) -> Checker:
    """Wrap a conftest's check. It returns a bool, a score in [0, 1] (passes at 1, or at
    the ``threshold`` option), or a ``Verdict``; anything else is the user's mistake."""

    def run(inp: CheckInput) -> Check:
        try:
            value = function(inp)
        except Exception as exc:
            # tb_next: the user's own frame; ours (this wrapper) is left out.
            raise UserCheckError(name, exc, exc.__traceback__.tb_next) from None  # type: ignore[union-attr]
        return _user_result(name, value, inp.options)

    return run


def _user_result(name: str, value: Any, options: Mapping[str, Any]) -> Check:
    if isinstance(value, Verdict):
        score = value.score if value.score is not None else float(value.passed)
        return Check(
            name,
            value.passed,
            value.reason or ("passed" if value.passed else "failed"),
            score=_unit(name, score),
        )
    if isinstance(value, bool):
        return Check(name, value, "passed" if value else "failed", score=float(value))
    if isinstance(value, (int, float)):
        score = _unit(name, float(value))
        threshold = float(options.get("threshold", 1.0))
        return Check(
            name, score >= threshold, f"score {score:g} (passes at {threshold:g})", score=score
        )
    raise TypeError(
        f"check {name!r} returned {type(value).__name__}; return a bool, a score in [0, 1] "
        "or pytest_evalmine.Verdict"
    )


def _unit(name: str, score: float) -> float:
    if not 0.0 <= score <= 1.0 or math.isnan(score):
        raise ValueError(f"check {name!r} returned the score {score}, outside [0, 1]")
    return score


def validate_check(
    spec: CheckSpec, info: CheckerInfo | None, case_refs: Sequence[Any]
) -> str | None:
    """Why this check cannot run on these cases (a load-time problem), or None."""
    if info is None:
        return None
    if spec.name == "regex":
        import regex

        try:
            pattern = compile_regex(spec.options)
        except regex.error as exc:
            return f"regex pattern does not compile: {exc}"
        group = spec.options.get("group")
        if isinstance(group, int) and group > pattern.groups:
            return f"regex group {group} does not exist (the pattern has {pattern.groups})"
        if isinstance(group, str) and group not in pattern.groupindex:
            return f"regex has no group named {group!r}"
    if spec.name == "json_path":
        try:
            parse_json_path(str(spec.options["path"]))
        except ValueError as exc:
            return str(exc)
    if info.needs_reference and any(ref is NO_GOLD for ref in case_refs):
        return (
            f"check {spec.name!r} needs a value to compare with: give each case a 'gold' (or "
            f"'expected: {{{spec.name}: ...}}'), or the check a 'value'"
        )
    for ref in case_refs:
        problem = _reference_problem(spec, ref)
        if problem:
            return problem
    return None


def _reference_problem(spec: CheckSpec, reference: Any) -> str | None:
    name = spec.name
    if reference is NO_GOLD:
        return None
    try:
        if name == "number":
            reference_number(reference)
        elif name == "choice":
            letters = str(spec.options.get("letters", "ABCD")).upper()
            if not isinstance(reference, str) or reference.strip().upper() not in letters:
                return f"choice gold must be one of the letters {letters}, got {shown(reference)}"
        elif name == "json_fields" and not isinstance(reference, dict):
            return f"json_fields needs an object as gold, got {shown(reference)}"
        elif name in ("contains", "not_contains") and any(
            not isinstance(p, str) or not p for p in _alternatives(reference)
        ):
            return f"{name} needs a non-empty string or a list of them, got {shown(reference)}"
    except (ValueError, InvalidOperation) as exc:
        return f"{name} gold: {exc}"
    return None
