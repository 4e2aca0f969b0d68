"""The run token: what every run id of a pytest session begins with, and what the ledger
keys the run's spend by."""

from __future__ import annotations

import datetime as dt
import secrets


def new_run_token() -> str:
    """``yyyymmddThhmmss.mmmZ_xxxxxx``: the UTC start time, for people and sorting, then 24
    random bits, so two runs started in the same millisecond share a ledger, claims or a
    report folder with odds of one in 16.7 million."""
    now = dt.datetime.now(dt.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
    return f"{stamp}_{secrets.token_hex(3)}"
