"""What a run keeps (spec "Run lifecycle"): an answer record per item, from the item that
ran or from the dispatch's outcome when none did (pytest stopped first, another xdist
worker ran it, or the workers never handed theirs over), and the run's id per suite."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..run.dispatch import BUDGET, ERROR, INTERRUPTED, OK, REPLAY_MISS, Dispatcher, Outcome, Planned
from ..run.records import ERROR as ERROR_OUTCOME
from ..run.records import (
    FAILED,
    NOT_RUN_BUDGET,
    NOT_RUN_INTERRUPTED,
    PASSED,
    AnswerRecord,
)
from ..run.records import REPLAY_MISS as REPLAY_MISS_OUTCOME
from ..scoring.checkers import UserCheckError
from ..scoring.item import score_answer
from ..suite.loader import Suite
from .dispatching import RunDispatch, shared_outcome
from .plan import ItemSpec, RunPlan, models_hash, spec_id


@dataclass
class RunRecords:
    """The answer records of a run: reported by its items, or made from the outcomes."""

    plan: RunPlan
    dispatching: RunDispatch
    records: list[AnswerRecord] = field(default_factory=list)
    # Records of dispatched answers whose items never ran, from xdist workers.
    unreported: list[AnswerRecord] = field(default_factory=list)
    # The xdist controller's preflight: its dispatcher, the selected items and their planned
    # requests (each worker dispatches them all), for ``records_from_workers``.
    workers_plan: tuple[Dispatcher, list[ItemSpec], list[Planned]] | None = None
    check_errors: dict[str, UserCheckError] = field(default_factory=dict)

    def record_for(self, spec: ItemSpec, outcome: Outcome) -> AnswerRecord:
        record = AnswerRecord(
            suite=spec.suite.name,
            suite_file=spec.suite.shown,
            task=spec.task.id,
            kind=spec.task.kind,
            case=spec.case.id,
            model=spec.model,
            repeat=spec.repeat,
            outcome=PASSED,
            **outcome.accounting(),
        )
        if outcome.status != OK or outcome.response is None:
            record.outcome = {
                ERROR: ERROR_OUTCOME,
                BUDGET: NOT_RUN_BUDGET,
                REPLAY_MISS: REPLAY_MISS_OUTCOME,
                INTERRUPTED: NOT_RUN_INTERRUPTED,
            }.get(outcome.status, ERROR_OUTCOME)
            record.error = outcome.error
            return record
        response = outcome.response
        record.text = response.text
        try:
            result = score_answer(
                response.text,
                spec.task.schema,
                spec.task.checks,
                spec.case,
                self.plan.checkers,
                task=spec.task.id,
                model=spec.model,
                executed=self.dispatching.executed.get(spec_id(spec)),
                refs=spec.task.schema_refs,
            )
        except UserCheckError as exc:
            self.check_errors[spec_id(spec)] = exc
            record.outcome, record.error = ERROR_OUTCOME, str(exc)
            return record
        record.score = result.score
        record.parsed = result.parsed
        record.checks = [check.to_dict() for check in result.checks]
        record.schema_mode = response.schema_mode
        record.finish_reason = response.finish_reason
        usage = response.usage
        record.usage_reported, record.usage_anomaly = usage.reported, usage.anomaly
        record.tokens = usage.token_counts()
        record.latency_s = response.latency_s
        record.width = response.width
        record.provider_request_id = response.provider_request_id
        if not result.passed:
            record.outcome = FAILED
        return record

    def add_record(self, record: AnswerRecord) -> None:
        self.records.append(record)

    def unreported_records(self) -> list[AnswerRecord]:
        """A record for every answer this process dispatched whose item reported nothing
        here (pytest stopped before it, or another xdist worker ran it)."""
        reported = {record.identity for record in self.records}
        records = []
        for key, outcome in self.dispatching.outcomes.items():
            spec = self.dispatching.specs[key]
            identity = (spec.suite.shown, spec.task.id, spec.case.id, spec.model, spec.repeat)
            if identity not in reported:
                record = self.record_for(spec, outcome)
                record.item_ran = False
                records.append(record)
        return records

    def records_from_workers(self) -> int:
        """The xdist controller, at session finish: a record (``item_ran`` false) for every
        selected item no worker's record reached, built from what the cache database says
        of its request (``Dispatcher.settled``), so the report counts every call any worker
        made: a Ctrl-C ends the controller's loop before the workers hand their records
        over. A request two items share is paid by the first, as in a worker. Returns how
        many records were added."""
        if self.workers_plan is None:
            return 0
        dispatcher, specs, planned = self.workers_plan
        have = {record.identity for record in [*self.records, *self.unreported]}
        lacking: list[tuple[ItemSpec, Planned, bool]] = []
        seen: set[str] = set()
        for spec, plan in zip(specs, planned, strict=True):
            identity = (spec.suite.shown, spec.task.id, spec.case.id, spec.model, spec.repeat)
            if identity not in have:
                lacking.append((spec, plan, plan.key in seen))
            seen.add(plan.key)
        if not lacking:
            return 0
        settled = dispatcher.settled([plan for _, plan, _ in lacking])
        outcomes = [shared_outcome(settled[plan.key], repeated) for _, plan, repeated in lacking]
        self.dispatching.execute_checks([spec for spec, _, _ in lacking], outcomes)
        for (spec, _, _), outcome in zip(lacking, outcomes, strict=True):
            record = self.record_for(spec, outcome)
            record.item_ran = False
            self.unreported.append(record)
        return len(lacking)

    def all_records(self) -> list[AnswerRecord]:
        """Every item's record once: the one its item reported, else the dispatch's own (so
        the report counts every call the run made, whichever items ran)."""
        by_identity = {}
        for record in [*self.records, *self.unreported_records(), *self.unreported]:
            by_identity.setdefault(record.identity, record)
        return list(by_identity.values())

    def release_outcomes(self) -> None:
        """Once every dispatched answer has its record (``all_records``), its outcome is not
        read again: letting the outcomes go before judging lowers a large run's peak (their
        responses, usages and keys were about 15 MB at 10,000 cases x 2 models)."""
        self.dispatching.outcomes.clear()
        self.dispatching.specs.clear()

    def run_id(self, suite: Suite) -> str:
        models = self.plan.models_for(suite)
        return f"{self.plan.base.run_token}-{suite.hash[:8]}-{models_hash(models)[:8]}"
