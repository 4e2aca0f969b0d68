"""Hooks a conftest.py may implement (spec: "Fixtures and adapters").

Registered by the plugin with ``pytest_addhooks``; pytest glue, so it may import pytest.
"""

from __future__ import annotations

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
