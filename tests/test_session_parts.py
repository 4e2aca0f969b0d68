"""The run session is a short composition of its parts (spec "Package layout", engine/):
every name it passes on is one of a part's, and what is written through it reaches the
part, so the glue, finish and the commands may keep calling the session."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

from pytest_evalmine.engine.session import EvalSession, Settings, _Part

PARTS = ("base", "plan", "dispatching", "kept")


def session() -> EvalSession:
    return EvalSession(settings=Settings({}), rootdir=Path("."))


def test_every_attribute_the_session_passes_on_is_a_field_of_its_part() -> None:
    made = session()
    passed = [attr for attr in vars(EvalSession).values() if isinstance(attr, _Part)]
    assert len(passed) > 15
    for attr in passed:
        part = getattr(made, attr.part)
        assert attr.name in {f.name for f in dataclasses.fields(part)}, (attr.part, attr.name)


def test_every_method_of_the_session_is_one_of_a_part() -> None:
    made = session()
    methods = [
        name
        for name, attr in vars(EvalSession).items()
        if inspect.isfunction(attr) and not name.startswith("_")
    ]
    assert "preflight" in methods and "record_for" in methods
    for name in methods:
        owners = [part for part in PARTS if callable(getattr(getattr(made, part), name, None))]
        assert len(owners) >= 1, name


def test_what_is_written_through_the_session_reaches_its_part() -> None:
    made = session()
    made.interrupted = True
    made.unreported += ["a record"]  # type: ignore[list-item]
    made.workers_plan = None
    assert made.dispatching.interrupted is True
    assert made.kept.unreported == ["a record"]
    assert made.base.suites is made.suites
    assert "interrupted" not in vars(made)  # not a new attribute of the session's own
    made.close()


def test_the_session_module_stays_short() -> None:
    source = Path(inspect.getfile(EvalSession)).read_text("utf-8")
    assert len(source.splitlines()) < 300
