"""Google Gemini adapter: ``generateContent`` of the Gemini Developer API over httpx.

Wire format: the REST reference of ``models.generateContent``
(https://ai.google.dev/api/generate-content), the API errors page
(https://ai.google.dev/gemini-api/docs/generate-content/api-errors) and the official SDK's
request and response types (https://github.com/googleapis/python-genai, v2.19.0, 2026-08-21:
``models.py``, ``types.py``). The key travels in the ``x-goog-api-key`` header, never in the URL.

Structured output: a task schema is translated to the OpenAPI-3.0 subset that
``generationConfig.responseSchema`` accepts (``translate_schema``). A schema that cannot be
translated faithfully is sent in *prompted* mode instead: the schema goes into the prompt and
only ``responseMimeType: application/json`` is set. The choice is made before the call, from
the schema alone, so it can enter the cache key; ``schema_fallback_reason`` says why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from ..redaction import redact
from .base import (
    SCHEMA_NATIVE,
    SCHEMA_PROMPTED,
    AdapterError,
    Request,
    Response,
    Usage,
    estimated_usage,
)
from .http import (
    ClientHolder,
    api_key_from_env,
    error_from_status,
    error_message,
    post_json,
    server_in_key,
)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
KEY_HEADER = "x-goog-api-key"

PROMPTED_INSTRUCTION = (
    "Reply with a single JSON value and nothing else (no prose, no code fence). "
    "It must be valid against this JSON Schema:"
)

# finishReason -> normalized reason (reference table 6). Anything else is "other".
FINISH_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
}

# ---------------------------------------------------------------------------------------------
# Schema translation: JSON Schema -> responseSchema (OpenAPI-3.0 subset, upper-case types).
# ---------------------------------------------------------------------------------------------

_TYPES = {
    "string": "STRING",
    "integer": "INTEGER",
    "number": "NUMBER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
    "null": "NULL",
}
# Annotations and bookkeeping that do not constrain an instance: dropped.
_DROPPED = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "$defs",
        "definitions",
        "$vocabulary",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
    }
)
# Constraints responseSchema cannot express: the schema falls back to prompted mode rather
# than being loosened silently.
_UNSUPPORTED = (
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
    "additionalItems",
    "contains",
    "minContains",
    "maxContains",
    "multipleOf",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
)
_ANNOTATIONS = ("title", "description")
# ``format`` values the subset knows; others (email, uri, ...) are annotations in Draft 2020-12
# and are dropped. Which formats the API rejects is not in the reference (UNCONFIRMED).
_FORMATS = {
    "STRING": frozenset({"date-time", "enum"}),
    "INTEGER": frozenset({"int32", "int64"}),
    "NUMBER": frozenset({"float", "double"}),
}


class _Untranslatable(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")


def translate_schema(schema: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``(responseSchema, None)``, or ``(None, reason)`` when the schema cannot be expressed.

    Supported: ``type`` (also a list; ``"null"`` in it becomes ``nullable: true``), ``enum``
    and ``const`` of strings (``null`` among them also becomes ``nullable``), ``properties``,
    ``required``, ``items``, ``anyOf``/``oneOf`` (both sent as ``anyOf``; a null branch becomes
    ``nullable``), local ``$ref`` (inlined), numeric, length, item and property-count bounds,
    ``pattern``, ``title``/``description``. ``exclusiveMinimum``/``exclusiveMaximum`` become
    inclusive bounds on integers. Dropped, as they never reject what the model is told to
    produce: annotations, ``additionalProperties: true|false`` (the API never adds undeclared
    properties), ``uniqueItems: false`` and unknown ``format`` values. Every other constraint
    (``allOf``, ``patternProperties``, tuple ``items``, non-string ``enum``/``const``, a
    recursive or non-local ``$ref``, ``uniqueItems: true``, an object without properties, ...)
    makes the whole schema untranslatable. The task schema itself is what answers are checked
    against either way.
    """
    if not isinstance(schema, dict):
        return None, "$: the schema is not a JSON object"
    try:
        return _Translator(schema).node(schema, "$", ()), None
    except _Untranslatable as exc:
        return None, str(exc)


class _Translator:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def node(self, schema: Any, path: str, refs: tuple[str, ...]) -> dict[str, Any]:
        if isinstance(schema, bool):
            what = "any value" if schema else "no value"
            raise _Untranslatable(path, f"boolean schema {str(schema).lower()} ({what})")
        if not isinstance(schema, dict):
            raise _Untranslatable(path, "a schema must be a JSON object")
        if "$ref" in schema:
            return self.ref(schema, path, refs)
        for keyword in _UNSUPPORTED:
            if keyword in schema:
                raise _Untranslatable(path, f"{keyword} is not supported by Gemini responseSchema")
        if schema.get("uniqueItems") is True:
            raise _Untranslatable(path, "uniqueItems is not supported by Gemini responseSchema")
        out: dict[str, Any] = {}
        for keyword in _ANNOTATIONS:
            if isinstance(schema.get(keyword), str):
                out[keyword] = schema[keyword]

        values, nullable = self.values(schema, path)
        branches_key = next((k for k in ("anyOf", "oneOf") if k in schema), None)
        if branches_key is not None:
            return self.branches(schema, branches_key, out, path, refs)

        types = schema.get("type")
        if types is None:
            types = self.infer_type(schema, values, path)
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not types:
            raise _Untranslatable(path, f"type {schema.get('type')!r} is not a type name or list")
        for name in types:
            if name not in _TYPES:
                raise _Untranslatable(path, f"unknown type {name!r}")
        if "null" in types:
            nullable = True
            types = [name for name in types if name != "null"]
        if values is not None:
            if "type" in schema and values and "string" not in types:
                raise _Untranslatable(path, f"enum/const of strings under type {types}")
            types = ["string"] if values else []
        if not types:
            out["type"] = "NULL"
            return out
        typed = [self.typed(name, schema, path, refs) for name in dict.fromkeys(types)]
        if values:
            typed[0]["enum"] = values
        if nullable:
            for branch in typed:
                branch["nullable"] = True
        if len(typed) == 1:
            return {**typed[0], **out}
        out["anyOf"] = typed
        return out

    def ref(self, schema: dict[str, Any], path: str, refs: tuple[str, ...]) -> dict[str, Any]:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise _Untranslatable(path, f"$ref {ref!r} is not a local reference")
        if ref in refs:
            raise _Untranslatable(path, f"recursive $ref {ref!r} cannot be inlined")
        siblings = set(schema) - {"$ref", *_ANNOTATIONS, *_DROPPED}
        if siblings:
            raise _Untranslatable(path, f"$ref next to {', '.join(sorted(siblings))}")
        target: Any = self.root
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdecimal() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise _Untranslatable(path, f"$ref {ref!r} does not resolve")
        out = self.node(target, path, (*refs, ref))
        for keyword in _ANNOTATIONS:
            if isinstance(schema.get(keyword), str):
                out[keyword] = schema[keyword]
        return out

    @staticmethod
    def values(schema: dict[str, Any], path: str) -> tuple[list[str] | None, bool]:
        """String values of ``enum``/``const`` (None when neither is present), and whether
        ``null`` was among them."""
        if "const" in schema:
            values = [schema["const"]]
            if "enum" in schema and schema["const"] not in schema["enum"]:
                raise _Untranslatable(path, "const is not among enum (no value is valid)")
            keyword = "const"
        elif "enum" in schema:
            values = schema["enum"]
            keyword = "enum"
            if not isinstance(values, list) or not values:
                raise _Untranslatable(path, "enum must be a non-empty list")
        else:
            return None, False
        nullable = any(value is None for value in values)
        strings = [value for value in values if value is not None]
        if not all(isinstance(value, str) for value in strings):
            kinds = sorted({type(v).__name__ for v in strings if not isinstance(v, str)})
            raise _Untranslatable(
                path, f"{keyword} of non-string values ({', '.join(kinds)}) is not supported"
            )
        return list(dict.fromkeys(strings)), nullable

    @staticmethod
    def infer_type(schema: dict[str, Any], values: list[str] | None, path: str) -> str:
        if values is not None:
            return "string"
        if "properties" in schema or "required" in schema:
            return "object"
        if "items" in schema:
            return "array"
        raise _Untranslatable(path, "no type: a schema for any value cannot be expressed")

    def branches(
        self,
        schema: dict[str, Any],
        key: str,
        out: dict[str, Any],
        path: str,
        refs: tuple[str, ...],
    ) -> dict[str, Any]:
        if "anyOf" in schema and "oneOf" in schema:
            raise _Untranslatable(path, "anyOf together with oneOf")
        others = set(schema) - {key, *_ANNOTATIONS, *_DROPPED}
        if others:
            raise _Untranslatable(path, f"{key} next to {', '.join(sorted(others))}")
        items = schema[key]
        if not isinstance(items, list) or not items:
            raise _Untranslatable(path, f"{key} must be a non-empty list")
        nullable = False
        translated = []
        for index, branch in enumerate(items):
            if isinstance(branch, dict) and branch.get("type") == "null" and len(branch) == 1:
                nullable = True
                continue
            translated.append(self.node(branch, f"{path}.{key}[{index}]", refs))
        if not translated:
            out["type"] = "NULL"
            return out
        if nullable:
            for branch in translated:
                if branch.get("type") != "NULL":
                    branch["nullable"] = True
        if len(translated) == 1:
            return {**translated[0], **out}
        out["anyOf"] = translated
        return out

    def typed(
        self, name: str, schema: dict[str, Any], path: str, refs: tuple[str, ...]
    ) -> dict[str, Any]:
        """The keywords of ``schema`` that apply to instances of type ``name``."""
        kind = _TYPES[name]
        out: dict[str, Any] = {"type": kind}
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS.get(kind, ()):
            out["format"] = fmt
        if kind == "STRING":
            _copy(schema, out, ("minLength", "maxLength", "pattern"), path)
        elif kind in ("INTEGER", "NUMBER"):
            _copy(schema, out, ("minimum", "maximum"), path)
            for keyword, bound, step in (
                ("exclusiveMinimum", "minimum", 1),
                ("exclusiveMaximum", "maximum", -1),
            ):
                if keyword not in schema:
                    continue
                value = schema[keyword]
                if kind == "NUMBER" or isinstance(value, bool) or not isinstance(value, int):
                    raise _Untranslatable(path, f"{keyword} is not supported on numbers")
                inclusive = value + step
                current = out.get(bound)
                if current is None or (inclusive > current if step > 0 else inclusive < current):
                    out[bound] = inclusive
        elif kind == "ARRAY":
            if "items" not in schema:
                raise _Untranslatable(path, "an array without items cannot be expressed")
            if isinstance(schema["items"], list):
                raise _Untranslatable(path, "tuple items (a list of schemas) are not supported")
            out["items"] = self.node(schema["items"], f"{path}.items", refs)
            _copy(schema, out, ("minItems", "maxItems"), path)
        elif kind == "OBJECT":
            extra = schema.get("additionalProperties")
            if extra is not None and not isinstance(extra, bool):
                raise _Untranslatable(path, "additionalProperties with a schema is not supported")
            properties = schema.get("properties")
            if not isinstance(properties, dict) or not properties:
                raise _Untranslatable(path, "an object without properties cannot be expressed")
            out["properties"] = {
                prop: self.node(sub, f"{path}.properties.{prop}", refs)
                for prop, sub in properties.items()
            }
            out["propertyOrdering"] = list(properties)
            required = schema.get("required")
            if required is not None:
                if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
                    raise _Untranslatable(path, "required must be a list of names")
                missing = [r for r in required if r not in properties]
                if missing:
                    raise _Untranslatable(path, f"required names undeclared {missing}")
                if required:
                    out["required"] = list(dict.fromkeys(required))
            _copy(schema, out, ("minProperties", "maxProperties"), path)
        return out


def _copy(
    schema: dict[str, Any], out: dict[str, Any], keywords: tuple[str, ...], path: str
) -> None:
    for keyword in keywords:
        if keyword not in schema:
            continue
        value = schema[keyword]
        wanted = str if keyword == "pattern" else (int, float)
        if isinstance(value, bool) or not isinstance(value, wanted):
            raise _Untranslatable(path, f"{keyword} has an invalid value {value!r}")
        out[keyword] = value


@lru_cache(maxsize=256)
def _translate_cached(text: str) -> tuple[str | None, str | None]:
    translated, reason = translate_schema(json.loads(text))
    return (None if translated is None else json.dumps(translated)), reason


def _translation(schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``translate_schema`` memoized on the schema's JSON text, key order kept (it becomes
    ``propertyOrdering``); returns a fresh copy."""
    translated, reason = _translate_cached(json.dumps(schema, ensure_ascii=False))
    return (None if translated is None else json.loads(translated)), reason


def prompted_text(prompt: str, schema: dict[str, Any]) -> str:
    """The prompt of a prompted-mode call: the task prompt, then the schema to follow."""
    return f"{prompt}\n\n{PROMPTED_INSTRUCTION}\n{json.dumps(schema, ensure_ascii=False)}"


# ---------------------------------------------------------------------------------------------
# The adapter.
# ---------------------------------------------------------------------------------------------


class GeminiAdapter:
    name = "google"
    version = "1"
    # A hosted API with published limits: the width starts at the configured one.
    declares_limits = True

    def __init__(
        self,
        api_key_env: str = "GEMINI_API_KEY",
        base_url: str = DEFAULT_BASE_URL,
    ) -> None:
        self.api_key_env = api_key_env
        self.base_url = base_url.rstrip("/")
        self._clients = ClientHolder(self.base_url)
        # Another server (a gateway, GOOGLE_GEMINI_BASE_URL) enters the cache key, as an
        # endpoint's does; Google's own keys stay as they were.
        self._server = server_in_key(self.base_url, DEFAULT_BASE_URL)

    def key_extra(self, request: Request) -> dict[str, Any]:
        return {"base_url": self._server} if self._server is not None else {}

    # -- planning ------------------------------------------------------------------------------

    def check_ready(self) -> None:
        """Raise ``AdapterError(kind="auth")`` naming the variable when the key is missing."""
        api_key_from_env(self.api_key_env, "google")

    def schema_mode(self, request: Request) -> str | None:
        if request.schema is None:
            return None
        if request.asks_prompted:
            return SCHEMA_PROMPTED
        translated, _ = _translation(request.schema)
        return SCHEMA_NATIVE if translated is not None else SCHEMA_PROMPTED

    def schema_fallback_reason(self, request: Request) -> str | None:
        """Why this request's schema goes in the prompt; None when it is sent natively."""
        if request.schema is None:
            return None
        return _translation(request.schema)[1]

    def url(self, request: Request) -> str:
        model = request.model_name.removeprefix("models/")
        return f"{self.base_url}/models/{quote(model, safe='')}:generateContent"

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body of ``generateContent`` for ``request`` (reference 3.1)."""
        config: dict[str, Any] = {"maxOutputTokens": request.max_tokens}
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.top_p is not None:
            config["topP"] = request.top_p
        if request.stop:
            config["stopSequences"] = list(request.stop)
        prompt = request.prompt
        if request.schema is not None:
            config["responseMimeType"] = "application/json"
            translated, _ = _translation(request.schema)
            if translated is not None and not request.asks_prompted:
                config["responseSchema"] = translated
            else:
                prompt = prompted_text(prompt, request.schema)
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}
        if request.system:
            body["systemInstruction"] = {"parts": [{"text": request.system}]}
        body["generationConfig"] = config
        return body

    # -- the call ------------------------------------------------------------------------------

    async def complete(self, request: Request) -> Response:
        key = api_key_from_env(self.api_key_env, "google")
        body = self.body(request)
        status, headers, parsed, latency_s = await post_json(
            self._clients.get(),
            self.url(request),
            {KEY_HEADER: key},
            body,
            request.timeout_s,
            secrets=[key],
        )
        if status >= 400:
            raise gemini_error(status, headers, parsed, secrets=[key])
        prompt_sent = body["contents"][0]["parts"][0]["text"]
        try:
            return parse_response(
                parsed,
                latency_s=latency_s,
                schema_mode=self.schema_mode(request),
                estimate_input=(request.system or "") + prompt_sent,
            )
        except AdapterError as exc:
            raise AdapterError(
                exc.kind,
                redact(str(exc), [key]),
                retryable=exc.retryable,
                retry_after_s=exc.retry_after_s,
                status=status,
            ) from None

    async def aclose(self) -> None:
        await self._clients.aclose()


def parse_response(
    data: Any,
    *,
    latency_s: float,
    schema_mode: str | None,
    estimate_input: str,
) -> Response:
    """A ``Response`` from a ``generateContent`` body (reference 3.2)."""
    if not isinstance(data, dict):
        raise _malformed("the body is not a JSON object")
    candidates = data.get("candidates") or []
    if not isinstance(candidates, list):
        raise _malformed("candidates is not a list")
    if candidates:
        candidate = candidates[0]
        if not isinstance(candidate, dict):
            raise _malformed("candidates[0] is not an object")
        text = _candidate_text(candidate)
        raw_reason = candidate.get("finishReason")
        finish_reason = FINISH_REASONS.get(raw_reason, "other") if raw_reason else "stop"
    else:
        feedback = data.get("promptFeedback")
        if not (isinstance(feedback, dict) and feedback.get("blockReason")):
            raise _malformed("no candidates and no promptFeedback.blockReason")
        text, finish_reason = "", "refusal"
    request_id = data.get("responseId")
    return Response(
        text=text,
        usage=_usage(data.get("usageMetadata"), estimate_input, text),
        latency_s=latency_s,
        finish_reason=finish_reason,
        schema_mode=schema_mode,
        provider_request_id=request_id if isinstance(request_id, str) else None,
    )


def _candidate_text(candidate: dict[str, Any]) -> str:
    content = candidate.get("content")
    if content is None:  # e.g. finishReason SAFETY: the candidate carries no content
        return ""
    if not isinstance(content, dict):
        raise _malformed("candidates[0].content is not an object")
    parts = content.get("parts") or []
    if not isinstance(parts, list):
        raise _malformed("candidates[0].content.parts is not a list")
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            raise _malformed("a content part is not an object")
        if part.get("thought") is True:
            continue
        text = part.get("text")
        if text is not None:
            if not isinstance(text, str):
                raise _malformed("a content part's text is not a string")
            texts.append(text)
    return "".join(texts)


_COUNT_FIELDS = (
    "promptTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
    "totalTokenCount",
)


def _usage(metadata: Any, estimate_input: str, text: str) -> Usage:
    """``promptTokenCount`` includes ``cachedContentTokenCount``; thoughts are billed as
    output. Absent counts are 0 (reference 3.2); absent metadata is an estimate."""
    if not isinstance(metadata, dict) or not any(f in metadata for f in _COUNT_FIELDS):
        return estimated_usage(estimate_input, text)
    counts = {}
    for field in _COUNT_FIELDS:
        value = metadata.get(field, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _malformed(f"usageMetadata.{field} is not a count: {value!r}")
        counts[field] = value
    cached = counts["cachedContentTokenCount"]
    return Usage(
        input_tokens=max(0, counts["promptTokenCount"] - cached),
        output_tokens=counts["candidatesTokenCount"] + counts["thoughtsTokenCount"],
        cached_input_tokens=cached,
    )


def _malformed(problem: str) -> AdapterError:
    return AdapterError(
        "malformed_response", f"unexpected generateContent response: {problem}", retryable=True
    )


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")
# A quota whose limit is 0 (e.g. a model without free tier) never clears (reference 3.3).
_ZERO_QUOTA = re.compile(r"\blimit:\s*0\b")


def gemini_error(
    status: int,
    headers: Mapping[str, str],
    parsed: Any,
    *,
    secrets: list[str] | None = None,
) -> AdapterError:
    """The ``AdapterError`` for a Gemini error body (reference 3.3)."""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    message = error_message(parsed)
    status_name = None
    details: list[Any] = []
    if isinstance(error, dict):
        if isinstance(error.get("status"), str):
            status_name = error["status"]
        if isinstance(error.get("details"), list):
            details = error["details"]
    if status_name:
        message = f"{status_name}: {message}"
    base = error_from_status(status, headers, message, secrets=secrets or [])
    kind, retryable, retry_after_s = base.kind, base.retryable, base.retry_after_s
    delay = _retry_delay(details)
    if delay is not None and retryable:
        retry_after_s = delay
    if status == 429 and _ZERO_QUOTA.search(message):
        retryable, retry_after_s = False, None
    if any(_detail_reason(d) == "API_KEY_INVALID" for d in details):
        kind, retryable = "auth", False
    return AdapterError(
        kind, str(base), retryable=retryable, retry_after_s=retry_after_s, status=status
    )


def _retry_delay(details: list[Any]) -> float | None:
    """``RetryInfo.retryDelay`` ("12s", "0.5s"), a protobuf Duration in JSON form."""
    for detail in details:
        if not isinstance(detail, dict):
            continue
        if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            match = _DURATION.match(delay) if isinstance(delay, str) else None
            if match:
                return float(match.group(1))
    return None


def _detail_reason(detail: Any) -> str | None:
    if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.ErrorInfo"):
        reason = detail.get("reason")
        return reason if isinstance(reason, str) else None
    return None
