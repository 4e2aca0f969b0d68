"""One batched dispatch of N requests against a loopback batch provider, in a process of its
own: ``python -m tests.batch_run URL CACHE N [PROVIDER]`` (``spawn`` starts it). Prints one
JSON line with the outcomes' statuses and cost. The batch tests kill it with SIGKILL while it
polls, and run it beside another process on the same cache; benchmarks/bench_batch.py times
it (``run_once``, the same dispatch in process, batched or online)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pytest_evalmine.adapters.base import Request
from pytest_evalmine.run.batch import BatchSession, BatchSettings
from pytest_evalmine.run.dispatch import Dispatcher, Outcome
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.runtoken import new_run_token
from pytest_evalmine.run.store import Store
from tests.dispatchers import loopback_registry
from tests.stores import is_sqlite, open_test_store

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "EVALMINE_TEST_BATCH_KEY"
MODELS = {
    "openai": "openai/gpt-6-sol",
    "anthropic": "anthropic/claude-haiku-4-5",
    "google": "google/gemini-2.5-flash",
}


def requests_for(n: int, provider: str) -> list[Request]:
    return [
        Request(model=MODELS[provider], prompt=f"case {i}: what is {i} + {i}?", max_tokens=64)
        for i in range(n)
    ]


def dispatcher(
    url: str, cache: str, *, cap: float = 5.0, batch: BatchSession | None, **options: Any
) -> Dispatcher:
    """``cache``: a SQLite file's path, or a PostgreSQL store's URL (``store_location``)."""
    return Dispatcher(
        registry=loopback_registry(url, KEY_ENV),
        store=Store(cache) if is_sqlite(cache) else open_test_store(cache),
        prices=load_prices(),
        run_token=new_run_token(),
        cap_usd=cap,
        batch=batch,
        **options,
    )


def run_once(
    url: str, cache: str, count: int, provider: str, poll_s: float | None
) -> tuple[dict[str, Outcome], BatchSession | None, float]:
    """``count`` requests to ``provider``'s model, batched and polled every ``poll_s`` seconds
    (``None``: online), under a 50 USD cap at width 32: the outcomes, the batch session and
    the wall time in seconds (building the dispatcher included)."""
    batch = None if poll_s is None else BatchSession(BatchSettings(poll_s=poll_s))
    started = time.perf_counter()
    run = dispatcher(url, cache, batch=batch, cap=50.0, concurrency=32)
    outcomes = run.run(run.plan(requests_for(count, provider)))
    return outcomes, batch, time.perf_counter() - started


def spawn(
    url: str, cache: Path | str, count: int, *, poll_s: float, output: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    """This module's run of ``count`` requests to OpenAI's wire in a process of its own,
    polling every ``poll_s`` seconds; its stdout and stderr to ``output``."""
    env = {**os.environ, "EVALMINE_TEST_BATCH_POLL_S": str(poll_s), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.batch_run", url, str(cache), str(count)],
        cwd=ROOT,
        env=env,
        stdout=output,
        stderr=output,
        text=True,
    )


def main() -> None:
    url, cache, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    provider = sys.argv[4] if len(sys.argv) > 4 else "openai"
    poll_s = float(os.environ.get("EVALMINE_TEST_BATCH_POLL_S", "0.05"))
    online = os.environ.get("EVALMINE_TEST_BATCH_ONLINE") == "1"
    outcomes, _batch, wall_s = run_once(url, cache, count, provider, None if online else poll_s)
    print(
        json.dumps(
            {
                "statuses": dict(Counter(o.status for o in outcomes.values())),
                "cached": sum(o.cached for o in outcomes.values()),
                "cost_usd": sum(o.cost_usd for o in outcomes.values()),
                "wall_s": wall_s,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
