"""OpenAI Chat Completions adapter, also for OpenAI-compatible servers, one attempt per call.

The same class serves OpenAI itself and any server speaking the same protocol (vLLM,
llama.cpp ``llama-server``, LM Studio, gateways): each gets its own provider ``name`` (which
enters the cache key, so answers of different servers never mix) and ``base_url``, and a bearer
token only when it needs one. Wire format:
the Chat Completions reference (https://platform.openai.com/docs/api-reference/chat), the
official SDK's types (https://github.com/openai/openai-python, v3.3.1, 2026-08-21:
``types/chat/completion_create_params.py``, ``types/chat/chat_completion.py``), llama.cpp's
server README (https://github.com/ggml-org/llama.cpp, ``tools/server/README.md``) and vLLM's
structured-outputs docs (https://docs.vllm.ai/en/latest/features/structured_outputs.html).
"""

from __future__ import annotations

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
    get_json,
    normalised_base_url,
    post_json,
    schema_instruction,
    with_rate_limit,
)

# o1, o3, o4-mini, ... and the gpt-5 family take only the default temperature/top_p: any other
# value is a 400 "unsupported_value". Matched on the last path segment so a gateway's
# "openai/gpt-5" counts too.
_REASONING_MODEL = re.compile(r"^(?:o\d+(?:$|-)|gpt-5)")
# Keywords OpenAI's strict mode documents as supported; anything else (allOf, not, if/then,
# minLength, ...) makes a strict request a 400, so such a schema is sent with strict false.
_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "anyOf",
        "$defs",
        "$ref",
        "title",
        "description",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_FINISH_REASONS = {"stop": "stop", "length": "length", "content_filter": "content_filter"}
OPENAI_BASE_URL = "https://api.openai.com/v1"


def accepts_sampling(model: str) -> bool:
    """False for OpenAI reasoning models, which reject a non-default temperature/top_p."""
    return _REASONING_MODEL.match(model.rsplit("/", 1)[-1].lower()) is None


def strict_compatible(schema: Any) -> bool:
    """Whether ``strict: true`` is safe: an object root, every object closed
    (``additionalProperties: false``) with all its properties required, and only keywords
    strict mode supports. A strict request whose schema breaks a rule is refused (400)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return False
    return _strict_node(schema)


def _strict_node(node: Any) -> bool:
    if not isinstance(node, dict) or not set(node) <= _STRICT_KEYWORDS:
        return False
    if "format" in node and node["format"] not in _STRICT_FORMATS:
        return False
    declared = node.get("type")
    types = set(declared) if isinstance(declared, list) else {declared}
    children: list[Any] = []
    if "object" in types or "properties" in node:
        properties = node.get("properties", {})
        if node.get("additionalProperties") is not False:
            return False
        if not isinstance(properties, dict) or set(node.get("required", [])) != set(properties):
            return False
        children += properties.values()
    elif "additionalProperties" in node or "required" in node:
        return False
    if "items" in node:
        children.append(node["items"])
    if "anyOf" in node:
        if not isinstance(node["anyOf"], list):
            return False
        children += node["anyOf"]
    if "$defs" in node:
        if not isinstance(node["$defs"], dict):
            return False
        children += node["$defs"].values()
    return all(_strict_node(child) for child in children)


class OpenAIAdapter:
    """Chat Completions against ``{base_url}/chat/completions``."""

    version = "1"

    def __init__(
        self,
        name: str = "openai",
        base_url: str = OPENAI_BASE_URL,
        api_key_env: str | None = "OPENAI_API_KEY",
        native_schema: bool = True,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.native_schema = native_schema
        self.served: list[dict[str, Any]] | None = None
        # How many requests the server serves at once, when it says (llama.cpp's
        # ``/props`` ``total_slots``): where the dispatcher's adaptive width starts.
        self.server_slots: int | None = None
        self._prepared = False
        # The server enters the cache key of every endpoint (and of "openai" pointed at
        # another server): one name repointed to another server with other sampling settings
        # gets new keys, never the first server's answers. OpenAI's own keys stay as they were.
        server = normalised_base_url(self.base_url)
        self._server = (
            server
            if self.compatible_server or server != normalised_base_url(OPENAI_BASE_URL)
            else None
        )
        self._clients = ClientHolder(self.base_url)

    def check_ready(self) -> None:
        self._api_key()

    @property
    def compatible_server(self) -> bool:
        return self.name != "openai"

    @property
    def declares_limits(self) -> bool:
        """OpenAI's own API sends its limits in rate-limit headers: its width starts at the
        configured one (a compatible server's is found by adapting)."""
        return not self.compatible_server

    async def prepare(self, models: list[str]) -> None:
        """A compatible server (llama.cpp, vLLM, LM Studio) may ignore the requested model name
        and answer with whatever it has loaded: read what it serves from ``GET /models`` so a
        swapped model gets new cache keys instead of stale answers. A server without that
        endpoint keeps keys by model name only."""
        if not self.compatible_server or self._prepared:
            return
        self._prepared = True
        key = self._api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        listing: Any = None
        try:
            listing = await get_json(
                self._clients.get(), f"{self.base_url}/models", 10, headers=headers
            )
            served = [
                {"id": str(m.get("id")), "meta": m.get("meta")}
                for m in listing.get("data", [])
                if isinstance(m, dict)
            ]
        except (AdapterError, AttributeError, TypeError):
            served = []
        self.served = sorted(served, key=lambda m: m["id"]) or None
        if _is_llama_cpp(listing):
            self.server_slots = await self._declared_slots(headers)

    async def _declared_slots(self, headers: dict[str, str]) -> int | None:
        """llama.cpp's ``GET /props`` (beside ``/v1``) says its ``total_slots``. Asked only of
        a server whose listing says it is llama.cpp: other servers have no such page, and the
        width is then found by adapting."""
        root = self.base_url.removesuffix("/v1")
        try:
            props = await get_json(self._clients.get(), f"{root}/props", 10, headers=headers)
        except AdapterError:
            return None
        slots = props.get("total_slots") if isinstance(props, dict) else None
        if isinstance(slots, int) and not isinstance(slots, bool) and slots >= 1:
            return slots
        return None

    def key_extra(self, request: Request) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.served:
            extra["served"] = self.served
        if self._server is not None:
            extra["base_url"] = self._server
        return extra

    def prepared_state(self) -> dict[str, Any] | None:
        """What ``prepare`` learnt, for the cache database (a replay restores it)."""
        return {"served": self.served} if self.compatible_server and self._prepared else None

    def restore_state(self, state: dict[str, Any]) -> None:
        self.served = state.get("served")
        self._prepared = True

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        return api_key_from_env(self.api_key_env, self.name)

    def schema_mode(self, request: Request) -> str | None:
        if request.schema is None:
            return None
        if request.asks_prompted:
            return SCHEMA_PROMPTED
        return SCHEMA_NATIVE if self.native_schema else SCHEMA_PROMPTED

    async def aclose(self) -> None:
        await self._clients.aclose()

    def _prompt(self, request: Request) -> str:
        if self.schema_mode(request) == SCHEMA_PROMPTED:
            return request.prompt + schema_instruction(request.schema)
        return request.prompt

    def build_body(self, request: Request) -> dict[str, Any]:
        messages = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.append({"role": "user", "content": self._prompt(request)})
        body: dict[str, Any] = {
            "model": request.model_name,
            "messages": messages,
            # Counts reasoning tokens too; max_tokens is deprecated on OpenAI and refused by
            # its reasoning models.
            "max_completion_tokens": request.max_tokens,
        }
        if self.name != "openai":
            # Compatible servers (llama.cpp, Ollama's /v1) read only the older max_tokens and
            # silently drop max_completion_tokens; sending both works on either kind.
            body["max_tokens"] = request.max_tokens
        if accepts_sampling(request.model_name):
            if request.temperature is not None:
                body["temperature"] = request.temperature
            if request.top_p is not None:
                body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop)
        if self.schema_mode(request) == SCHEMA_NATIVE:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "schema": request.schema,
                    "strict": strict_compatible(request.schema),
                },
            }
        return body

    async def complete(self, request: Request) -> Response:
        key = self._api_key()
        headers = {"content-type": "application/json"}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        status, reply_headers, data, latency_s = await post_json(
            self._clients.get(),
            f"{self.base_url}/chat/completions",
            headers,
            self.build_body(request),
            request.timeout_s,
        )
        if status >= 400:
            raise self._error(status, reply_headers, data, key)
        if isinstance(data, dict) and "error" in data and "choices" not in data:
            # Some gateways report an upstream failure inside a 200.
            raise AdapterError(
                "server_error",
                redact(f"HTTP {status} carried an error: {error_message(data)}", [key]),
                retryable=True,
                status=status,
            )
        try:
            response = self._response(request, data, reply_headers.get("x-request-id"), latency_s)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise AdapterError(
                "malformed_response",
                redact(f"unexpected chat completion shape ({exc!r})", [key]),
                retryable=True,
                status=status,
            ) from None
        return with_rate_limit(response, reply_headers)

    def _response(
        self, request: Request, data: dict[str, Any], request_id: str | None, latency_s: float
    ) -> Response:
        choice = data["choices"][0]
        message = choice["message"]
        raw_finish = choice.get("finish_reason")
        finish_reason = _FINISH_REASONS.get(raw_finish, raw_finish or "unknown")
        if message.get("refusal"):
            # A schema-constrained refusal: content is null and the refusal text is not an
            # answer to check.
            text, finish_reason = "", "refusal"
        else:
            text = _content_text(message.get("content"))
        return Response(
            text=text,
            usage=self._usage(request, data.get("usage"), text),
            latency_s=latency_s,
            finish_reason=finish_reason,
            schema_mode=self.schema_mode(request),
            provider_request_id=request_id or data.get("id"),
        )

    def _usage(self, request: Request, usage: Any, text: str) -> Usage:
        if not isinstance(usage, dict) or usage.get("prompt_tokens") is None:
            # Some compatible servers send no usage: estimate, and say so.
            return estimated_usage((request.system or "") + self._prompt(request), text)
        details = usage.get("prompt_tokens_details") or {}
        prompt = int(usage["prompt_tokens"])
        cached = int(details.get("cached_tokens") or 0)
        written = int(details.get("cache_write_tokens") or 0)
        return Usage(
            # prompt_tokens counts cached (and cache-write) tokens too; each token is billed
            # at one rate, so they are taken out of the uncached input. A negative result (or
            # count) is a lie the dispatcher prices at the worst case: not floored to 0 here.
            input_tokens=prompt - cached - written,
            # completion_tokens already includes reasoning tokens.
            output_tokens=int(usage.get("completion_tokens") or 0),
            cached_input_tokens=cached,
            cache_write_tokens=written,
        )

    def _error(self, status: int, headers: Any, data: Any, key: str | None) -> AdapterError:
        message = error_message(data)
        detail = data.get("error") if isinstance(data, dict) else None
        code = detail.get("code") if isinstance(detail, dict) else None
        if isinstance(code, str) and code:
            message = f"{code}: {message}"
        error = error_from_status(status, headers, message, secrets=[key])
        if code == "insufficient_quota":
            # Out of credit, not rate limited: waiting does not help.
            error.retryable = False
        return error


def _content_text(content: Any) -> str:
    """``message.content``: a string, null, or (some servers) a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise TypeError(f"content is {type(content).__name__}")


def _is_llama_cpp(listing: Any) -> bool:
    """llama-server lists its models as ``owned_by: llamacpp``."""
    data = listing.get("data") if isinstance(listing, dict) else None
    return isinstance(data, list) and any(
        isinstance(m, dict) and m.get("owned_by") == "llamacpp" for m in data
    )
