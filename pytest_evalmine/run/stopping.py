"""One process of a run stops every other (spec: "Dispatch", xdist and Ctrl-C).

A terminal sends Ctrl-C to the whole process group, but ``kill -INT`` on the controller, a CI
runner cancelling a job or a process manager signals the xdist controller alone, and its
workers would go on sending until they were killed. The controller asks the run to stop in
the cache database every worker shares (``Store.request_stop``); each worker's dispatch polls
for it and stops as at its own first Ctrl-C (nothing new sent, the calls in flight get their
grace to land). The controller then waits for those calls before it counts them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .interrupts import INTERRUPT_GRACE_S, STOP_POLL_S
from .store import StoreBackend

# After the workers' grace: time for a call cut off at its end to be written down.
SETTLE_SLACK_S = 2.0


def stop_run(store: StoreBackend, run_token: str) -> set[str]:
    """Ask every process of the run to send nothing new; the requests in flight now."""
    store.request_stop(run_token)
    return store.reserved_keys(run_token)


def wait_for_calls(
    store: StoreBackend,
    run_token: str,
    timeout_s: float = INTERRUPT_GRACE_S + SETTLE_SLACK_S,
    *,
    poll_s: float = STOP_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> set[str]:
    """Wait until no call of the run is in flight (reserved in the ledger, not settled),
    at most ``timeout_s``, and at least two polls, so that a dispatch that had not yet seen
    the stop has seen it (a call is reserved before it is sent). Returns the requests still
    in flight."""
    start = clock()
    while True:
        in_flight = store.reserved_keys(run_token)
        waited = clock() - start
        if (not in_flight and waited >= 2 * poll_s) or waited >= timeout_s:
            return in_flight
        sleep(poll_s)
