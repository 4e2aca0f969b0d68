"""How a run asks (spec "Run lifecycle"): its dispatchers (answers and judge, on the one
session loop), the answers dispatched at once or streamed while items run, their outcomes
by item, the execution checks of the answers that arrived, and what the dispatchers learned
(widths, back-offs, batches) for the report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..adapters.base import set_max_response_mb
from ..adapters.registry import AdapterRegistry
from ..run.concurrency import merged_concurrency
from ..run.dispatch import OK, Dispatcher, Outcome, Planned, Progress, Streaming
from ..run.loop import SessionLoop
from ..scoring.item import EXEC
from .plan import ItemSpec, RunPlan, spec_id
from .settings import Foundations


@dataclass
class RunDispatch:
    """The run's dispatchers and the outcomes they gave, by item (``spec_id``)."""

    base: Foundations
    plan: RunPlan
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    specs: dict[str, ItemSpec] = field(default_factory=dict)
    # Set when a Ctrl-C stopped a dispatch of this process.
    interrupted: bool = False
    judge_registry: AdapterRegistry | None = None
    # Every batch of the session runs on this loop: one HTTP client per provider throughout.
    loop: SessionLoop = field(default_factory=SessionLoop)
    executed: dict[str, dict[int, Any]] = field(default_factory=dict)
    # Other runs on the cache this run waited for: run token -> what they had committed.
    other_runs: dict[str, float] = field(default_factory=dict)
    # Every dispatcher this session built (answers, judge): their providers' widths.
    dispatchers: list[Dispatcher] = field(default_factory=list)
    # The answers' dispatch while items run (``stream``): None when it has ended or never ran.
    streaming: Streaming | None = None
    # spec id -> (its request's cache key, whether an earlier spec has the same request)
    _streamed: dict[str, tuple[str, bool]] = field(default_factory=dict)
    stream_progress: Progress | None = None

    def dispatcher(
        self,
        registry: AdapterRegistry,
        *,
        concurrency_share: int = 1,
        on_progress: Callable[[Progress], None] | None = None,
        on_interrupt: Callable[[int, float], None] | None = None,
    ) -> Dispatcher:
        set_max_response_mb(self.base.settings.max_response_mb)
        dispatcher = Dispatcher(
            registry=registry,
            store=self.base.store,
            prices=self.base.prices,
            run_token=self.base.run_token,
            budget_token=self.base.budget_token,
            cap_usd=self.plan.resolve_cap(),
            record=self.base.record_mode,
            concurrency=max(1, self.base.settings.concurrency.limit // max(1, concurrency_share)),
            retries=self.base.settings.retries,
            rpm=self.base.rpm_limits(),
            provider_concurrency={
                e.name: e.concurrency for e in self.base.endpoints() if e.concurrency
            },
            adaptive=not self.base.settings.concurrency.fixed,
            fixed_providers=frozenset(e.name for e in self.base.endpoints() if e.concurrency_fixed),
            on_progress=on_progress,
            loop=self.loop,
            on_interrupt=on_interrupt,
            batch=self.base.batching(),
            start_width=self._learned_width,
        )
        self.dispatchers.append(dispatcher)
        return dispatcher

    def _learned_width(self, provider: str) -> int | None:
        """The width the run's latest dispatcher to call ``provider`` ended at: the server
        is the same one, so a later dispatcher (each judging phase has its own) starts
        there instead of slow-starting again."""
        for earlier in reversed(self.dispatchers):
            width = earlier.learned_width(provider)
            if width is not None:
                return width
        return None

    def batches_used(self) -> dict[str, Any] | None:
        """report.json ``batches``: which calls went by batch and which online, the batches,
        and the calls still in one when the run stopped waiting (None: batching off)."""
        batch = self.base.batching()
        return batch.to_json() if batch is not None else None

    def latency_widths(self, models: Iterable[str]) -> dict[str, int]:
        """Per model whose provider's capacity this process knows: the width its scorecard
        latency is taken within. The narrowest over the dispatchers (the judge's starts at
        the answers' last width, which may be wider than they proved)."""
        known: dict[str, int] = {}
        for dispatcher in self.dispatchers:
            for provider, width in dispatcher.latency_widths().items():
                known[provider] = min(width, known.get(provider, width))
        provider_for = self.base.default_registry().provider_for
        return {model: known[p] for model in models if (p := provider_for(model)) in known}

    def concurrency_used(self) -> dict[str, dict[str, Any]]:
        """report.json ``concurrency``: per provider called in this process, the widths its
        dispatchers used (lowest, highest, the last one's final) and their back-offs."""
        return merged_concurrency(d.concurrency_used() for d in self.dispatchers)

    def close(self) -> None:
        self.loop.close()

    def dispatch(
        self, dispatcher: Dispatcher, specs: list[ItemSpec], planned: list[Planned] | None = None
    ) -> dict[str, Outcome]:
        if planned is None:
            planned = dispatcher.plan(spec.request() for spec in specs)
        outcomes = dispatcher.run_each(planned)
        self.other_runs.update(dispatcher.other_runs)
        self.interrupted = self.interrupted or dispatcher.interrupted
        for spec, outcome in zip(specs, outcomes, strict=True):
            key = spec_id(spec)
            self.outcomes[key] = outcome
            self.specs[key] = spec
        self.execute_checks(specs, outcomes)
        return self.outcomes

    def can_stream(self, specs: list[ItemSpec]) -> bool:
        """Whether the answers can arrive while items run: not when an execution check must
        see every answer first (they run together on a bounded pool)."""
        return self.loop is not None and not any(
            check.name == EXEC for spec in specs for check in spec.task.checks
        )

    def stream(
        self, dispatcher: Dispatcher, specs: list[ItemSpec], planned: list[Planned] | None
    ) -> None:
        """Start the answers' dispatch and return at once: ``outcome_for`` waits for one,
        ``finish_dispatch`` for all. A request that two items share is sent and paid once;
        the later item's outcome is cached at no cost, as ``Dispatcher.run_each`` gives it."""
        if planned is None:
            planned = dispatcher.plan(spec.request() for spec in specs)
        seen: set[str] = set()
        for spec, plan in zip(specs, planned, strict=True):
            key = spec_id(spec)
            self.specs[key] = spec
            self._streamed[key] = (plan.key, plan.key in seen)
            seen.add(plan.key)
        self.stream_progress = Progress(total=len(seen))
        self.streaming = dispatcher.stream(planned, self.stream_progress)

    def outcome_for(self, spec: ItemSpec) -> Outcome:
        """The item's outcome, waiting for it while the dispatch streams."""
        key = spec_id(spec)
        outcome = self.outcomes.get(key)
        if outcome is None and self.streaming is not None:
            cache_key, repeated = self._streamed[key]
            outcome = shared_outcome(self.streaming.wait(cache_key), repeated)
            self.outcomes[key] = outcome
            self.interrupted = self.interrupted or self.streaming.dispatcher.interrupted
        if outcome is None:
            raise KeyError(key)
        return outcome

    def finish_dispatch(self) -> None:
        """Wait for the streamed dispatch to end (the calls in flight land in the cache) and
        take every outcome, also those of items pytest never ran."""
        streaming, self.streaming = self.streaming, None
        if streaming is None:
            return
        arrived = streaming.finish()
        self.other_runs.update(streaming.dispatcher.other_runs)
        self.interrupted = self.interrupted or streaming.dispatcher.interrupted
        for key, (cache_key, repeated) in self._streamed.items():
            if key not in self.outcomes and cache_key in arrived:
                self.outcomes[key] = shared_outcome(arrived[cache_key], repeated)
        self._streamed.clear()

    def execute_checks(self, specs: list[ItemSpec], outcomes: list[Outcome]) -> None:
        """Every execution check of the answers that arrived, at once on the bounded pool,
        before any item reads its record. Never cached: they run on every run."""
        from ..scoring.execution import ExecJob, run_exec_checks

        jobs = [
            ExecJob((spec_id(spec), index), outcome.response.text, check.options,
                    spec.case.reference(check))
            for spec, outcome in zip(specs, outcomes, strict=True)
            if outcome.status == OK and outcome.response is not None
            and outcome.response.text.strip()
            for index, check in enumerate(spec.task.checks)
            if check.name == EXEC
        ]  # fmt: skip
        for (item, index), check in run_exec_checks(jobs).items():
            self.executed.setdefault(item, {})[index] = check


def shared_outcome(outcome: Outcome, repeated: bool) -> Outcome:
    """The outcome of a request an earlier item of the run made too: cached, at no cost."""
    if repeated and outcome.status == OK:
        return dataclasses.replace(outcome, cached=True, cost_usd=0.0)
    return outcome
