"""pytest glue for pytest-evalmine: options, collection, fixtures, reporting hooks.

Loaded in every pytest run of whoever installs the package, so it imports only pytest and
the standard library at import time and does nothing until an evalmine option is given or a
suite file is collected. Every hook delegates to one ``EvalSession`` kept in ``config.stash``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .. import exitcodes
from ..options import add_options
from .gc_freeze import freeze_survivors, unfreeze_earlier_run
from .item_protocol import ITEM_RECORD_KEY, answer_for, end_streaming, run_protocol, stop

# The two constants are re-exported: tests read them here, where they were defined before
# the preload and the progress lines had modules of their own.
from .preload import PRELOAD_KEY, SessionFinishPreload, preloaded_modules
from .preload import PRELOAD_NUMPY_MAX_ITEMS as PRELOAD_NUMPY_MAX_ITEMS
from .progress import PROGRESS_EVERY_S as PROGRESS_EVERY_S
from .progress import interrupt_printer, progress_printer, say, stop_watching, watch_workers
from .sharding import SHARD_EMPTY_KEY, empty_suites, nothing_left, sharding
from .startup import check_options, compare_problem
from .stash import (
    EXIT_KEY,
    FINISHED_KEY,
    RECORD_ATTRIBUTE,
    REFUSAL_KEY,
    VERDICT_NOTE_KEY,
    add_conftest_checks,
    eval_session,
    is_active,
    run_token,
)
from .terminal_summary import MARKUP
from .terminal_summary import register as register_summary

if TYPE_CHECKING:
    from ..adapters.registry import AdapterRegistry
    from ..run.dispatch import Dispatcher, Outcome

UNREPORTED_KEY = "evalmine_unreported"
SUITE_SUFFIXES = (".yaml", ".yml")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Called once at start-up: declares the option table as flags and ini keys."""
    group = parser.getgroup("evalmine", "pytest-evalmine: LLM evaluation")
    add_options(group.addoption, parser.addini)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Called at start-up: declares the hooks a conftest.py may implement."""
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_configure(config: pytest.Config) -> None:
    """Called after options are parsed, before collection: checks every option value (a bad
    one is a usage error, exit 4), registers the marker items carry, and the reporter whose
    hooks need this config."""
    unfreeze_earlier_run()
    check_options(config)
    config.pluginmanager.register(Reporter(config), "evalmine-reporter")
    register_summary(config)
    if _html_report_requested(config):
        from .htmlhooks import HtmlHooks

        config.pluginmanager.register(HtmlHooks(config, FINISHED_KEY), "evalmine-html")
    config.addinivalue_line(
        "markers",
        "evalmine(suite, task, kind, model, provider, variant): a suite item; select with e.g. "
        "-m \"evalmine(kind='classify')\" or -m \"evalmine(model='fake/a')\"",
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The run's header: built-in providers pointed at another server by their SDKs'
    variables (checked at start-up, so a bad one never gets here)."""
    from ..run.endpoints import base_urls_from, base_urls_line

    line = base_urls_line(base_urls_from())
    return [f"evalmine: {line}"] if line else []


def _html_report_requested(config: pytest.Config) -> bool:
    """pytest-html writes a page (``--html``; xdist workers see the option too). Installed
    alone it is registered as well, but then an answer's extra would be built for every item
    (about 0.6 KB each, held to the end) and never shown."""
    return bool(config.getoption("htmlpath", None)) and config.pluginmanager.hasplugin("html")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Called for every file pytest visits: suite files become ``SuiteFile`` collectors."""
    if file_path.suffix not in SUITE_SUFFIXES:
        return None
    glob = parent.config.getini("evalmine_glob") or "*.eval.yaml"
    if not fnmatch.fnmatch(file_path.name, glob) and not _named_on_command_line(
        file_path, parent.config
    ):
        return None
    from .items import SuiteFile

    return SuiteFile.from_parent(parent, path=file_path)


def _named_on_command_line(file_path: Path, config: pytest.Config) -> bool:
    base = config.invocation_params.dir
    for arg in config.args:
        if (base / arg.split("::", 1)[0]).resolve() == file_path.resolve():
            return True
    return False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Called after collection, last of the selections (-k, -m, --lf): with
    ``--evalmine-shard``, only this shard's slice of the items stays selected."""
    if sharding(config):
        from .sharding import keep_shard

        keep_shard(config, items)


# fixtures ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def evalmine_adapters(pytestconfig: pytest.Config) -> AdapterRegistry:
    """The adapter registry. Override it (session scope) in a conftest.py to evaluate your
    own application: register an adapter for your model strings' provider prefix."""
    return _registry(pytestconfig)


@pytest.fixture(scope="session")
def evalmine_judge_adapters(pytestconfig: pytest.Config) -> AdapterRegistry:
    """The registry the judge's model is resolved in (built-in adapters; with
    --evalmine-fake, the fake). Override it to script a judge in tests."""
    return _registry(pytestconfig)


def _registry(config: pytest.Config) -> AdapterRegistry:
    """The built-in adapters plus what conftest.py files register with the
    ``pytest_evalmine_adapters`` hook (visible to the xdist controller too)."""
    registry = eval_session(config).default_registry()
    config.hook.pytest_evalmine_adapters(registry=registry, config=config)
    return registry


@pytest.fixture(scope="session")
def evalmine_cost_limit(pytestconfig: pytest.Config) -> float:
    """The run's cost cap in USD (option > EVALMINE_MAX_COST > suite limit > default)."""
    from ..errors import EvalmineError

    try:
        return eval_session(pytestconfig).resolve_cap()
    except EvalmineError as exc:  # a suite limit that is not a finite number
        stop(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def evalmine_dispatcher(
    pytestconfig: pytest.Config, evalmine_adapters: AdapterRegistry, evalmine_cost_limit: float
) -> Dispatcher:
    """The one place that spends: cache, claims, budget, retries, concurrency."""
    session = eval_session(pytestconfig)
    share = int(getattr(pytestconfig, "workerinput", {}).get("workercount", 1))
    batching = session.batching()
    if batching is not None:
        from .progress import batch_printer

        batching.say, batching.tty = batch_printer(pytestconfig)
    return session.dispatcher(
        evalmine_adapters,
        concurrency_share=share,
        on_progress=progress_printer(pytestconfig, "answers"),
        on_interrupt=interrupt_printer(pytestconfig),
    )


@pytest.fixture(scope="session")
def evalmine_answers(
    request: pytest.FixtureRequest,
    evalmine_dispatcher: Dispatcher,
    evalmine_judge_adapters: AdapterRegistry,
) -> dict[str, Outcome]:
    """Dispatches every selected suite item of this process at once, on first use: the
    dispatch streams while the items run (``EvalSession.stream``), or, when an execution
    check must see every answer first, returns when every answer is in."""
    from ..errors import EvalmineError, RefusedError
    from .items import EvalItem

    config = request.config
    session = eval_session(config)
    specs = [item.spec for item in request.session.items if isinstance(item, EvalItem)]
    session.judge_registry = evalmine_judge_adapters
    streaming = session.can_stream(specs)
    if streaming:
        # The items' own progress (pytest's dots) shows the answers arriving; one line at the
        # end (end_streaming) gives their total.
        evalmine_dispatcher.on_progress = None
    try:
        planned = None
        preloading = None
        if not hasattr(config, "workerinput"):
            judging = session.dispatcher(evalmine_judge_adapters)
            planned = session.preflight(evalmine_dispatcher, specs, judging)
            say(config, session.cap_warning)
            preloading = SessionFinishPreload(evalmine_dispatcher, preloaded_modules(len(specs)))
        if streaming:
            config.stash[PRELOAD_KEY] = preloading
            session.stream(evalmine_dispatcher, specs, planned)
            return session.outcomes
        try:
            outcomes = session.dispatch(evalmine_dispatcher, specs, planned)
        finally:
            if preloading is not None:
                preloading.join()
    except RefusedError as exc:
        config.stash[REFUSAL_KEY] = str(exc)
        stop(str(exc), returncode=exitcodes.REFUSED_BEFORE_SPENDING)
    except EvalmineError as exc:
        stop(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
    if session.interrupted:
        # Session finish still writes the partial report from what was dispatched.
        stop(
            "interrupted (Ctrl-C); the answers that arrived are cached",
            returncode=pytest.ExitCode.INTERRUPTED,
        )
    return outcomes


@pytest.fixture
def evalmine_answer(request: pytest.FixtureRequest) -> Any:
    """The checked answer of the suite item that requests it (suite items only). The first
    item of a process gets ``evalmine_answers`` through pytest (so conftest overrides of the
    registries apply) and with it the dispatch; later items read their outcome from the
    session: resolving the session fixtures' chain again for each item was about a third of
    a 10,000-case warm run's item time."""
    from .items import EvalItem

    if not isinstance(request.node, EvalItem):
        raise pytest.UsageError("evalmine_answer is only for suite items")
    __tracebackhide__ = True  # a check's own exception is shown from its frame down
    return answer_for(request.node, lambda: request.getfixturevalue("evalmine_answers"))


@pytest.fixture
def evalmine(pytestconfig: pytest.Config, evalmine_dispatcher: Dispatcher) -> Any:
    """For plain test functions: ``evalmine.complete(model, prompt, ...)`` through the same
    cache, budget and price table as the suite items."""
    from ..run.client import EvalClient

    # One batch at a time on a dispatcher: the suite items' streamed answers come in first.
    end_streaming(pytestconfig)
    return EvalClient(evalmine_dispatcher)


# The last suite item that made a report, with that report's keywords and user properties.
EARLIER_REPORT_KEY = pytest.StashKey[tuple[pytest.Item, Any, list[tuple[str, object]]]]()


# running ----------------------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Called for each item to run: a suite item that nothing of the user's reaches runs
    without pytest's per-phase fixture machinery (``item_protocol``); others as always."""
    return run_protocol(item, nextitem)


# reporting --------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator:
    """Wraps report creation: puts the item's answer record on its last report, where xdist
    carries it to the controller."""
    report = yield
    record = item.stash.get(ITEM_RECORD_KEY, None)
    if record is not None:
        _share_with_earlier_report(item, report)
    if record is not None and (call.when == "call" or (call.when == "setup" and report.failed)):
        # The record object itself, held once; it becomes a dict only to cross to the xdist
        # controller (pytest_report_to_serializable).
        setattr(report, RECORD_ATTRIBUTE, record)
        if _html_report_requested(item.config):
            from .htmlhooks import add_item_extra

            add_item_extra(report, record, item.spec.request().prompt)
    return report


def _share_with_earlier_report(item: pytest.Item, report: pytest.TestReport) -> None:
    """pytest keeps every report to the end of the run (the terminal's statistics), each
    with its own copy of the item's keywords and user properties: about 15 MB of copies for
    the 60,000 reports of 10,000 cases x 2 models. An item's reports are made one after the
    other (setup, call, teardown), so a report shares the previous one's copies when they
    are equal; the earlier report is remembered per run, never per item."""
    earlier = item.config.stash.get(EARLIER_REPORT_KEY, None)
    if earlier is not None and earlier[0] is item:
        _, keywords, properties = earlier
        if report.keywords == keywords:
            report.keywords = keywords
        if report.user_properties == properties:
            report.user_properties = properties
    item.config.stash[EARLIER_REPORT_KEY] = (item, report.keywords, report.user_properties)


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(report: Any) -> Generator:
    """Wraps report serialization (xdist workers, report logs): the record as a dict."""
    data = yield
    record = data.get(RECORD_ATTRIBUTE) if isinstance(data, dict) else None
    if record is not None and not isinstance(record, dict):
        data[RECORD_ATTRIBUTE] = record.to_dict()
    return data


class Reporter:
    """The hooks that need the run's config: one instance per config, so in-process pytest
    runs (pytester) never see each other's records."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Called for each report on the process that prints (the xdist controller too)."""
        record = getattr(report, RECORD_ATTRIBUTE, None)
        if record is None:
            return
        if isinstance(record, dict):  # from an xdist worker: the record, once, for all
            from ..run.records import AnswerRecord

            record = AnswerRecord.from_dict(record)
            setattr(report, RECORD_ATTRIBUTE, record)
        eval_session(self.config).add_record(record)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Called after selection (-k, -m, --lf, --deselect), before any item runs: notes
        which suites this run covers only in part, whose reports then leave latest.json
        alone, and refuses an ``--evalmine-compare`` that names no run of a selected suite
        (exit 4; on xdist the controller asks). A run with suite items then freezes what
        start-up left alive (``gc_freeze.freeze_survivors``)."""
        from .items import EvalItem

        selected: dict[Path, int] = {}
        suites = {}
        for item in session.items:
            if isinstance(item, EvalItem):
                path = item.spec.suite.path
                selected[path] = selected.get(path, 0) + 1
                suites[path] = item.spec.suite
        for path, count in selected.items():
            eval_session(self.config).note_selection(suites[path], count)
        if selected and not hasattr(self.config, "workerinput"):  # xdist: the controller asks
            problem = compare_problem(self.config, suites.values())
            if problem is not None:
                raise pytest.UsageError(problem)
        if selected:
            freeze_survivors(generation=1)

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """A Ctrl-C (not pytest.exit, nor xdist's -x): before pytest renders it, which takes
        a second on a busy machine, an xdist controller tells its workers to stop sending."""
        if is_active(self.config) and excinfo.type is KeyboardInterrupt:
            from .sessionfinish import ask_workers_to_stop

            ask_workers_to_stop(self.config)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller, when a worker finishes: the answers it dispatched for items no
        worker reported (-x, Ctrl-C), so the report counts every call."""
        empty = getattr(node, "workeroutput", {}).get(SHARD_EMPTY_KEY)
        if empty:
            eval_session(self.config).plan.shard_empty.update(Path(path) for path in empty)
        data = getattr(node, "workeroutput", {}).get(UNREPORTED_KEY)
        if data:
            from ..run.records import AnswerRecord

            eval_session(self.config).unreported += [AnswerRecord.from_dict(r) for r in data]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Called after the last item, on workers and controller: judges and writes the
        reports once (on the controller or the only process) and sets our exit codes. First
        of the session finishes, so that --junitxml writes its file with our properties."""
        config = self.config
        if not is_active(config):
            return
        end_streaming(config)
        if hasattr(config, "workerinput"):
            config.workeroutput[UNREPORTED_KEY] = [
                record.to_dict() for record in eval_session(config).unreported_records()
            ]
            config.workeroutput[SHARD_EMPTY_KEY] = empty_suites(config)
            eval_session(config).close()  # a worker's connections and cache file
            return
        from .sessionfinish import finish_session, settle_workers

        if sharding(config) and nothing_left(session):
            session.exitstatus = pytest.ExitCode.OK

        settle_workers(config, session)  # xdist: the workers stopped, their calls counted
        stop_watching(config)

        finish_session(
            config,
            session,
            on_progress=progress_printer(config, "judge verdicts", inside_item=False),
            on_interrupt=interrupt_printer(config),
        )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """Wraps every other session finish: keeps the run's final exit status for the verdict."""
    result = yield
    if is_active(session.config) and not hasattr(session.config, "workerinput"):
        session.config.stash[EXIT_KEY] = int(session.exitstatus)
    return result


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The very last output of a run, after pytest's closing line ("56 passed") and after the
    message of a run stopped by ``pytest.exit``: our exit code, why, and whether a win rate is
    a headline, so a run never ends on a green "passed" over an exit 12."""
    stop_watching(config)  # a run that ended before session finish
    if is_active(config):
        freeze_survivors()
    code = config.stash.get(EXIT_KEY, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if code is None or reporter is None:
        return
    from ..reports.terminal import verdict_line

    finished = config.stash.get(FINISHED_KEY, [])
    note = config.stash.get(VERDICT_NOTE_KEY, None)
    why = note[1] if note is not None and note[0] == code else None
    refusal = config.stash.get(REFUSAL_KEY, None)
    line = verdict_line([f.summary for f in finished], code, refusal, why)
    reporter.write_line(line.text, **MARKUP.get(line.style, {}))


# xdist ------------------------------------------------------------------------------------
@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller, before a worker starts: share the run token (ledger, claims)."""
    node.workerinput["evalmine_run_token"] = run_token(node.config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist controller, when a worker has collected: before any worker runs an item,
    refuse the run if the selection could pass the cap (workers then only reserve)."""
    config = node.config
    files = sorted(
        {i.split("::", 1)[0] for i in ids if i.split("::", 1)[0].endswith(SUITE_SUFFIXES)}
    )
    if not files or (is_active(config) and eval_session(config).estimate is not None):
        return
    from ..errors import EvalmineError, RefusedError

    evalsession = eval_session(config)
    wanted = set(ids)
    root = Path(config.rootpath)
    registry: AdapterRegistry | None = None
    specs: list[Any] = []
    try:
        add_conftest_checks(config)
        specs = []
        for relative in files:
            suite = evalsession.load(root / relative)
            chosen = [
                spec
                for spec in evalsession.specs_for(suite)
                if f"{relative}::{spec.task.id}::{spec.name}" in wanted
            ]
            evalsession.note_selection(suite, len(chosen))
            specs += chosen
        problem = compare_problem(config, {s.suite.path: s.suite for s in specs}.values())
        if problem is not None:
            stop(problem, returncode=pytest.ExitCode.USAGE_ERROR)
        # Built once the suites are loaded: their own ``endpoints:`` are adapters too.
        registry = _registry(config)
        if specs:
            dispatcher = evalsession.dispatcher(registry)
            planned = evalsession.preflight(dispatcher, specs)
            evalsession.workers_plan = (dispatcher, specs, planned)
            if evalsession.estimate is not None and evalsession.estimate.uncached:
                watch_workers(config)
            say(config, evalsession.cap_warning)
    except RefusedError as exc:
        providers = {spec.model.split("/", 1)[0] for spec in specs}
        if registry is None:
            registry = _registry(config)
        unknown = [] if registry.route_all_to else sorted(providers - set(registry.factories))
        hint = (
            f" (no adapter for {', '.join(map(repr, unknown))} on the xdist controller, which "
            "sees no fixtures: register your own adapter with the pytest_evalmine_adapters "
            "hook in conftest.py)"
            if unknown
            else ""
        )
        config.stash[REFUSAL_KEY] = str(exc)
        stop(f"{exc}{hint}", returncode=exitcodes.REFUSED_BEFORE_SPENDING)
    except EvalmineError:
        return  # workers report suite errors themselves, as collection errors
