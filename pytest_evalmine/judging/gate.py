"""The release gate (spec: "Release gate"): Ship / Hold / Investigate / Block per candidate
from the 95 % interval of its paired delta on the primary metric, in points."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..options import GateConfig
from ..scoring.paired import SCORE, ModelComparison
from ..stats.estimators import Interval, interval_dict
from .headline import Headline

SHIP, HOLD, INVESTIGATE, BLOCK = "ship", "hold", "investigate", "block"
SEVERITY = (SHIP, HOLD, INVESTIGATE, BLOCK)  # least to most severe
# One model: no candidate to gate, so no verdict and no exit code (a failed regression task
# still blocks).
NOT_APPLICABLE = "not_applicable"
ONE_MODEL = "one model only: there is no candidate to compare with the baseline"
WIN_RATE, ALL_PASS = "win_rate", "all_pass"


@dataclass(frozen=True)
class Measurement:
    """A candidate's delta on the primary metric, in points (100 x), with its interval.
    ``trusted``: deterministic, or a headline-eligible (calibrated) win rate."""

    candidate: str
    delta: float | None
    interval: Interval | None
    trusted: bool
    why_untrusted: str = ""


@dataclass(frozen=True)
class GateRow:
    measurement: Measurement
    verdict: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        m = self.measurement
        return {
            "candidate": m.candidate,
            "delta_points": m.delta,
            "interval_points": interval_dict(m.interval),
            "trusted": m.trusted,
            "verdict": self.verdict,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class GateResult:
    config: GateConfig
    rows: tuple[GateRow, ...]
    # items of regression tasks that did not pass: any blocks, even with no candidate to compare
    regression_failures: int = 0

    @property
    def verdict(self) -> str:
        """The most severe verdict over the candidates; Block whenever a regression task
        failed; without a candidate (one model) otherwise, ``NOT_APPLICABLE``: a run that
        could not be gated neither passes nor fails the gate."""
        if self.regression_failures:
            return BLOCK
        if not self.rows:
            return NOT_APPLICABLE
        return max((row.verdict for row in self.rows), key=SEVERITY.index)

    @property
    def note(self) -> str | None:
        """Why there is no verdict, when there is none."""
        return ONE_MODEL if self.verdict == NOT_APPLICABLE else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.config.metric,
            "indifference_points": self.config.indifference,
            "minor_regression_points": self.config.minor_regression,
            "verdict": self.verdict,
            "note": self.note,
            "regression_failures": self.regression_failures,
            "candidates": [row.to_dict() for row in self.rows],
        }


def decide(measurement: Measurement, config: GateConfig, regression_failures: int = 0) -> GateRow:
    """The decision table of spec section "Release gate", first row that applies."""
    i, m = config.indifference, config.minor_regression
    if regression_failures:
        return GateRow(
            measurement,
            BLOCK,
            f"{regression_failures} item(s) of regression tasks did not pass: every model must "
            "pass every case",
        )
    interval = measurement.interval
    if interval is None:
        why = measurement.why_untrusted or "nothing to compare"
        return GateRow(measurement, INVESTIGATE, f"no measurement: {why}")
    low, high = interval.low, interval.high
    if high < -i and low < -m:
        return GateRow(
            measurement,
            BLOCK,
            f"worse by more than {i:g} points for certain, and possibly by more than {m:g}",
        )
    if not measurement.trusted:
        return GateRow(
            measurement,
            INVESTIGATE,
            f"the measurement is not trusted ({measurement.why_untrusted}): it cannot Ship",
        )
    if low >= -i:
        return GateRow(measurement, SHIP, f"no worse than {i:g} points (the interval's low end)")
    if high >= -i:
        return GateRow(
            measurement,
            HOLD,
            f"the interval reaches below -{i:g} and above it: it cannot tell the change from "
            "no change; a person decides",
        )
    return GateRow(
        measurement,
        INVESTIGATE,
        f"worse by more than {i:g} points for certain, by at most {m:g}: a minor regression",
    )


def _points(interval: Interval, offset: float) -> Interval:
    return Interval(100 * (interval.low - offset), 100 * (interval.high - offset))


def measurements(
    metric: str, headline: Headline | None, comparisons: Sequence[ModelComparison]
) -> list[Measurement]:
    """Per candidate: win rate - 0.5, or the paired all-pass or checker-score delta B - A,
    in points. A run without a task with checks has no score comparison: no measurement."""
    if metric in (ALL_PASS, SCORE):
        chosen = {c.candidate: c for c in comparisons if c.metric == metric}
        candidates = dict.fromkeys(c.candidate for c in comparisons)
        return [_paired_measurement(candidate, chosen.get(candidate)) for candidate in candidates]
    if headline is None:
        return [
            Measurement(candidate, None, None, False, "no judge ran")
            for candidate in dict.fromkeys(c.candidate for c in comparisons)
        ]
    return [
        Measurement(
            rate.candidate,
            None if rate.win_rate is None else 100 * (rate.win_rate - 0.5),
            _points(rate.interval, 0.5) if rate.interval else None,
            trusted=rate.headline_eligible,
            why_untrusted="; ".join(rate.ineligible_reasons),
        )
        for rate in headline.overall
    ]


def _paired_measurement(candidate: str, comparison: ModelComparison | None) -> Measurement:
    """Deterministic, so always trusted; without a comparison (no task with checks for the
    score metric) there is nothing to measure."""
    if comparison is None:
        return Measurement(candidate, None, None, True, "no task has checks")
    paired = comparison.comparison
    return Measurement(
        candidate,
        None if paired.delta is None else 100 * paired.delta,
        _points(paired.interval, 0.0) if paired.interval else None,
        trusted=True,
    )


def evaluate_gate(
    config: GateConfig,
    headline: Headline | None,
    comparisons: Sequence[ModelComparison],
    regression_failures: int = 0,
) -> GateResult:
    rows = [
        decide(m, config, regression_failures)
        for m in measurements(config.metric, headline, comparisons)
    ]
    return GateResult(config, tuple(rows), regression_failures)
