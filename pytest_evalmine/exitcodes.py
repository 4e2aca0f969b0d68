"""Exit codes (spec: "Exit codes"). pytest owns 0-6; ours start at 10."""

from __future__ import annotations

REFUSED_BEFORE_SPENDING = 10
STOPPED_OVER_BUDGET = 11
CALIBRATION_GATE_FAILED = 12  # reserved for the judge and calibration gate
RELEASE_GATE_BLOCKED = 13  # reserved for release gates
