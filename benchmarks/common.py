"""What every benchmark shares: how the measured pytest processes start."""

from __future__ import annotations

import os
import sys


def pytest_command(*args: str, all_plugins: bool = False) -> list[str]:
    """``python -m pytest``, loading this project's plugin by name unless every plugin is
    autoloaded (its entry point would register it a second time); run it with
    ``child_environment(all_plugins)``."""
    plugin = [] if all_plugins else ["-p", "pytest_evalmine.plugin"]
    return [sys.executable, "-m", "pytest", *plugin, *args]


def child_environment(all_plugins: bool = False) -> dict[str, str]:
    """This environment, with Python's bytecode cache on and, unless ``all_plugins``, pytest's
    plugin autoload off.

    Bytecode cache: a user's machine writes ``__pycache__`` (pytest caches its rewritten plugin
    modules there too), so a measured process should not compile some 140 modules on every
    start, as it would under PYTHONDONTWRITEBYTECODE. Each benchmark runs one unmeasured process
    first to fill it.

    Autoload: a user's virtualenv holds this project and its dependencies; this machine's
    holds the dev extra and more, whose plugins load into every pytest process (hypothesis's
    imports hypothesis and trio and runs a full garbage collection: about 0.5 s of CPU a
    process here). Those are not this plugin's cost; report.py measures the 800-request run
    with them too, so the difference stays visible.
    """
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if all_plugins:
        environment.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    else:
        environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return environment
