"""Exit codes (spec: "Exit codes"). pytest owns 0-6; ours start at 10."""

from __future__ import annotations

REFUSED_BEFORE_SPENDING = 10
STOPPED_OVER_BUDGET = 11
CALIBRATION_GATE_FAILED = 12  # reserved for the judge and calibration gate
RELEASE_GATE_BLOCKED = 13  # the release gate says Block
REGRESSION_FAILED = 14  # a case of a regression task did not pass for some model
RELEASE_GATE_INVESTIGATE = 15  # the release gate says Investigate
REPLAY_MISSED = 16  # --evalmine-record=none needed an answer or verdict the cache lacks
BATCH_PENDING = 17  # --evalmine-batch-wait ended with calls still in a provider batch
MERGE_REFUSED = 18  # evalmine merge: a shard's partial run is missing, or two disagree

# What each code means, in the words the terminal's last line, the CLI and the MCP server use.
MEANINGS = {
    0: "all items passed",
    1: "some items failed",
    2: "interrupted, or a suite did not load",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
    6: "too many warnings",
    REFUSED_BEFORE_SPENDING: "refused before spending: unknown model or over the cap",
    STOPPED_OVER_BUDGET: "stopped over budget: the report is partial",
    CALIBRATION_GATE_FAILED: "calibration gate: a win rate is not headline-eligible",
    RELEASE_GATE_BLOCKED: "release gate: Block",
    REGRESSION_FAILED: "a regression task failed: some model missed a case it must pass",
    REPLAY_MISSED: "replay miss: --evalmine-record=none needed calls the cache does not hold",
    RELEASE_GATE_INVESTIGATE: "release gate: Investigate",
    BATCH_PENDING: "calls still in a provider batch: the report is partial; rerun to collect them",
    MERGE_REFUSED: "merge refused: a shard's partial run is missing, or two partial runs disagree",
}


def meaning(code: int) -> str:
    return MEANINGS.get(int(code), "unknown exit code")
