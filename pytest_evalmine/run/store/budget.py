"""The cap check both ledgers make (spec: "Prices and the budget"), apart from their SQL: which
of a wave's amounts fit, given what the budget has committed already."""

from __future__ import annotations

# Amounts are sums of float prices: a wave that fits the cap exactly must not miss it by a
# rounding error.
TOLERANCE_USD = 1e-12


def amounts_that_fit(
    committed: float, amounts: list[float], cap: float
) -> tuple[list[bool], float]:
    """Whether each amount, taken in turn, fits under ``cap`` on top of ``committed`` and the
    earlier amounts that fitted (one that does not fit leaves room for a smaller one after it),
    exactly as one reservation after another would; and the fitting amounts' total, summed in
    that order (the amount the budget's running total grows by)."""
    added = 0.0
    fits: list[bool] = []
    for amount in amounts:
        fitting = committed + added + amount <= cap + TOLERANCE_USD
        fits.append(fitting)
        if fitting:
            added += amount
    return fits, added
