"""Checking an answer against its task schema with bounded work (spec: "Suite file", task
schemas, "Bounded work per answer").

An answer is hostile input: ``jsonschema`` matches ``pattern`` and ``patternProperties``
with ``re``, which has no time limit and holds the interpreter's lock (``^(a+)+$`` on forty
a's and a ``!`` runs for minutes), and its ``uniqueItems``
compares every pair of items that do not sort (8,000 objects: over a minute). Here:

- while ``bounded_check`` is active, every regular expression ``jsonschema`` runs is run by
  the ``regex`` module (the same syntax, version 0) with a deadline: at most
  ``PATTERN_TIMEOUT_S`` per search and ``SCHEMA_CHECK_TIMEOUT_S`` for the whole answer.
  ``jsonschema`` calls ``re.search`` from four keywords (``pattern``, ``patternProperties``,
  ``additionalProperties`` next to it, ``unevaluatedProperties``), in three of its modules:
  those modules' ``re`` is a stand-in that is ``re`` itself outside ``bounded_check``;
- ``uniqueItems`` hashes a canonical form of each item (one pass);
- every keyword looks at the deadline before it runs, so no combination of keywords holds
  a check longer than ``SCHEMA_CHECK_TIMEOUT_S`` (give or take one search).

Past the deadline the check raises ``SchemaCheckTimeout``: the schema check fails, not
decided, and the run goes on.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

# One search of one pattern (a Ctrl-C ends it in the middle all the same).
PATTERN_TIMEOUT_S = 1.0
# All the work of checking one answer against its schema.
SCHEMA_CHECK_TIMEOUT_S = 5.0

_deadline: ContextVar[float | None] = ContextVar("evalmine_schema_deadline", default=None)


class SchemaCheckTimeout(Exception):
    """The answer's schema check ran past its deadline; ``str()`` says where."""


@contextlib.contextmanager
def bounded_check() -> Iterator[None]:
    """Within it, validation by this module's validators stops after
    ``SCHEMA_CHECK_TIMEOUT_S``."""
    _install_bounded_re()
    token = _deadline.set(time.monotonic() + SCHEMA_CHECK_TIMEOUT_S)
    try:
        yield
    finally:
        _deadline.reset(token)


def _check_deadline(at_the_end: bool = False) -> float | None:
    """The seconds left (None outside ``bounded_check``); raises once none are left (or,
    ``at_the_end``, anyway: a search given the time left used it up)."""
    deadline = _deadline.get()
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0 or at_the_end:
        raise SchemaCheckTimeout(
            f"checking this answer against the schema took over {SCHEMA_CHECK_TIMEOUT_S:g} s"
        )
    return left


# Regular expressions -----------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str, flags: int) -> Any:
    import regex

    return regex.compile(pattern, flags | regex.VERSION0)


def bounded_search(pattern: str, string: str, flags: int = 0) -> Any:
    """``re.search``; inside ``bounded_check`` by ``regex`` with the time left (at most
    ``PATTERN_TIMEOUT_S``), raising ``SchemaCheckTimeout`` when it runs out."""
    left = _check_deadline()
    if left is None or not isinstance(pattern, str):
        return re.search(pattern, string, flags)
    try:
        compiled = _compiled(pattern, int(flags))
    except Exception:
        return re.search(pattern, string, flags)
    timeout = min(left, PATTERN_TIMEOUT_S)
    try:
        return compiled.search(string, timeout=timeout)
    except TimeoutError:
        if timeout < PATTERN_TIMEOUT_S:  # the answer's time ran out, not the search's
            _check_deadline(at_the_end=True)
        raise SchemaCheckTimeout(
            f"pattern {_clipped(pattern)} timed out after {timeout:g} s on this answer "
            "(catastrophic backtracking)"
        ) from None


def _clipped(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 60 else pattern[:57] + "...")


class _BoundedRe:
    """``re``, except that ``search`` is ``bounded_search``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)

    search = staticmethod(bounded_search)


_JSONSCHEMA_REGEX_MODULES = (
    "jsonschema._keywords",
    "jsonschema._utils",
    "jsonschema._legacy_keywords",
)


@functools.cache
def _install_bounded_re() -> None:
    import importlib

    for name in _JSONSCHEMA_REGEX_MODULES:
        module = importlib.import_module(name)
        if getattr(module, "re", None) is re:
            module.re = _BoundedRe()  # type: ignore[attr-defined]


# uniqueItems -------------------------------------------------------------------------------


def canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal for values JSON Schema calls equal: numbers by
    value (``1`` and ``1.0``; Python hashes equal numbers alike), booleans apart from
    numbers, objects whatever their key order."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("l", tuple(canonical(item) for item in value))
    if isinstance(value, dict):
        return ("o", frozenset((key, canonical(item)) for key, item in value.items()))
    return ("z", None) if value is None else ("x", repr(value))


def first_repeat(items: list[Any]) -> tuple[int, int] | None:
    """The indexes of the first item equal to an earlier one, and of that earlier one."""
    seen: dict[Any, int] = {}
    for index, item in enumerate(items):
        if index % 1024 == 0:
            _check_deadline()
        key = canonical(item)
        if key in seen:
            return seen[key], index
        seen[key] = index
    return None


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    repeat = first_repeat(instance)
    if repeat is not None:
        shown = repr(instance)
        shown = shown if len(shown) <= 200 else shown[:197] + "..."
        first, second = repeat
        yield ValidationError(
            f"{shown} has non-unique elements (items {first} and {second} are equal)"
        )


# Validator classes -------------------------------------------------------------------------


def _timed(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _check_deadline()
        return keyword(validator, value, instance, schema)

    return run


@functools.cache
def _bounded_classes() -> dict[Any, Any]:
    """Each of ``jsonschema``'s draft validators -> its bounded version."""
    import attrs
    import jsonschema
    from jsonschema import validators

    stock = (
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    )
    classes: dict[Any, Any] = {}
    for cls in stock:
        keywords = {name: _timed(fn) for name, fn in cls.VALIDATORS.items()}
        keywords["uniqueItems"] = _timed(_unique_items)
        bounded = validators.extend(cls, keywords)
        init_fields = [(f.name, f.alias) for f in attrs.fields(bounded) if f.init]
        bounded.evolve = _evolve_within(classes, init_fields)
        classes[cls] = classes[bounded] = bounded
    return classes


def _evolve_within(classes: dict[Any, Any], init_fields: list[tuple[str, str]]) -> Any:
    """``evolve`` that keeps to the bounded classes: ``jsonschema`` picks the stock class
    a subschema's ``$schema`` names, which would drop the bounds below it."""
    from jsonschema.validators import validator_for

    def evolve(self: Any, **changes: Any) -> Any:
        schema = changes.setdefault("schema", self.schema)
        chosen = validator_for(schema, default=type(self))
        for name, alias in init_fields:
            if alias not in changes:
                changes[alias] = getattr(self, name)
        return classes.get(chosen, chosen)(**changes)

    return evolve


def bounded_validator(schema: Any, registry: Any, default: Any = None) -> Any:
    """A validator of ``schema``'s dialect (``default``, else 2020-12, when it names none)
    whose work is bounded inside ``bounded_check``."""
    import jsonschema
    from jsonschema.validators import validator_for

    chosen = validator_for(schema, default=default or jsonschema.Draft202012Validator)
    cls = _bounded_classes().get(chosen, chosen)
    return cls(schema, registry=registry)
