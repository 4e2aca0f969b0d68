"""Provider batches against the loopback batch provider (issue 23): a --cases-case run sent as
batches, then the same requests online, on fresh caches; then the same run killed with
SIGKILL while it polls its batch and run again, with the server's counts showing nothing was
paid twice.

For each wire (OpenAI files + batches, Anthropic message batches, Gemini inline): calls,
batches, the run's cost at batch prices against the online run's at online prices, wall
time (the batch is held "in progress" for --polls polls --poll seconds apart, as a real one is
for minutes or hours; the online run answers at once). Numbers for closing notes, never
thresholds in tests.

    python benchmarks/bench_batch.py [--cases 2000] [--polls 3] [--poll 0.2]
        [--wires openai anthropic google]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.batch_run import KEY_ENV, run_once, spawn  # noqa: E402
from tests.batch_servers import BatchProvider, ProviderServer  # noqa: E402


def one_run(url: str, cache: Path, cases: int, wire: str, poll_s: float | None) -> dict:
    outcomes, batch, wall = run_once(url, str(cache), cases, wire, poll_s)
    return {
        "ok": sum(o.status == "ok" for o in outcomes.values()),
        "cost": sum(o.cost_usd for o in outcomes.values()),
        "wall": wall,
        "batches": len(batch.batches) if batch else 0,
        "resumed": sum(b["resumed"] for b in batch.batches.values()) if batch else 0,
    }


def compare(wire: str, cases: int, polls: int, poll_s: float, folder: Path) -> None:
    provider = BatchProvider(polls_to_end=polls)
    server = ProviderServer(provider)
    try:
        batched = one_run(server.url, folder / f"{wire}-batch.sqlite", cases, wire, poll_s)
        sent = (provider.batches_created, provider.requests_batched, provider.online_calls)
        online = one_run(server.url, folder / f"{wire}-online.sqlite", cases, wire, None)
    finally:
        server.stop()
    print(
        f"{wire:9} {cases} cases: batched {batched['ok']} ok in {sent[0]} batch(es) of "
        f"{sent[1]} requests ({sent[2]} online), ${batched['cost']:.4f}, {batched['wall']:.2f} s"
        f" | online {online['ok']} ok, {provider.online_calls - sent[2]} calls, "
        f"${online['cost']:.4f}, {online['wall']:.2f} s | batch/online cost "
        f"{batched['cost'] / online['cost']:.3f}"
    )


def kill_and_resume(cases: int, poll_s: float, folder: Path) -> None:
    provider = BatchProvider(polls_to_end=-1)
    server = ProviderServer(provider)
    cache = folder / "killed.sqlite"
    try:
        child = spawn(server.url, cache, cases, poll_s=poll_s, output=subprocess.DEVNULL)
        started = time.perf_counter()
        while provider.polls < 2:
            if child.poll() is not None or time.perf_counter() - started > 300:
                raise SystemExit("the run ended before it polled its batch")
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        before = (provider.batches_created, provider.requests_batched, provider.online_calls)
        provider.finish_all()
        resumed = one_run(server.url, cache, cases, "openai", poll_s)
        after = (provider.batches_created, provider.requests_batched, provider.online_calls)
        again = one_run(server.url, cache, cases, "openai", poll_s)
        last = (provider.batches_created, provider.requests_batched, provider.online_calls)
    finally:
        server.stop()
    print(
        f"kill -9 while polling ({cases} cases): killed after submitting; server saw "
        f"{before[0]} batch, {before[1]} requests, {before[2]} online"
    )
    print(
        f"  rerun: {resumed['ok']} ok, {resumed['resumed']} batch resumed, "
        f"${resumed['cost']:.4f} (the answers' bill, paid once), {resumed['wall']:.2f} s; "
        f"server now {after[0]} batch, {after[1]} requests, {after[2]} online"
    )
    print(
        f"  third run: {again['ok']} ok from the cache, ${again['cost']:.4f}; server "
        f"{last[0]} batch, {last[1]} requests, {last[2]} online"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--polls", type=int, default=3)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--wires", nargs="+", default=["openai", "anthropic", "google"])
    args = parser.parse_args()
    os.environ.setdefault(KEY_ENV, "sk-bench-key")
    with tempfile.TemporaryDirectory() as folder:
        for wire in args.wires:
            compare(wire, args.cases, args.polls, args.poll, Path(folder))
        kill_and_resume(args.cases, args.poll, Path(folder))
    print(json.dumps({"cases": args.cases, "polls": args.polls, "poll_s": args.poll}))


if __name__ == "__main__":
    main()
