"""What happens to a provider batch after it is sent (spec: "Batch"): ``evalmine batches
cancel`` and what it releases under the cap, the files a finished OpenAI batch leaves (deleted),
and the 1-hour prompt cache a batched Anthropic prefix asks for, at its price. Against the
loopback servers of tests/batch_servers.py, with test_batch's helpers."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.adapters.base import Request
from pytest_evalmine.run.batch import IN_BATCH, BatchSession, BatchSettings
from pytest_evalmine.run.batch_cancel import cancel_batch
from pytest_evalmine.run.dispatch import ERROR, OK, Dispatcher
from pytest_evalmine.run.endpoints import parse_option
from pytest_evalmine.run.store import Store
from tests.batch_run import KEY_ENV, MODELS, dispatcher, requests_for
from tests.batch_servers import BatchProvider, ProviderServer
from tests.conftest import clear_proxies, open_test_store
from tests.dispatchers import loopback_registry
from tests.test_batch import ONLINE, PRICES, run, session


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv(KEY_ENV, "sk-batch-test-key")


@pytest.fixture
def provider() -> BatchProvider:
    return BatchProvider(polls_to_end=2)


@pytest.fixture
def server(provider: BatchProvider) -> Iterator[ProviderServer]:
    served = ProviderServer(provider)
    try:
        yield served
    finally:
        served.stop()


def test_a_finished_openai_batch_leaves_no_files_and_a_failed_delete_is_a_warning(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    first, outcomes = run(server, tmp_path / "c.sqlite", requests_for(4, "openai"))
    assert [o.status for o in outcomes] == [OK] * 4
    (batch,) = provider.batches.values()
    assert sorted(provider.deleted_files) == sorted([batch.input_file, batch.output_file])
    assert provider.files == {} and first.batch.to_json()["warnings"] == []
    # One with a failure leaves an error file too; a delete the server refuses is a warning.
    provider.delete_status = 500
    failing_run = dispatcher(server.url, str(tmp_path / "d.sqlite"), batch=session())
    planned = failing_run.plan(requests_for(4, "openai"))
    provider.failures = {planned[0].key: "errored"}
    again = failing_run.run_each(planned)
    assert [o.status for o in again] == [ERROR, OK, OK, OK]
    warnings = failing_run.batch.to_json()["warnings"]
    assert len(warnings) == 3 and all("could not delete its" in w for w in warnings)
    assert {w.split(" ")[6] for w in warnings} == {"input_file", "output_file", "error_file"}
    assert len(provider.files) == 3  # kept, and named in the warnings


def _left_in_batch(
    provider: BatchProvider, server: ProviderServer, cache: Path | str, provider_name: str
) -> tuple[Dispatcher, list[Any]]:
    """A run of 4 calls that stops waiting while its batch is in flight."""
    provider.polls_to_end = -1
    first, outcomes = run(server, cache, requests_for(4, provider_name), batch=session(wait_s=0.2))
    assert {o.error_kind for o in outcomes} == {IN_BATCH}
    return first, outcomes


@pytest.mark.parametrize("provider_name", ["openai", "anthropic", "google"])
def test_cancel_a_batch_that_ran_nothing_releases_its_reservations(
    provider: BatchProvider, server: ProviderServer, store_location: str, provider_name: str
) -> None:
    provider.canceled_runs_half = False
    first, _ = _left_in_batch(provider, server, store_location, provider_name)
    worst = 4 * first.plan(requests_for(4, provider_name))[0].max_cost_usd
    assert first.store.committed(first.run_token) == pytest.approx(worst, rel=1e-9)
    (listed,) = first.store.batches()
    name = listed["local_id"] if provider_name == "openai" else listed["batch_id"]
    done = cancel_batch(first.store, name, loopback_registry(server.url, KEY_ENV))
    assert provider.cancels == 1 and provider.batches[listed["batch_id"]].canceled
    assert (done.released, done.released_usd) == (4, pytest.approx(worst, rel=1e-9))
    # Nothing of it will be billed: the cap no longer counts it, and nothing is in flight.
    assert first.store.committed(first.run_token) == pytest.approx(0.0, abs=1e-12)
    assert first.store.ledger_total(first.run_token) == pytest.approx(0.0, abs=1e-12)
    assert first.store.batches() == []


def test_cancel_a_batch_that_ran_half_then_a_rerun_keeps_what_ran_and_releases_the_rest(
    provider: BatchProvider, server: ProviderServer, tmp_path: Path
) -> None:
    # SQLite alone below: it reads the ledger's rows by state (no store method lists them).
    first, _ = _left_in_batch(provider, server, tmp_path / "c.sqlite", "anthropic")
    (listed,) = first.store.batches()
    done = cancel_batch(first.store, listed["batch_id"], loopback_registry(server.url, KEY_ENV))
    assert done.released == 0  # which requests ran is in the results: the rerun reads them
    assert [b["state"] for b in first.store.batches()] == ["submitted"]
    second, outcomes = run(server, tmp_path / "c.sqlite", requests_for(4, "anthropic"))
    assert [o.status for o in outcomes[:2]] == [OK, OK]
    assert {o.error_kind for o in outcomes[2:]} == {"batch_canceled"}
    assert provider.batches_created == 1 and second.store.batches() == []
    # Counted once, in the run that sent them: two answers spent, two canceled released.
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        states = db.execute(
            "SELECT run_token, state, COUNT(*) FROM ledger GROUP BY 1, 2 ORDER BY 2"
        ).fetchall()
    assert states == [(first.run_token, "released", 2), (first.run_token, "spent", 2)]
    assert second.store.committed(second.run_token) == 0.0


def test_evalmine_batches_cancel_names_what_it_did_and_refuses_unknown_ids(
    provider: BatchProvider,
    server: ProviderServer,
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_evalmine.commands import cli

    home = tmp_path / "home"
    monkeypatch.setenv("EVALMINE_HOME", str(home))
    assert cli.main(["batches", "cancel", "em-0123456789abcdef"]) == 4
    assert "there is no cache" in capsys.readouterr().err
    provider.polls_to_end = -1
    endpoint = f"box={server.url}/v1,input=1,output=2"
    registry = loopback_registry(server.url, KEY_ENV)
    box = parse_option(endpoint)
    registry.register("box", box.factory())
    row = box.price_row()
    assert row is not None
    box_run = Dispatcher(
        registry=registry, store=Store(home / "cache.sqlite"), prices=PRICES.with_rows((row,)),
        run_token="box-run", cap_usd=5.0,
        batch=BatchSession(BatchSettings(providers=frozenset({"box"}), poll_s=0.01, wait_s=0.2)),
    )  # fmt: skip
    requests = [Request(model="box/m", prompt=f"q{i}", max_tokens=16) for i in range(3)]
    assert {o.error_kind for o in box_run.run_each(box_run.plan(requests))} == {IN_BATCH}
    (listed,) = box_run.store.batches()
    assert cli.main(["batches", "cancel", "batch_nope", f"--endpoint={endpoint}"]) == 4
    assert "no batch 'batch_nope' in" in capsys.readouterr().err
    # A provider that is not built in needs its endpoint named.
    assert cli.main(["batches", "cancel", listed["batch_id"]]) == 4
    assert "--endpoint box=BASE_URL" in capsys.readouterr().err
    assert provider.cancels == 0
    assert cli.main(["batches", "cancel", listed["local_id"], f"--endpoint={endpoint}"]) == 0
    said = capsys.readouterr().out
    assert f"canceled batch box {listed['batch_id']} ({listed['local_id']}, 3 calls)" in said
    assert "a rerun of its suite reads what ran" in said
    assert provider.cancels == 1


def test_a_batched_anthropic_prefix_asks_for_the_1_hour_cache_and_is_priced_for_it(
    server: ProviderServer, tmp_path: Path
) -> None:
    request = Request(
        model=MODELS["anthropic"], prompt="Which is better?", system="criteria " * 400,
        max_tokens=8, cache_system=True,
    )  # fmt: skip
    batched = dispatcher(server.url, str(tmp_path / "c.sqlite"), batch=session())
    online = dispatcher(server.url, str(tmp_path / "c.sqlite"), batch=None)
    (item,) = batched.plan([request])
    wire = batched.batch.wire(item.adapter)
    params = json.loads(wire.entry(item.key, request))["params"]
    assert params["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    # Online requests keep the default five minutes.
    online_body = item.adapter.build_body(request)
    assert online_body["system"][0]["cache_control"] == {"type": "ephemeral"}
    # The 1-hour write costs 2x base input (1.25x for 5 minutes): the batch row, the
    # reservation and the cost of a reported write all use it.
    row = ONLINE[MODELS["anthropic"]]
    assert item.price.cache_write == pytest.approx(2 * row.input, rel=1e-12)
    assert online.plan([request])[0].price.cache_write == pytest.approx(1.25 * row.input)
    writes = item.bounds.worst_case(item.price).cache_write_tokens
    assert writes == item.bounds.input_tokens
    assert item.max_cost_usd == pytest.approx(
        (writes * 2 * row.input + 8 * row.output * 0.5) / 1e6, rel=1e-9
    )
    # OpenAI's batch rows keep their own cache rates.
    (gpt,) = batched.plan([dataclasses.replace(request, model=MODELS["openai"])])
    assert gpt.price.cache_write == ONLINE[MODELS["openai"]].cache_write


def test_cancel_while_a_run_waits_for_the_batch_leaves_the_releasing_to_that_run(
    provider: BatchProvider, server: ProviderServer, store_location: str
) -> None:
    import threading

    provider.polls_to_end, provider.canceled_runs_half = -1, False
    waiting = dispatcher(server.url, store_location, batch=session())
    planned = waiting.plan(requests_for(3, "openai"))
    outcomes: list[Any] = []
    thread = threading.Thread(target=lambda: outcomes.extend(waiting.run_each(planned)))
    thread.start()
    try:
        deadline = 600  # polls, not seconds: the run polls every 10 ms
        while provider.polls < 2 and deadline:
            deadline -= 1
            threading.Event().wait(0.05)
        # As `evalmine batches cancel` does: another process, a store of its own.
        (listed,) = open_test_store(store_location).batches()
        done = cancel_batch(
            open_test_store(store_location),
            listed["local_id"],
            loopback_registry(server.url, KEY_ENV),
        )
    finally:
        thread.join(timeout=120)
    # The run polling it reads the end and releases each canceled call once: nothing twice.
    assert done.released == 0
    assert {o.error_kind for o in outcomes} == {"batch_canceled"}
    assert waiting.store.committed(waiting.run_token) == pytest.approx(0.0, abs=1e-12)
    assert waiting.store.ledger_total(waiting.run_token) == pytest.approx(0.0, abs=1e-12)
