"""Recordings (spec: "Recordings"): the calls a suite needs as a sorted plain-text JSONL file
that a team commits and reviews like a cassette. Written from the cache database after a run
that may call (record modes ``new`` and ``all``); read into it before a run that reads the
cache (``new`` and ``none``). CI then replays at $0 with no key and no network, and the SQLite
cache stays the fast local store."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import EvalmineError
from ..reports.files import atomic_write, jsonl_lines
from ..run.store import StoreBackend

BESIDE_SUITE = "beside"
SUFFIX = ".recording.jsonl"


def recording_path(setting: str, suite_file: Path, suite_name: str, rootdir: Path) -> Path:
    """``beside``: the suite file's name with ``.yaml``/``.yml`` replaced by
    ``.recording.jsonl``, next to it; anything else names a folder (relative to the rootdir)
    holding ``<suite name>.recording.jsonl``."""
    if setting == BESIDE_SUITE:
        return suite_file.with_name(suite_file.name.rsplit(".", 1)[0] + SUFFIX)
    return rootdir / setting / f"{suite_name}{SUFFIX}"


def write_recording(
    store: StoreBackend,
    path: Path,
    uses: dict[str, set[str]],
    adapters: Iterable[str],
    *,
    merge: bool,
) -> None:
    """Adapter states first (by name), then answers by key, one JSON object a line; each
    answer lists ``for`` what the suite used it (``uses``: key -> task/case and model, or the
    judged pair). With ``merge`` (the run selected part of the suite) the file's other entries
    are kept."""
    entries = {_identity(e): e for e in read_entries(path)} if merge else {}
    for name in set(adapters):
        state = store.adapter_state(name)
        if state is not None:
            entries[("adapter", name)] = {"adapter": name, "state": state}
    for row in store.answer_rows(sorted(uses)):
        entries[("answer", row["key"])] = {**row, "for": sorted(uses[row["key"]])}
    if not entries:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, jsonl_lines(entries[identity] for identity in sorted(entries)))


def read_recording(store: StoreBackend, path: Path) -> int:
    """Load a recording into the cache database; returns the number of answers in it."""
    entries = read_entries(path)
    answers = [e for e in entries if _identity(e)[0] == "answer"]
    store.load_recorded(answers, [e for e in entries if _identity(e)[0] == "adapter"])
    return len(answers)


def read_entries(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    entries = []
    for number, text in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            entry = json.loads(text)
            _identity(entry)
        except (ValueError, KeyError, TypeError):
            raise EvalmineError(
                f"{path}:{number}: not a recording entry (an answer with key, provider, "
                "model, response, cost_usd, or an adapter with state)"
            ) from None
        entries.append(entry)
    return entries


ANSWER_FIELDS = ("key", "provider", "model", "response", "cost_usd")


def _identity(entry: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of an entry; ``KeyError`` when it lacks a field of its kind."""
    kind, required = (
        ("adapter", ("adapter", "state")) if "adapter" in entry else ("answer", ANSWER_FIELDS)
    )
    missing = [name for name in required if name not in entry]
    if missing:
        raise KeyError(missing[0])
    return (kind, str(entry[required[0]]))
