"""Anthropic Messages API adapter (``anthropic/<model>``), one attempt per call.

Wire format: the Messages API reference and the errors page
(https://platform.claude.com/docs/en/api/messages, https://platform.claude.com/docs/en/api/errors),
the structured-outputs guide, and the generated types of the official SDK
(https://github.com/anthropics/anthropic-sdk-python, v0.121.0, 2026-08-07:
``types/message_create_params.py``, ``types/message.py``, ``types/usage.py``). Structured output
uses ``output_config.format`` (GA, no beta header), with the task schema reduced to the subset
the API accepts; the answer's check still validates against the original schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

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
    schema_instruction,
    server_in_key,
    with_rate_limit,
)

API_VERSION = "2023-06-01"

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    # The context window ran out before max_tokens: the answer is cut short all the same.
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}
# String formats the schema subset keeps; others move into the description.
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
# Keywords with no effect on the output worth telling the model about.
_METADATA = frozenset({"$schema", "$id", "$comment"})
_NEW_FAMILY = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?=-|$)")
_OLD_FAMILY = re.compile(r"claude-(\d+)(?:-(\d{1,2}))?-(?:opus|sonnet|haiku)")


def accepts_sampling(model: str) -> bool:
    """False for models that refuse ``temperature``/``top_p`` outright: Opus 4.7 and every
    later model (4.8, all 5.x, Fable, Mythos) answer 400 "`temperature` is deprecated for
    this model". An id we cannot place counts as older, so a rejection stays a loud 400
    rather than a silently ignored setting."""
    name = model.lower()
    if "fable" in name or "mythos" in name:
        return False
    match = _NEW_FAMILY.search(name) or _OLD_FAMILY.search(name)
    if match is None:
        return True
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    return major < 4 or (major == 4 and minor < 7)


def sampling_params(model: str, temperature: float | None, top_p: float | None) -> dict[str, Any]:
    """The sampling fields to send. Older models 400 on ``temperature`` and ``top_p`` together
    ("cannot both be specified"), so temperature, the more common knob, wins."""
    if not accepts_sampling(model):
        return {}
    if temperature is not None:
        return {"temperature": temperature}
    if top_p is not None:
        return {"top_p": top_p}
    return {}


def transform_schema(schema: Any) -> Any:
    """The task schema in Anthropic's structured-output subset.

    Every object gets ``additionalProperties: false`` (required by the API); ``oneOf`` becomes
    ``anyOf`` and ``const`` a one-value ``enum``; keywords the grammar cannot enforce
    (numeric and length bounds, ``pattern``, ``maxItems``, ``minItems`` above 1, unknown
    formats, ...) are written into ``description`` so the model still reads them.
    """
    if isinstance(schema, bool) or not isinstance(schema, dict):
        return schema
    source = dict(schema)
    out: dict[str, Any] = {}
    for defs_key in ("$defs", "definitions"):
        if isinstance(source.get(defs_key), dict):
            out[defs_key] = {k: transform_schema(v) for k, v in source.pop(defs_key).items()}
    if "$ref" in source:
        out["$ref"] = source.pop("$ref")
    for key in ("type", "title", "description"):
        if key in source:
            out[key] = source.pop(key)
    if "const" in source:
        out["enum"] = [source.pop("const")]
    if "enum" in source:
        out["enum"] = source.pop("enum")
    for key, target in (("anyOf", "anyOf"), ("oneOf", "anyOf"), ("allOf", "allOf")):
        if isinstance(source.get(key), list):
            out.setdefault(target, []).extend(transform_schema(s) for s in source.pop(key))
    declared = out.get("type")
    types = set(declared) if isinstance(declared, list) else {declared}
    if "object" in types or "properties" in source:
        properties = source.pop("properties", {})
        out["properties"] = {k: transform_schema(v) for k, v in properties.items()}
        if "required" in source:
            out["required"] = source.pop("required")
        source.pop("additionalProperties", None)
        out["additionalProperties"] = False
    if "items" in source and isinstance(source["items"], dict):
        out["items"] = transform_schema(source.pop("items"))
    if source.get("minItems") in (0, 1):
        out["minItems"] = source.pop("minItems")
    if source.get("format") in _FORMATS:
        out["format"] = source.pop("format")
    for key in _METADATA:
        source.pop(key, None)
    if source:
        note = json.dumps(source, ensure_ascii=False, sort_keys=True)
        out["description"] = (out["description"] + "\n\n" if out.get("description") else "") + note
    return out


DEFAULT_BASE_URL = "https://api.anthropic.com"


class AnthropicAdapter:
    """Claude over the Messages API; the key is read from the environment at call time."""

    name = "anthropic"
    version = "1"
    # A hosted API that sends its limits in rate-limit headers: the width starts at the
    # configured one.
    declares_limits = True

    def __init__(
        self, api_key_env: str = "ANTHROPIC_API_KEY", base_url: str = DEFAULT_BASE_URL
    ) -> None:
        self.api_key_env = api_key_env
        self.base_url = base_url.rstrip("/")
        self._clients = ClientHolder(self.base_url)
        # Another server (a gateway, ANTHROPIC_BASE_URL) enters the cache key, as an
        # endpoint's does; Anthropic's own keys stay as they were.
        self._server = server_in_key(self.base_url, DEFAULT_BASE_URL)

    def key_extra(self, request: Request) -> dict[str, Any]:
        return {"base_url": self._server} if self._server is not None else {}

    def check_ready(self) -> None:
        api_key_from_env(self.api_key_env, self.name)

    def schema_mode(self, request: Request) -> str | None:
        if request.schema is None:
            return None
        return SCHEMA_PROMPTED if request.asks_prompted else SCHEMA_NATIVE

    async def aclose(self) -> None:
        await self._clients.aclose()

    def build_body(self, request: Request) -> dict[str, Any]:
        prompt = request.prompt
        if request.asks_prompted:
            prompt += schema_instruction(request.schema)
        body: dict[str, Any] = {
            "model": request.model_name,
            "max_tokens": request.max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }
        if request.system and request.cache_system:
            # One cache breakpoint, at the end of the system block: the provider caches the
            # prefix up to it (when it is at least the model's minimum cacheable length, else
            # the call is billed as plain input) and reads it back for the next request that
            # starts with the same bytes (spec: "Judge", "Prompt cache").
            body["system"] = [
                {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
            ]
        elif request.system:
            body["system"] = request.system
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        body.update(sampling_params(request.model_name, request.temperature, request.top_p))
        if self.schema_mode(request) == SCHEMA_NATIVE:
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": transform_schema(request.schema)}
            }
        return body

    async def complete(self, request: Request) -> Response:
        key = api_key_from_env(self.api_key_env, self.name)
        headers = {
            "x-api-key": key,
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
        }
        status, reply_headers, data, latency_s = await post_json(
            self._clients.get(),
            f"{self.base_url}/v1/messages",
            headers,
            self.build_body(request),
            request.timeout_s,
        )
        if status >= 400:
            raise self._error(status, reply_headers, data, key)
        try:
            response = self._response(request, data, reply_headers.get("request-id"), latency_s)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AdapterError(
                "malformed_response",
                redact(f"unexpected Messages API response shape ({exc!r})", [key]),
                retryable=True,
                status=status,
            ) from None
        return with_rate_limit(response, reply_headers)

    def _response(
        self, request: Request, data: dict[str, Any], request_id: str | None, latency_s: float
    ) -> Response:
        blocks = data["content"]
        text = "".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        raw_stop = data.get("stop_reason")
        usage = data.get("usage")
        if isinstance(usage, dict) and usage.get("output_tokens") is not None:
            counts = Usage(
                input_tokens=int(usage.get("input_tokens") or 0),
                output_tokens=int(usage["output_tokens"]),
                # Both cache fields are nullable: absent and null mean none.
                cached_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
                cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
            )
        else:
            counts = estimated_usage((request.system or "") + request.prompt, text)
        return Response(
            text=text,
            usage=counts,
            latency_s=latency_s,
            finish_reason=_STOP_REASONS.get(raw_stop, raw_stop or "unknown"),
            schema_mode=self.schema_mode(request),
            provider_request_id=request_id or data.get("id"),
        )

    def _error(self, status: int, headers: Any, data: Any, key: str) -> AdapterError:
        message = error_message(data)
        detail = data.get("error") if isinstance(data, dict) else None
        if isinstance(detail, dict) and isinstance(detail.get("type"), str):
            message = f"{detail['type']}: {message}"
        error = error_from_status(status, headers, message, secrets=[key])
        details = detail.get("details") if isinstance(detail, dict) else None
        if isinstance(details, dict) and details.get("error_code") == (
            "enforced_spend_limit_reached"
        ):
            # A spend cap does not lift by waiting; retrying only repeats the refusal.
            error.retryable = False
        return error
