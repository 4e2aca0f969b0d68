"""Adapters made ready before the first call (spec: "Dispatch", "Replay").

Planning checks every adapter's key at once (a run names every missing variable, not the
first), lets adapters look up their servers (model listings, digests) and keeps what they
learnt in the cache database, redacted, so that a replay (record mode ``none``) builds the
same cache keys offline; a replay gets that state back instead. Also the warning for an
application adapter whose cache key does not follow its code. Apart from dispatch, which
sends: nothing here is paid.
"""

from __future__ import annotations

import contextlib
import json
import warnings
import weakref
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from ..adapters.base import Adapter, AdapterError
from ..errors import EvalmineError, EvalmineWarning
from ..redaction import redact
from .store import StoreBackend


def unready(adapter: Adapter) -> str | None:
    """Why ``adapter`` cannot be called (its ``check_ready`` failed), or None."""
    check_ready = getattr(adapter, "check_ready", None)
    if check_ready is None:
        return None
    try:
        check_ready()
    except AdapterError as exc:
        message = str(exc)
        # Adapters usually name themselves already; never "openai: openai: ...".
        return message if message.startswith(f"{adapter.name}:") else f"{adapter.name}: {message}"
    return None


def prepare(
    store: StoreBackend,
    adapters: Iterable[tuple[Adapter, set[str]]],
    run: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """Check keys and let adapters look up their servers (model listings, digests), then
    remember what they learnt, so a replay can build the same cache keys offline.
    ``adapters``: each with the models planned on it; ``run``: runs a coroutine on the
    dispatcher's loop."""
    adapters = list(adapters)
    problems = [p for adapter, _models in adapters if (p := unready(adapter)) is not None]
    if problems:
        raise EvalmineError("; ".join(problems))
    preparing = [
        (adapter, sorted(models))
        for adapter, models in adapters
        if getattr(adapter, "prepare", None) is not None
    ]
    if not preparing:
        return
    run(_prepare_all(preparing))
    for adapter, _models in preparing:
        state = getattr(adapter, "prepared_state", lambda: None)()
        if state is None:
            continue
        # A server may echo the key in its listing. What is kept is redacted, and the
        # adapter keys its cache by that same kept state, so a replay builds equal keys.
        kept = json.loads(redact(json.dumps(state)))
        restore = getattr(adapter, "restore_state", None)
        if kept != state and restore is not None:
            restore(kept)
        store.remember_adapter_state(adapter.name, kept)


def restore_prepared(store: StoreBackend, adapters: Iterable[Adapter]) -> None:
    """Replay (record mode ``none``) touches no network and needs no key: each adapter gets
    back what it learnt the last time it prepared, from the cache database."""
    for adapter in adapters:
        restore = getattr(adapter, "restore_state", None)
        state = store.adapter_state(adapter.name) if restore else None
        if restore is not None and state is not None:
            restore(state)


async def _prepare_all(preparing: list[tuple[Adapter, list[str]]]) -> None:
    for adapter, models in preparing:
        try:
            await adapter.prepare(models)  # type: ignore[attr-defined]
        except AdapterError as exc:
            raise EvalmineError(f"{adapter.name}: {exc}") from None


# Adapters already warned about, by id (an adapter need not be hashable).
_WARNED: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def warn_without_fingerprint(adapter: Adapter) -> None:
    """Once per adapter instance (one per run): an adapter that is not built in (your own
    application) and has no ``key_extra`` keys its cache by name and version only, so a
    change to the application's code would be served the old cached answers."""
    name = adapter.name
    if type(adapter).__module__.startswith("pytest_evalmine."):
        return
    if getattr(adapter, "key_extra", None) is None and _WARNED.get(id(adapter)) is not adapter:
        with contextlib.suppress(TypeError):  # an object without weak references
            _WARNED[id(adapter)] = adapter
        warnings.warn(
            EvalmineWarning(
                f"adapter {name!r} has no key_extra(request): its cached answers are keyed by "
                f"name and version ({adapter.version!r}) only, so after a change to your "
                "application's code the cache serves the old answers. Return a fingerprint "
                "of the code from key_extra (pytest_evalmine.code_fingerprint) or bump version."
            ),
            stacklevel=2,
        )
