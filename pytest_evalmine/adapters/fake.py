"""The fake adapter: deterministic answers from a hash of the request (spec: "Fake adapter").

No key, no network. Text, token counts and any judge verdict follow from the request alone, so
every number a fake run prints is reproducible. Faults can be injected to exercise retries,
check failures and error outcomes.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from ..options import parse_number
from ..suite.canonical import sha256_hex
from .base import (
    SCHEMA_NATIVE,
    SCHEMA_PROMPTED,
    TEMPLATE_OVERHEAD_TOKENS,
    AdapterError,
    Request,
    Response,
    Usage,
    estimate_tokens,
)

FAULT_KINDS = (
    "rate_limit",
    "server_error",
    "timeout",
    "malformed_json",
    "schema_violation",
    "empty_answer",
)

_WORDS = [
    "account",
    "billing",
    "customer",
    "request",
    "refund",
    "invoice",
    "order",
    "team",
    "update",
    "support",
    "issue",
    "payment",
    "access",
    "settings",
    "error",
    "limit",
    "plan",
    "workspace",
    "export",
    "report",
    "ticket",
    "review",
    "policy",
    "reply",
    "detail",
    "change",
    "week",
    "message",
    "problem",
    "option",
    "answer",
    "system",
    "user",
    "data",
]
_OPENERS = (
    "Thanks for reaching out",
    "Here is what happened",
    "The short answer is yes",
    "I looked into this",
    "Good question",
    "This comes down to one setting",
)


ANSWERS, JUDGE = "answers", "judge"
PHASES = (ANSWERS, JUDGE)


def phase_of(request: Request) -> str:
    """The judge's requests say so in their context; everything else asks for an answer."""
    purpose = (request.context or {}).get("purpose")
    return JUDGE if purpose == "judge" else ANSWERS


# Fake judges with a known behaviour, chosen by the model name's last part (spec: "Fake
# adapter"): ``fake/judge-slot1`` always prefers the answer in slot 1 (a position-biased
# judge), ``fake/judge-longer`` the longer answer (a judge whose taste a test can label
# ahead). Any other fake judge answers from the request's hash (a noisy judge).
JUDGE_SLOT1, JUDGE_LONGER = "judge-slot1", "judge-longer"


def scripted_verdict(request: Request) -> str | None:
    """A scripted fake judge's verdict for a pairwise judge request, else None."""
    if (request.context or {}).get("purpose") != "judge":
        return None
    mode = request.model.rsplit("/", 1)[-1]
    if mode == JUDGE_SLOT1:
        return json.dumps({"winner": "1", "reason": "fake judge: slot 1 always"})
    if mode != JUDGE_LONGER:
        return None
    first, _, rest = request.prompt.partition("\n## Answer 1\n")[2].partition("\n\n## Answer 2\n")
    second = rest.rpartition("\n\n## Your verdict")[0]
    winner = "tie" if len(first) == len(second) else "1" if len(first) > len(second) else "2"
    return json.dumps({"winner": winner, "reason": "fake judge: the longer answer"})


@dataclass
class Fault:
    """Inject ``kind`` into matching requests of one phase (answers by default), at most
    ``count`` times in that phase in this process."""

    kind: str
    model: str | None = None
    prompt_contains: str | None = None
    count: int = 1
    phase: str = ANSWERS
    fired: int = 0

    def matches(self, request: Request) -> bool:
        if self.fired >= self.count or phase_of(request) != self.phase:
            return False
        if self.kind == "schema_violation" and request.schema is None:
            return False  # nothing to violate: the fault waits for a request it can break
        if self.model is not None and request.model != self.model:
            return False
        return self.prompt_contains is None or self.prompt_contains in request.prompt

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """``KIND[,model=M][,prompt=TEXT][,count=N][,phase=answers|judge]``, as given to
        ``--evalmine-fake-fault``."""
        kind, *pairs = [part.strip() for part in spec.split(",")]
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; choose from {', '.join(FAULT_KINDS)}")
        fault = cls(kind=kind)
        for pair in pairs:
            name, sep, value = pair.partition("=")
            if not sep:
                raise ValueError(f"fault option {pair!r} is not name=value")
            if name == "model":
                fault.model = value
            elif name == "prompt":
                fault.prompt_contains = value
            elif name == "count":
                # At least once: a count below 1 would inject nothing, silently.
                fault.count = parse_number(value, "count", integer=True, minimum=1)
            elif name == "phase":
                if value not in PHASES:
                    raise ValueError(f"phase {value!r}: choose from {', '.join(PHASES)}")
                fault.phase = value
            else:
                raise ValueError(f"unknown fault option {name!r} (model, prompt, count, phase)")
        return fault


def parse_faults(specs: list[str]) -> list[Fault]:
    """Every ``--evalmine-fake-fault`` value; ``ValueError`` names the bad one."""
    faults = []
    for spec in specs:
        try:
            faults.append(Fault.parse(spec))
        except ValueError as exc:
            raise ValueError(f"--evalmine-fake-fault={spec}: {exc}") from None
    return faults


@dataclass
class FakeOptions:
    latency_s: float = 0.0
    faults: list[Fault] = field(default_factory=list)


class FakeAdapter:
    name = "fake"
    version = "1"
    # No server and no queue behind it: its calls go at the concurrency ceiling from the first
    # (a declared capacity is where the adaptive width starts, spec "Dispatch").
    server_slots = 1 << 20

    def __init__(self, options: FakeOptions | None = None) -> None:
        self.options = options or FakeOptions()
        self.calls = 0

    def schema_mode(self, request: Request) -> str | None:
        # Asked for the schema in the prompt, the fake follows it all the same: its answers
        # are a function of the request's key fields, which the mode is not among.
        if request.schema is None:
            return None
        return SCHEMA_PROMPTED if request.asks_prompted else SCHEMA_NATIVE

    async def aclose(self) -> None:
        return None

    async def complete(self, request: Request) -> Response:
        started = time.perf_counter()
        self.calls += 1
        if self.options.latency_s:
            await asyncio.sleep(self.options.latency_s)
        fault = next((f for f in self.options.faults if f.matches(request)), None)
        if fault is not None:
            fault.fired += 1
        text = self._answer(request, fault.kind if fault else None)
        output_tokens = estimate_tokens(text)
        finish_reason = "stop"
        if output_tokens > request.max_tokens:
            text = text[: request.max_tokens * 4]
            output_tokens = request.max_tokens
            finish_reason = "length"
        digest = sha256_hex(request.key_fields())
        return Response(
            text=text,
            usage=Usage(
                input_tokens=estimate_tokens((request.system or "") + request.prompt)
                + TEMPLATE_OVERHEAD_TOKENS,
                output_tokens=output_tokens,
            ),
            latency_s=time.perf_counter() - started,
            finish_reason=finish_reason,
            schema_mode=self.schema_mode(request),
            provider_request_id=f"fake-{digest[:16]}",
            # An injected fault is not what this request answers: a later run without the
            # fault must get the real answer, not a replay of the fault.
            cacheable=fault is None,
        )

    def _answer(self, request: Request, fault: str | None) -> str:
        if fault in ("rate_limit", "server_error", "timeout"):
            status = {"rate_limit": 429, "server_error": 500, "timeout": None}[fault]
            raise AdapterError(
                fault,
                f"fake {fault} injected",
                retryable=True,
                retry_after_s=0.0,
                status=status,
            )
        if fault == "empty_answer":
            return ""
        if fault == "malformed_json":
            return '{"answer": "cut off mid'
        scripted = scripted_verdict(request)
        if scripted is not None:
            return scripted
        rng = random.Random(int(sha256_hex(request.key_fields())[:16], 16))
        if fault == "schema_violation":
            return json.dumps(_violation(request.schema))
        if request.schema is not None:
            return _schema_answer(request.schema, rng)
        return _prose(rng)


def _prose(rng: random.Random) -> str:
    sentences = [rng.choice(_OPENERS) + "."]
    for _ in range(rng.randint(2, 4)):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 12))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def _violation(schema: dict[str, Any] | None) -> Any:
    """The first of a few unlike values that the schema rejects."""
    from jsonschema import Draft202012Validator

    fallback = {"type": "object", "required": ["answer"]}
    shaped = schema if isinstance(schema, (dict, bool)) else None
    validator = Draft202012Validator(shaped or fallback)
    candidates: list[Any] = ["not the expected shape", {}, [], -123456789, None, True, 0.5]
    for candidate in candidates:
        try:
            if not validator.is_valid(candidate):
                return candidate
        except Exception:  # a schema the suite loader refuses: try the next candidate
            continue
    return {"unexpected": True}


# Bounds of the instance generator (spec: "Fake adapter"): a schema it cannot satisfy within
# them gets an error naming the place in the schema, never a crash, a hang or a MemoryError.
MAX_SCHEMA_DEPTH = 32  # subschemas followed from the root ($ref, allOf, items, ...)
MAX_ITEMS = 1000  # items of one array
MAX_STRING_CHARS = 100_000  # characters of one string
MAX_VALUES = 10_000  # values in one answer
MAX_ANSWER_CHARS = 1_000_000  # characters of all its strings
GENERATE_BUDGET_S = 2.0
# From this depth on optional properties are left out and arrays take their fewest items, so
# a recursive schema (a tree whose children $ref the root) ends in a small answer.
SHALLOW_DEPTH = 12


class _Unanswerable(Exception):
    """No instance within the bounds: ``path`` is where in the schema it was found."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")


class _OverBudget(_Unanswerable):
    """The answer as a whole is too large or too slow: another branch would not help."""


def _schema_answer(schema: Any, rng: random.Random) -> str:
    """The JSON text of an instance of ``schema``; ``AdapterError`` (bad_request, not
    retried) naming the schema path when there is none within the bounds."""
    generator = _Generator(schema, rng, time.monotonic() + GENERATE_BUDGET_S)
    try:
        return json.dumps(generator.value(schema, "$", 0), ensure_ascii=False, allow_nan=False)
    except _Unanswerable as exc:
        problem = str(exc)
    except (
        RecursionError,
        MemoryError,
        ArithmeticError,
        LookupError,
        TypeError,
        ValueError,
    ) as exc:
        # a schema of a shape the generator does not read (one the suite loader refuses;
        # the evalmine fixture's schemas are not loaded)
        problem = f"{generator.at}: {type(exc).__name__}: {exc}"
    raise AdapterError(
        "bad_request",
        f"the fake adapter cannot answer this schema: {' '.join(problem.split())[:300]}",
        retryable=False,
        possibly_billed=False,
    )


class _Generator:
    """A value valid against the common JSON Schema keywords, chosen by ``rng``."""

    def __init__(self, root: Any, rng: random.Random, deadline: float) -> None:
        self.root = root
        self.rng = rng
        self.deadline = deadline
        self.values = 0
        self.chars = 0
        self.at = "$"

    def value(self, schema: Any, path: str, depth: int) -> Any:
        self.at = path
        self.values += 1
        if self.values > MAX_VALUES:
            raise _OverBudget(path, f"the answer would hold more than {MAX_VALUES} values")
        if time.monotonic() > self.deadline:
            raise _OverBudget(path, f"no answer within {GENERATE_BUDGET_S:g} s")
        if depth > MAX_SCHEMA_DEPTH:
            raise _Unanswerable(
                path,
                f"nested deeper than {MAX_SCHEMA_DEPTH} subschemas (a $ref loop through "
                "required values?)",
            )
        if schema is True:
            schema = {}
        if schema is False:
            raise _Unanswerable(path, "false accepts no value")
        if not isinstance(schema, dict):
            raise _Unanswerable(path, "not a schema (a JSON object or a boolean)")
        rng = self.rng
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            target, target_path = self.resolve(ref, path)
            return self.value(target, target_path, depth + 1)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise _Unanswerable(f"{path}.enum", "enum lists no value")
            return rng.choice(values)
        for combinator in ("anyOf", "oneOf"):
            if combinator in schema:
                return self.one_of(schema, combinator, f"{path}.{combinator}", depth)
        if "allOf" in schema:
            return self.value(self.merged(schema, path), path, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.typed(schema, kind, path, depth)
        return self.of_type(schema, kind, path, depth)

    def typed(self, schema: dict[str, Any], kinds: list[Any], path: str, depth: int) -> Any:
        """A value of one of the listed types: drawn among those other than null, then the
        others in turn when the schema cannot be met in that type."""
        first = self.rng.choice([k for k in kinds if k != "null"] or ["null"])
        failure: _Unanswerable | None = None
        for kind in [first, *(k for k in dict.fromkeys(kinds) if k != first)]:
            try:
                return self.of_type(schema, kind, path, depth)
            except _OverBudget:
                raise
            except _Unanswerable as exc:
                failure = failure or exc
        assert failure is not None
        raise failure

    def of_type(self, schema: dict[str, Any], kind: Any, path: str, depth: int) -> Any:
        rng = self.rng
        if kind == "object" or (kind is None and "properties" in schema):
            return self.object(schema, path, depth)
        if kind == "array":
            return self.array(schema, path, depth)
        if kind in ("integer", "number"):
            return _number(schema, rng, path, integer=kind == "integer")
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        text = _string(schema, rng, path)
        self.chars += len(text)
        if self.chars > MAX_ANSWER_CHARS:
            raise _OverBudget(path, f"the answer would exceed {MAX_ANSWER_CHARS} characters")
        return text

    def resolve(self, ref: str, path: str) -> tuple[Any, str]:
        """The subschema a local reference names (a JSON pointer, or an ``$anchor``)."""
        from urllib.parse import unquote

        pointer = unquote(ref[1:])
        if pointer and not pointer.startswith("/"):
            found = _anchor(self.root, pointer)
            if found is None:
                raise _Unanswerable(path, f"$ref {ref!r} names no $anchor")
            return found, f"$ ($anchor {pointer!r})"
        target: Any = self.root
        where = "$"
        for raw in pointer.split("/")[1:] if pointer else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target, where = target[part], f"{where}.{part}"
            elif isinstance(target, list) and part.isdecimal() and int(part) < len(target):
                target, where = target[int(part)], f"{where}[{part}]"
            else:
                raise _Unanswerable(path, f"$ref {ref!r} points to nothing")
        return target, where

    def one_of(self, schema: dict[str, Any], combinator: str, path: str, depth: int) -> Any:
        """A value of one branch (drawn, then the others in turn when it cannot be met),
        with the schema's other keywords applying too."""
        options = schema[combinator]
        if not isinstance(options, list) or not options:
            raise _Unanswerable(path, "lists no schema")
        rest = {key: value for key, value in schema.items() if key != combinator}
        first = self.rng.randrange(len(options))
        failure: _Unanswerable | None = None
        for index in [first, *(i for i in range(len(options)) if i != first)]:
            branch_path = f"{path}[{index}]"
            try:
                branch = self.fold(dict(rest), options[index], branch_path)
                return self.value(branch, branch_path, depth + 1)
            except _OverBudget:
                raise
            except _Unanswerable as exc:  # another branch may do
                failure = failure or exc
        assert failure is not None
        raise failure

    def merged(self, schema: dict[str, Any], path: str) -> dict[str, Any]:
        """``allOf`` folded into the schema holding it."""
        parts = schema["allOf"]
        if not isinstance(parts, list):
            raise _Unanswerable(f"{path}.allOf", "is not a list of schemas")
        merged = {key: value for key, value in schema.items() if key != "allOf"}
        for index, part in enumerate(parts):
            merged = self.fold(merged, part, f"{path}.allOf[{index}]")
        return merged

    def fold(self, merged: dict[str, Any], part: Any, part_path: str) -> dict[str, Any]:
        """``part``'s keywords added to ``merged``: properties and required joined, any
        other keyword of ``part`` replacing the one there; a local ``$ref`` is followed."""
        for _ in range(MAX_SCHEMA_DEPTH):
            ref = part.get("$ref") if isinstance(part, dict) else None
            if not (isinstance(ref, str) and ref.startswith("#")):
                break
            siblings = {key: value for key, value in part.items() if key != "$ref"}
            target, part_path = self.resolve(ref, part_path)
            part = {**siblings, **target} if isinstance(target, dict) and siblings else target
        if part is True:
            return merged
        if part is False:
            raise _Unanswerable(part_path, "false accepts no value")
        if not isinstance(part, dict):
            raise _Unanswerable(part_path, "not a schema (a JSON object or a boolean)")
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged[key] = value
        return merged

    def object(self, schema: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        properties = schema.get("properties", {})
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required", [])
        required = (
            [name for name in required if isinstance(name, str)]
            if isinstance(required, list)
            else []
        )
        shallow = depth >= SHALLOW_DEPTH
        out: dict[str, Any] = {}
        for name, sub in properties.items():
            sub_path = f"{path}.properties.{name}"
            needed = name in required
            if sub is False and needed:
                raise _Unanswerable(sub_path, f"false, yet {name!r} is required")
            if sub is False or (shallow and not needed):
                continue  # a forbidden property, or an optional one deep down: left out
            try:
                out[name] = self.value(sub, sub_path, depth + 1)
            except _OverBudget:
                raise
            except _Unanswerable:
                if needed:
                    raise
        for name in required:
            if name not in out and name not in properties:
                out[name] = self.value(*self.undeclared(schema, name, path), depth + 1)
        return out

    @staticmethod
    def undeclared(schema: dict[str, Any], name: str, path: str) -> tuple[Any, str]:
        """The subschema for a required property ``properties`` does not name."""
        import re

        patterns = schema.get("patternProperties", {})
        for pattern, sub in patterns.items() if isinstance(patterns, dict) else ():
            try:
                if re.search(pattern, name):
                    return sub, f"{path}.patternProperties.{pattern}"
            except re.error:
                continue
        extra = schema.get("additionalProperties", True)
        if extra is False:
            raise _Unanswerable(
                f"{path}.required",
                f"{name!r} is required, but properties does not name it and "
                "additionalProperties is false",
            )
        return extra, f"{path}.additionalProperties"

    def array(self, schema: dict[str, Any], path: str, depth: int) -> list[Any]:
        shallow = depth >= SHALLOW_DEPTH
        fewest = _count(schema.get("minItems"), 0 if shallow else 1)
        most = _count(schema.get("maxItems"), fewest if shallow else max(fewest, 3))
        low = min(fewest, most)
        high = max(low, min(most, low + 2))
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", {"type": "string"})
        rest_path = f"{path}.items"
        if isinstance(items, list):  # before draft 2020-12, a list of items is a tuple
            prefix, items = items, schema.get("additionalItems", {"type": "string"})
            rest_path = f"{path}.additionalItems"
        prefix = prefix if isinstance(prefix, list) else []
        prefix_key = "prefixItems" if "prefixItems" in schema else "items"
        if items is False:
            high = min(high, len(prefix))
            if low > high:
                raise _Unanswerable(
                    f"{path}.minItems", f"{low} items, but only {len(prefix)} are allowed"
                )
        if low > MAX_ITEMS:
            raise _Unanswerable(
                f"{path}.minItems",
                f"{low} items are more than it writes in an array (at most {MAX_ITEMS})",
            )
        count = self.rng.randint(low, min(high, MAX_ITEMS))
        out = []
        for index in range(count):
            if index < len(prefix):
                sub, sub_path = prefix[index], f"{path}.{prefix_key}[{index}]"
            else:
                sub, sub_path = items, rest_path
            try:
                out.append(self.value(sub, sub_path, depth + 1))
            except _OverBudget:
                raise
            except _Unanswerable:
                if index < low:
                    raise
                break  # the items so far are enough
        return out


def _anchor(root: Any, name: str) -> Any:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("$anchor") == name:
                return node
            stack.extend(v for k, v in node.items() if k not in ("const", "enum", "default"))
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _count(value: Any, default: int) -> int:
    """A minItems/maxItems/minLength/maxLength value as an int (``1e3`` is 1000)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return default
    return int(value) if value < 10**18 else 10**18


def _bound(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _number(schema: dict[str, Any], rng: random.Random, path: str, *, integer: bool) -> float | int:
    low = _bound(schema.get("minimum"))
    high = _bound(schema.get("maximum"))
    step = 1 if integer else 1e-6
    exclusive_low, exclusive_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if exclusive_low is True and low is not None:  # draft 4: the minimum is exclusive
        low += step
    elif _bound(exclusive_low) is not None:
        low = max(exclusive_low + step, low) if low is not None else exclusive_low + step
    if exclusive_high is True and high is not None:
        high -= step
    elif _bound(exclusive_high) is not None:
        high = min(exclusive_high - step, high) if high is not None else exclusive_high - step
    if low is None:
        low = 0 if high is None or high >= 0 else high - 100
    if high is None:
        high = low + 100
    if integer:
        smallest, largest = math.ceil(low), math.floor(high)
        if smallest > largest:
            raise _Unanswerable(path, f"no integer lies between {low} and {high}")
        return rng.randint(smallest, largest)
    if low > high:
        raise _Unanswerable(path, f"no number lies between {low} and {high}")
    share = rng.random()  # rng.uniform's own draw, kept finite across the whole float range
    value = low + (high - low) * share
    if not math.isfinite(value):
        value = low * (1 - share) + high * share
    rounded = round(value, 2)
    return rounded if low <= rounded <= high else value


def _string(schema: dict[str, Any], rng: random.Random, path: str) -> str:
    formats = {"date": "2026-01-15", "date-time": "2026-01-15T09:30:00Z", "email": "a@b.example"}
    if schema.get("format") in formats:
        return formats[schema["format"]]
    low = _count(schema.get("minLength"), 0)
    if low > MAX_STRING_CHARS:
        raise _Unanswerable(
            f"{path}.minLength",
            f"{low} characters are more than it writes in a string (at most {MAX_STRING_CHARS})",
        )
    high = _count(schema.get("maxLength"), 200)
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 6)))
    words = words[:high]
    return words + "x" * max(0, low - len(words))
