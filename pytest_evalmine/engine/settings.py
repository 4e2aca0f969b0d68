"""What every part of a run reads (spec "Run lifecycle"): the option values, the rootdir, the
run's token, the suites loaded, and what follows from them once per run: the cache store,
the prices, the endpoints, the adapter registry and the provider batches."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..adapters.builtin import default_registry
from ..adapters.registry import AdapterRegistry
from ..errors import EvalmineError
from ..options import (
    Shard,
    cache_path,
    check_values,
    evalmine_home,
    project_folders,
    record_mode,
    run_name_from,
    shard_from,
)
from ..run.batch import BatchSession, parse_batch
from ..run.endpoints import Endpoint, base_urls_from, from_suite, parse_option
from ..run.prices import PriceTable, load_prices
from ..run.runtoken import new_run_token
from ..run.store import StoreBackend
from ..run.store.location import open_store, store_location
from ..suite.canonical import sha256_hex
from ..suite.loader import Suite


@dataclass
class Settings:
    """Option values by name, as ``options.resolve`` returns them."""

    values: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


def check_settings(settings: Settings) -> None:
    """Parse every value a run reads from options, ini keys and the environment once, at
    start-up, so that a bad one is one line before anything runs (``EvalmineError``)."""
    try:
        check_values(settings.values)
    except ValueError as exc:
        raise EvalmineError(str(exc)) from None
    foundations = Foundations(settings=settings, rootdir=Path("."))
    foundations.rpm_limits()
    foundations.endpoints()
    foundations.default_registry()
    foundations.batching()


@dataclass
class Foundations:
    """The settings and what the plan, the dispatch and the records share: built on first
    use, one of each per run."""

    settings: Settings
    rootdir: Path
    run_token: str = field(default_factory=new_run_token)
    # The suites loaded so far, by path (``RunPlan.load`` adds them): their endpoints, caps
    # and batch settings join the options'.
    suites: dict[Path, Suite] = field(default_factory=dict)
    _store: StoreBackend | None = None
    _prices: PriceTable | None = None
    _registry: AdapterRegistry | None = None

    @property
    def home(self) -> Path:
        return evalmine_home(self.rootdir)

    @property
    def run_name(self) -> str | None:
        """``--evalmine-run-name`` (checked at start-up)."""
        try:
            return run_name_from(self.settings.values.get("run_name"))
        except ValueError as exc:
            raise EvalmineError(str(exc)) from None

    @property
    def shard(self) -> Shard | None:
        """``--evalmine-shard`` as K of N (``auto/N`` read from the environment), or None."""
        try:
            return shard_from(self.settings.values.get("shard"), self.run_name)
        except ValueError as exc:
            raise EvalmineError(str(exc)) from None

    @property
    def budget_token(self) -> str:
        """What the run's cap holds for (spec "Prices and the budget", budget scope): every
        process reserving under it shares the cap. The run token (one pytest session and its
        xdist workers), or for the shards of a named run the name with what the run is (its
        suites' hashes, the models option, the shard count), so every shard of one run, and
        the rerun of a killed shard, reserve against one cap in a shared store, while a later
        run of the name over changed suites or models starts a cap of its own (spec
        "Shards"). Read after collection, once the suites are loaded."""
        shard = self.shard
        if shard is None:
            return self.run_token
        what = [
            self.run_name,
            sorted(suite.hash for suite in self.suites.values()),
            self.settings.values.get("models"),
            shard.count,
        ]
        return f"run:{self.run_name}:{sha256_hex(what)[:16]}"

    @property
    def store(self) -> StoreBackend:
        """The run's store: ``--evalmine-store`` (or ``EVALMINE_STORE``), else the SQLite file
        under the home folder; opened on first use (``EvalmineError`` when it cannot be)."""
        if self._store is None:
            location = store_location(self.settings.values.get("store"))
            self._store = open_store(location, cache_path(self.rootdir))
        return self._store

    @property
    def prices(self) -> PriceTable:
        """The shipped table, the user's extra table, then the endpoints' declared costs."""
        if self._prices is None:
            extra = self.settings.prices
            table = load_prices(self.rootdir / extra if extra else None)
            rows = tuple(row for e in self.endpoints() if (row := e.price_row()) is not None)
            self._prices = table.with_rows(rows)
        return self._prices

    def endpoints(self) -> list[Endpoint]:
        """Endpoints declared by the loaded suites, then by options (which win by name)."""
        by_name = {
            name: from_suite(name, raw)
            for suite in self.suites.values()
            for name, raw in sorted(suite.endpoints.items())
        }
        for spec in self.settings.endpoint:
            endpoint = parse_option(spec)
            by_name[endpoint.name] = endpoint
        return [by_name[name] for name in sorted(by_name)]

    def file_roots(self) -> tuple[Path, ...]:
        """The folders a suite's referenced files may lie in besides its own (spec "Suite
        file", paths): the rootdir and the ini key ``evalmine_data_roots``'s folders."""
        return project_folders(self.rootdir, self.settings.data_roots)

    def rpm_limits(self) -> dict[str, int]:
        limits = {e.name: e.rpm for e in self.endpoints() if e.rpm}
        for spec in self.settings.rpm:
            provider, sep, value = spec.partition("=")
            if not sep or not value.isdecimal() or int(value) < 1:
                raise EvalmineError(f"--evalmine-rpm={spec}: expected PROVIDER=N with N >= 1")
            limits[provider] = int(value)
        return limits

    @property
    def record_mode(self) -> str:
        try:
            return record_mode(self.settings.no_cache, str(self.settings.record))
        except ValueError as exc:
            raise EvalmineError(str(exc)) from None

    def default_registry(self) -> AdapterRegistry:
        """The built-in adapters, one registry per session: answers and judge share each
        provider's adapter, so its look-ups run once and its connections serve both."""
        if self._registry is None:
            self._registry = self._new_registry()
        else:
            # Suites loaded since it was built bring their own endpoints (the xdist
            # controller builds it before it loads any); what is registered already stays.
            for endpoint in self.endpoints():
                if endpoint.name not in self._registry.factories:
                    self._registry.register(endpoint.name, endpoint.factory())
        return self._registry

    def _new_registry(self) -> AdapterRegistry:
        from ..adapters.fake import FakeOptions, parse_faults

        try:
            faults = parse_faults(self.settings.fake_fault)
        except ValueError as exc:
            raise EvalmineError(str(exc)) from None
        options = FakeOptions(latency_s=self.settings.fake_latency, faults=faults)
        return default_registry(
            fake_everything=self.settings.fake,
            fake_options=options,
            endpoints=self.endpoints(),
            base_urls=base_urls_from(),
        )

    def batching(self) -> BatchSession | None:
        """The run's provider batches (``--evalmine-batch``), shared by the answers' and the
        judge's dispatchers, or None: every call online. Read once, at the first call."""
        return self._batch_session

    @cached_property
    def _batch_session(self) -> BatchSession | None:
        spec = self.settings.values.get("batch")
        if not spec:  # a suite's ``batch: true`` (or its own value) when the option is off
            asked = [s.batch for s in self.suites.values() if s.batch]
            spec = next((a for a in asked if isinstance(a, str)), "on" if asked else None)
        settings = parse_batch(spec, self.settings.values.get("batch_wait"))
        return BatchSession(settings) if settings is not None else None

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
