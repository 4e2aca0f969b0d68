"""Why a replay missed (spec: "Recordings"). A cache key includes the adapter that answers, so
answers recorded with ``--evalmine-fake`` never match a replay that routes the same model to
its real provider (nor the other way round): every item misses. The miss says so, once per
model and adapter, instead of leaving a person to guess why a fresh recording replays
nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

from .store import StoreBackend

NO_CACHED_ANSWER = "no cached answer and --evalmine-record=none forbids calling the model"
FAKE = "fake"  # the fake adapter's name (adapters/fake.py), which --evalmine-fake routes to


@dataclass
class ReplayMisses:
    store: StoreBackend
    # (model, adapter) -> the error: every miss of a model gives the same reason, so one query.
    _errors: dict[tuple[str, str], str] = field(default_factory=dict, init=False, repr=False)

    def error(self, model: str, adapter: str) -> str:
        """The item's error for a miss of ``model`` sent to ``adapter``: the plain miss, or,
        when the cache holds answers of the model made only by other adapters, which."""
        if (model, adapter) not in self._errors:
            made_by = self.store.answer_providers(model)
            reason = "" if not made_by or adapter in made_by else made_with(model, made_by, adapter)
            self._errors[model, adapter] = NO_CACHED_ANSWER + reason
        return self._errors[model, adapter]


def made_with(model: str, made_by: set[str], adapter: str) -> str:
    """The ``; ...`` clause naming the adapters the cached answers came from and what to do."""
    names = " and ".join(f"the {name} adapter" for name in sorted(made_by))
    if made_by == {FAKE}:
        advice = "add --evalmine-fake to replay them"
    elif adapter == FAKE:
        advice = "drop --evalmine-fake to replay them"
    else:
        advice = "route the model as when they were recorded, or record them again"
    return (
        f"; the cached answers of {model} (the recording's, or an earlier run's) were made "
        f"with {names}, and this run sends it to the {adapter} adapter: {advice}"
    )
