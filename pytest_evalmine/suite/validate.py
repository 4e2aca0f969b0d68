"""Validation (spec: "Suite file"): the suite document against the JSON Schema (``schema.json``),
its version and the reserved keys, with every schema error reworded into what a suite author
needs to fix it. The checks of one case or label line are here too: ``resolve`` applies them to
the files it reads. jsonschema is imported when the first suite is validated.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

from ..errors import SuiteError
from .problems import Problems, clip, path_key, quoted

SUITE_VERSION = 1
MODEL = re.compile(r"^[a-z0-9][a-z0-9_-]*/\S+$")
# A number as written in text: YAML 1.1 (PyYAML) reads ``1e308`` and ``1e-3`` (an exponent
# without a dot, or without a sign) as strings, and a quoted number is one too. Where the
# schema wants a number the author clearly meant one (``_numbers_from_text``).
NUMBER_TEXT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# evalmine v1 keys this plugin cannot honour yet: refused with the reason, never ignored.
RESERVED_KEYS = {
    "check": (
        "evalmine's 'check' is not read: write the execution check as the task's "
        "'checks: [{exec: {run: ...}}]'; see spec section 2 'Reserved keys'"
    ),
}


def validate_suite(document: Any, shown: str) -> dict[str, Any]:
    """The validate stage of a suite load: ``document`` held to the suite schema, or one
    ``SuiteError`` with every problem found. A document of another version is refused before
    anything else is looked at, and the reserved keys are refused, with their reason, before
    the schema would call them unknown."""
    if not isinstance(document, dict):
        raise SuiteError(shown, "$", "a suite must be a mapping with version, suite and tasks")
    if "version" in document and document["version"] != SUITE_VERSION:
        # Checked first: the other keys of another version mean nothing to this reader.
        raise SuiteError(shown, "$.version", version_problem(document["version"]))
    problems = Problems()
    _refuse_reserved_keys(document, shown, problems)
    problems.raise_any()
    _check_schema(document, shown, problems)
    problems.raise_any()
    return document


def version_problem(version: Any) -> str:
    """Why ``version`` is not this plugin's: a quoted ``"1"`` is told apart from another
    version, whose message would otherwise read "unsupported version '1': ... version 1"."""
    if isinstance(version, str) and version.strip() == str(SUITE_VERSION):
        return (
            f"version {quoted(version)} is a string (it is quoted): this plugin reads the number "
            f"{SUITE_VERSION}; write version: {SUITE_VERSION} without quotes"
        )
    return f"unsupported version {quoted(version)}: this plugin reads version {SUITE_VERSION}"


def model_problem(model: str) -> str | None:
    """Why ``model`` is not a ``provider/model`` string, or None when it is one."""
    if not isinstance(model, str) or not MODEL.match(model):
        return (
            f"model {quoted(model)} is not 'provider/model' (a lowercase provider, '/', "
            "then the provider's model name)"
        )
    return None


def _refuse_reserved_keys(document: dict[str, Any], shown: str, problems: Problems) -> None:
    tasks = document.get("tasks")
    for index, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict):
            continue
        where = f"$.tasks[{index}]"
        entries = [(where, task)]
        cases = task.get("cases")
        entries += [
            (f"{where}.cases[{i}]", case)
            for i, case in enumerate(cases if isinstance(cases, list) else [])
            if isinstance(case, dict)
        ]
        for entry_where, entry in entries:
            for key, reason in RESERVED_KEYS.items():
                if key in entry:
                    problems.add(shown, f"{entry_where}.{key}", reason)


_VALIDATORS: dict[str, Any] = {}


def _validator(definition: str | None = None) -> Any:
    """The suite schema validator, or one for a named ``$defs`` entry (case lines, labels)."""
    key = definition or ""
    if key not in _VALIDATORS:
        from jsonschema import Draft202012Validator

        schema = json.loads(
            resources.files("pytest_evalmine.suite").joinpath("schema.json").read_text("utf-8")
        )
        # The suite schema is not recursive: with its references replaced by their targets,
        # validating a 10,000-case suite skips 20,000 reference look-ups.
        target = schema["$defs"][definition] if definition else schema
        try:
            flat = _without_refs(target, schema, ())
        except RecursionError:
            flat = (
                {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
                if definition
                else schema
            )
        _VALIDATORS[key] = Draft202012Validator(flat)
    return _VALIDATORS[key]


def _without_refs(value: Any, root: dict[str, Any], expanding: tuple[str, ...]) -> Any:
    """``value`` with every ``#/...`` reference replaced by its target; RecursionError when
    a definition refers back to itself (then the references stay)."""
    if isinstance(value, dict):
        if isinstance(value.get("$ref"), str):
            pointer = value["$ref"]
            if pointer in expanding:
                raise RecursionError(pointer)
            target: Any = root
            for part in pointer.removeprefix("#/").split("/"):
                target = target[part]
            rest = {k: v for k, v in value.items() if k != "$ref"}
            return _without_refs({**target, **rest}, root, (*expanding, pointer))
        return {k: _without_refs(v, root, expanding) for k, v in value.items() if k != "$defs"}
    if isinstance(value, list):
        return [_without_refs(item, root, expanding) for item in value]
    return value


def json_path(root: str, parts: Any) -> str:
    return root + "".join(f"[{p}]" if isinstance(p, int) else f".{path_key(p)}" for p in parts)


def validate_instance(
    instance: Any,
    shown: str,
    problems: Problems,
    definition: str | None = None,
    root: str = "$",
    path_of: Callable[[list[Any]], list[Any]] = list,
    source: Any = None,
) -> bool:
    """Adds one problem per schema violation; True when there was none. ``path_of`` maps
    an error's path in ``instance`` to the path the author sees, which is also its path in
    ``source`` (the document ``instance`` was sliced from, when it is not the document)."""
    from jsonschema.exceptions import best_match

    validator = _validator(definition)
    errors = list(validator.iter_errors(instance))
    if errors and _numbers_from_text(errors, instance, source, path_of):
        errors = list(validator.iter_errors(instance))
    for error in errors:
        best = best_match([error])
        problems.add(shown, json_path(root, path_of(list(best.absolute_path))), _explain(best))
    return not errors


def _numbers_from_text(
    errors: list[Any], instance: Any, source: Any, path_of: Callable[[list[Any]], list[Any]]
) -> bool:
    """Where the schema wants a number and finds a string that is one (``1e308``, which YAML
    1.1 reads as text), the number replaces it, in ``instance`` and in ``source``; True when
    any did. One place for every number-typed field, nested ones (``oneOf``) included. A
    non-finite number stays refused (``_explain`` says so), and the schema's bounds apply
    to the number as to one written with a dot (``-1e3`` is still below a minimum of 0)."""
    changed = False
    pending = list(errors)
    while pending:
        error = pending.pop()
        pending.extend(error.context or ())
        value = _number_in_text(error)
        if value is None:
            continue
        path = list(error.absolute_path)
        _replace(instance, path, value)
        if source is not None:
            _replace(source, path_of(path), value)
        changed = True
    return changed


def _number_in_text(error: Any) -> float | None:
    """The finite number a ``type: number`` error's string spells, else None."""
    text = error.instance
    if error.validator != "type" or error.validator_value != "number":
        return None
    if not isinstance(text, str) or NUMBER_TEXT.fullmatch(text) is None:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _replace(root: Any, path: list[Any], value: Any) -> None:
    for part in path[:-1]:
        root = root[part]
    root[path[-1]] = value


def schema_problem(definition: str, instance: Any) -> str | None:
    """The first thing the suite schema's ``$defs`` entry ``definition`` finds wrong with
    ``instance``, in a suite error's words (``KEY: why``), or None: an endpoint given on the
    command line is held to the rules of a suite's entry (``run.endpoints.parse_option``)."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator(definition).iter_errors(instance))
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {_explain(error)}" if where else _explain(error)


def _check_schema(document: dict[str, Any], shown: str, problems: Problems) -> None:
    """The suite schema over the document, where inline cases of the plain shape are taken
    as valid without the validator, as case lines are (``plain_case``): jsonschema spent a
    third of loading a 10,000-case suite on them. Each task keeps its other cases (or its
    first, so the list is never empty) and an error's case index is mapped back."""
    tasks = document.get("tasks")
    if not isinstance(tasks, list):
        validate_instance(document, shown, problems)
        return
    kept_by_task: dict[int, list[int]] = {}
    slim_tasks = []
    for index, task in enumerate(tasks):
        cases = task.get("cases") if isinstance(task, dict) else None
        if isinstance(cases, list) and cases:
            kept = [i for i, case in enumerate(cases) if not plain_case(case)] or [0]
            if len(kept) < len(cases):
                kept_by_task[index] = kept
                task = {**task, "cases": [cases[i] for i in kept]}
        slim_tasks.append(task)

    def path_of(path: list[Any]) -> list[Any]:
        if len(path) > 3 and path[0] == "tasks" and path[2] == "cases":
            kept = kept_by_task.get(path[1])
            if kept is not None and isinstance(path[3], int):
                return [*path[:3], kept[path[3]], *path[4:]]
        return path

    validate_instance(
        {**document, "tasks": slim_tasks}, shown, problems, path_of=path_of, source=document
    )


def _explain(error: Any) -> str:
    """Rewrite jsonschema's messages into the words a suite author needs, quoting values
    clipped."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(known))
        names = ", ".join(quoted(k) for k in extra[:5])
        return f"unknown key{'s' if len(extra) > 1 else ''} {names} (allowed: {', '.join(known)})"
    if error.validator == "const" and path == ["version"]:
        return version_problem(error.instance)
    if (
        error.validator == "type"
        and error.validator_value in ("number", "integer")
        and isinstance(error.instance, str)
        and NUMBER_TEXT.fullmatch(error.instance)
    ):
        return _number_text_problem(error.instance, error.validator_value)
    if error.validator == "not":
        both = error.validator_value.get("required", [])
        return f"use either {' or '.join(both)}, not both"
    if error.validator == "anyOf" and all("required" in s for s in error.validator_value):
        names = [s["required"][0] for s in error.validator_value]
        return f"needs one of: {', '.join(names)}"
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return f"missing required key {quoted(missing[0])}"
    if error.validator == "pattern" and error.schema.get("pattern", "").startswith("^[a-z0-9]"):
        return model_problem(error.instance) or error.message
    if error.validator == "pattern" and path[-1:] == ["base_url"]:
        return f"{quoted(error.instance)} is not an http:// or https:// URL with a host"
    shown = repr(error.instance)
    message = str(error.message)
    if message.startswith(shown):
        message = quoted(error.instance) + message[len(shown) :]
    return clip(message, 200)


def _number_text_problem(text: str, wanted: Any) -> str:
    """A string that spells a number where the schema wants one and it was not taken: it is
    not finite (``1e999``), or the field wants an integer and YAML read text (``1e3``)."""
    value = float(text)
    if not math.isfinite(value):
        return f"{quoted(text)} is not a finite number"
    read_as = (
        "YAML 1.1 reads a number with an exponent and no dot as text"
        if "e" in text.lower() and "." not in text
        else "a quoted number is text"
    )
    hint = f"; write {int(value)}" if value.is_integer() and abs(value) < 10**19 else ""
    article = "an" if wanted == "integer" else "a"
    return f"{quoted(text)} is a string, not {article} {wanted} ({read_as}){hint}"


_CASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def plain_case(entry: Any) -> bool:
    """True for a case line the schema's ``case`` definition surely accepts: an id and
    scalar vars. jsonschema takes about 0.1 ms a line, which a cases file of 10,000 lines
    feels; whatever this does not accept goes to the validator, whose messages stay."""
    if not isinstance(entry, dict) or not entry.keys() <= {"id", "vars"}:
        return False
    case_id = entry.get("id")
    variables = entry.get("vars", {})
    return (
        isinstance(case_id, str)
        and _CASE_ID.fullmatch(case_id) is not None
        and isinstance(variables, dict)
        and all(
            isinstance(name, str)
            and _VAR_NAME.fullmatch(name) is not None
            and isinstance(value, (str, int, float))
            for name, value in variables.items()
        )
    )
