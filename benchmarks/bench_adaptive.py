"""Adaptive concurrency against loopback servers with K slots and a queue (issue 21, section 2).

For each server (1 or 4 slots, each answer taking --service seconds, extra requests waiting in
the server's queue) and each setting (the default adaptive width, with and without llama.cpp's
``/props`` declaring the slots, and fixed widths 1, 2, 4, 8 under the default ceiling 8): wall
time of --requests calls, how many timed out (request timeout --timeout, no retries, so a
timeout is final and counted once), the answers' p50/p95 latency (from the send, the server's queue
included), the scorecard's p50/p95 (over the answers sent within the capacity found), the
widths used. "adaptive, rerun" is a second run on the same cache and server, which starts at
the width the first one learnt. Then a server that
answers 429 bursts: the retries it cost, adaptive against fixed 8 (today's default).

Numbers for closing notes, never thresholds in tests.

    python benchmarks/bench_adaptive.py [--requests 40] [--service 0.2] [--timeout 1.0]
        [--slots 1 4] [--settings adaptive fixed:4 ...] [--no-burst]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_evalmine.adapters.base import Request  # noqa: E402
from pytest_evalmine.adapters.registry import AdapterRegistry  # noqa: E402
from pytest_evalmine.run.dispatch import Dispatcher, Outcome  # noqa: E402
from pytest_evalmine.run.endpoints import parse_option  # noqa: E402
from pytest_evalmine.run.prices import load_prices  # noqa: E402
from pytest_evalmine.run.store import Store  # noqa: E402
from tests.slot_server import SlotServer, running_slot_server  # noqa: E402

# "adaptive, rerun": a second run on the same cache and server (new requests), which starts
# at the width the first one learnt (the table learned_widths).
SETTINGS = (
    "adaptive",
    "adaptive, rerun",
    "adaptive+props",
    "fixed:1",
    "fixed:2",
    "fixed:4",
    "fixed:8",
)


def run_once(
    scratch: Path, server: SlotServer, setting: str, requests: int, timeout_s: float, retries: int
) -> tuple[float, list[Outcome], dict]:
    with running_slot_server(server) as (loopback, _):
        if setting == "adaptive, rerun":
            _dispatch(scratch, loopback.url, "adaptive", requests, timeout_s, retries, "first")
            server.posts = 0
        return _dispatch(scratch, loopback.url, setting, requests, timeout_s, retries, "question")


def _dispatch(
    scratch: Path, url: str, setting: str, requests: int, timeout_s: float, retries: int, ask: str
) -> tuple[float, list[Outcome], dict]:
    option = f",concurrency={setting}" if setting.startswith("fixed") else ""
    endpoint = parse_option(f"local={url}/v1,free{option}")
    registry = AdapterRegistry()
    registry.register("local", endpoint.factory())
    row = endpoint.price_row()
    assert row is not None
    dispatcher = Dispatcher(
        registry=registry,
        store=Store(scratch / "cache.sqlite"),
        prices=load_prices().with_rows((row,)),
        run_token="bench",
        cap_usd=10.0,
        retries=retries,
        concurrency=8,  # the default ceiling
        # What a run's session builds: adaptive, fixed only where the endpoint says so.
        adaptive=True,
        fixed_providers=frozenset({"local"}) if endpoint.concurrency_fixed else frozenset(),
        provider_concurrency={"local": endpoint.concurrency} if endpoint.concurrency else {},
    )
    asked = [
        Request(model="local/m", prompt=f"{ask} {i}", max_tokens=16, timeout_s=timeout_s)
        for i in range(requests)
    ]
    planned = dispatcher.plan(asked)
    started = time.perf_counter()
    outcomes = dispatcher.run_each(planned)
    wall = time.perf_counter() - started
    return wall, outcomes, dispatcher.concurrency_used()["local"]


def _p50_p95(answers: list) -> tuple[float, float]:
    latencies = [a.latency_s for a in answers]
    if len(latencies) < 2:
        return (latencies[0] if latencies else 0.0,) * 2
    return statistics.median(latencies), statistics.quantiles(latencies, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--service", type=float, default=0.2)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--no-burst", action="store_true")
    args = parser.parse_args()
    print(
        f"{args.requests} requests, {args.service} s per answer, request timeout {args.timeout} s"
    )
    print(
        f"{'slots':>5}  {'setting':<15} {'wall s':>7} {'x best':>7} {'timeouts':>8} "
        f"{'p50 s':>6} {'p95 s':>6} {'card p50':>8} {'card p95':>8}  widths used"
    )
    with tempfile.TemporaryDirectory() as scratch:
        for slots in args.slots:
            rows = []
            for setting in args.settings:
                server = SlotServer(slots, args.service, declare_slots=setting == "adaptive+props")
                wall, outcomes, used = run_once(
                    Path(scratch) / f"{slots}-{setting}", server, setting, args.requests,
                    args.timeout, retries=0,
                )  # fmt: skip
                timeouts = sum(o.error_kind == "timeout" for o in outcomes)
                answers = [o.response for o in outcomes if o.response is not None]
                # What the scorecard takes: answers sent within the capacity found.
                capacity = used.get("capacity", used["max"])
                within = [a for a in answers if a.width is None or a.width <= capacity]
                figures = (*_p50_p95(answers), *_p50_p95(within))
                rows.append((setting, wall, timeouts, figures, used))
            # The best fixed width: the fastest that timed nothing out.
            clean = [row[1] for row in rows if row[0].startswith("fixed") and not row[2]]
            best = min(clean, default=math.nan)
            for setting, wall, timeouts, (p50, p95, card50, card95), used in rows:
                widths = f"{used['min']}-{used['max']} (final {used['final']})"
                print(
                    f"{slots:>5}  {setting:<15} {wall:7.2f} {wall / best:7.2f} {timeouts:>8} "
                    f"{p50:6.2f} {p95:6.2f} {card50:8.2f} {card95:8.2f}  {widths}, "
                    f"{used['backoffs']} back-offs"
                )
        if args.no_burst:
            return
        print("\n429 bursts (8 slots, 0.02 s answers, 429 from 0.05 s to 0.2 s, Retry-After 0.05)")
        for setting in ("adaptive", "fixed:8"):
            burst = SlotServer(8, 0.02, burst_429=(0.05, 0.15), retry_after_s=0.05)
            wall, outcomes, used = run_once(
                Path(scratch) / f"burst-{setting}", burst, setting, 24, 5.0, retries=4
            )
            retried = sum(o.attempts - 1 for o in outcomes)
            failed = sum(o.status != "ok" for o in outcomes)
            print(
                f"  {setting:<10} retries {retried:>3}, failed {failed}, wall {wall:.2f} s, "
                f"widths {used['min']}-{used['max']}, {used['backoffs']} back-offs"
            )


if __name__ == "__main__":
    main()
