"""Text for people: the scorecard as a terminal table and as markdown, from one row builder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..stats.proportions import Proportion
from .scorecard import ModelScore, Rate

HEADERS = (
    "model",
    "passed",
    "all checks pass",
    "schema native",
    "schema prompted",
    "latency p50",
    "p95",
    "cost run",
    "if uncached",
)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 item``, ``2 items``, ``0 items``: a count with its noun in the number it takes
    (``plural`` for a noun that is not made plural by adding ``s``)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def money(value: float) -> str:
    """Dollars with four decimals, six below a tenth of a cent (tiny runs cost fractions)."""
    return f"${value:.4f}" if value == 0 or abs(value) >= 0.001 else f"${value:.6f}"


def if_uncached_text(summary: Any) -> str:
    """``$X if uncached``: what the run's calls would cost made now, at today's price table;
    when a cached call was paid at other prices, which figure it is and the recorded one:
    ``$X if uncached at today's prices (recorded $Y)``."""
    today, recorded = money(summary.if_uncached_usd), money(summary.if_uncached_recorded_usd)
    if today == recorded:
        return f"{today} if uncached"
    return f"{today} if uncached at today's prices (recorded {recorded})"


def proportion_text(rate: Proportion) -> str:
    """``9/10 90% [60-98%]``: a rate with n and its 95 % Wilson interval."""
    interval = rate.interval
    if rate.value is None or interval is None:
        return "-"
    return (
        f"{rate.successes}/{rate.n} {100 * rate.value:.0f}% "
        f"[{100 * interval.low:.0f}-{100 * interval.high:.0f}%]"
    )


def _rate(rate: Rate) -> str:
    return proportion_text(rate.proportion)


def milliseconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def scorecard_rows(scores: Sequence[ModelScore]) -> list[tuple[str, ...]]:
    rows = []
    for score in scores:
        # Some answer came without usage: its cost is estimated from text, a lower bound.
        bound = ">=" if score.cost_lower_bound else ""
        rows.append(
            (
                score.model + (" (baseline)" if score.baseline else ""),
                f"{score.passed}/{score.items}",
                _rate(score.all_pass),
                _rate(score.schema_native),
                _rate(score.schema_prompted),
                milliseconds(score.latency_p50_s) + _latency_count(score),
                milliseconds(score.latency_p95_s),
                bound + money(score.cost_usd),
                bound + money(score.cost_if_uncached_usd),
            )
        )
    return rows


def _latency_count(score: ModelScore) -> str:
    """`` (n=38)``: how many answers the latency is over; `` (n=38, within width 4)`` when
    answers sent wider than the provider's capacity were left out of it."""
    narrowed = score.latency_width is not None and score.latency_n < score.passed + score.failed
    width = f", within width {score.latency_width}" if narrowed else ""
    return f" (n={score.latency_n}{width})"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    lines = [line, "  ".join("-" * w for w in widths)]
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return lines


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def cells(values: Sequence[str]) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"

    return [cells(headers), "|" + "|".join("---" for _ in headers) + "|", *map(cells, rows)]
