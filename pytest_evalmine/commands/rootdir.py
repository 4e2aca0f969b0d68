"""Where the ``evalmine`` command looks for a project when ``--rootdir`` is not given: the
rootdir pytest itself would pick from the working directory and the paths the command was
given (spec "Command line"), so that ``evalmine runs SUITE`` finds the runs ``pytest SUITE``
wrote wherever the suite file lies.

pytest's rule (its "rootdir" documentation): the first configuration file (``pytest.ini``,
``pyproject.toml`` with a pytest table, ...) in the paths' common ancestor or above it; else
the first ``setup.py`` there or above; else a configuration file in or above any one path;
else the common ancestor of the paths and the working directory (the paths' own, when that
is the file system's root). The rule is pytest's own function, so the command follows the
installed pytest's version of it; it lives here, in the command layer, the one part of the
core that runs beside pytest rather than under it."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path


def pytest_rootdir(paths: Sequence[str | Path], cwd: Path) -> Path:
    """The rootdir ``pytest PATHS...`` run from ``cwd`` would have (``cwd`` itself with no
    path). A configuration file pytest cannot read, or a pytest whose rule cannot be called
    as expected, gives ``cwd``: the command's own errors then name that folder."""
    from _pytest.config.exceptions import UsageError
    from _pytest.config.findpaths import determine_setup

    # pytest resolves its arguments against the working directory: so does the command.
    given = [str(cwd / path) for path in paths]
    arguments: dict[str, object] = {
        "inifile": None,
        "args": given,
        "rootdir_cmd_arg": None,
        "invocation_dir": cwd,
    }
    if "override_ini" in inspect.signature(determine_setup).parameters:  # pytest 9
        arguments["override_ini"] = None
    try:
        rootdir = determine_setup(**arguments)[0]  # type: ignore[arg-type]
    except (UsageError, OSError, ValueError, TypeError):
        return cwd
    return Path(rootdir)
