"""Issue 8 "Money": the cap cannot be disabled, two runs never pay one call twice, a call that
may have been billed counts, impossible usage is clamped, and the user hears about a tight
cap before the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_evalmine.errors import EvalmineError

from .conftest import call_count
from .test_dispatch import Probe, make_dispatcher


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("flag", "nan", "--evalmine-max-cost: 'nan' is not a finite number"),
        ("flag", "inf", "--evalmine-max-cost: 'inf' is not a finite number"),
        ("flag", "-1", "--evalmine-max-cost: -1 is below the minimum of 0"),
        ("flag", "abc", "--evalmine-max-cost: 'abc' is not a number"),
        ("env", "nan", "EVALMINE_MAX_COST: 'nan' is not a finite number"),
        ("env", "-5", "EVALMINE_MAX_COST: -5 is below the minimum of 0"),
        ("env", "abc", "EVALMINE_MAX_COST: 'abc' is not a number"),
        ("ini", "inf", "ini evalmine_max_cost: 'inf' is not a finite number"),
        ("flag-concurrency", "0", "--evalmine-concurrency: 0 is below the minimum of 1"),
        ("flag-retries", "1.5", "--evalmine-retries: '1.5' is not a whole number"),
        ("flag-fake-latency", "nan", "--evalmine-fake-latency: 'nan' is not a finite number"),
        ("flag-endpoint", "x=http://127.0.0.1:9,input=nan", "*input: 'nan' is not a finite*"),
    ],
)
def test_every_number_is_checked_once_at_start_up(
    pytester: pytest.Pytester,
    small_suite: Path,
    counting: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    value: str,
    message: str,
) -> None:
    args = []
    if where == "flag":
        args.append(f"--evalmine-max-cost={value}")
    elif where == "env":
        monkeypatch.setenv("EVALMINE_MAX_COST", value)
    elif where == "ini":
        pytester.makeini(f"[pytest]\nevalmine_max_cost = {value}\n")
    else:
        args.append(f"--evalmine-{where.removeprefix('flag-')}={value}")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert call_count(counting) == 0


def test_a_suite_limit_that_is_not_finite_is_refused(tmp_path: Path) -> None:
    from pytest_evalmine.options import cap_from

    with pytest.raises(ValueError, match="is not a finite number"):
        cap_from(None, [float("nan")])


@pytest.mark.parametrize("cap", [float("nan"), float("inf"), -1.0])
def test_the_dispatcher_refuses_a_cap_that_cannot_stop_it(tmp_path: Path, cap: float) -> None:
    with pytest.raises(EvalmineError, match="cost cap"):
        make_dispatcher(tmp_path, Probe(), cap=cap)
