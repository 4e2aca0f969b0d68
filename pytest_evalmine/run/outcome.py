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
# A call still in a provider batch when the run stopped waiting (``batch.py``): a rerun
# collects it.
IN_BATCH = "in_batch"
# Said by a call whose retry the cap had no room for: the cap stopped it, as it stops a call
# never sent (the run is partial and exits 11, spec section 8).
CAP_REFUSED_RETRY = "not retried: the cost cap has no room for another try"


@dataclass
class Outcome:
    """What happened to one request in this run."""

    key: str
    status: str
    response: Response | None = None
    cached: bool = False
    cost_usd: float = 0.0
    cost_if_uncached_usd: float = 0.0  # at today's prices
    recorded_cost_usd: float | None = None  # a cached answer's, as paid (``CallAccounting``)
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 0
    # Worst case of tries that were sent and failed: the provider may have billed them.
    possibly_billed_usd: float = 0.0
    # Tries that reached a server, and tries that may be billed; None where not counted
    # (``CallAccounting`` says what is assumed then).
    sent_tries: int | None = None
    billed_tries: int | None = None

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
    done: int = 0  # ended, however (those left in a provider batch included)
    cached: int = 0
    spent_usd: float = 0.0
    # How they ended: answered (from the cache too), failed, never run (the cap, a Ctrl-C),
    # or left in a provider batch when the run stopped waiting (``left_in_batch``).
    answered: int = 0
    failed: int = 0
    not_run: int = 0
    left_in_batch: int = 0
    # Calls in a provider batch now: not answered, whatever ``done`` says (spec: "Batch",
    # "Waiting is visible").
    in_batch: int = 0

    def count(self, outcome: Outcome) -> None:
        self.done += 1
        self.cached += outcome.cached
        self.spent_usd += outcome.cost_usd
        if outcome.status == OK:
            self.answered += 1
        elif outcome.error_kind == IN_BATCH:
            self.left_in_batch += 1
        elif outcome.status in (BUDGET, INTERRUPTED, REPLAY_MISS) and not outcome.attempts:
            self.not_run += 1
        else:
            self.failed += 1


def interrupted_outcome(key: str) -> Outcome:
    """A call the Ctrl-C stopped before it was sent: not run, nothing spent."""
    return _not_run(key, INTERRUPTED, "the run was interrupted (Ctrl-C) before this call was sent")


def cut_off_outcome(
    key: str,
    *,
    attempts: int,
    possibly_billed_usd: float,
    sent_tries: int | None = None,
    billed_tries: int | None = None,
) -> Outcome:
    """A call still in flight when the Ctrl-C's grace ended: the provider may bill it."""
    return Outcome(
        key,
        INTERRUPTED,
        error="interrupted (Ctrl-C) while the call was in flight; it may be billed",
        error_kind=INTERRUPTED,
        attempts=attempts,
        possibly_billed_usd=possibly_billed_usd,
        sent_tries=sent_tries,
        billed_tries=billed_tries,
    )


def budget_outcome(key: str) -> Outcome:
    """A call the cost cap had no room for: not run, nothing spent."""
    return _not_run(key, BUDGET, "the cost cap was reached before this call could be reserved")


def _not_run(key: str, status: str, why: str) -> Outcome:
    return Outcome(key, status, error=f"not run: {why}", error_kind=status)
