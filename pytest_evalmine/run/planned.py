"""Requests resolved for dispatch, and what they would cost (spec: "Prices and the budget"):
each one's reservation (its worst case) and the pre-run estimate."""

from __future__ import annotations

from dataclasses import dataclass

from ..adapters.base import SCHEMA_PROMPTED, Adapter, Request, Usage, tokens_for_chars
from .prices import PriceRow
from .usage import RESERVE_OVERHEAD_TOKENS, Bounds, checked_usage

ESTIMATE_OVERHEAD_TOKENS = 8


@dataclass(frozen=True)
class Planned:
    """A request resolved to its adapter, cache key and price row."""

    request: Request
    key: str
    adapter: Adapter
    price: PriceRow

    def _prompted_schema(self) -> str:
        """The schema as the estimate counts it: only when the adapter puts it in the
        prompt."""
        if self.request.schema is not None and self.adapter.schema_mode(self.request) == (
            SCHEMA_PROMPTED
        ):
            return str(self.request.schema)
        return ""

    def _sent_schema(self) -> str:
        """The schema as the reservation counts it: whenever one is sent, natively too (a
        provider may bill a native schema as input: OpenAI's structured outputs do)."""
        return "" if self.request.schema is None else str(self.request.schema)

    @property
    def bounds(self) -> Bounds:
        """The most this call can be billed for (``usage.Bounds``)."""
        request = self.request
        text = (request.system or "") + request.prompt + self._sent_schema()
        return Bounds.of(text, request.max_tokens, request.cache_system)

    @property
    def max_input_tokens(self) -> int:
        return self.bounds.input_tokens

    @property
    def max_cost_usd(self) -> float:
        """Strict upper bound, reserved before the call: the input bound and all of
        max_tokens. No call is costed above it (``checked_usage``)."""
        return self.price.cost(self.bounds.worst_case(self.price))

    def max_cost_for(self, text_chars: int) -> float:
        """The reservation of a request like this one whose system and prompt are
        ``text_chars`` characters long, a token a character (their bytes are not known
        yet)."""
        schema_bytes = len(self._sent_schema().encode())
        input_tokens = text_chars + schema_bytes + RESERVE_OVERHEAD_TOKENS
        bounds = Bounds(input_tokens, self.request.max_tokens, self.request.cache_system)
        return self.price.cost(bounds.worst_case(self.price))

    def checked_usage(self, usage: Usage, text: str) -> Usage:
        """The provider's counts for an answer ``text``, or what the call is costed at when
        they are impossible (``usage.checked_usage``)."""
        return checked_usage(usage, text, self.bounds, self.price)

    @property
    def estimated_cost_usd(self) -> float:
        """Pre-run estimate: input at about four characters a token, output at max_tokens."""
        request = self.request
        return self.estimated_cost_for(len(request.system or "") + len(request.prompt))

    def estimated_cost_for(self, text_chars: int) -> float:
        """The estimate of a request like this one whose system and prompt are
        ``text_chars`` characters long (the schema, when prompted, is added)."""
        input_chars = text_chars + len(self._prompted_schema())
        input_tokens = tokens_for_chars(input_chars) + ESTIMATE_OVERHEAD_TOKENS
        return self.price.cost(
            Usage(input_tokens=input_tokens, output_tokens=self.request.max_tokens)
        )


@dataclass(frozen=True)
class Estimate:
    calls: int
    cached: int
    uncached: int
    cost_usd: float
    already_committed_usd: float
    # The sum of the uncached calls' reservations (section "Prices and the budget").
    worst_case_usd: float = 0.0
    # Uncached calls already in a provider batch an earlier run submitted: collected at no
    # new cost (their reservations are that run's), so in neither figure above.
    in_batch: int = 0

    def __add__(self, other: Estimate) -> Estimate:
        """Both batches' calls; the ledger's committed amount is the run's, counted once."""
        return Estimate(
            calls=self.calls + other.calls,
            cached=self.cached + other.cached,
            uncached=self.uncached + other.uncached,
            cost_usd=self.cost_usd + other.cost_usd,
            already_committed_usd=max(self.already_committed_usd, other.already_committed_usd),
            worst_case_usd=self.worst_case_usd + other.worst_case_usd,
            in_batch=self.in_batch + other.in_batch,
        )
