"""Every dispatch ends (issue 28; spec "Dispatch", **Termination**).

A property test over generated scenarios (tests/termination_scenarios.py: 1-3 providers on
loopback, online, batched or mixed, caps from zero to above the worst case, timeouts, 429
with Retry-After, 5xx, resets, lying usage, fixed and adaptive widths, one or two processes
on one cache, a Ctrl-C after the N-th request): each run must end within a guard computed
from its timeouts, retries and polls, give every request an outcome, stay within the cap,
lose no paid answer and leave no reservation, claim or batch submission open. The CI profile
here is small; benchmarks/soak_termination.py runs many more. And the two runs the issue
found that never ended, as plain tests.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings

from pytest_evalmine import exitcodes
from tests.termination_scenarios import Call, Scenario, run, scenarios, violations

settings.register_profile(
    "termination-ci",
    max_examples=int(os.environ.get("EVALMINE_TERMINATION_EXAMPLES", "12")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The search alone (no explicit examples): EVALMINE_TERMINATION_SEARCH=1, to see what the
# generated scenarios find by themselves.
settings.register_profile(
    "termination-search",
    settings.get_profile("termination-ci"),
    phases=[Phase.generate, Phase.shrink],
)
CI = settings.get_profile(
    "termination-search" if os.environ.get("EVALMINE_TERMINATION_SEARCH") else "termination-ci"
)
# Issue 28's two hangs, as scenarios: two calls whose first tries time out under a cap with
# room for both but for no retry; three providers' batches ending at different polls under a
# cap halfway from the estimate to the worst case.
ONLINE_HANG = Scenario(
    calls=(Call("openai", 0, ("timeout",)), Call("openai", 1, ("timeout",))),
    batched=frozenset(),
    retries=1,
    concurrency=2,
    adaptive=False,
    cap_units=2.5,
)


def batched_everywhere(cases: int, polls: dict[str, int]) -> Scenario:
    """3 providers x ``cases`` batched, each provider's batches ending after ``polls`` polls,
    under a cap halfway from the estimate to the worst case."""
    providers = ("anthropic", "google", "openai")
    return Scenario(
        calls=tuple(Call(p, case, ()) for p in providers for case in range(cases)),
        batched=frozenset(providers),
        retries=0,
        concurrency=8,
        adaptive=False,
        cap_units=0.0,
        cap_fraction=0.5,
        polls_to_end=polls,
    )


BATCH_HANG = batched_everywhere(3, {"openai": 0, "anthropic": 1, "google": 2})


def check(scenario: Scenario) -> None:
    with TemporaryDirectory() as directory:
        result = run(scenario, Path(directory))
        broken = violations(result)
    assert not broken, "\n".join(broken)


@settings(CI)
@example(ONLINE_HANG)
@given(scenarios(ways=("online",)))
def test_every_online_run_ends_with_its_invariants(scenario: Scenario) -> None:
    check(scenario)


@settings(CI)
@example(BATCH_HANG)
@given(scenarios(ways=("batch",)))
def test_every_batched_run_ends_with_its_invariants(scenario: Scenario) -> None:
    check(scenario)


@settings(CI)
@given(scenarios(ways=("mixed",)))
def test_every_mixed_run_ends_with_its_invariants(scenario: Scenario) -> None:
    check(scenario)


ISSUE_SUITE = """\
version: 1
suite: small
models: [fake/a, fake/b]
tasks:
  - id: t1
    kind: answer
    prompt: "Say hi to {{ name }}"
    cases:
      - {id: c1, vars: {name: Ann}}
      - {id: c2, vars: {name: Bob}}
"""
# A hang guard for the child pytest (the run itself takes seconds), never a timing threshold.
HANG_GUARD_S = 120


def test_two_retries_under_a_cap_for_the_first_tries_end_the_run_partial(
    pytester: pytest.Pytester,
) -> None:
    """Issue 28's online hang: both first tries time out (possibly billed), the cap has room
    for both but for no retry; each retry used to wait for the other to settle, for ever."""
    pytester.makefile(".eval.yaml", small=ISSUE_SUITE)
    result = pytester.runpytest_subprocess(
        "small.eval.yaml",
        "--evalmine-models=fake/a",
        "--evalmine-no-cache",
        "--evalmine-max-cost=0.0032",
        "--evalmine-fake-fault=timeout,count=2",
        "-p",
        "no:cacheprovider",
        timeout=HANG_GUARD_S,
    )
    assert result.ret == exitcodes.STOPPED_OVER_BUDGET, result.stdout.str()


def test_three_batched_providers_under_a_cap_below_the_worst_case_all_end(
    tmp_path: Path,
) -> None:
    """Issue 28's batch hang: 3 providers x 6 cases, batched, their batches ending at
    different polls, a cap halfway from the estimate to the worst case. Calls that found room
    while a later wave was being submitted used to be left queued, never submitted, their
    claims running for ever."""
    scenario = batched_everywhere(6, {"openai": 1, "anthropic": 2, "google": 0})
    result = run(scenario, tmp_path)
    assert violations(result) == []
    # Answers settle below their reservations: the room they free lets the waiting calls in.
    statuses = Counter(o.status for o in result.outcomes[0].values())
    assert set(statuses) <= {"ok", "budget"} and statuses["ok"] >= 6, statuses
