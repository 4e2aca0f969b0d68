"""What every tool shares: the server's limits, and finding suites and stored runs under the
suite root (a path outside it is refused, never followed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...engine.stored import StoredRun, digest, find_run
from ...errors import EvalmineError
from ...options import project_folders
from .limits import Limits, OutsideRoot, confine, shown_path
from .records import Refusal, RunView, refusal
from .rounding import gate_digest, paired_digest, rounded_digest


class ToolBase:
    """The server's limits and the lookups the tools share; each tool's class extends it."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def _inside(self, path: Path) -> bool:
        try:
            confine(self.limits.root, str(path))
        except OutsideRoot:
            return False
        return True

    def _suite_name(self, suite: str) -> str:
        """A suite's name as its report folder has it: given directly, or read from a suite
        file under the root."""
        if not suite.endswith((".yaml", ".yml")):
            if not suite.replace("-", "").replace("_", "").replace(".", "").isalnum() or suite in {
                ".",
                "..",
            }:
                raise EvalmineError(f"{suite!r} is neither a suite name nor a suite file")
            return suite
        from ...suite.loader import load_suite

        path = confine(self.limits.root, suite)
        shown = shown_path(path, self.limits.root)
        return load_suite(path, shown=shown, roots=project_folders(self.limits.root)).name

    def _find(self, reference: str) -> StoredRun:
        if "/" in reference or os.sep in reference or reference.startswith("."):
            confine(self.limits.root, reference)  # a path, even one that does not exist
        run = find_run(reference, self.limits.report_root, self.limits.root)
        confine(self.limits.root, str(run.run_dir))
        return run

    def _digested(self, run: StoredRun) -> RunView:
        report = run.report()
        return RunView(
            "ok",
            rounded_digest(digest(run, self.limits.root)),
            [paired_digest(entry) for entry in report.get("paired") or []],
            gate_digest(report.get("gate")),
        )

    def _view(self, locate: Any) -> RunView | Refusal:
        try:
            return self._digested(locate())
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        except EvalmineError as exc:
            return refusal("not_found", str(exc))
