"""pytest glue that hides import time behind the wait for answers (spec: "Run lifecycle",
step 5): a thread imports what session finish needs while the dispatch is under way. It
imports only modules the run imports later anyway, so it changes when they load, never what
the run does."""

from __future__ import annotations

import contextlib
import importlib
import threading
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..run.dispatch import Dispatcher, Progress

PRELOAD_KEY = pytest.StashKey[Any]()  # a streamed dispatch's SessionFinishPreload

# In the order they are first needed: the first item's checks and junit properties once
# the answers are in, then session finish, then the intervals after the judge (numpy loads
# numpy.random and numpy.ma, which np.unique uses, only when they are first touched).
SESSION_FINISH_IMPORTS = (
    "..scoring.execution",
    "..reports.junit",
    "..engine.finish",
    "..reports.terminal",
)
NUMPY_IMPORTS = ("numpy", "numpy.random", "numpy.ma")
# Up to this many items numpy is preloaded too. Its pages (about 20 MB of RSS) would
# otherwise arrive after the judge; a 10,000-case run's memory peak is while it judges
# (5 MB higher with numpy preloaded), and there its import is a few thousandths of the run.
PRELOAD_NUMPY_MAX_ITEMS = 2_000


class SessionFinishPreload:
    """Imports what session finish needs and dispatching does not, in a thread, while the
    answers are awaited: the judging and report modules, and numpy (the bootstrap intervals)
    when the dispatch is small enough (``preloaded_modules``). Imported where they are first
    used, they cost 0.1-0.2 s of a run's wall time between the last answer and the first
    judge request, and after the last verdict.

    The thread starts when the first answer is in (cached ones come at once), so it never
    holds the interpreter while the first requests are being sent, and ``join`` restores
    the dispatcher's own progress report."""

    def __init__(self, dispatcher: Dispatcher, modules: tuple[str, ...]) -> None:
        self.dispatcher = dispatcher
        self.shown = dispatcher.on_progress
        self.thread = threading.Thread(
            target=_import_quietly, args=(modules,), name="evalmine-preload"
        )
        self.thread.daemon = True  # joined when the last answer is in
        dispatcher.on_progress = self.answer_arrived

    def answer_arrived(self, progress: Progress) -> None:
        if self.thread.ident is None:
            self.thread.start()
        if self.shown is not None:
            self.shown(progress)

    def join(self) -> None:
        self.dispatcher.on_progress = self.shown
        if self.thread.ident is None:  # nothing to send: no answer called back
            self.thread.start()
        self.thread.join()


def join_preload(config: pytest.Config) -> None:
    """Wait for a streamed dispatch's preload, once: before the items have left and session
    finish imports what it loads."""
    preloading = config.stash.get(PRELOAD_KEY, None)
    if preloading is not None:
        del config.stash[PRELOAD_KEY]
        preloading.join()


def preloaded_modules(items: int) -> tuple[str, ...]:
    """What the preload imports for a dispatch of ``items`` suite items."""
    if items <= PRELOAD_NUMPY_MAX_ITEMS:
        return SESSION_FINISH_IMPORTS + NUMPY_IMPORTS
    return SESSION_FINISH_IMPORTS


def _import_quietly(modules: tuple[str, ...]) -> None:
    for name in modules:
        # A failing import fails again where the module is used, which reports it there.
        with contextlib.suppress(Exception):
            importlib.import_module(name, __package__)
