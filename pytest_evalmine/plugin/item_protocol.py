"""How a suite item runs: the answer its fixture gives, and pytest's run-test protocol
without the fixture machinery for the items that need none (spec section 3, "How an item
runs").

A suite item only reads an outcome that was dispatched before it ran and checks it. Going
through pytest's per-phase hooks for that (the fixture request, capture and logging around
each phase, three hook calls that do nothing for it) was about two thirds of a 10,000-case
warm rerun's CPU. An item that no fixture, mark or plugin of the user's can reach runs here
instead: its three reports are made and logged through pytest's own hooks
(``pytest_runtest_makereport``, ``pytest_runtest_logreport``), so the terminal, --junitxml,
pytest-html, xdist, -x and --lf see what they always see. Any item that could differ goes
through pytest's protocol unchanged.

Imports only pytest and modules the plugin has already loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import pytest

from ..errors import StoreUnavailable
from .preload import join_preload
from .progress import progress_printer, say
from .stash import eval_session

ITEM_RECORD_KEY = pytest.StashKey[Any]()
# Whether this run's plugins and options leave suite items to the short protocol.
_RUN_ALLOWS_KEY = pytest.StashKey[bool]()

# The plugins whose per-phase hooks (setup, call, teardown, the test function's call) do
# nothing for a suite item: pytest's own, this one, and those that act only on a test of
# their own kind (hypothesis: @given tests; anyio: async tests). Any other plugin with such
# a hook may act on every item (timeouts, coverage contexts, reruns), so its presence keeps
# suite items on pytest's protocol.
_PHASE_HOOKS = (
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_pyfunc_call",
)
_INERT_PLUGIN_MODULES = ("_pytest.", "pytest_evalmine.", "_hypothesis_pytestplugin", "anyio.")
# Marks that pytest's skipping plugin acts on in an item's setup and call.
_PHASE_MARKS = frozenset({"skip", "skipif", "xfail"})
# What a suite item's fixture closure is when nothing of the user's reaches it, and where
# its evalmine_answer fixture comes from then.
_OWN_CLOSURE = frozenset({"evalmine_answer", "request"})
_PLUGIN_MODULE = "pytest_evalmine.plugin"


class Stopped(pytest.exit.Exception):
    """``pytest.exit`` whose message pytest prints as ``evalmine: ...``: pytest names the
    exception class before the message, and for its own ``_pytest.outcomes.Exit`` that prefix
    means nothing to a user. (pytest's own ``Interrupted`` hides its module the same way.)"""


Stopped.__name__ = Stopped.__qualname__ = "evalmine"
Stopped.__module__ = "builtins"


def stop(message: str, returncode: int) -> NoReturn:
    raise Stopped(message, returncode=returncode)


def end_streaming(config: pytest.Config) -> None:
    """Let a streamed dispatch end (the calls in flight land in the cache), join the
    preload, and say how many answers arrived. Before anything reads every outcome."""
    session = eval_session(config)
    if session.streaming is None:
        return
    try:
        session.finish_dispatch()
    except Exception as exc:
        say(config, f"evalmine: the dispatch failed: {exc}")
        return
    finally:
        join_preload(config)
    show = progress_printer(config, "answers", inside_item=False)
    if show is not None and session.stream_progress is not None:
        show(session.stream_progress)


def answer_for(item: Any, start_dispatch: Callable[[], object] | None) -> Any:
    """The checked answer of a suite item (what the ``evalmine_answer`` fixture gives). The
    first item of a process calls ``start_dispatch`` (the ``evalmine_answers`` fixture, so
    conftest overrides of the registries apply); later items read their outcome from the
    session. Fails the item on a provider error; re-raises a check's own exception."""
    from ..engine.session import spec_id
    from ..reports.junit import item_properties
    from .items import ItemAnswer

    config = item.config
    session = eval_session(config)
    key = spec_id(item.spec)
    outcome = session.outcomes.get(key)
    waited = outcome is None
    try:
        if outcome is None and session.streaming is None and start_dispatch is not None:
            start_dispatch()
        if outcome is None:
            outcome = session.outcome_for(item.spec)
    except StoreUnavailable as exc:
        # The server went away mid-run: every later item would fail the same way. The
        # answers committed before it stay; a rerun once it is back pays only for the rest.
        stop(
            f"{exc}; the run stopped (the answers stored before stay: rerun once the store "
            "is back)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    if waited:
        if session.streaming is not None and session.streaming.done:
            join_preload(config)  # before the items left and session finish
        if session.interrupted:
            end_streaming(config)
            stop(
                "interrupted (Ctrl-C); the answers that arrived are cached",
                returncode=pytest.ExitCode.INTERRUPTED,
            )
    record = session.record_for(item.spec, outcome)
    item.stash[ITEM_RECORD_KEY] = record
    # On the item, so the report carries them (to the xdist controller too) into --junitxml.
    item.user_properties.extend(item_properties(record))
    raised = session.check_errors.get(key)
    if raised is not None:
        # The user's exception from the user's own frame down: our frames are hidden.
        __tracebackhide__ = True
        raise raised.error.with_traceback(raised.traceback)
    if record.outcome == "error":
        pytest.fail(f"provider error: {record.error}", pytrace=False)
    return ItemAnswer(record)


def run_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Runs a suite item that nothing of the user's reaches, as pytest's ``runtestprotocol``
    would (logstart, setup, call, teardown, logfinish) but with its answer read directly;
    None leaves the item to pytest's protocol."""
    if not _short_protocol_serves(item):
        return None
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    answers: list[Any] = []

    def setup() -> None:
        __tracebackhide__ = True  # a check's own exception is shown from its frame down
        answers.append(answer_for(item, None))

    if _phase(item, "setup", setup).passed:
        _phase(item, "call", lambda: answers[0].assert_passed())
    session = item.session
    if session.shouldfail or session.shouldstop:
        nextitem = None  # as pytest does: everything is torn down for the report
    _phase(item, "teardown", lambda: session._setupstate.teardown_exact(nextitem))
    # As pytest's protocol does once an item has run: its request goes away.
    item._request = False  # type: ignore[attr-defined]
    item.funcargs = None  # type: ignore[attr-defined]
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _phase(item: pytest.Item, when: Any, body: Callable[[], object]) -> pytest.TestReport:
    """One phase, reported as pytest's ``call_and_report`` reports it."""
    # The phase's own pytest exceptions go on up as in pytest (no --pdb here: Ctrl-C too).
    reraise = (pytest.exit.Exception, KeyboardInterrupt)
    call = pytest.CallInfo.from_call(body, when=when, reraise=reraise)
    ihook = item.ihook
    report: pytest.TestReport = ihook.pytest_runtest_makereport(item=item, call=call)
    ihook.pytest_runtest_logreport(report=report)
    if call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception):
        ihook.pytest_exception_interact(node=item, call=call, report=report)
    return report


def _short_protocol_serves(item: pytest.Item) -> bool:
    from .items import EvalItem, TaskNode

    if not isinstance(item, EvalItem) or not _run_allows(item.config):
        return False
    task = item.parent
    if not isinstance(task, TaskNode):
        return False
    if task.short_protocol is None:
        task.short_protocol = _task_allows(item)
    if not task.short_protocol:
        return False
    # Everything above the item is set up (pytest's protocol ran the task's first item), so
    # the item adds nothing to set up or tear down but itself. (pytest's own state: a pytest
    # that keeps it elsewhere gets its own protocol.)
    stack = getattr(getattr(item.session, "_setupstate", None), "stack", None)
    if not isinstance(stack, dict) or list(stack) != item.listchain()[:-1]:
        return False
    if any(mark.name in _PHASE_MARKS for mark in item.iter_markers()):
        return False
    session = eval_session(item.config)
    if session.streaming is None:
        from ..engine.session import spec_id

        return spec_id(item.spec) in session.outcomes  # the dispatch ran already
    return True


def _task_allows(item: Any) -> bool:
    """The items of one task share one fixture closure and one list of checks: the short
    protocol serves them when the closure is the plugin's own (no autouse fixture, no
    usefixtures mark, no override of ``evalmine_answer``) and every check is built in (a
    user's check may print or log, which pytest's capture keeps with the item)."""
    from ..scoring.checkers import BUILTIN
    from ..scoring.item import EXEC

    info = getattr(item, "_fixtureinfo", None)
    if info is None or frozenset(info.names_closure) != _OWN_CLOSURE:
        return False
    definitions = info.name2fixturedefs.get("evalmine_answer", ())
    if not definitions or getattr(definitions[-1].func, "__module__", None) != _PLUGIN_MODULE:
        return False
    return all(check.name == EXEC or check.name in BUILTIN for check in item.spec.task.checks)


def _run_allows(config: pytest.Config) -> bool:
    allowed = config.stash.get(_RUN_ALLOWS_KEY, None)
    if allowed is None:
        allowed = config.stash[_RUN_ALLOWS_KEY] = _options_allow(config) and not _acting_plugins(
            config
        )
    return allowed


def _options_allow(config: pytest.Config) -> bool:
    """--pdb and --trace step into an item; --setup-show, --setup-only and --setup-plan show
    its fixtures: those runs keep pytest's protocol."""
    return not any(
        config.getoption(name, False)
        for name in ("usepdb", "trace", "setupshow", "setuponly", "setupplan")
    )


def _acting_plugins(config: pytest.Config) -> list[str]:
    """The plugins with a per-phase hook that may act on a suite item."""
    hook = config.pluginmanager.hook
    impls = [impl for name in _PHASE_HOOKS for impl in getattr(hook, name).get_hookimpls()]
    # A plugin that runs items its own way (reruns, say); one that wraps the protocol does not.
    impls += [
        impl
        for impl in hook.pytest_runtest_protocol.get_hookimpls()
        if not (impl.wrapper or impl.hookwrapper)
    ]
    return [impl.plugin_name for impl in impls if not _inert(impl.plugin)]


def _inert(plugin: object) -> bool:
    module = getattr(plugin, "__name__", None) or type(plugin).__module__
    return f"{module}.".startswith(_INERT_PLUGIN_MODULES)
