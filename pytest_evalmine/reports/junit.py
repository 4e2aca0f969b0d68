"""What a CI system reads from ``--junitxml`` (spec: "CI"): properties of each suite item and
of the whole run (calibration, each win rate with its flag), as name/value strings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..run.records import PASSED, AnswerRecord
from .sections import flagged
from .summary import RunSummary, failure_reason


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


def write_junit(path: Path, summaries: Sequence[RunSummary]) -> None:
    """A JUnit XML file for a run pytest did not write one for (``evalmine merge``): one
    test suite, a test case per item named as pytest names it, with the same item and run
    properties as ``--junitxml``."""
    from xml.etree import ElementTree

    from .files import atomic_write

    records = [(s, r) for s in summaries for r in s.records]
    failed = sum(1 for _, r in records if r.outcome != PASSED)
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(
        root,
        "testsuite",
        name="evalmine",
        tests=str(len(records)),
        failures=str(failed),
        errors="0",
        skipped="0",
    )
    properties = ElementTree.SubElement(suite, "properties")
    for summary in summaries:
        for name, value in suite_properties(summary):
            ElementTree.SubElement(properties, "property", name=name, value=value)
    for summary, record in records:
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=f"{summary.suite_file}::{record.task}",
            name=f"{record.case}[{record.shown_model}]",
            time=f"{record.latency_s or 0.0:.3f}",
        )
        own = ElementTree.SubElement(case, "properties")
        for name, value in item_properties(record):
            ElementTree.SubElement(own, "property", name=name, value=value)
        if record.outcome != PASSED:
            ElementTree.SubElement(
                case, "failure", message=f"{record.outcome}: {failure_reason(record)}"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n")
