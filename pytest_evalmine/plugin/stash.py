"""Where the plugin keeps its per-run state: stash keys on the pytest config and the run's
``EvalSession``, built on first use. Shared by the hooks (``plugin``) and the collectors
(``items``) so neither imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..options import resolve
from ..run.runtoken import new_run_token

if TYPE_CHECKING:
    from ..engine.session import EvalSession

# The test-report attribute that carries an item's answer record (to the xdist controller too).
RECORD_ATTRIBUTE = "evalmine_record"
SESSION_KEY = pytest.StashKey["EvalSession"]()
TOKEN_KEY = pytest.StashKey[str]()
SUMMARY_KEY = pytest.StashKey[list]()
FINISHED_KEY = pytest.StashKey[list]()
EXIT_KEY = pytest.StashKey[int]()  # the run's final exit status, for the verdict line
REFUSAL_KEY = pytest.StashKey[str]()  # why the run was refused before spending (exit 10)
# (exit code, text): what the last line says for that code instead of its meaning.
VERDICT_NOTE_KEY = pytest.StashKey[tuple[int, str]]()


def eval_session(config: pytest.Config) -> EvalSession:
    """The run's session object, created on first use (so plain test runs never build it)."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        from ..engine.session import EvalSession, Settings

        settings = Settings(resolve(config.getoption, config.getini))
        session = EvalSession(
            settings=settings, rootdir=Path(config.rootpath), run_token=run_token(config)
        )
        config.stash[SESSION_KEY] = session
    return session


def add_conftest_checks(config: pytest.Config) -> None:
    """Hand the checks of every ``pytest_evalmine_checks`` hook loaded so far to the
    session. Called before each suite file is loaded, so a conftest beside it counts."""
    checks: dict[str, object] = {}
    for answer in config.hook.pytest_evalmine_checks():
        if isinstance(answer, dict):
            checks.update(answer)
        else:
            checks.update({function.__name__: function for function in answer})
    if checks:
        eval_session(config).add_user_checks(checks)


def run_token(config: pytest.Config) -> str:
    """The session's run token: the controller's for an xdist worker, so that the ledger
    (one cap) and the call claims (one call per request) span every worker."""
    workerinput = getattr(config, "workerinput", {})
    if "evalmine_run_token" in workerinput:
        return str(workerinput["evalmine_run_token"])
    if TOKEN_KEY not in config.stash:
        config.stash[TOKEN_KEY] = new_run_token()
    return config.stash[TOKEN_KEY]


def is_active(config: pytest.Config) -> bool:
    return SESSION_KEY in config.stash
