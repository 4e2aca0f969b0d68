"""Per-item answer records: what one task x case x model produced (spec: "answers.jsonl")."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

PASSED, FAILED, ERROR = "passed", "failed", "error"
NOT_RUN_BUDGET, REPLAY_MISS = "not_run_budget", "replay_miss"
NOT_RUN_INTERRUPTED = "not_run_interrupted"


def with_repeat(model: str, repeat: int) -> str:
    """The model as an item's id shows it: ``fake/alpha``, then ``fake/alpha#r1``... for the
    later repeats (repeat 0 keeps the id of a run without repeats)."""
    return f"{model}#r{repeat}" if repeat else model


@dataclass(kw_only=True)
class CallAccounting:
    """What every kept record of a call carries about it (an answer, a judge pass, a
    criterion verdict): its cache key, how it was paid for, its tries, its redactions. Filled
    from the dispatcher's outcome (``Outcome.accounting``); keyword-only, so the records'
    own fields keep their places."""

    key: str = ""
    cached: bool = False
    cost_usd: float = 0.0
    # What the call would cost if made now: its usage at today's price table.
    cost_if_uncached_usd: float = 0.0
    # A cached answer's cost as recorded when it was paid (None: paid this run, at today's
    # prices): the two differ when the price table changed in between.
    recorded_cost_usd: float | None = None
    # Worst case of tries that were sent and failed: the provider may have billed them.
    possibly_billed_usd: float = 0.0
    attempts: int = 0
    redactions: int = 0
    # Tries that reached a server and tries that may be billed (spec 6); None where the
    # dispatch did not count them (a batch, a claim settled by another process).
    sent_tries: int | None = None
    billed_tries: int | None = None

    @property
    def reached_server(self) -> bool:
        """A call made: one of its tries reached a server (uncounted: any try)."""
        tries = self.attempts if self.sent_tries is None else self.sent_tries
        return tries > 0 and not self.cached

    @property
    def tries_possibly_billed(self) -> int:
        """Tries sent that failed and may be billed (uncounted: one if any was)."""
        if self.billed_tries is not None:
            return self.billed_tries
        return 1 if self.possibly_billed_usd else 0

    @property
    def cost_as_recorded_usd(self) -> float:
        """The call's cost as the cache recorded it (paid this run: what it cost now)."""
        recorded = self.recorded_cost_usd
        return self.cost_if_uncached_usd if recorded is None else recorded


ACCOUNTING_FIELDS = tuple(f.name for f in fields(CallAccounting))


@dataclass
class AnswerRecord(CallAccounting):
    suite: str
    suite_file: str
    task: str
    kind: str
    case: str
    model: str
    outcome: str
    text: str | None = None
    parsed: Any = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    score: float | None = None  # in [0, 1] when an answer arrived (spec: "Checks")
    schema_mode: str | None = None
    finish_reason: str | None = None
    tokens: dict[str, int] = field(default_factory=dict)
    usage_reported: bool = True
    # What the dispatcher clamped when the provider reported impossible token counts.
    usage_anomaly: str | None = None
    latency_s: float | None = None
    # How many calls its provider could have out at once when it was sent (None: unknown).
    width: int | None = None
    error: str | None = None
    provider_request_id: str | None = None
    # False for an answer dispatched for an item pytest never ran (-x, Ctrl-C): the report
    # still counts its call and checks its answer.
    item_ran: bool = True
    # Which of the --evalmine-repeat answers of this task x case x model (0 = the first).
    repeat: int = 0

    @property
    def identity(self) -> tuple[str, str, str, str, int]:
        return (self.suite_file, self.task, self.case, self.model, self.repeat)

    @property
    def shown_model(self) -> str:
        return with_repeat(self.model, self.repeat)

    def to_dict(self) -> dict[str, Any]:
        """The record as answers.jsonl holds it. Shares ``parsed``, ``checks`` and ``tokens``
        with the record (dataclasses.asdict's deep copy cost more than the rest of writing
        the reports): for serialising, not for editing. A copy of the instance's ``__dict__``
        (its fields, in their order, as ``__init__`` set them): a tenth of the time of
        reading them one by one, and report.html reads every record five times."""
        data = self.__dict__.copy()
        if len(data) != len(_FIELDS):  # an attribute set on the record beside its fields
            data = {name: getattr(self, name) for name in _FIELDS}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnswerRecord:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def check_passed(self, name: str) -> bool | None:
        return next((c["passed"] for c in self.checks if c["name"] == name), None)


_FIELDS = tuple(f.name for f in fields(AnswerRecord))
