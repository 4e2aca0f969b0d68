"""A stored run's numbers rounded as the terminal prints them, and report.json's paired
comparison and release gate as the tools' records.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...engine.stored import RunDigest
from ...reports.render import milliseconds, money, number, percent
from .records import GateDigest, GateRowDigest, PairedDigest, no_gate


# Numbers as the terminal prints them: each is read back from the terminal's own text for it
# (reports.render), so an agent and a person see the same digits and the
# two cannot drift apart. Floats arrive unrounded (0.04908990000000001) from the sums.
def dollars(value: float | None) -> float | None:
    """$0.0491: four decimals, six below a tenth of a cent (``money``)."""
    return None if value is None else float(money(value).replace("$", ""))


def share(value: float | None) -> float | None:
    """A rate the terminal prints as a percent with one decimal (``percent``): 0.518."""
    return None if value is None else round(float(percent(value).rstrip("%")) / 100, 3)


def kappa(value: float | None) -> float | None:
    """Two decimals (``number``), as kappa and its interval are printed."""
    return None if value is None else float(number(value))


def seconds(value: float | None) -> float | None:
    """A latency to the millisecond (``milliseconds``), in seconds."""
    return None if value is None else round(float(milliseconds(value).split()[0]) / 1000, 3)


def points(value: float | None) -> float | None:
    """A fraction as points (x 100) with one decimal, as the paired and gate lines print."""
    return None if value is None else float(number(100 * value, 1))


def _each(rounding: Any, values: list[float] | None) -> list[float] | None:
    return None if values is None else [rounding(v) for v in values]


def rounded_digest(run: RunDigest) -> RunDigest:
    cal = run.calibration
    return replace(
        run,
        spent_usd=dollars(run.spent_usd),
        if_uncached_usd=dollars(run.if_uncached_usd),
        cap_usd=dollars(run.cap_usd),
        calibration=None
        if cal is None
        else replace(cal, kappa=kappa(cal.kappa), interval=_each(kappa, cal.interval)),
        win_rates=[
            replace(r, win_rate=share(r.win_rate), interval=_each(share, r.interval))
            for r in run.win_rates
        ],
        models=[
            replace(
                m,
                schema_pass_rate=share(m.schema_pass_rate),
                latency_p50_s=seconds(m.latency_p50_s),
                latency_p95_s=seconds(m.latency_p95_s),
                cost_usd=dollars(m.cost_usd),
                cost_if_uncached_usd=dollars(m.cost_if_uncached_usd),
            )
            for m in run.models
        ],
    )


def low_high(interval: dict[str, float] | None, rounding: Any) -> list[float] | None:
    return None if interval is None else [rounding(interval["low"]), rounding(interval["high"])]


def paired_digest(entry: dict[str, Any]) -> PairedDigest:
    return PairedDigest(
        candidate=entry["candidate"],
        baseline=entry["baseline"],
        metric=entry["metric"],
        verdict=entry["verdict"],
        cases=entry["cases"],
        observations=entry.get("observations", entry["cases"]),
        excluded_cases=entry.get("excluded_cases") or 0,
        delta_points=points(entry.get("delta")),
        interval_points=low_high(entry.get("interval"), points),
        noise_floor_points=points((entry.get("noise_floor") or {}).get("floor")),
        beyond_noise=entry.get("beyond_noise"),
        worse=entry["worse"],
        better=entry["better"],
        same=entry["same"],
    )


def _in_points(value: float | None) -> float | None:
    """A number already in points, with the one decimal the gate's lines print."""
    return None if value is None else float(number(value, 1))


def gate_digest(gate: dict[str, Any] | None) -> GateDigest:
    if gate is None:
        return no_gate()
    return GateDigest(
        verdict=gate["verdict"],
        note=gate.get("note"),  # why a gate did not apply (one model), as report.json says
        metric=gate["metric"],
        indifference_points=gate["indifference_points"],
        minor_regression_points=gate["minor_regression_points"],
        regression_failures=gate.get("regression_failures", 0),
        candidates=[
            GateRowDigest(
                candidate=row["candidate"],
                verdict=row["verdict"],
                delta_points=_in_points(row.get("delta_points")),
                interval_points=low_high(row.get("interval_points"), _in_points),
                trusted=bool(row["trusted"]),
                reason=row["reason"],
            )
            for row in gate.get("candidates") or []
        ],
    )
