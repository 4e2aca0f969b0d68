"""What a run will ask (spec "Run lifecycle"): the suites loaded, the models and the items
(task x case x model x repeat) of each, the requests they make, the cap, and the preflight:
every price and adapter resolved and the answers plus the judge's calls estimated, refused
before spending when they exceed what is left of the cap."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters.base import CHARS_PER_TOKEN, Request
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
from ..options import cap_from
from ..reports.render import money
from ..run.dispatch import Dispatcher, Estimate, Planned
from ..run.records import with_repeat
from ..scoring.checkers import BUILTIN, CheckerInfo, user_checker
from ..scoring.item import EXEC, score_answer, validate_checks
from ..suite.canonical import sha256_hex
from ..suite.loader import Case, Params, Suite, Task, load_suite, model_problem
from ..suite.variants import suffix_problem, undeclared_suffix
from .settings import Foundations


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
class RunPlan:
    """The suites, models and items of a run, its cap and its estimate."""

    base: Foundations
    checkers: dict[str, CheckerInfo] = field(default_factory=lambda: dict(BUILTIN))
    estimate: Estimate | None = None
    cap_usd: float | None = None
    cap_source: str = ""
    # Set by the preflight when the estimate fits the cap but the worst case does not.
    cap_warning: str | None = None
    # Suite files whose items were not all selected (-k, -m, --lf, --deselect, node ids).
    subsets: set[Path] = field(default_factory=set)
    # Suites of which --evalmine-shard left this shard no item: each still gets its (empty)
    # partial run, so ``evalmine merge`` sees that this shard ran.
    shard_empty: set[Path] = field(default_factory=set)

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
        if path not in self.base.suites:
            shown = relative_to(path, self.base.rootdir)
            suite = load_suite(path, shown=shown, roots=self.base.file_roots())
            validate_checks(suite, self.checkers, shown)
            self.base.suites[path] = suite
            recording = self.recording_for(suite)
            if recording is not None and self.base.record_mode != "all":
                from .recording import read_recording

                read_recording(self.base.store, recording)
        return self.base.suites[path]

    def recording_for(self, suite: Suite) -> Path | None:
        """The suite's recording file when ``--evalmine-recording`` asks for one."""
        setting = self.base.settings.values.get("recording")
        if not setting:
            return None
        from .recording import recording_path

        return recording_path(setting, suite.path, suite.name, self.base.rootdir)

    def models_for(self, suite: Suite) -> list[str]:
        """Option models, else the suite's; ``--evalmine-baseline`` moves one to the front.
        An entry may be ``MODEL@VARIANT`` (a contender) for a variant every task has."""
        models = (
            [m.strip() for m in self.base.settings.models.split(",") if m.strip()]
            if self.base.settings.models
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
        baseline = self.base.settings.baseline
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
        limit = self.base.settings.limit
        return [
            ItemSpec(suite, task, case, model, repeat, variant)
            for task in suite.tasks
            for case in (task.cases[:limit] if limit else task.cases)
            for model, variant in contenders
            for repeat in range(self.base.settings.repeat)
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
            suites = self.base.suites.values()
            limits = [s.max_cost_usd for s in suites if s.max_cost_usd is not None]
            try:
                self.cap_usd, self.cap_source = cap_from(self.base.settings.max_cost, limits)
            except ValueError as exc:
                raise EvalmineError(str(exc)) from None
        return self.cap_usd

    def judge_option(self) -> tuple[str, ...]:
        """``--evalmine-judge``: one model, or a panel's jurors separated by commas."""
        if not self.base.settings.judge:
            return ()
        jurors = tuple(j.strip() for j in self.base.settings.judge.split(","))
        for juror in jurors:
            problem = model_problem(juror)
            if problem is not None:
                raise EvalmineError(f"--evalmine-judge: {problem}")
        if len(set(jurors)) < len(jurors):
            raise EvalmineError("--evalmine-judge: a juror is listed twice")
        return jurors

    def judge_model_for(self, suite: Suite) -> str | None:
        """The one judge (the binary judges' too), or a panel's first juror when the suite
        names no judge.model."""
        option = self.judge_option()
        if option:
            return option[0]
        return suite.judge.model or next(iter(self.judge_models_for(suite)), None)

    def jurors_for(self, suite: Suite) -> dict[str, tuple[str, ...]]:
        """Task id -> its jurors when a panel judges (spec: "Judge panel"); {}: one judge."""
        from ..judging.panel import jurors_by_task

        return jurors_by_task(suite, self.judge_option())

    def judge_models_for(self, suite: Suite) -> tuple[str, ...]:
        """Every model that judges the suite's pairs: a panel's jurors, or the one judge."""
        from ..judging.panel import all_jurors, jurors_by_task

        option = self.judge_option()
        jurors = all_jurors(jurors_by_task(suite, option))
        if jurors:
            return jurors
        single = option[0] if option else suite.judge.model
        return (single,) if single else ()

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
                if len(self.models_for(suite)) > 1 or has_criteria(suite)
                for model in dict.fromkeys(
                    [*(self.judge_models_for(suite)), *filter(None, [self.judge_model_for(suite)])]
                )
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
        cached = self.base.store.answers_of(first) if reads else {}
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
            # A panel: every juror judges every pair in both orders (spec: "Judge panel").
            panel = self.jurors_for(suite)
            sized: dict[str, list[int]] = {}
            like: dict[str, Planned] = {}
            for task in suite.tasks:
                if not task.judge:
                    continue
                system = judge_system(suite, task.id)
                jurors = panel.get(task.id, (judge_model,))
                for case in task.cases:
                    # judge.pairs: all judges every two models, both orders each
                    for baseline, candidate in model_pairs(models, suite.judge.pairs):
                        base = judged.get((suite.path, task.id, case.id, baseline))
                        cand = judged.get((suite.path, task.id, case.id, candidate))
                        if base is None or cand is None:
                            continue
                        if base[0] is not None and cand[0] is not None:
                            for juror in jurors:
                                calls = (juror, suite, task.id, case.id, baseline, candidate)
                                buildable.append(_PairCalls(*calls, base[0], cand[0], system))
                            continue
                        pair = Pair(suite.name, task.id, case.id, baseline, candidate)
                        chars = judge_text_chars(suite, pair, base[1] + cand[1], system=system)
                        for juror in jurors:
                            if juror not in like:  # resolves the juror's adapter and price
                                empty = {baseline: "", candidate: ""}
                                request = judge_request(juror, suite, pair, orders[0], empty)
                                like[juror] = judging.plan([request])[0]
                            sized.setdefault(juror, []).extend([chars] * len(orders))
            for juror, planned_like in like.items():
                estimate = estimate + judging.estimate_by_size(planned_like, sized[juror])
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


def from_here(path: Path, cwd: Path | None = None) -> str:
    """``path`` as the user can open it from where they stand: relative to the working
    directory when it lies inside it, else absolute. (Relative to pytest's rootdir it would
    not open from a folder that is not the rootdir: a suite file outside the project roots
    pytest at that file's folder.)"""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to((cwd or Path.cwd()).resolve()))
    except ValueError:
        return str(resolved)


def spec_id(spec: ItemSpec) -> str:
    return f"{spec.suite.path}::{spec.task.id}::{spec.name}"


def models_hash(models: list[str]) -> str:
    return sha256_hex(models)
