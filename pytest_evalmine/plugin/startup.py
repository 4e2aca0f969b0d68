"""pytest glue before anything runs (spec: "Options"): every option value is checked at
start-up, and ``--evalmine-compare`` once the run's suites are known, so a bad one is one
line and exit 4 before any call, never a run whose results are lost at session finish."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..options import SPEC_OPTIONS, check_given, check_values, report_root, resolve
from .stash import eval_session

if TYPE_CHECKING:
    from ..suite.loader import Suite


def check_options(config: pytest.Config) -> None:
    """From ``pytest_configure``: every value from the flags, the ini keys and the
    environment is parsed and checked (``pytest.UsageError``, one line naming the option);
    ``--evalmine-suite`` prepares the built-in suites it names."""
    from ..errors import EvalmineError

    try:
        check_given(config.getoption)
        values = resolve(config.getoption, config.getini)
        check_values(values)
        report_root(Path(config.rootpath), values["report_dir"])
        if any(values[name] for name in SPEC_OPTIONS):
            from ..engine.session import Settings, check_settings

            check_settings(Settings(values))
        from ..run.endpoints import base_urls_from

        base_urls_from()  # the providers' base-URL variables, held to an endpoint's rules
        if values["prices"]:
            from ..run.prices import load_prices

            load_prices(Path(config.rootpath) / values["prices"])
        if values["suite"]:
            _add_builtin_suites(config, values["suite"])
        _open_shared_store(config, values["store"])
    except (ValueError, EvalmineError) as exc:
        raise pytest.UsageError(str(exc)) from None


def _open_shared_store(config: pytest.Config, option_value: str | None) -> None:
    """A store named by URL is opened now: a bad URL, a server that cannot be reached or a
    database with a newer schema is one line and exit 4 before anything runs."""
    from ..run.store.location import check_location, is_postgresql, store_location

    location = store_location(option_value)
    check_location(location)
    if is_postgresql(location):
        eval_session(config).store  # noqa: B018  (opened, kept for the run)


def _add_builtin_suites(config: pytest.Config, names: list[str]) -> None:
    """``--evalmine-suite=NAME``: prepare each built-in suite file and collect it; without
    paths on the command line, only them (not the testpaths)."""
    from ..suite.builtin import materialize

    home = eval_session(config).home
    paths = [str(materialize(name, home)) for name in names]
    explicit = config.args_source == pytest.Config.ArgsSource.ARGS
    kept = list(config.args) if explicit else []
    config.args = kept + [path for path in paths if path not in kept]


def compare_problem(config: pytest.Config, suites: Iterable[Suite]) -> str | None:
    """Why ``--evalmine-compare`` names no readable run report for one of ``suites``, or
    ``--evalmine-compare-by`` no field of its cases, or None. Asked once the suites are
    selected, before any call: by collection finish, and on the xdist controller when a
    worker has collected."""
    from ..engine.finish import check_compare
    from ..errors import EvalmineError

    try:
        check_compare(eval_session(config), suites)
    except EvalmineError as exc:
        return str(exc)
    return None
