"""Comparing numbers that numpy computed: never bit for bit.

A reseeded rerun draws the same random numbers, but numpy may sum them in another order (a
different block size, CPU kernel or numpy release), which moves the last bits. The spec
promises the printed figures and the stored values to RERUN_TOLERANCE (docs/spec.md,
section 26, "Generator and seeds"), so that is what the tests check."""

from __future__ import annotations

from typing import Any

import pytest

RERUN_TOLERANCE = 1e-9  # relative, as docs/spec.md states


def assert_same_interval(got: Any, want: Any) -> None:
    """Both intervals' ends agree to the spec's rerun tolerance."""
    assert got is not None and want is not None
    assert (got.low, got.high) == pytest.approx((want.low, want.high), rel=RERUN_TOLERANCE)
