"""The ``merge_run`` tool (spec: "MCP server", "Merge"): ``evalmine merge NAME`` for an
agent. A shard missing, or two partial runs that disagree, is a refusal naming them."""

from __future__ import annotations

from typing import Annotated

from ...engine.merge import MergeRefused, merge_run, merged_exit_code
from ...engine.stored import StoredRun
from ...errors import EvalmineError
from ...exitcodes import meaning
from ...options import RUN_NAME_PATTERN
from .base import ToolBase
from .limits import Field
from .records import MergeResult, Refusal, refusal


class MergeTool(ToolBase):
    """Build the one run of a named run from its shards' partial runs."""

    def merge_run(
        self,
        name: Annotated[
            str, Field(description="the run name every shard was given (--evalmine-run-name)")
        ],
    ) -> MergeResult | Refusal:
        """Merge the partial runs of run NAME (one per shard, the newest of each) into one
        run: its reports, the comparison with the suite's previous run, the release gate and
        the exit code a pytest run over the same items would have. Refused, naming them,
        while a shard is missing or when two partial runs disagree (suite, models, settings)."""
        if not RUN_NAME_PATTERN.fullmatch(name):
            return refusal("bad_request", f"{name!r} is not a run name")
        try:
            finished = merge_run(name, self.limits.report_root, self.limits.root)
        except MergeRefused as exc:
            return refusal("merge_refused", str(exc))
        except EvalmineError as exc:
            return refusal("suite_error", str(exc))
        code = merged_exit_code(finished)
        runs = [self._digested(StoredRun(f.run_dir)) for f in finished if f.run_dir is not None]
        return MergeResult(
            status="completed" if code == 0 else "failed",
            exit_code=code,
            exit_meaning=meaning(code),
            merged_from=[run_id for f in finished for run_id in f.summary.merged_from or ()],
            runs=runs,
        )
