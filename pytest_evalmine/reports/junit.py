"""What a CI system reads from ``--junitxml`` (spec: "CI"): properties of each suite item and
of the whole run (calibration, each win rate with its flag), as name/value strings."""

from __future__ import annotations

from ..run.records import AnswerRecord
from .sections import flagged
from .summary import RunSummary


def item_properties(record: AnswerRecord) -> list[tuple[str, str]]:
    checks = ",".join(f"{c['name']}:{'pass' if c['passed'] else 'fail'}" for c in record.checks)
    latency = "" if record.latency_s is None else f"{record.latency_s:.3f}"
    return [
        ("evalmine_model", record.model),
        ("evalmine_outcome", record.outcome),
        ("evalmine_cost_usd", f"{record.cost_usd:.6f}"),
        ("evalmine_latency_s", latency),
        ("evalmine_cached", "true" if record.cached else "false"),
        ("evalmine_checks", checks),
    ]


def suite_properties(summary: RunSummary) -> list[tuple[str, str]]:
    """Run-level properties, prefixed ``evalmine.SUITE.`` (one test suite element holds every
    suite of the run)."""
    prefix = f"evalmine.{summary.suite_name}."
    properties = [
        (prefix + "run_id", summary.run_id),
        (prefix + "spent_usd", f"{summary.spent_usd:.6f}"),
        (prefix + "partial", "true" if summary.partial else "false"),
    ]
    headline = summary.headline
    if headline is None:
        return [*properties, (prefix + "judge_note", summary.judge_note or "")]
    cal = headline.calibration
    kappa = "" if cal.kappa.value is None else f"{cal.kappa.value:.3f}"
    properties += [
        (prefix + "calibration", f"{cal.status}: {cal.reason()}"),
        (prefix + "kappa", kappa),
        (prefix + "headline_eligible", "true" if headline.headline_eligible else "false"),
    ]
    rates = [(f"{prefix}win_rate.{rate.candidate}", flagged(rate)) for rate in headline.overall]
    return properties + rates
