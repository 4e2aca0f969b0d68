"""pytest glue that keeps the garbage collector off what a run holds to its end (spec: "Run
lifecycle", steps 3 and 8): what is alive once selection is done, and again after the run's
last hook, moves to the collector's permanent generation, which no later collection walks;
the next in-process run lets the earlier one's objects go. Standard library only."""

from __future__ import annotations

import gc

_frozen_by_us = False


def freeze_survivors(generation: int = 2) -> None:
    """Collect the garbage of ``generation`` and the younger ones, then move every object
    still alive to the collector's permanent generation, where no later collection walks it.

    After our last hook of a run, a full collection first (reports, records: a 10,000-case
    run holds millions of objects): pytest then runs five full collections to surface
    unraisable exceptions, and the interpreter's exit one more; each walked all of those
    objects, about 4 s of CPU at 10,000 cases, to free nothing. Garbage made before this
    point is still collected, and its unraisable exceptions reported.

    Once selection is done, the young generations only (the modules, pytest's machinery and
    the items then stay out of the full collections made while items run, the judge is
    awaited and reports are written). A full collection there found at most a few dozen
    objects (class drafts attrs discards) for 35 ms at 200 cases and 100 ms at 5,000: that
    little old garbage stays frozen instead.

    At session finish, the youngest generation only: the records, reports and items alive
    then stay out of the full collections that judging and writing the reports set off (at
    3,000 cases five, a third of session finish's CPU, freeing nothing), while the garbage
    cycles session finish makes (a judge's HTTP exchanges) are still collected. Turning the
    collector off there saved the same and would have kept those cycles to the end."""
    global _frozen_by_us
    gc.collect(generation)
    gc.freeze()
    _frozen_by_us = True


def unfreeze_earlier_run() -> None:
    """An in-process run (pytester) after one we froze: the earlier run's objects become
    collectable again, so a process running many never keeps them all."""
    global _frozen_by_us
    if _frozen_by_us:
        gc.unfreeze()
        _frozen_by_us = False
