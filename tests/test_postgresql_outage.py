"""The PostgreSQL server going down in the middle of a real run (spec: "Cache database" and
"Exit codes"): ``pg_ctl stop`` while answers are being paid for. The run ends, never hangs,
with one clear line and the documented exit code, no traceback; every answer committed
before the stop is still there once the server is back, and the rerun pays only for what was
never committed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from tests.postgres_server import PASSWORD, PostgresServer

from .conftest import COUNTING_CONFTEST

CASES = 30  # x 2 models: 60 calls, far more than are made before the stop


def many_cases_suite() -> str:
    cases = "\n".join(f"      - {{id: c{i}, vars: {{m: 'message {i}'}}}}" for i in range(CASES))
    header = """\
        version: 1
        suite: small
        models: [fake/alpha, fake/beta]
        defaults: {max_tokens: 64, temperature: 0}
        tasks:
          - id: say
            kind: echo
            prompt: "Say: {{ m }}"
            cases:
        """
    return textwrap.dedent(header) + cases + "\n"


def calls_made(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def stored_keys(url: str) -> set[str]:
    with psycopg.connect(url) as db:
        return {row[0] for row in db.execute("SELECT key FROM evalmine.answers")}


def test_a_server_stopped_mid_run_ends_the_run_clearly_and_the_rerun_pays_nothing_twice(
    postgres_server: PostgresServer, pytester: pytest.Pytester
) -> None:
    pytester.makefile(".eval.yaml", small=many_cases_suite())
    pytester.makeconftest(COUNTING_CONFTEST)
    log = pytester.path / "calls.log"
    url = postgres_server.url(postgres_server.fresh_database(), password=True)
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark",
        "--evalmine-fake", "--evalmine-concurrency=2", f"--evalmine-store={url}",
    ]  # fmt: skip
    environment = {**os.environ, "TEST_FAKE_LATENCY": "0.3", "EVALMINE_LEASE_S": "2"}
    run = subprocess.Popen(
        command,
        cwd=pytester.path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(calls_made(log)) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(calls_made(log)) >= 6, "the run never started calling"
        postgres_server.halt()
        # The store's timeouts (connect 10 s, pool 10 s, three tries) end it: never a hang.
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        postgres_server.launch()
    first_calls = calls_made(log)
    # Exit 4, as for a store unusable at start-up (spec: "Exit codes"), with one line.
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, (run.returncode, output[-3000:])
    assert "Traceback" not in output, output[-3000:]
    assert PASSWORD not in output
    assert "cannot be used" in output and "postgresql://evalmine:***@" in output, output[-3000:]
    assert "the run stopped" in output and "evalmine: exit 4: usage error" in output
    assert len(first_calls) < 2 * CASES  # it stopped, it did not carry on without a store
    # Each answer committed before the stop is in the database; every call made is at most
    # one (the answers in flight at the stop could not be committed: they are the ones the
    # rerun makes again).
    committed = stored_keys(url)
    assert 0 < len(committed) <= len(first_calls)
    rerun = subprocess.run(
        command, cwd=pytester.path, env=environment, capture_output=True, text=True, timeout=300
    )
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    assert len(stored_keys(url)) == 2 * CASES
    # What was committed was not paid for again: the rerun called only the rest.
    rerun_calls = calls_made(log)[len(first_calls) :]
    assert len(rerun_calls) == 2 * CASES - len(committed)
    assert len(set(first_calls + rerun_calls)) == 2 * CASES
    repeated = len(first_calls) + len(rerun_calls) - 2 * CASES
    assert repeated == len(first_calls) - len(committed)  # only those lost in flight
