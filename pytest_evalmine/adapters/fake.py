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
        rng = random.Random(int(sha256_hex(request.key_fields())[:16], 16))
        if fault == "schema_violation":
            return json.dumps(_violation(request.schema))
        if request.schema is not None:
            return json.dumps(_instance(request.schema, rng, request.schema), ensure_ascii=False)
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

    validator = Draft202012Validator(schema or {"type": "object", "required": ["answer"]})
    candidates: list[Any] = ["not the expected shape", {}, [], -123456789, None, True, 0.5]
    return next((c for c in candidates if not validator.is_valid(c)), {"unexpected": True})


def _instance(schema: dict[str, Any], rng: random.Random, root: dict[str, Any]) -> Any:
    """A value valid against the common JSON Schema keywords, chosen by ``rng``."""
    if "$ref" in schema and schema["$ref"].startswith("#/"):
        target: Any = root
        for part in schema["$ref"][2:].split("/"):
            target = target[part]
        return _instance(target, rng, root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            return _instance(rng.choice(schema[combinator]), rng, root)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(part)
        return _instance(merged, rng, root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice([k for k in kind if k != "null"] or ["null"])
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties", {})
        return {name: _instance(sub, rng, root) for name, sub in properties.items()}
    if kind == "array":
        fewest = schema.get("minItems", 1)
        most = schema.get("maxItems", max(fewest, 3))
        low = min(fewest, most)
        high = max(low, min(most, low + 2))
        items = schema.get("items", {"type": "string"})
        return [_instance(items, rng, root) for _ in range(rng.randint(low, high))]
    if kind in ("integer", "number"):
        return _number(schema, rng, integer=kind == "integer")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(schema, rng)


def _number(schema: dict[str, Any], rng: random.Random, *, integer: bool) -> float | int:
    low = schema.get("minimum")
    high = schema.get("maximum")
    if "exclusiveMinimum" in schema:
        low = schema["exclusiveMinimum"] + (1 if integer else 1e-6)
    if "exclusiveMaximum" in schema:
        high = schema["exclusiveMaximum"] - (1 if integer else 1e-6)
    if low is None:
        low = 0 if high is None or high >= 0 else high - 100
    if high is None:
        high = low + 100
    if integer:
        return rng.randint(math.ceil(low), math.floor(high))
    value = rng.uniform(low, high)
    rounded = round(value, 2)
    return rounded if low <= rounded <= high else value


def _string(schema: dict[str, Any], rng: random.Random) -> str:
    formats = {"date": "2026-01-15", "date-time": "2026-01-15T09:30:00Z", "email": "a@b.example"}
    if schema.get("format") in formats:
        return formats[schema["format"]]
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 6)))
    low, high = schema.get("minLength", 0), schema.get("maxLength", 200)
    words = words[:high]
    return words + "x" * max(0, low - len(words))
