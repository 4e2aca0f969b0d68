"""The run token: the UTC start time every run id of a pytest session begins with."""

from __future__ import annotations

import datetime as dt


def new_run_token() -> str:
    """``yyyymmddThhmmss.mmmZ``; milliseconds keep two quick runs apart."""
    now = dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
