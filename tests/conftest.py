"""Shared helpers: a small suite, a call-counting adapter, and report readers."""

from __future__ import annotations

import json
import os
import sqlite3
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import jsonschema  # noqa: F401
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

import pytest_evalmine.adapters.aiohttp_transport  # noqa: F401
from pytest_evalmine import redaction
from pytest_evalmine.suite.builtin import BUILTIN_SUITES, DATA_ENV
from tests.postgres_server import INSTALL as POSTGRES_INSTALL
from tests.postgres_server import PostgresServer, server_bin
from tests.stores import close_test_stores, is_sqlite, open_test_store

__all__ = ["is_sqlite", "open_test_store"]  # for the tests that import them from here

# The variables the built-in providers read for their base URL (run/endpoints.py).
BASE_URL_NAMES = ("ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "OPENAI_BASE_URL")

# The statistics import numpy and scipy when first needed. pytester's in-process runs unload
# every module imported during the run, and numpy refuses to load twice in one process, so
# the test process loads them once, up front (a real pytest run imports them once anyway).
# jsonschema likewise: the task-schema check keeps its validator classes (an lru_cache), so a
# jsonschema loaded anew raised a SchemaError the check no longer caught.
# The adapters' HTTP client likewise: new_client imports aiohttp (and httpx-aiohttp) lazily,
# and an aiohttp loaded anew after a pytester run would meet its C extensions (parser,
# multidict, yarl) kept from the first load, with exception classes the new one no longer
# catches.

SMALL_SUITE = """\
version: 1
suite: small
models: [fake/alpha, fake/beta]
defaults: {max_tokens: 64, temperature: 0}
tasks:
  - id: triage
    kind: classify
    prompt: "Classify: {{ message }}"
    schema:
      type: object
      properties:
        category: {enum: [billing, bug, other]}
      required: [category]
      additionalProperties: false
    cases:
      - {id: charged-twice, vars: {message: "I was charged twice"}}
      - {id: login-loop, vars: {message: "The login page loops"}}
  - id: polite
    kind: rewrite
    prompt: "Rewrite politely: {{ text }}"
    cases:
      - {id: refund-no, vars: {text: "No refunds. Read the policy."}}
"""

# A conftest for pytester runs: wraps the fake adapter and appends one line per real call to
# calls.log, so call counts survive xdist workers and killed processes.
COUNTING_CONFTEST = """\
import os
import pytest
from pytest_evalmine.adapters.registry import AdapterRegistry
from pytest_evalmine.adapters.fake import FakeAdapter, FakeOptions

LOG = os.path.join(os.path.dirname(__file__), "calls.log")


class CountingAdapter(FakeAdapter):
    async def complete(self, request):
        with open(LOG, "a") as log:
            log.write(request.model + " " + request.prompt.replace("\\n", " ") + "\\n")
        return await super().complete(request)


@pytest.fixture(scope="session")
def evalmine_adapters():
    latency = float(os.environ.get("TEST_FAKE_LATENCY", "0"))
    registry = AdapterRegistry()
    registry.register("fake", lambda: CountingAdapter(FakeOptions(latency_s=latency)))
    return registry
"""


# Read once, before any test: the override names the public data sets for ``shared_data``,
# and is then taken out of every test's environment (below), so a built-in suite reads a copy
# only when its test says so.
PUBLIC_DATA_OVERRIDE = os.environ.get(DATA_ENV)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The providers' base-URL variables too: a developer's gateway must not redirect tests.
    for name in (
        "EVALMINE_MAX_COST", "EVALMINE_HOME", "EVALMINE_STORE", DATA_ENV, *BASE_URL_NAMES
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    # A process redacts every key it ever loaded; pytester's in-process runs share this one,
    # so each test starts with none, as a pytest process of its own would (a key an earlier
    # test loaded could otherwise redact, and be counted in, this test's texts).
    monkeypatch.setattr(redaction, "_loaded", redaction._secrets(frozenset()))


def unavailable(message: str) -> NoReturn:
    """Something a test needs from outside the repository is missing: the test skips with
    ``message`` (which says how to provide it), except under ``CI=true``, where it fails: CI
    provides everything (.ci/run), so there a broken set-up never passes as skipped."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(
            f"{message} (CI=true: CI provides it, so this is a failure here)", pytrace=False
        )
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test process (each xdist worker starts its own), started
    on first use, stopped at the end of the session."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        unavailable("psycopg 3 is not installed: pip install 'pytest-evalmine[postgresql]'")
    folder = server_bin()
    if folder is None:
        unavailable(f"no PostgreSQL server binaries (initdb, pg_ctl): {POSTGRES_INSTALL}")
    server = PostgresServer(folder)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a database of this test's own, on the tests' server (trusted user)."""
    return postgres_server.url(postgres_server.fresh_database())


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a store under test lives, once per backend: a SQLite file, a fresh PostgreSQL
    database (``open_test_store(location)``). The PostgreSQL case skips without the server
    (naming what to install), and fails so under ``CI=true`` (``postgres_server``)."""
    if request.param == "sqlite":
        location = str(tmp_path / "cache.sqlite")
    else:
        location = request.getfixturevalue("postgres_url")
    yield location
    close_test_stores()


@dataclass(frozen=True)
class RunStore:
    """The store a whole pytest run uses (``run_store``): SQLite under the run's folder
    (``url`` None, no option), or a PostgreSQL database (``--evalmine-store=URL``)."""

    url: str | None

    @property
    def options(self) -> list[str]:
        return [] if self.url is None else [f"--evalmine-store={self.url}"]

    def answer_keys(self, root: Path) -> set[str]:
        """Every answer in the store (``root``: the folder the run ran in)."""
        if self.url is None:
            return cached_keys(root)
        import psycopg

        with psycopg.connect(self.url) as db:
            return {row[0] for row in db.execute("SELECT key FROM evalmine.answers")}


@pytest.fixture(params=["sqlite", "postgresql"])
def run_store(request: pytest.FixtureRequest) -> RunStore:
    """The store of an end-to-end run, once per backend (a handful of runs take it: the
    money and cache guarantees across processes); the PostgreSQL case skips without the
    server, as ``postgres_server`` does."""
    if request.param == "sqlite":
        return RunStore(None)
    return RunStore(request.getfixturevalue("postgres_url"))


@pytest.fixture
def small_suite(pytester: pytest.Pytester) -> Path:
    return pytester.makefile(".eval.yaml", small=SMALL_SUITE)


@pytest.fixture
def counting(pytester: pytest.Pytester) -> Path:
    """Install the counting adapter; returns the path of its call log."""
    pytester.makeconftest(COUNTING_CONFTEST)
    return pytester.path / "calls.log"


def call_count(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


# Proxies from the environment (aiohttp's trust_env) would route loopback traffic away from
# a test's server.
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def clear_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def write_suite(directory: Path, text: str, name: str = "suite.eval.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def newest_run_dir(root: Path, suite: str = "small") -> Path:
    """The folder of the suite's most recent run (run ids begin with the start time), whether
    or not it moved latest.json (a subset or a partial run does not)."""
    return max((root / "reports" / suite).glob("*/report.json")).parent


def latest_report(root: Path, suite: str = "small") -> dict[str, Any]:
    return json.loads((newest_run_dir(root, suite) / "report.json").read_text())


def latest_answers(root: Path, suite: str = "small") -> list[dict[str, Any]]:
    run_dir = newest_run_dir(root, suite)
    return [json.loads(line) for line in (run_dir / "answers.jsonl").read_text().splitlines()]


def cached_keys(root: Path) -> set[str]:
    with sqlite3.connect(root / ".evalmine" / "cache.sqlite") as db:
        return {row[0] for row in db.execute("SELECT key FROM answers")}


def shared_data() -> Path:
    """The public data sets of every built-in suite (GSM8K, E2E, MMLU): the folder
    ``$EVALMINE_DATA`` names, else ``shared/data`` beside the repository, as CI lays it out
    (from a git worktree, beside the main checkout). Neither: the test skips, naming the
    override; under ``CI=true`` it fails.
    An override that lacks the files always fails: it was meant to be used."""
    wanted = [f"{s.data.folder}/{s.data.name}" for s in BUILTIN_SUITES.values()]
    if PUBLIC_DATA_OVERRIDE:
        folder = Path(PUBLIC_DATA_OVERRIDE)
        lacking = [name for name in wanted if not (folder / name).is_file()]
        if lacking:
            pytest.fail(f"{DATA_ENV}={folder} holds no {' or '.join(lacking)}", pytrace=False)
        return folder
    repo = Path(__file__).resolve().parents[1]
    candidates = [repo.parent / "shared" / "data"]
    git = repo / ".git"
    if git.is_file():  # a worktree: ".git" names <main>/.git/worktrees/<name>
        gitdir = Path(git.read_text("utf-8").split(":", 1)[1].strip())
        candidates.append(gitdir.parents[2].parent / "shared" / "data")
    for candidate in candidates:
        if all((candidate / name).is_file() for name in wanted):
            return candidate
    unavailable(
        f"no copy of the public data sets: set {DATA_ENV} to a folder holding "
        f"{' and '.join(wanted)} (none beside the repository: {[str(c) for c in candidates]})"
    )


# A conftest for pytester runs whose answers are scripted by the case: the variable
# ``reply_<model name>`` (dashes as underscores), else ``reply``, is the answer text.
SCRIPTED_CONFTEST = """\
import pytest
from pytest_evalmine import AdapterRegistry, Response, Usage


class Scripted:
    name = "scripted"
    version = "1"

    def schema_mode(self, request):
        return "native" if request.schema else None

    async def complete(self, request):
        replies = request.context["vars"]
        own = "reply_" + request.model.split("/", 1)[1].replace("-", "_")
        text = str(replies.get(own, replies.get("reply", "")))
        return Response(text=text, usage=Usage(input_tokens=5, output_tokens=5), latency_s=0.0,
                        schema_mode=self.schema_mode(request))

    async def aclose(self):
        pass


@pytest.fixture(scope="session")
def evalmine_adapters():
    registry = AdapterRegistry()
    registry.register("fake", Scripted)
    return registry
"""


@pytest.fixture
def scripted(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester whose answers are scripted by the cases (``SCRIPTED_CONFTEST``)."""
    pytester.makeconftest(SCRIPTED_CONFTEST)
    return pytester
