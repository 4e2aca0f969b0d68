"""A dispatcher over one endpoint named ``local``, as the money, usage and concurrency tests
build it: its own cache database (SQLite, or the store at a ``store_location``), the
endpoint's declared price, no retries or back-off unless a test asks for them; and the three
shipped providers' adapters pointed at one loopback server, as the batch and judge-cache
tests and benchmarks build them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_evalmine.adapters.anthropic import AnthropicAdapter
from pytest_evalmine.adapters.gemini import GeminiAdapter
from pytest_evalmine.adapters.openai import OpenAIAdapter
from pytest_evalmine.adapters.registry import AdapterRegistry
from pytest_evalmine.run.dispatch import Dispatcher
from pytest_evalmine.run.endpoints import parse_option
from pytest_evalmine.run.prices import load_prices
from pytest_evalmine.run.store import Store, StoreBackend
from tests.stores import open_test_store


def store_at(where: Path | str) -> StoreBackend:
    """A folder: the SQLite file ``cache.sqlite`` in it; a ``store_location`` (a SQLite
    file's path or a PostgreSQL URL): a store opened there, another process's view of it."""
    return Store(where / "cache.sqlite") if isinstance(where, Path) else open_test_store(where)


def loopback_registry(url: str, key_env: str) -> AdapterRegistry:
    """``anthropic``, ``openai`` and ``google`` all at ``url`` (each under its own API's path
    prefix), their key read from ``key_env``."""
    registry = AdapterRegistry()
    registry.register("anthropic", lambda: AnthropicAdapter(base_url=url, api_key_env=key_env))
    registry.register("openai", lambda: OpenAIAdapter(base_url=url + "/v1", api_key_env=key_env))
    registry.register(
        "google", lambda: GeminiAdapter(base_url=url + "/v1beta", api_key_env=key_env)
    )
    return registry


def endpoint_dispatcher(where: Path | str, spec: str, **kwargs: Any) -> Dispatcher:
    """``spec`` as ``--evalmine-endpoint`` takes it (``local=URL,...``); ``kwargs`` override
    the dispatcher's fields (cap 10 USD, 0 retries by default); ``where``: as ``store_at``
    takes it."""
    endpoint = parse_option(spec)
    registry = AdapterRegistry()
    registry.register("local", endpoint.factory())
    row = endpoint.price_row()
    assert row is not None
    settings: dict[str, Any] = {"cap_usd": 10.0, "retries": 0, "backoff_s": 0.0}
    if endpoint.concurrency:
        settings["provider_concurrency"] = {"local": endpoint.concurrency}
    if endpoint.concurrency_fixed:
        settings["fixed_providers"] = frozenset({"local"})
    return Dispatcher(
        registry=registry,
        store=store_at(where),
        prices=load_prices().with_rows((row,)),
        run_token="run",
        **{**settings, **kwargs},
    )
