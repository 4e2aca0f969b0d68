"""What one call may cost, and what is believed of the usage a server reports (spec: "Prices
and the budget", "Reservation" and "Impossible usage").

A call's reservation is its worst case: every input byte a token (true of byte-level BPE
tokenizers) plus chat-template overhead, and all of max_tokens. What a server reports is
checked against those bounds before it is costed or cached, so a lying server can neither
make a call free (negative counts, no output tokens for an answer) nor make it cost more
than it reserved (which would push a run past its cap).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..adapters.base import Usage
from .prices import PriceRow

# Chat-template and role tokens a prompt's bytes do not show.
RESERVE_OVERHEAD_TOKENS = 64
WORST_CASE_NOTE = "priced at the reservation (the worst case)"
_INPUT_SIDE = ("input_tokens", "cached_input_tokens", "cache_write_tokens")


@dataclass(frozen=True)
class Bounds:
    """The most one call can be billed for: the counts its reservation is priced at."""

    input_tokens: int
    output_tokens: int
    # The request marks a prefix for the provider's prompt cache (``Request.cache_system``):
    # its input may be billed as cache writes, which cost more than plain input (Anthropic
    # 1.25x, OpenAI from GPT-5.6 on 1.25x).
    writes_cache: bool = False

    @classmethod
    def of(cls, input_text: str, max_tokens: int, writes_cache: bool = False) -> Bounds:
        """Bounds of a call sending ``input_text`` (system, prompt and schema) and asking
        for at most ``max_tokens``."""
        input_tokens = len(input_text.encode("utf-8")) + RESERVE_OVERHEAD_TOKENS
        return cls(input_tokens, max_tokens, writes_cache)

    def worst_case(self, price: PriceRow) -> Usage:
        """The counts the reservation is priced at: every input token at the dearest rate
        the call can be billed (a cache write, when it may write one and that costs more),
        and all of max_tokens. No prompt-cache read is assumed: it could only cost less."""
        write = price.cache_write
        if self.writes_cache and write is not None and write > price.input:
            return Usage(cache_write_tokens=self.input_tokens, output_tokens=self.output_tokens)
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)


def checked_usage(usage: Usage, text: str, bounds: Bounds, price: PriceRow) -> Usage:
    """``usage`` when it is possible; else what the call is costed at, with the reported
    values in ``anomaly``:

    - a negative count, or no output tokens reported for a non-empty answer, says nothing
      the run can believe: the call is priced at its reservation (a negative count would
      make a negative cost and free room under the cap; zero output would make it free);
    - output above max_tokens is cut to max_tokens, and input-side tokens above the input
      bound are scaled down to it;
    - counts within the bounds that still cost more than the reservation (a cache rate above
      the input rate) are priced at the reservation.

    So no call is ever costed above what it reserved, and the cap holds against any server.
    """
    counts = usage.token_counts()
    negative = [f"{name} {value} < 0" for name, value in counts.items() if value < 0]
    if negative:
        return _worst_case(bounds, price, negative)
    if usage.reported and counts["output_tokens"] == 0 and text:
        return _worst_case(bounds, price, ["output_tokens 0 for a non-empty answer"])
    problems = []
    if counts["output_tokens"] > bounds.output_tokens:
        problems.append(
            f"output_tokens {counts['output_tokens']} > max_tokens {bounds.output_tokens}"
        )
        counts["output_tokens"] = bounds.output_tokens
    total_input = sum(counts[name] for name in _INPUT_SIDE)
    if total_input > bounds.input_tokens:
        problems.append(f"{total_input} input tokens > the bound of {bounds.input_tokens}")
        for name in _INPUT_SIDE:
            counts[name] = counts[name] * bounds.input_tokens // total_input
    checked = dataclasses.replace(usage, **counts)
    if price.cost(checked) > price.cost(bounds.worst_case(price)):
        return _worst_case(bounds, price, [*problems, "costs more than the reservation"])
    if not problems:
        return usage
    return dataclasses.replace(checked, anomaly="clamped: " + "; ".join(problems))


def _worst_case(bounds: Bounds, price: PriceRow, problems: list[str]) -> Usage:
    note = "clamped: " + "; ".join([*problems, WORST_CASE_NOTE])
    return dataclasses.replace(bounds.worst_case(price), anomaly=note)
