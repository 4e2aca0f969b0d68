"""The store's seam (spec: "Cache database"): ``StoreBackend`` names what the package asks of
a store, the SQLite ``Store`` implements it with the same signatures, and no module outside
``run/store/`` asks a store for anything else (a connection, a private helper), so a second
backend implementing the interface is enough for the rest of the package. Both stores, the
SQLite file and PostgreSQL, implement it with the same signatures."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from pytest_evalmine.run.store import Store, StoreBackend
from pytest_evalmine.run.store.records import RUNNING, held_by_another
from pytest_evalmine.run.store.urls import masked
from tests.conftest import is_sqlite, open_test_store

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_evalmine"
STORE_PACKAGE = PACKAGE / "run" / "store"
# The names a store is reached by in the package: a variable, a field, a property.
STORE_NAMES = {"store", "_store"}


def interface_members() -> set[str]:
    members = {
        name
        for name, value in vars(StoreBackend).items()
        if not name.startswith("_") and callable(value)
    }
    return members | set(StoreBackend.__annotations__)


def asked_of_a_store(source: str) -> set[str]:
    """The attributes read off a store in ``source``: ``store.x``, ``self.store.x``,
    ``session._store.x``."""
    asked = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id in STORE_NAMES) or (
            isinstance(owner, ast.Attribute) and owner.attr in STORE_NAMES
        ):
            asked.add(node.attr)
    return asked


def test_each_store_implements_the_interface(store_location: str) -> None:
    store = open_test_store(store_location)
    assert isinstance(store, StoreBackend)
    differing = [
        name
        for name in sorted(interface_members() - set(StoreBackend.__annotations__))
        if inspect.signature(getattr(type(store), name))
        != inspect.signature(getattr(StoreBackend, name))
    ]
    assert differing == []
    if is_sqlite(store_location):
        assert isinstance(store, Store)
        assert store.location == store_location
        assert store.thread_safe is False
    else:
        assert store.location == masked(store_location)
        assert store.thread_safe is True  # a pool: the progress watcher's thread shares it


def test_the_package_asks_a_store_only_what_the_interface_names() -> None:
    outside = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if STORE_PACKAGE in path.parents:
            continue
        beyond = asked_of_a_store(path.read_text("utf-8")) - interface_members()
        if beyond:
            outside[str(path.relative_to(PACKAGE))] = sorted(beyond)
    assert outside == {}


def test_the_scan_sees_a_module_reaching_past_the_interface() -> None:
    # The shape run/batch_ledger.py had before the seam: the connection and private helpers.
    reaching = (
        "def f(store, self):\n"
        "    store.connection.execute('SELECT 1')\n"
        "    with store._write(store.connection):\n"
        "        self.store._rows_of('q', [])\n"
        "    store.committed('run')\n"
    )
    assert asked_of_a_store(reaching) - interface_members() == {"connection", "_write", "_rows_of"}


def test_the_claim_rule_both_backends_share() -> None:
    asked: list[str] = []

    def alive(holder: str) -> bool:
        asked.append(holder)
        return holder == "live"

    def held(claim: tuple[str, str, str]) -> bool:
        return held_by_another("run", "me", claim, alive)

    assert not held(("other run", "me", RUNNING))  # our own claim
    assert held(("other run", "live", RUNNING))
    assert not held(("run", "dead", RUNNING))  # a dead owner's claim is taken over
    assert held(("run", "dead", "ok"))  # another worker of this run finished it
    assert not held(("other run", "live", "ok"))  # another run finished it: made again
    assert asked == ["live", "dead"]  # liveness is asked only of running claims
