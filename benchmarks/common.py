"""What every benchmark shares: the environment of the measured pytest processes."""

from __future__ import annotations

import os


def child_environment() -> dict[str, str]:
    """This environment, with Python's bytecode cache on: a user's machine writes
    ``__pycache__`` (pytest caches its rewritten plugin modules there too), so a measured
    process should not compile some 140 modules on every start, as it would under
    PYTHONDONTWRITEBYTECODE. Each benchmark runs one unmeasured process first to fill it."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
