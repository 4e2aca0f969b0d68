"""Named runs (spec: "Report files", named runs): ``--evalmine-run-name=NAME`` gives a run a
name many runs may share; ``NAME`` is the latest of them and ``NAME~K`` the K-th earlier, read
wherever a run id is (``evalmine compare``, ``--evalmine-compare``, the MCP tools)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import EvalmineError
from ..options import RUN_NAME_PATTERN

REFERENCE = re.compile(rf"({RUN_NAME_PATTERN.pattern})(?:~([0-9]{{1,4}}))?")


@dataclass(frozen=True)
class NamedRun:
    run_dir: Path
    suite: str

    @property
    def run_id(self) -> str:
        return self.run_dir.name


def parse_reference(reference: str) -> tuple[str, int] | None:
    """``NAME`` -> (NAME, 0), ``NAME~K`` -> (NAME, K); None when ``reference`` is neither."""
    match = REFERENCE.fullmatch(reference)
    if match is None:
        return None
    return match.group(1), int(match.group(2) or 0)


def runs_named(report_root: Path, name: str, suite: str | None = None) -> list[NamedRun]:
    """The whole runs named ``name`` (of ``suite`` only, when given), oldest first (run ids
    begin with their UTC start). A shard's partial run (report.json's ``shard``) is part of a
    run, never one by itself."""
    if not report_root.is_dir():
        return []
    suite_dirs = [report_root / suite] if suite else sorted(report_root.iterdir())
    found = []
    for suite_dir in suite_dirs:
        if not suite_dir.is_dir():
            continue
        for run_dir in suite_dir.iterdir():
            report = _report(run_dir / "report.json")
            if report is not None and report.get("run_name") == name and not report.get("shard"):
                found.append(NamedRun(run_dir, suite_dir.name))
    return sorted(found, key=lambda run: (run.run_id, run.suite))


def find_named(reference: str, report_root: Path, suite: str | None = None) -> Path | None:
    """The run folder ``NAME`` or ``NAME~K`` names, None when no run has that name;
    ``EvalmineError`` naming the runs of that name when K goes past the oldest."""
    parsed = parse_reference(reference)
    if parsed is None:
        return None
    name, back = parsed
    runs = runs_named(report_root, name, suite)
    if not runs:
        return None
    if back >= len(runs):
        listed = ", ".join(
            f"{_spelled(name, k)} ({run.run_id})" for k, run in enumerate(reversed(runs))
        )
        raise EvalmineError(
            f"no run {reference!r}: {len(runs)} run(s) are named {name!r} under {report_root}: "
            f"{listed}"
        )
    return runs[-1 - back].run_dir


def _spelled(name: str, back: int) -> str:
    return name if back == 0 else f"{name}~{back}"


def _report(path: Path) -> dict | None:
    try:
        report = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None
