"""pytest nodes for suite files: file -> task -> case[model] (spec: "Collection").

Items are ``pytest.Function`` objects whose function asks for the ``evalmine_answer``
fixture, so fixtures (and a conftest.py that overrides ``evalmine_adapters``) reach them
through pytest's public machinery. The item itself only reads its outcome and its checks;
the calls were dispatched for the whole selection before the first item ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ..engine.session import ItemSpec
from ..errors import EvalmineError
from ..redaction import redact
from .stash import add_conftest_checks, eval_session


def run_eval_item(evalmine_answer: Any) -> None:
    """The body of every suite item: fail with a readable report unless the checks passed."""
    evalmine_answer.assert_passed()


class SuiteFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        session = eval_session(self.config)
        add_conftest_checks(self.config)
        suite = session.load(self.path)
        specs = session.specs_for(suite)
        for task in suite.tasks:
            yield TaskNode.from_parent(
                self, name=task.id, specs=[s for s in specs if s.task.id == task.id]
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, EvalmineError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class TaskNode(pytest.Collector):
    def __init__(self, *, specs: list[ItemSpec], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.specs = specs
        # Whether its items may take the short protocol (item_protocol), decided once.
        self.short_protocol: bool | None = None

    def collect(self) -> Iterator[pytest.Item]:
        # Every item of a task has the same function, parent and marks, so one fixture
        # closure serves them all; pytest would otherwise resolve it again for each item.
        fixtureinfo = None
        # One marker per model, shared by its items like a class's marks are: a marker
        # built per item (a mark, its decorator and kwargs) was 10 MB at 20,000 items.
        markers: dict[str, pytest.MarkDecorator] = {}
        for spec in self.specs:
            marker = markers.get(spec.model)
            if marker is None:
                marker = markers[spec.model] = evalmine_marker(spec)
            item = EvalItem.from_parent(
                self,
                name=spec.name,
                callobj=run_eval_item,
                spec=spec,
                marker=marker,
                fixtureinfo=fixtureinfo,
            )
            fixtureinfo = item._fixtureinfo
            yield item


def evalmine_marker(spec: ItemSpec) -> pytest.MarkDecorator:
    """The marker ``-m "evalmine(...)"`` selects an item by."""
    return pytest.mark.evalmine(
        suite=spec.suite.name,
        task=spec.task.id,
        kind=spec.task.kind,
        model=spec.model,
        provider=spec.model.split("/", 1)[0],
        variant=spec.variant,
    )


class EvalItem(pytest.Function):
    def __init__(self, *, spec: ItemSpec, marker: pytest.MarkDecorator, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        structured = getattr(self, "_id", None)
        if structured is not None and hasattr(type(structured), "parse"):
            # pytest >= 9.2 keeps node ids structured and compares them structurally (--lf,
            # --deselect): re-parse ours so "[model]" is its params part, as it is for a
            # parametrized test and for the ids read back from the cache.
            self._id = type(structured).parse(str(structured))
        self.add_marker(marker)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        # Line 0 (shown as 1): pytest needs a line where a skip mark reports its location.
        return self.path, 0, f"{self.spec.task.id}::{self.name}"


class ItemAnswer:
    """What ``evalmine_answer`` gives an item: its record, and the verdict on its checks."""

    def __init__(self, record: Any) -> None:
        self.record = record

    def assert_passed(self) -> None:
        record = self.record
        if record.outcome == "passed":
            return
        # The failure text reaches the terminal, junit.xml and the pytest-html page: an
        # expected value quoted from the case's gold may hold a loaded key.
        if record.error:
            pytest.fail(redact(f"{record.outcome}: {record.error}"), pytrace=False)
        pytest.fail(redact(failure_text(record)), pytrace=False)


def failure_text(record: Any) -> str:
    """Like a pytest assertion failure: each failed check with what was expected and what
    the answer gave, then the answer's tail."""
    lines = []
    for check in record.checks:
        if check["passed"]:
            continue
        lines.append(f"check {check['name']!r} failed: {check['message']}")
        if check.get("expected") is not None:
            lines.append(f"  expected: {check['expected']}")
        if check.get("got") is not None:
            lines.append(f"  got:      {check['got']}")
    tail = (record.text or "")[-400:]
    lines.append(f"answer ({record.model}, last {len(tail)} characters):")
    lines.append(tail)
    return "\n".join(lines)
