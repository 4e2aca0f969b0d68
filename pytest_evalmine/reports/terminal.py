"""The terminal summary: the compact form of report.md, in the same order."""

from __future__ import annotations

from .render import text_table
from .sections import Section, report_sections
from .summary import RunSummary


def terminal_lines(summary: RunSummary, report_path: str) -> list[str]:
    lines = [
        f"suite {summary.suite_name} (sha256 {summary.suite_hash[:12]}) run {summary.run_id}",
        f"models: {', '.join(summary.models)} (baseline first); adapters: "
        f"{summary.adapter_routing}",
    ]
    for section in report_sections(summary):
        lines += terminal_section(section)
    lines.append(f"report: {report_path}")
    return lines


def terminal_section(section: Section) -> list[str]:
    lines = [f"-- {section.title} --", *section.lines]
    for headers, rows in section.tables:
        lines += text_table(headers, rows)
    return lines + section.footer
