"""The read-only tools over suites and stored runs: ``list_suites``, ``list_runs``,
``show_run`` and ``last_report``.
"""

from __future__ import annotations

from typing import Annotated

from ...engine.catalog import describe_suite, find_suite_files
from ...engine.stored import StoredRun, latest_run, list_runs
from ...errors import EvalmineError
from .base import ToolBase
from .limits import REPORT_DIR, Field, OutsideRoot, confine, shown_path
from .records import Refusal, RunBrief, RunList, RunView, SuiteList, refusal
from .rounding import dollars


class ListingTools(ToolBase):
    """Suites and stored runs, in numbers and flags."""

    def list_suites(
        self,
        folder: Annotated[
            str, Field(description="a folder under the suite root, searched with its subfolders")
        ] = ".",
    ) -> SuiteList | Refusal:
        """Suite files (*.eval.yaml) under a folder of the suite root, with their tasks,
        cases, models, judge and labels; a suite that does not load shows its error."""
        try:
            where = confine(self.limits.root, folder)
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        if not where.is_dir():
            return refusal("not_found", f"{folder}: no such folder under the suite root")
        suites = [
            describe_suite(path, self.limits.root)
            for path in find_suite_files(where)
            if self._inside(path)
        ]
        return SuiteList("ok", shown_path(where, self.limits.root), suites)

    def list_runs(
        self,
        suite: Annotated[
            str, Field(description="a suite's name, or its suite file under the suite root")
        ],
    ) -> RunList | Refusal:
        """A suite's stored runs, oldest first (suite name, or its file)."""
        try:
            name = self._suite_name(suite)
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        except EvalmineError as exc:
            return refusal("suite_error", str(exc))
        runs = [_brief(run) for run in list_runs(self.limits.report_root, name)]
        if not runs and not (self.limits.report_root / name).is_dir():
            # No folder: no run of it ever finished here, or the name is mistyped.
            return refusal("not_found", f"no run of suite {name!r} under {REPORT_DIR}/")
        return RunList("ok", name, runs)

    def show_run(
        self,
        run: Annotated[
            str,
            Field(
                description="a run id, a run name (NAME: its latest run, NAME~K: the K-th "
                "earlier), or a run folder or its report.json under the root"
            ),
        ],
    ) -> RunView | Refusal:
        """One stored run in numbers and flags, with its paired comparison and release gate
        (as run_suite returns them)."""
        return self._view(lambda: self._find(run))

    def last_report(
        self,
        suite: Annotated[
            str, Field(description="a suite's name, or its suite file under the suite root")
        ],
    ) -> RunView | Refusal:
        """The latest run of a suite, as show_run returns it."""
        return self._view(lambda: latest_run(self.limits.report_root, self._suite_name(suite)))


def _brief(run: StoredRun) -> RunBrief:
    report = run.report()
    headline = report.get("headline")
    return RunBrief(
        run_id=report["run_id"],
        created_utc=report.get("created_utc", ""),
        models=report["models"],
        items=report["items"],
        outcomes=report["outcomes"],
        spent_usd=dollars(report["cost"]["spent_usd"]),
        partial=bool(report["partial"]),
        headline_eligible=None if headline is None else bool(headline["headline_eligible"]),
        run_name=report.get("run_name"),
    )
