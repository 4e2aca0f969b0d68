"""One evaluation run, independent of pytest (spec "Run lifecycle").

The plugin, the CLI and the MCP server drive this object. It composes the run's parts, each
in its own module: ``Foundations`` (settings.py: the settings and what follows from them,
the store, prices, endpoints, registry and batches), ``RunPlan`` (plan.py: what the run
will ask: suites, models, items, the cap, the estimate and the refusal before spending),
``RunDispatch`` (dispatching.py: how it asks: dispatchers, streaming, outcomes) and
``RunRecords`` (keeping.py: what it keeps: the answer records, the workers', run ids). Its
methods and attributes are the parts', by the same names, so a caller need not know which
part holds one; a new behaviour goes in its part, and here only its name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters.registry import AdapterRegistry
from ..run.batch import BatchSession
from ..run.dispatch import Dispatcher, Outcome, Planned, Progress
from ..run.endpoints import Endpoint
from ..run.prices import PriceTable
from ..run.records import AnswerRecord
from ..run.runtoken import new_run_token
from ..run.store import StoreBackend
from ..suite.loader import Suite
from .dispatching import RunDispatch
from .keeping import RunRecords

# Re-exported: the glue, the commands and finish import them from here.
from .plan import ItemSpec, RunPlan, has_criteria, models_hash, relative_to, spec_id
from .settings import Foundations, Settings, check_settings

__all__ = [
    "EvalSession",
    "ItemSpec",
    "Settings",
    "check_settings",
    "has_criteria",
    "models_hash",
    "relative_to",
    "spec_id",
]


class _Part:
    """The attribute ``name`` of the session's part ``part``, read and written through the
    session (``session.interrupted = True`` sets the dispatch's)."""

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __get__(self, session: Any, owner: type | None = None) -> Any:
        if session is None:
            return self
        return getattr(getattr(session, self.part), self.name)

    def __set__(self, session: Any, value: Any) -> None:
        setattr(getattr(session, self.part), self.name, value)


@dataclass
class EvalSession:
    settings: Settings
    rootdir: Path
    run_token: str = field(default_factory=new_run_token)

    def __post_init__(self) -> None:
        self.base = Foundations(self.settings, self.rootdir, self.run_token)
        self.plan = RunPlan(self.base)
        self.dispatching = RunDispatch(self.base, self.plan)
        self.kept = RunRecords(self.plan, self.dispatching)

    def close(self) -> None:
        try:
            self.dispatching.close()
        finally:
            self.base.close()

    # the settings and what follows from them (Foundations) ----------------------------
    suites = _Part("base", "suites")

    @property
    def home(self) -> Path:
        return self.base.home

    @property
    def store(self) -> StoreBackend:
        return self.base.store

    @property
    def prices(self) -> PriceTable:
        return self.base.prices

    @property
    def record_mode(self) -> str:
        return self.base.record_mode

    def endpoints(self) -> list[Endpoint]:
        return self.base.endpoints()

    def file_roots(self) -> tuple[Path, ...]:
        return self.base.file_roots()

    def rpm_limits(self) -> dict[str, int]:
        return self.base.rpm_limits()

    def default_registry(self) -> AdapterRegistry:
        return self.base.default_registry()

    def batching(self) -> BatchSession | None:
        return self.base.batching()

    # what the run will ask (RunPlan) ----------------------------------------------------
    checkers = _Part("plan", "checkers")
    estimate = _Part("plan", "estimate")
    cap_usd = _Part("plan", "cap_usd")
    cap_source = _Part("plan", "cap_source")
    cap_warning = _Part("plan", "cap_warning")
    subsets = _Part("plan", "subsets")

    def add_user_checks(self, checks: dict[str, Any]) -> None:
        self.plan.add_user_checks(checks)

    def load(self, path: Path) -> Suite:
        return self.plan.load(path)

    def recording_for(self, suite: Suite) -> Path | None:
        return self.plan.recording_for(suite)

    def models_for(self, suite: Suite) -> list[str]:
        return self.plan.models_for(suite)

    def note_selection(self, suite: Suite, selected: int) -> None:
        self.plan.note_selection(suite, selected)

    def specs_for(self, suite: Suite) -> list[ItemSpec]:
        return self.plan.specs_for(suite)

    def check_suffixes(self, suite: Suite, price_for: Callable[[str], Any]) -> None:
        self.plan.check_suffixes(suite, price_for)

    def resolve_cap(self) -> float:
        return self.plan.resolve_cap()

    def judge_model_for(self, suite: Suite) -> str | None:
        return self.plan.judge_model_for(suite)

    def jurors_for(self, suite: Suite) -> dict[str, tuple[str, ...]]:
        return self.plan.jurors_for(suite)

    def judge_models_for(self, suite: Suite) -> tuple[str, ...]:
        return self.plan.judge_models_for(suite)

    def preflight(
        self,
        dispatcher: Dispatcher,
        specs: Iterable[ItemSpec],
        judge_dispatcher: Dispatcher | None = None,
    ) -> list[Planned]:
        return self.plan.preflight(dispatcher, specs, judge_dispatcher)

    # how it asks (RunDispatch) -----------------------------------------------------------
    outcomes = _Part("dispatching", "outcomes")
    specs = _Part("dispatching", "specs")
    interrupted = _Part("dispatching", "interrupted")
    judge_registry = _Part("dispatching", "judge_registry")
    loop = _Part("dispatching", "loop")
    executed = _Part("dispatching", "executed")
    other_runs = _Part("dispatching", "other_runs")
    dispatchers = _Part("dispatching", "dispatchers")
    streaming = _Part("dispatching", "streaming")
    stream_progress = _Part("dispatching", "stream_progress")

    def dispatcher(
        self,
        registry: AdapterRegistry,
        *,
        concurrency_share: int = 1,
        on_progress: Callable[[Progress], None] | None = None,
        on_interrupt: Callable[[int, float], None] | None = None,
    ) -> Dispatcher:
        return self.dispatching.dispatcher(
            registry,
            concurrency_share=concurrency_share,
            on_progress=on_progress,
            on_interrupt=on_interrupt,
        )

    def batches_used(self) -> dict[str, Any] | None:
        return self.dispatching.batches_used()

    def latency_widths(self, models: Iterable[str]) -> dict[str, int]:
        return self.dispatching.latency_widths(models)

    def concurrency_used(self) -> dict[str, dict[str, Any]]:
        return self.dispatching.concurrency_used()

    def dispatch(
        self, dispatcher: Dispatcher, specs: list[ItemSpec], planned: list[Planned] | None = None
    ) -> dict[str, Outcome]:
        return self.dispatching.dispatch(dispatcher, specs, planned)

    def can_stream(self, specs: list[ItemSpec]) -> bool:
        return self.dispatching.can_stream(specs)

    def stream(
        self, dispatcher: Dispatcher, specs: list[ItemSpec], planned: list[Planned] | None
    ) -> None:
        self.dispatching.stream(dispatcher, specs, planned)

    def outcome_for(self, spec: ItemSpec) -> Outcome:
        return self.dispatching.outcome_for(spec)

    def finish_dispatch(self) -> None:
        self.dispatching.finish_dispatch()

    def execute_checks(self, specs: list[ItemSpec], outcomes: list[Outcome]) -> None:
        self.dispatching.execute_checks(specs, outcomes)

    # what it keeps (RunRecords) ----------------------------------------------------------
    records = _Part("kept", "records")
    unreported = _Part("kept", "unreported")
    workers_plan = _Part("kept", "workers_plan")
    check_errors = _Part("kept", "check_errors")

    def record_for(self, spec: ItemSpec, outcome: Outcome) -> AnswerRecord:
        return self.kept.record_for(spec, outcome)

    def add_record(self, record: AnswerRecord) -> None:
        self.kept.add_record(record)

    def unreported_records(self) -> list[AnswerRecord]:
        return self.kept.unreported_records()

    def records_from_workers(self) -> int:
        return self.kept.records_from_workers()

    def all_records(self) -> list[AnswerRecord]:
        return self.kept.all_records()

    def release_outcomes(self) -> None:
        self.kept.release_outcomes()

    def run_id(self, suite: Suite) -> str:
        return self.kept.run_id(suite)
