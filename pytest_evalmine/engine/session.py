"""One evaluation run, independent of pytest (spec: "Run lifecycle").

The plugin, the CLI and the MCP server drive this object: it loads suites, turns
task x case x model into requests, plans and estimates them, dispatches through the one
``Dispatcher``, turns outcomes into answer records and writes the reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..adapters.base import CHARS_PER_TOKEN, Request, set_max_response_mb
from ..adapters.builtin import default_registry
from ..adapters.registry import AdapterRegistry
from ..errors import EvalmineError, PriceError, RefusedError
from ..judging.criteria import criterion_request
from ..judging.judge import (
    JUDGE_BATCH_PASSES,
    judge_request,
    judge_system,
    judge_text_chars,
    task_prompt,
)
from ..judging.pairs import BASELINE_FIRST, CANDIDATE_FIRST, Pair
from ..options import (
    cache_path,
    cap_from,
    check_values,
    evalmine_home,
    project_folders,
    record_mode,
)
from ..reports.render import money
from ..run.batch import BatchSession, parse_batch
from ..run.concurrency import merged_concurrency
from ..run.dispatch import (
    BUDGET,
    ERROR,
    INTERRUPTED,
    OK,
    REPLAY_MISS,
    Dispatcher,
    Estimate,
    Outcome,
    Planned,
    Progress,
    Streaming,
)
from ..run.endpoints import Endpoint, base_urls_from, from_suite, parse_option
from ..run.loop import SessionLoop
from ..run.prices import PriceTable, load_prices
from ..run.records import ERROR as ERROR_OUTCOME
from ..run.records import (
    FAILED,
    NOT_RUN_BUDGET,
    NOT_RUN_INTERRUPTED,
    PASSED,
    AnswerRecord,
    with_repeat,
)
from ..run.records import REPLAY_MISS as REPLAY_MISS_OUTCOME
from ..run.runtoken import new_run_token
from ..run.store import Store
from ..scoring.checkers import BUILTIN, CheckerInfo, UserCheckError, user_checker
from ..scoring.item import EXEC, score_answer, validate_checks
from ..suite.canonical import sha256_hex
from ..suite.loader import Case, Params, Suite, Task, load_suite, model_problem
from ..suite.variants import suffix_problem, undeclared_suffix


@dataclass(frozen=True)
class ItemSpec:
    """One collected item: a task's case asked of one contender, a model or a model with
    one of the suite's variants (``MODEL@VARIANT``, spec "Variants"). The run keys answers,
    pairs, labels and reports by the contender string ``model``; the adapter and the price
    see ``base_model``."""

    suite: Suite
    task: Task
    case: Case
    model: str
    repeat: int = 0
    variant: str | None = None

    @property
    def name(self) -> str:
        return f"{self.case.id}[{with_repeat(self.model, self.repeat)}]"

    @property
    def base_model(self) -> str:
        """The model string without the variant: what the adapter is asked, priced as."""
        return self.model.removesuffix(f"@{self.variant}") if self.variant else self.model

    @property
    def params(self) -> Params:
        """The task's parameters, or its variant's."""
        return self.task.variants[self.variant].params if self.variant else self.task.params

    def request(self) -> Request:
        rendered = self.suite.render(self.task, self.case, self.variant)
        params = self.params
        return Request(
            model=self.base_model,
            prompt=rendered.prompt,
            system=rendered.system,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            stop=params.stop,
            schema=self.task.schema,
            timeout_s=params.timeout_s,
            repeat=self.repeat,
            schema_mode=self.task.variants[self.variant].schema_mode if self.variant else None,
            context={
                "purpose": "answer",
                "suite": self.suite.name,
                "task": self.task.id,
                "case": self.case.id,
                "vars": dict(self.case.vars),
                "repeat": self.repeat,
                "variant": self.variant,
            },
        )


@dataclass
class Settings:
    """Option values by name, as ``options.resolve`` returns them."""

    values: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


def check_settings(settings: Settings) -> None:
    """Parse every value a run reads from options, ini keys and the environment once, at
    start-up, so that a bad one is one line before anything runs (``EvalmineError``)."""
    try:
        check_values(settings.values)
    except ValueError as exc:
        raise EvalmineError(str(exc)) from None
    session = EvalSession(settings=settings, rootdir=Path("."))
    session.rpm_limits()
    session.endpoints()
    session.default_registry()
    session.batching()


@dataclass
class EvalSession:
    settings: Settings
    rootdir: Path
    run_token: str = field(default_factory=new_run_token)
    suites: dict[Path, Suite] = field(default_factory=dict)
    records: list[AnswerRecord] = field(default_factory=list)
    estimate: Estimate | None = None
    cap_usd: float | None = None
    cap_source: str = ""
    # Set by the preflight when the estimate fits the cap but the worst case does not.
    cap_warning: str | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    specs: dict[str, ItemSpec] = field(default_factory=dict)
    # Records of dispatched answers whose items never ran, from xdist workers.
    unreported: list[AnswerRecord] = field(default_factory=list)
    # The xdist controller's preflight: its dispatcher, the selected items and their planned
    # requests (each worker dispatches them all), for ``records_from_workers``.
    workers_plan: tuple[Dispatcher, list[ItemSpec], list[Planned]] | None = None
    # Set when a Ctrl-C stopped a dispatch of this process.
    interrupted: bool = False
    # Suite files whose items were not all selected (-k, -m, --lf, --deselect, node ids).
    subsets: set[Path] = field(default_factory=set)
    judge_registry: AdapterRegistry | None = None
    # Every batch of the session runs on this loop: one HTTP client per provider throughout.
    loop: SessionLoop = field(default_factory=SessionLoop)
    checkers: dict[str, CheckerInfo] = field(default_factory=lambda: dict(BUILTIN))
    check_errors: dict[str, UserCheckError] = field(default_factory=dict)
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
    _store: Store | None = None
    _prices: PriceTable | None = None
    _registry: AdapterRegistry | None = None

    # configuration --------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return evalmine_home(self.rootdir)

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(cache_path(self.rootdir))
        return self._store

    @property
    def prices(self) -> PriceTable:
        """The shipped table, the user's extra table, then the endpoints' declared costs."""
        if self._prices is None:
            extra = self.settings.prices
            table = load_prices(self.rootdir / extra if extra else None)
            rows = tuple(row for e in self.endpoints() if (row := e.price_row()) is not None)
            self._prices = table.with_rows(rows)
        return self._prices

    def endpoints(self) -> list[Endpoint]:
        """Endpoints declared by the loaded suites, then by options (which win by name)."""
        by_name = {
            name: from_suite(name, raw)
            for suite in self.suites.values()
            for name, raw in sorted(suite.endpoints.items())
        }
        for spec in self.settings.endpoint:
            endpoint = parse_option(spec)
            by_name[endpoint.name] = endpoint
        return [by_name[name] for name in sorted(by_name)]

    def file_roots(self) -> tuple[Path, ...]:
        """The folders a suite's referenced files may lie in besides its own (spec "Suite
        file", paths): the rootdir and the ini key ``evalmine_data_roots``'s folders."""
        return project_folders(self.rootdir, self.settings.data_roots)

    def rpm_limits(self) -> dict[str, int]:
        limits = {e.name: e.rpm for e in self.endpoints() if e.rpm}
        for spec in self.settings.rpm:
            provider, sep, value = spec.partition("=")
            if not sep or not value.isdecimal() or int(value) < 1:
                raise EvalmineError(f"--evalmine-rpm={spec}: expected PROVIDER=N with N >= 1")
            limits[provider] = int(value)
        return limits

    @property
    def record_mode(self) -> str:
        try:
            return record_mode(self.settings.no_cache, str(self.settings.record))
        except ValueError as exc:
            raise EvalmineError(str(exc)) from None

    def default_registry(self) -> AdapterRegistry:
        """The built-in adapters, one registry per session: answers and judge share each
        provider's adapter, so its look-ups run once and its connections serve both."""
        if self._registry is None:
            self._registry = self._new_registry()
        else:
            # Suites loaded since it was built bring their own endpoints (the xdist
            # controller builds it before it loads any); what is registered already stays.
            for endpoint in self.endpoints():
                if endpoint.name not in self._registry.factories:
                    self._registry.register(endpoint.name, endpoint.factory())
        return self._registry

    def _new_registry(self) -> AdapterRegistry:
        from ..adapters.fake import FakeOptions, parse_faults

        try:
            faults = parse_faults(self.settings.fake_fault)
        except ValueError as exc:
            raise EvalmineError(str(exc)) from None
        options = FakeOptions(latency_s=self.settings.fake_latency, faults=faults)
        return default_registry(
            fake_everything=self.settings.fake,
            fake_options=options,
            endpoints=self.endpoints(),
            base_urls=base_urls_from(),
        )

    def close(self) -> None:
        try:
            self.loop.close()
        finally:
            if self._store is not None:
                self._store.close()

    # suites and items -------------------------------------------------------------------
    def add_user_checks(self, checks: dict[str, Any]) -> None:
        """Checks from conftest hooks, by name. A name of a built-in or reserved check, or
        one name given two different functions, is refused."""
        from ..scoring.checkers import RESERVED

        for name, function in checks.items():
            if name in BUILTIN or name in RESERVED:
                raise EvalmineError(
                    f"pytest_evalmine_checks: {name!r} is a built-in check name; choose another"
                )
            known = self.checkers.get(name)
            # The same hook answers again for every suite file collected: not a conflict.
            if known is not None and known.source is not function:
                raise EvalmineError(f"pytest_evalmine_checks: two hooks define the check {name!r}")
            self.checkers[name] = CheckerInfo(
                user_checker(name, function), needs_reference=False, builtin=False, source=function
            )

    def load(self, path: Path) -> Suite:
        path = Path(path)
        if path not in self.suites:
            shown = relative_to(path, self.rootdir)
            suite = load_suite(path, shown=shown, roots=self.file_roots())
            validate_checks(suite, self.checkers, shown)
            self.suites[path] = suite
            recording = self.recording_for(suite)
            if recording is not None and self.record_mode != "all":
                from .recording import read_recording

                read_recording(self.store, recording)
        return self.suites[path]

    def recording_for(self, suite: Suite) -> Path | None:
        """The suite's recording file when ``--evalmine-recording`` asks for one."""
        setting = self.settings.values.get("recording")
        if not setting:
            return None
        from .recording import recording_path

        return recording_path(setting, suite.path, suite.name, self.rootdir)

    def models_for(self, suite: Suite) -> list[str]:
        """Option models, else the suite's; ``--evalmine-baseline`` moves one to the front.
        An entry may be ``MODEL@VARIANT`` (a contender) for a variant every task has."""
        models = (
            [m.strip() for m in self.settings.models.split(",") if m.strip()]
            if self.settings.models
            else list(suite.models)
        )
        if not models:
            raise EvalmineError(
                f"{suite.path}: no models: give --evalmine-models or a 'models' list in the suite"
            )
        if len(set(models)) != len(models):
            raise EvalmineError(f"model list names a model twice: {', '.join(models)}")
        for model in models:
            problem = model_problem(suite.contender(model)[0]) or suite.variant_problem(model)
            if problem is not None:
                raise EvalmineError(f"--evalmine-models: {problem}")
        baseline = self.settings.baseline
        if baseline:
            if baseline not in models:
                raise EvalmineError(f"baseline {baseline!r} is not among the models {models}")
            models.remove(baseline)
            models.insert(0, baseline)
        return models

    def note_selection(self, suite: Suite, selected: int) -> None:
        """Remember whether this run selected every item of ``suite``."""
        if selected < len(self.specs_for(suite)):
            self.subsets.add(suite.path)

    def specs_for(self, suite: Suite) -> list[ItemSpec]:
        """Items in file order of tasks and cases (the first ``--evalmine-limit`` of each
        task), then model order, then repeat (deterministic for xdist)."""
        contenders = [(model, suite.contender(model)[1]) for model in self.models_for(suite)]
        limit = self.settings.limit
        return [
            ItemSpec(suite, task, case, model, repeat, variant)
            for task in suite.tasks
            for case in (task.cases[:limit] if limit else task.cases)
            for model, variant in contenders
            for repeat in range(self.settings.repeat)
        ]

    def check_suffixes(self, suite: Suite, price_for: Callable[[str], Any]) -> None:
        """A model string ending in ``@SUFFIX`` whose suffix is not one of the suite's
        variants must be a model of its own (``gw/claude-sonnet-4@20250514``): one whose
        price (``price_for``, as planning resolves it) is found nowhere is refused naming the
        suite's variants, the suffix may have been meant as one."""
        for model in self.models_for(suite):
            if undeclared_suffix(model, suite.variant_names) is None:
                continue
            try:
                price_for(model)
            except EvalmineError as exc:
                problem = suffix_problem(model, suite.variant_names, str(exc))
                kind = PriceError if isinstance(exc, PriceError) else EvalmineError
                raise kind(problem) from None

    def resolve_cap(self) -> float:
        if self.cap_usd is None:
            limits = [s.max_cost_usd for s in self.suites.values() if s.max_cost_usd is not None]
            try:
                self.cap_usd, self.cap_source = cap_from(self.settings.max_cost, limits)
            except ValueError as exc:
                raise EvalmineError(str(exc)) from None
        return self.cap_usd

    # dispatch ----------------------------------------------------------------------------
    def dispatcher(
        self,
        registry: AdapterRegistry,
        *,
        concurrency_share: int = 1,
        on_progress: Callable[[Progress], None] | None = None,
        on_interrupt: Callable[[int, float], None] | None = None,
    ) -> Dispatcher:
        set_max_response_mb(self.settings.max_response_mb)
        dispatcher = Dispatcher(
            registry=registry,
            store=self.store,
            prices=self.prices,
            run_token=self.run_token,
            cap_usd=self.resolve_cap(),
            record=self.record_mode,
            concurrency=max(1, self.settings.concurrency.limit // max(1, concurrency_share)),
            retries=self.settings.retries,
            rpm=self.rpm_limits(),
            provider_concurrency={e.name: e.concurrency for e in self.endpoints() if e.concurrency},
            adaptive=not self.settings.concurrency.fixed,
            fixed_providers=frozenset(e.name for e in self.endpoints() if e.concurrency_fixed),
            on_progress=on_progress,
            loop=self.loop,
            on_interrupt=on_interrupt,
            batch=self.batching(),
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

    def batching(self) -> BatchSession | None:
        """The run's provider batches (``--evalmine-batch``), shared by the answers' and the
        judge's dispatchers, or None: every call online. Read once, at the first call."""
        return self._batch_session

    @cached_property
    def _batch_session(self) -> BatchSession | None:
        spec = self.settings.values.get("batch")
        if not spec:  # a suite's ``batch: true`` (or its own value) when the option is off
            asked = [s.batch for s in self.suites.values() if s.batch]
            spec = next((a for a in asked if isinstance(a, str)), "on" if asked else None)
        settings = parse_batch(spec, self.settings.values.get("batch_wait"))
        return BatchSession(settings) if settings is not None else None

    def batches_used(self) -> dict[str, Any] | None:
        """report.json ``batches``: which calls went by batch and which online, the batches,
        and the calls still in one when the run stopped waiting (None: batching off)."""
        batch = self.batching()
        return batch.to_json() if batch is not None else None

    def latency_widths(self, models: Iterable[str]) -> dict[str, int]:
        """Per model whose provider's capacity this process knows: the width its scorecard
        latency is taken within. The narrowest over the dispatchers (the judge's starts at
        the answers' last width, which may be wider than they proved)."""
        known: dict[str, int] = {}
        for dispatcher in self.dispatchers:
            for provider, width in dispatcher.latency_widths().items():
                known[provider] = min(width, known.get(provider, width))
        provider_for = self.default_registry().provider_for
        return {model: known[p] for model in models if (p := provider_for(model)) in known}

    def concurrency_used(self) -> dict[str, dict[str, Any]]:
        """report.json ``concurrency``: per provider called in this process, the widths its
        dispatchers used (lowest, highest, the last one's final) and their back-offs."""
        return merged_concurrency(d.concurrency_used() for d in self.dispatchers)

    def judge_model_for(self, suite: Suite) -> str | None:
        if self.settings.judge:
            problem = model_problem(self.settings.judge)
            if problem is not None:
                raise EvalmineError(f"--evalmine-judge: {problem}")
        return self.settings.judge or suite.judge.model

    def preflight(
        self,
        dispatcher: Dispatcher,
        specs: Iterable[ItemSpec],
        judge_dispatcher: Dispatcher | None = None,
    ) -> list[Planned]:
        """Resolve every price and adapter (judge included) and refuse (``RefusedError``)
        when answers plus judge calls are estimated over what is left of the cap. Returns the
        planned answer requests, for ``dispatch`` to send without planning them again."""
        specs = list(specs)
        judging_dispatcher = judge_dispatcher or dispatcher
        try:
            suites = {spec.suite.path: spec.suite for spec in specs}.values()
            judges = [
                model
                for suite in suites
                if (model := self.judge_model_for(suite))
                and (len(self.models_for(suite)) > 1 or has_criteria(suite))
            ]
            for suite in suites:
                self.check_suffixes(suite, dispatcher.price_for)
            # Every missing key of the run in one line, answers and judge alike.
            missing = dispatcher.unready(spec.base_model for spec in specs)
            missing += judging_dispatcher.unready(judges)
            if missing:
                raise EvalmineError("; ".join(dict.fromkeys(missing)))
            planned = dispatcher.plan(spec.request() for spec in specs)
            judging = self._judge_estimate(specs, planned, dispatcher, judging_dispatcher)
        except EvalmineError as exc:  # an unpriced model, or a provider without an adapter
            raise RefusedError(f"refused before spending: {exc}") from None
        answers = dispatcher.estimate(planned)
        self.estimate = estimate = answers + judging
        available = dispatcher.cap_usd - estimate.already_committed_usd
        if estimate.cost_usd > available:
            committed = (
                f" after {money(estimate.already_committed_usd)} already committed"
                if estimate.already_committed_usd
                else ""
            )
            raise RefusedError(
                f"refused before spending: {answers.uncached} uncached answer call(s) and "
                f"{judging.uncached} judge call(s) of this selection are estimated at "
                f"{money(estimate.cost_usd)} (every answer at max_tokens), over the "
                f"{money(available)} left of the cap of {money(dispatcher.cap_usd)} "
                f"(from {self.cap_source}){committed}; {estimate.cached} call(s) are cached. "
                "Raise the cap, lower max_tokens or select fewer items."
            )
        if estimate.worst_case_usd > available:
            self.cap_warning = (
                f"evalmine: warning: the cap may not cover the worst case: "
                f"{estimate.uncached} uncached call(s) are estimated at "
                f"{money(estimate.cost_usd)} but may cost up to "
                f"{money(estimate.worst_case_usd)} (every input byte a token, every answer at "
                f"max_tokens), over the {money(available)} left of the cap of "
                f"{money(dispatcher.cap_usd)} (from {self.cap_source}); if answers run long "
                f"the run stops short with exit 11. A cap of "
                f"{money(estimate.worst_case_usd + estimate.already_committed_usd)} covers "
                "the worst case."
            )
        return planned

    def _judge_estimate(
        self,
        specs: list[ItemSpec],
        planned: list[Planned],
        dispatcher: Dispatcher,
        judging: Dispatcher,
    ) -> Estimate:
        """The judge calls this selection will need: two per pair and one per answer per
        binary criterion. A call whose answers are cached is built from them, so a fully
        cached rerun estimates its judge calls as cached too; any other call is new and
        priced from sizes, an answer not yet cached assumed to fill max_tokens (about four
        characters a token)."""
        from ..judging.pairs import model_pairs

        reads = dispatcher.record != "all"
        # The cached first answers, in a few queries (judges see repeat 0 only).
        first = [plan.key for spec, plan in zip(specs, planned, strict=True) if not spec.repeat]
        cached = self.store.answers_of(first) if reads else {}
        # Per item: the cached answer's text, or None, and the answer's length for sizing;
        # for the pairs, the text as the pairwise judge sees it (its checks' outcome added).
        answers: dict[tuple[Path, str, str, str], tuple[str | None, int]] = {}
        judged: dict[tuple[Path, str, str, str], tuple[str | None, int]] = {}
        # Only a task the pairwise judge will see needs its answers as it sees them (their
        # checks run for that): a suite with a judge and two models, a task with judge on.
        pairwise = {
            path: self.judge_model_for(suite) is not None and len(self.models_for(suite)) >= 2
            for path, suite in {spec.suite.path: spec.suite for spec in specs}.items()
        }
        for spec, plan in zip(specs, planned, strict=True):
            if spec.repeat:
                continue  # judges see the first answers (repeat 0) only
            hit = cached.get(plan.key)
            key = (spec.suite.path, spec.task.id, spec.case.id, spec.model)
            if hit is not None:
                answers[key] = (hit.response.text, len(hit.response.text))
                if pairwise[spec.suite.path] and spec.task.judge:
                    seen = self._as_judged(spec, hit.response.text)
                    judged[key] = (seen, len(seen or hit.response.text))
            else:
                answers[key] = judged[key] = (None, CHARS_PER_TOKEN * spec.params.max_tokens)
        orders = (BASELINE_FIRST, CANDIDATE_FIRST)
        # Requests, or a pair whose two judge calls are built only when their part is
        # estimated (``estimate_requests``): a warm 10,000-case rerun's 20,000 judge
        # requests, all built at once, were its largest thing in memory.
        buildable: list[Request | _PairCalls] = []
        estimate = Estimate(0, 0, 0, 0.0, 0.0)
        for suite in {spec.suite.path: spec.suite for spec in specs}.values():
            judge_model = self.judge_model_for(suite)
            models = self.models_for(suite)
            if judge_model is None:
                continue
            built, sized_criteria = _criteria_calls(suite, judge_model, models, answers, judging)
            buildable += built
            estimate = estimate + sized_criteria
            if len(models) < 2:
                continue
            sized: list[int] = []
            like: Planned | None = None
            for task in suite.tasks:
                if not task.judge:
                    continue
                system = judge_system(suite, task.id)
                for case in task.cases:
                    # judge.pairs: all judges every two models, both orders each
                    for baseline, candidate in model_pairs(models, suite.judge.pairs):
                        base = judged.get((suite.path, task.id, case.id, baseline))
                        cand = judged.get((suite.path, task.id, case.id, candidate))
                        if base is None or cand is None:
                            continue
                        if base[0] is not None and cand[0] is not None:
                            calls = (judge_model, suite, task.id, case.id, baseline, candidate)
                            buildable.append(_PairCalls(*calls, base[0], cand[0], system))
                            continue
                        pair = Pair(suite.name, task.id, case.id, baseline, candidate)
                        if like is None:  # resolves the judge's adapter and price
                            empty = {baseline: "", candidate: ""}
                            request = judge_request(judge_model, suite, pair, orders[0], empty)
                            like = judging.plan([request])[0]
                        chars = judge_text_chars(suite, pair, base[1] + cand[1], system=system)
                        sized += [chars] * len(orders)
            if like is not None:
                estimate = estimate + judging.estimate_by_size(like, sized)
        requests = (
            call
            for entry in buildable
            for call in (entry.requests() if isinstance(entry, _PairCalls) else (entry,))
        )
        return estimate + judging.estimate_requests(requests, JUDGE_BATCH_PASSES)

    def _as_judged(self, spec: ItemSpec, text: str) -> str | None:
        """A cached answer as the pairwise judge will see it (``with_check_outcome``), so that
        a rerun's judge calls are estimated as the cached calls they are; None (sized as
        new) when that needs an execution check or a check of the user's: those run with
        the items, never for an estimate."""
        from ..judging.judge import judged_text

        checks = spec.task.checks
        if any(c.name == EXEC or c.name not in BUILTIN for c in checks):
            return None
        if not checks:
            return text
        result = score_answer(
            text,
            spec.task.schema,
            checks,
            spec.case,
            self.checkers,
            task=spec.task.id,
            model=spec.model,
            refs=spec.task.schema_refs,
        )
        return judged_text(text, [check.to_dict() for check in result.checks])

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
            outcome = self._shared(self.streaming.wait(cache_key), repeated)
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
                self.outcomes[key] = self._shared(arrived[cache_key], repeated)
        self._streamed.clear()

    @staticmethod
    def _shared(outcome: Outcome, repeated: bool) -> Outcome:
        if repeated and outcome.status == OK:
            return dataclasses.replace(outcome, cached=True, cost_usd=0.0)
        return outcome

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

    # records ----------------------------------------------------------------------------
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
                self.checkers,
                task=spec.task.id,
                model=spec.model,
                executed=self.executed.get(spec_id(spec)),
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
        for key, outcome in self.outcomes.items():
            spec = self.specs[key]
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
        outcomes = [self._shared(settled[plan.key], repeated) for _, plan, repeated in lacking]
        self.execute_checks([spec for spec, _, _ in lacking], outcomes)
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
        self.outcomes.clear()
        self.specs.clear()

    # identity -----------------------------------------------------------------------------
    def run_id(self, suite: Suite) -> str:
        return f"{self.run_token}-{suite.hash[:8]}-{models_hash(self.models_for(suite))[:8]}"


def has_criteria(suite: Suite) -> bool:
    return any(task.judges for task in suite.tasks)


@dataclass(frozen=True)
class _PairCalls:
    """The two judge calls (both orders) of a pair whose answers are cached, unbuilt."""

    judge_model: str
    suite: Suite
    task: str
    case: str
    baseline: str
    candidate: str
    baseline_text: str
    candidate_text: str
    system: str  # judge_system of the task, rendered once for all its pairs

    def requests(self) -> list[Request]:
        pair = Pair(self.suite.name, self.task, self.case, self.baseline, self.candidate)
        texts = {self.baseline: self.baseline_text, self.candidate: self.candidate_text}
        # The two orders ask the same prompt: rendered once.
        asked = task_prompt(self.suite, self.task, self.case)
        return [
            judge_request(
                self.judge_model, self.suite, pair, order, texts, asked=asked, system=self.system
            )
            for order in (BASELINE_FIRST, CANDIDATE_FIRST)
        ]


def _criteria_calls(
    suite: Suite,
    judge_model: str,
    models: list[str],
    answers: dict[tuple[Path, str, str, str], tuple[str | None, int]],
    judging: Dispatcher,
) -> tuple[list[Request], Estimate]:
    """The binary judges' calls on the selected answers: built where the answer is cached
    (a cached empty answer is never judged), else estimated from sizes."""
    built: list[Request] = []
    sized: list[int] = []
    like: Planned | None = None
    for task in suite.tasks:
        if not task.judges:
            continue
        for case in task.cases:
            asked = task_prompt(suite, task.id, case.id)  # every answer and criterion's
            for model in models:
                answer = answers.get((suite.path, task.id, case.id, model))
                if answer is None or (answer[0] is not None and not answer[0].strip()):
                    continue
                text, chars = answer
                for criterion in task.judges:
                    request = criterion_request(
                        judge_model, suite, task.id, case.id, criterion, text or "", asked=asked
                    )
                    if text is not None:
                        built.append(request)
                        continue
                    if like is None:  # resolves the judge's adapter and price
                        like = judging.plan([request])[0]
                    # Built on an empty answer: the answer's size adds to its length.
                    sized.append(len(request.system or "") + len(request.prompt) + chars)
    if like is None:
        return built, Estimate(0, 0, 0, 0.0, 0.0)
    return built, judging.estimate_by_size(like, sized)


def relative_to(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when it lies inside it, else as given."""
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def spec_id(spec: ItemSpec) -> str:
    return f"{spec.suite.path}::{spec.task.id}::{spec.name}"


def models_hash(models: list[str]) -> str:
    return sha256_hex(models)
