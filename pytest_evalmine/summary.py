"""The terminal summary: the compact form of report.md, in the same order."""

from __future__ import annotations

from .render import HEADERS, money, scorecard_rows, text_table
from .report import RunSummary


def terminal_lines(summary: RunSummary, report_path: str) -> list[str]:
    lines = [
        f"suite {summary.suite_name} (sha256 {summary.suite_hash[:12]}) run {summary.run_id}",
        f"models: {', '.join(summary.models)} (baseline first); adapters: "
        f"{summary.adapter_routing}",
    ]
    if summary.partial:
        lines.append("PARTIAL RUN: the cost cap was reached; some items were not run")
    lines += text_table(HEADERS, scorecard_rows(summary.scores))
    lines += [
        f"cost: {money(summary.spent_usd)} this run, {money(summary.if_uncached_usd)} if "
        f"uncached; cap {money(summary.cap_usd)} ({summary.cap_source}); prices pinned "
        f"{summary.prices_pinned}",
        f"calls: {summary.calls_made} made, {summary.calls_cached} cached; outcomes: "
        + ", ".join(f"{k} {v}" for k, v in summary.outcomes.items()),
        f"report: {report_path}",
    ]
    return lines
