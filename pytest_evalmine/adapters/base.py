"""The adapter interface (spec: "Adapters") and the registry that resolves model strings."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

from ..errors import EvalmineError
from ..options import DEFAULT_MAX_RESPONSE_MB
from ..redaction import redact
from ..suite.canonical import sha256_hex

SCHEMA_NATIVE = "native"
SCHEMA_PROMPTED = "prompted"
# The largest response body read from a provider (--evalmine-max-response-mb), process-wide
# like the loaded keys: adapters are built without options.
_response_limit = [int(DEFAULT_MAX_RESPONSE_MB * 1024 * 1024)]


def set_max_response_mb(megabytes: float) -> None:
    """Set the response cap for every adapter of this process (once per run, from options)."""
    _response_limit[0] = int(megabytes * 1024 * 1024)


def max_response_bytes() -> int:
    return _response_limit[0]


@dataclass(frozen=True)
class Request:
    """Everything that decides an answer. Holds no secret: keys live in adapters only."""

    model: str
    prompt: str
    system: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    schema: dict[str, Any] | None = None
    timeout_s: float = 60.0
    repeat: int = 0
    # "prompted" asks the adapter to put the schema in the prompt instead of sending it as
    # native structured output (a variant's ``schema_mode``); None leaves the choice to the
    # adapter. Not a key field itself: the mode the adapter decides enters the cache key.
    schema_mode: str | None = None
    # The system text is a prefix many requests share word for word (the judge's instructions
    # and rubric): an adapter whose provider wants a marker for its prompt cache marks it
    # (Anthropic's ``cache_control``); the others cache a long shared prefix on their own. Not
    # a key field: a cache changes the bill, never the answer. It does change the worst case
    # (a cache write can cost more than plain input: spec "Prices and the budget").
    cache_system: bool = False
    # For adapters that evaluate an application (task, case, vars) or script a test judge.
    # Not part of the cache key: an adapter whose answer depends on it must say so through
    # ``key_extra``.
    context: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def asks_prompted(self) -> bool:
        """Whether the request has a schema and asks for it in the prompt."""
        return self.schema is not None and self.schema_mode == SCHEMA_PROMPTED

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0]

    @property
    def model_name(self) -> str:
        """The model id the provider knows, without our ``provider/`` prefix."""
        return self.model.split("/", 1)[1]

    def key_fields(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "system": self.system,
            "prompt": self.prompt,
            "params": {
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "top_p": self.top_p,
                "stop": list(self.stop),
            },
            "schema": self.schema,
            "repeat": self.repeat,
        }


@dataclass(frozen=True)
class Usage:
    """Token counts. ``input_tokens`` excludes cached and cache-write tokens (each input token
    is billed at exactly one rate), whatever the provider's own convention is.

    ``reported`` is False when the provider sent no usage: the adapter then fills in an
    estimate and the cost derived from it is a lower bound, shown as such, never as $0.
    ``anomaly`` says what the dispatcher clamped when the provider's counts were impossible.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reported: bool = True
    anomaly: str | None = None

    def token_counts(self) -> dict[str, int]:
        """The four counts, as an answer record's ``tokens`` holds them."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


CHARS_PER_TOKEN = 4
# Role markers and the chat template add a few input tokens the text does not show.
TEMPLATE_OVERHEAD_TOKENS = 8


def estimate_tokens(text: str) -> int:
    """About four characters a token: the one estimate used wherever counts are missing."""
    return tokens_for_chars(len(text))


def tokens_for_chars(chars: int) -> int:
    """``estimate_tokens`` of a text known only by its length."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def estimated_usage(prompt_text: str, answer_text: str) -> Usage:
    """Usage for a response that reported none: estimated, and marked so."""
    return Usage(
        input_tokens=estimate_tokens(prompt_text) + TEMPLATE_OVERHEAD_TOKENS,
        output_tokens=estimate_tokens(answer_text),
        reported=False,
    )


@dataclass(frozen=True)
class RateLimit:
    """What a provider's rate-limit headers say it still takes in the current window
    (``x-ratelimit-remaining-requests`` / ``-tokens``, ``anthropic-ratelimit-requests-remaining``
    / ``-tokens-remaining``); None: not said."""

    remaining_requests: int | None = None
    remaining_tokens: int | None = None


@dataclass(frozen=True)
class Response:
    text: str
    usage: Usage
    latency_s: float
    finish_reason: str = "stop"
    schema_mode: str | None = None
    provider_request_id: str | None = None
    # False for an answer that must never be cached or replayed (the fake's injected faults).
    cacheable: bool = True
    # How many calls its provider could have out at once when it was sent (the dispatcher's
    # width): the scorecard's latency is taken from answers sent within the learnt capacity.
    width: int | None = None
    # The reply's rate-limit headers, for the dispatcher's width; never cached.
    rate_limit: RateLimit | None = field(default=None, compare=False)

    def to_json(self) -> str:
        # Every field is a scalar but usage, a flat record: cheaper than asdict's deep copy,
        # once per paid call. Read field by field: vars() would give each response and its
        # usage a dict of their own for as long as they live (2.6 MB at 20,000 answers).
        data = {name: getattr(self, name) for name in _RESPONSE_FIELDS}
        data["usage"] = {name: getattr(self.usage, name) for name in _USAGE_FIELDS}
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Response:
        data = json.loads(text)
        data["usage"] = Usage(**data["usage"])
        return cls(**data)


_RESPONSE_FIELDS = tuple(f.name for f in fields(Response) if f.name != "rate_limit")
_USAGE_FIELDS = tuple(f.name for f in fields(Usage))


class AdapterError(EvalmineError):
    """A provider call failed. ``retryable`` says whether the same request may succeed later.

    ``kind`` is one of: rate_limit, server_error, timeout, connection, bad_request, auth,
    malformed_response. The message never contains a credential: every key this process loaded
    and every key-shaped string is redacted here, whoever raises the error.
    ``possibly_billed`` says whether the provider may have processed (and billed) the request
    although no usable answer came back; ``None`` leaves it to the kind (timeout, connection
    and malformed_response may have been billed).
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool,
        retry_after_s: float | None = None,
        status: int | None = None,
        possibly_billed: bool | None = None,
    ) -> None:
        super().__init__(redact(message))
        self.kind = kind
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.status = status
        self.possibly_billed = possibly_billed
        # The error reply's rate-limit headers (``RateLimit``), for the dispatcher's width.
        self.rate_limit: RateLimit | None = None

    @property
    def may_have_been_billed(self) -> bool:
        if self.possibly_billed is not None:
            return self.possibly_billed
        return self.kind in ("timeout", "connection", "malformed_response")

    @property
    def reached_server(self) -> bool:
        """Whether the try reached a server: it answered with a status, or the request was
        sent and then lost. A refused connection, a connect timeout, a missing key or a
        request that cannot be built never did."""
        return self.status is not None or self.may_have_been_billed


@runtime_checkable
class Adapter(Protocol):
    """What the dispatcher needs from a provider.

    ``name`` and ``version`` enter the cache key: bump ``version`` when a change to the adapter
    can change answers for the same request.

    Optional hooks, looked up with ``getattr`` (see ``optional hooks`` in the spec):

    - ``check_ready(self) -> None``: raise ``AdapterError(kind="auth")`` naming the missing
      environment variable; called while planning, before any network call.
    - ``async prepare(self, models: list[str]) -> None``: one-time unpaid look-ups (e.g. a
      local model's digest); must not keep event-loop-bound resources afterwards.
    - ``key_extra(self, request) -> dict``: extra cache-key fields (e.g. that digest).
    - ``prepared_state(self) -> dict | None`` and ``restore_state(self, state)``: what
      ``prepare`` learnt, kept in the cache database so that a replay (record mode ``none``,
      which neither checks keys nor prepares) builds the same keys with no network.
    """

    name: str
    version: str

    def schema_mode(self, request: Request) -> str | None:
        """``native``, ``prompted`` or ``None`` (no schema), decided before the call."""
        ...

    async def complete(self, request: Request) -> Response: ...

    async def aclose(self) -> None: ...


def cache_key(adapter: Adapter, request: Request) -> str:
    """sha256 of the canonical request as this adapter will send it (spec: "Cache key")."""
    fields = request.key_fields()
    fields["provider"] = adapter.name
    fields["adapter_version"] = adapter.version
    fields["schema_mode"] = adapter.schema_mode(request)
    key_extra = getattr(adapter, "key_extra", None)
    if key_extra is not None:
        extra = key_extra(request)
        if extra:
            fields["adapter_extra"] = extra
    return sha256_hex(fields)


def code_fingerprint(*sources: Any) -> str:
    """sha256 (16 hex digits) of the source code of modules, classes or functions, or of the
    bytes of files (paths): return it from your adapter's ``key_extra`` so that a change to
    your application's code gets fresh answers instead of cached ones."""
    import hashlib
    import inspect
    from pathlib import Path

    digest = hashlib.sha256()
    for source in sources:
        if isinstance(source, (str, Path)):
            digest.update(Path(source).read_bytes())
        else:
            digest.update(inspect.getsource(source).encode("utf-8"))
    return digest.hexdigest()[:16]
