"""What dispatch made of one request (spec: "Dispatch"): its status, its answer, and how it
was paid for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..adapters.base import Response
from ..redaction import count_redacted
from .records import ACCOUNTING_FIELDS

OK, ERROR, BUDGET, REPLAY_MISS = "ok", "error", "budget", "replay_miss"
INTERRUPTED = "interrupted"


@dataclass
class Outcome:
    """What happened to one request in this run."""

    key: str
    status: str
    response: Response | None = None
    cached: bool = False
    cost_usd: float = 0.0
    cost_if_uncached_usd: float = 0.0
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 0
    # Worst case of tries that were sent and failed: the provider may have billed them.
    possibly_billed_usd: float = 0.0

    @property
    def redactions(self) -> int:
        """Keys redacted from this outcome's answer or error (spec: "Secrets in texts")."""
        return count_redacted(self.error, self.response.text if self.response else None)

    def accounting(self) -> dict[str, Any]:
        """What every kept record of a call carries about it (an answer, a judge pass, a
        criterion verdict): its cache key, how it was paid for, its tries, its redactions."""
        return {name: getattr(self, name) for name in ACCOUNTING_FIELDS}


@dataclass
class Progress:
    total: int = 0
    done: int = 0
    cached: int = 0
    spent_usd: float = 0.0
