"""Hooks a conftest.py may implement (spec: "Fixtures and adapters", "Checks").

Registered by the plugin with ``pytest_addhooks``; pytest glue, so it may import pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest


@pytest.hookspec
def pytest_evalmine_adapters(registry: Any, config: pytest.Config) -> None:
    """Register your own adapters in ``registry`` (a ``pytest_evalmine.AdapterRegistry``),
    e.g. ``registry.register("app", MyApp)`` for model strings ``app/...``.

    Called for the adapter registry of every process of the run, the xdist controller
    included, which sees no fixtures: an adapter registered here is known to the preflight
    under ``-n 2``, one registered only by overriding the ``evalmine_adapters`` fixture is
    not."""


@pytest.hookspec
def pytest_evalmine_checks() -> Mapping[str, Callable[[Any], Any]] | Sequence[Callable[[Any], Any]]:
    """Return checks a suite can name in a task's ``checks`` list: a mapping name ->
    function, or a list of functions (named by ``__name__``).

    Each function receives a ``pytest_evalmine.CheckInput`` (``text``, ``reference``: the
    case's gold or the check's ``value``, ``options``: the check's options from the suite,
    ``parsed``, ``vars``, ``task``, ``case``, ``model``) and returns a bool, a score in
    [0, 1] (passing at 1, or at the ``threshold`` option), or a ``pytest_evalmine.Verdict``.
    An exception it raises becomes the item's error, shown with its own traceback."""
