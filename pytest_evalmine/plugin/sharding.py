"""pytest glue for ``--evalmine-shard`` (spec: "Shards"): after collection and pytest's own
selection, this shard keeps its slice of the items (``engine.shards``) and deselects the
rest as ``-k`` does, so the plan, the estimate and the dispatch see only its items. Every
xdist worker computes the same slice (a stable hash); the controller reads the ids the
workers collected."""

from __future__ import annotations

import pytest

from .stash import eval_session

# xdist: a worker's suites of which the shard kept no item, for the controller.
SHARD_EMPTY_KEY = "evalmine_shard_empty"


def sharding(config: pytest.Config) -> bool:
    """Whether the run asked for a shard (read without building the session)."""
    return bool(config.getoption("evalmine_shard", None) or config.getini("evalmine_shard"))


def keep_shard(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep this shard's items (in place), deselect the others; a suite left with none is
    noted, so that this shard still writes its (empty) partial run of it."""
    from ..engine.shards import split
    from ..errors import EvalmineError
    from .items import EvalItem

    session = eval_session(config)
    try:
        shard = session.base.shard
    except EvalmineError as exc:  # checked at start-up: an environment changed since
        raise pytest.UsageError(str(exc)) from None
    if shard is None:
        return

    def key(item: pytest.Item) -> tuple[str, ...]:
        if isinstance(item, EvalItem):
            spec = item.spec
            return (spec.suite.name, spec.task.id, spec.case.id)
        return ("", item.nodeid)  # a plain test: in one shard too, by its node id

    kept, dropped = split(items, key, shard)
    if not dropped:
        return
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept
    kept_suites = {item.spec.suite.path for item in kept if isinstance(item, EvalItem)}
    for item in dropped:
        if isinstance(item, EvalItem) and item.spec.suite.path not in kept_suites:
            session.plan.shard_empty.add(item.spec.suite.path)


def empty_suites(config: pytest.Config) -> list[str]:
    """What a worker hands its controller (``SHARD_EMPTY_KEY``)."""
    return sorted(str(path) for path in eval_session(config).plan.shard_empty)


def nothing_left(session: pytest.Session) -> bool:
    """The shard kept no item at all: pytest would say "no tests collected" (exit 5), but
    an empty shard is a shard that ran: its partial runs are written and it passes."""
    return session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and bool(
        eval_session(session.config).plan.shard_empty
    )
