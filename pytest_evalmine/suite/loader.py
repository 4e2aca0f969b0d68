"""Suite loading: YAML -> validated, rendered, hashed ``Suite`` (spec: "Suite file").

Imports no pytest. jsonschema and PyYAML are imported when a suite is loaded, not at plugin
import. Reading is bounded (``reading``), templates are parsed once (``template``), and every
problem found is reported at once, one line each, sorted by file and path.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import SuiteError
from ..options import (
    DEFAULT_INDIFFERENCE_POINTS,
    DEFAULT_MINOR_REGRESSION_POINTS,
    GateConfig,
)
from .canonical import sha256_hex
from .reading import (
    Problems,
    Roots,
    clip,
    file_roots,
    parse_json,
    parse_yaml,
    path_key,
    quoted,
    read_entries,
    read_text,
    resolve_file,
)
from .refs import SchemaRefs
from .task_schema import SchemaBudget, check_task_schema
from .template import Template, parse_template
from .variants import missing_variant_problem, split_contender

SUITE_VERSION = 1
RUN_CHOICES = ("models", "limits", "endpoints", "gate")
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MIN_KAPPA = 0.40
DEFAULT_MIN_LABELS = 10
# Below this many judged pairs a win-rate row is shown but never a headline.
DEFAULT_MIN_PAIRS = 10
DEFAULT_JUDGE_MAX_TOKENS = 300
DEFAULT_JUDGE_TEMPERATURE = 0.0
DEFAULT_MOVER_THRESHOLD = 0.15
# A binary criterion's judge is trusted only with this many test-split labels of each class
# and each recall's Wilson lower bound at least this high (spec: "Binary judges").
DEFAULT_MIN_LABELS_PER_CLASS = 10
DEFAULT_MIN_RECALL = 0.6
PARAM_KEYS = ("temperature", "max_tokens", "timeout_s", "top_p", "stop", "system")
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


@dataclass(frozen=True)
class Params:
    """Generation parameters after defaults and task overrides are merged.

    ``temperature`` and ``top_p`` stay ``None`` unless the suite sets them: several current
    models reject them, so adapters send only what the user asked for.
    """

    max_tokens: int = DEFAULT_MAX_TOKENS
    timeout_s: float = DEFAULT_TIMEOUT_S
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()

    def for_key(self) -> dict[str, Any]:
        """The parameters that can change an answer (timeout cannot, so it is left out)."""
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": list(self.stop),
        }


class _NoGold:
    """The sentinel for "this case names no gold value" (a gold of ``null`` is a value)."""

    def __repr__(self) -> str:
        return "NO_GOLD"


NO_GOLD: Any = _NoGold()


@dataclass(frozen=True)
class CheckSpec:
    """One entry of a task's ``checks`` list: a checker name and its options."""

    name: str
    options: dict[str, Any]
    where: str  # the entry's path in the suite, for error lines


@dataclass(frozen=True)
class Case:
    id: str
    vars: dict[str, Any]
    gold: Any = NO_GOLD
    expected: dict[str, Any] = field(default_factory=dict)

    def reference(self, check: CheckSpec) -> Any:
        """What ``check`` compares with: the case's ``expected`` entry for the check, else
        the check's ``value`` option, else the case's ``gold`` (``NO_GOLD`` when none)."""
        if check.name in self.expected:
            return self.expected[check.name]
        if "value" in check.options:
            return check.options["value"]
        return self.gold


@dataclass(frozen=True)
class Criterion:
    """One binary judge of a task: a named PASS/FAIL criterion."""

    name: str
    criterion: str


@dataclass(frozen=True)
class Variant:
    """A named variant as it applies to one task (spec: "Variants"): the task's prompt, system
    prompt, parameters and schema mode with the variant's overrides applied."""

    name: str
    where: str  # the declaration's path in the suite (the suite's variants or the task's)
    prompt: str
    system: str | None
    params: Params
    # "prompted": the schema goes in the prompt instead of native structured output.
    schema_mode: str | None = None
    prompt_template: Template | None = field(default=None, repr=False, compare=False)
    system_template: Template | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Task:
    id: str
    kind: str
    prompt: str
    system: str | None
    schema: dict[str, Any] | None
    rubric: str | None
    judge: bool
    params: Params
    cases: tuple[Case, ...]
    # Files the schema's ``$ref``s point to (URI -> schema), all inside the suite's folder.
    schema_refs: SchemaRefs | None = field(default=None, repr=False, compare=False)
    prompt_template: Template | None = field(default=None, repr=False, compare=False)
    system_template: Template | None = field(default=None, repr=False, compare=False)
    checks: tuple[CheckSpec, ...] = ()
    regression: bool = False
    judges: tuple[Criterion, ...] = ()
    # The variants this task can be asked with: the suite's, then the task's own (which
    # replace a suite variant of the same name), by name.
    variants: dict[str, Variant] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Label:
    task: str
    case: str
    baseline: str
    candidate: str
    prefer: str
    note: str = ""


@dataclass(frozen=True)
class CriterionLabel:
    """A person's PASS/FAIL for one answer (task, case, model) on one binary criterion."""

    task: str
    case: str
    model: str
    criterion: str
    label: str
    note: str = ""


@dataclass(frozen=True)
class JudgeConfig:
    model: str | None = None
    rubric: str = ""
    min_kappa: float = DEFAULT_MIN_KAPPA
    min_labels: int = DEFAULT_MIN_LABELS
    min_pairs: int = DEFAULT_MIN_PAIRS
    on_below_floor: str = "flag"
    max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS
    temperature: float = DEFAULT_JUDGE_TEMPERATURE
    min_labels_per_class: int = DEFAULT_MIN_LABELS_PER_CLASS
    min_recall: float = DEFAULT_MIN_RECALL
    # judge.audit.fraction: the share of pairs in the audit sample; None: about 30 per
    # candidate (judging/audit.py)
    audit_fraction: float | None = None
    # judge.pairs: "baseline" (each candidate against the baseline) or "all" (every two
    # models, for the ranking; win rates still read the baseline's pairs only)
    pairs: str = "baseline"


@dataclass(frozen=True)
class Rendered:
    """A task prompt after ``{{ name }}`` substitution for one case."""

    system: str | None
    prompt: str


@dataclass(frozen=True)
class Suite:
    path: Path
    name: str
    description: str
    models: tuple[str, ...]
    max_cost_usd: float | None
    judge: JudgeConfig
    tasks: tuple[Task, ...]
    labels: tuple[Label, ...]
    hash: str
    document: dict[str, Any] = field(repr=False, compare=False)
    endpoints: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    mover_threshold: float = DEFAULT_MOVER_THRESHOLD
    gate: GateConfig | None = None
    # How messages and reports name the file: relative to the rootdir when inside it.
    shown: str = ""
    criterion_labels: tuple[CriterionLabel, ...] = ()
    # Every declared variant name: the suite's, then the tasks' own, in file order.
    variant_names: tuple[str, ...] = ()
    # ``batch``: true (or an ``--evalmine-batch`` value) sends its calls as provider batches.
    batch: bool | str = False

    def contender(self, entry: str) -> tuple[str, str | None]:
        """``(model, variant)`` of a model list entry, ``MODEL`` or ``MODEL@VARIANT``."""
        return split_contender(entry, self.variant_names)

    def variant_problem(self, entry: str) -> str | None:
        """Why the model list entry ``entry`` cannot be asked every task (its variant is
        declared on some tasks only), or None."""
        _model, variant = self.contender(entry)
        if variant is None:
            return None
        without = [task.id for task in self.tasks if variant not in task.variants]
        return missing_variant_problem(entry, variant, without) if without else None

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def case(self, task_id: str, case_id: str) -> Case:
        """A task's case by id, from an index built on first use (the judge asks for every
        case of a large suite)."""
        return self._cases[(task_id, case_id)]

    @cached_property
    def _cases(self) -> dict[tuple[str, str], Case]:
        return {(task.id, case.id): case for task in self.tasks for case in task.cases}

    def render(self, task: Task, case: Case, variant: str | None = None) -> Rendered:
        """The task's prompts for ``case``, or those of its variant ``variant``."""
        asked: Task | Variant = task.variants[variant] if variant else task
        prompt = asked.prompt_template or parse_template(asked.prompt)
        system = asked.system_template or (parse_template(asked.system) if asked.system else None)
        return Rendered(
            system=system.render(case.vars) if system is not None else None,
            prompt=prompt.render(case.vars),
        )


def load_suite(path: str | Path, shown: str | None = None, roots: Sequence[Path] = ()) -> Suite:
    """Load, validate and render a suite; every problem found raises one ``SuiteError``
    with one line each (up to a limit), sorted by file and path.

    ``shown`` is how errors name the file (relative to the rootdir); files the suite refers
    to are named relative to it the same way. ``roots``: the folders besides the suite's own
    that those files may lie in (the rootdir, then the ini key ``evalmine_data_roots``'s);
    a file anywhere else is refused, unread."""
    path = Path(path)
    shown = shown or str(path)
    document = parse_yaml(read_text(path, shown), shown)
    if not isinstance(document, dict):
        raise SuiteError(shown, "$", "a suite must be a mapping with version, suite and tasks")
    if "version" in document and document["version"] != SUITE_VERSION:
        # Checked first: the other keys of another version mean nothing to this reader.
        raise SuiteError(shown, "$.version", version_problem(document["version"]))
    problems = Problems()
    _refuse_reserved_keys(document, shown, problems)
    problems.raise_any()
    _validate_suite(document, shown, problems)
    problems.raise_any()
    sources = _inline_files(document, path, shown, problems, file_roots(path, roots))
    problems.raise_any()
    suite = _build(document, path, shown, sources, problems)
    problems.raise_any()
    return suite


def suite_hash(document: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the inlined suite without ``models``, ``limits`` and
    ``endpoints``.

    The model list, the budget and where models are served are choices of a run, not of the
    suite: the same tasks and labels compared across different models keep one suite hash.
    """
    content = {k: v for k, v in document.items() if k not in RUN_CHOICES}
    return sha256_hex(content)


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


def _validate(
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


def _validate_suite(document: dict[str, Any], shown: str, problems: Problems) -> None:
    """The suite schema over the document, where inline cases of the plain shape are taken
    as valid without the validator, as case lines are (``_plain_case``): jsonschema spent a
    third of loading a 10,000-case suite on them. Each task keeps its other cases (or its
    first, so the list is never empty) and an error's case index is mapped back."""
    tasks = document.get("tasks")
    if not isinstance(tasks, list):
        _validate(document, shown, problems)
        return
    kept_by_task: dict[int, list[int]] = {}
    slim_tasks = []
    for index, task in enumerate(tasks):
        cases = task.get("cases") if isinstance(task, dict) else None
        if isinstance(cases, list) and cases:
            kept = [i for i, case in enumerate(cases) if not _plain_case(case)] or [0]
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

    _validate({**document, "tasks": slim_tasks}, shown, problems, path_of=path_of, source=document)


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


@dataclass
class _Sources:
    """Where each case and label came from (file and JSON path or line), so errors found
    after inlining name the file the author has to edit."""

    cases: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    labels: list[tuple[str, str]] = field(default_factory=list)
    schema_refs: dict[int, SchemaRefs] = field(default_factory=dict)


def _inline_files(
    document: dict[str, Any], path: Path, shown: str, problems: Problems, roots: Roots
) -> _Sources:
    """Replace ``schema_path``, ``cases_path`` and ``labels_path`` by their contents.

    Paths are relative to the suite file. The suite hash is taken after inlining, so an edit
    to a referenced file changes the hash.
    """
    base = path.parent
    sources = _Sources()
    budget = SchemaBudget()  # the size bounds hold for the suite's task schemas together
    tasks = [dict(task) for task in document["tasks"]]
    document["tasks"] = tasks
    for index, task in enumerate(tasks):
        where = f"$.tasks[{index}]"
        schema_file, schema_shown = path, shown
        if "schema_path" in task:
            target = _resolve(
                base, task["schema_path"], shown, f"{where}.schema_path", problems, roots
            )
            if target is not None:
                schema_file = target
                schema_shown = _shown_ref(shown, task["schema_path"])
                before = len(problems.found)
                schema = parse_json(read_text(target, schema_shown), schema_shown, "$", problems)
                if len(problems.found) == before:  # a file holding null is checked, not dropped
                    task["schema"] = schema
            del task["schema_path"]
        if "cases_path" in task:
            target = _resolve(
                base, task["cases_path"], shown, f"{where}.cases_path", problems, roots
            )
            if target is not None:
                file_shown = _shown_ref(shown, task["cases_path"])
                task["cases"], sources.cases[index] = _read_cases(
                    target, file_shown, shown, f"{where}.cases_path", problems
                )
            del task["cases_path"]
        else:
            sources.cases[index] = [
                (shown, f"{where}.cases[{i}]") for i in range(len(task.get("cases", [])))
            ]
        if "schema" in task:
            schema_where = "$" if schema_file != path else f"{where}.schema"
            checked = check_task_schema(
                task["schema"], schema_file, schema_shown, schema_where, base, problems, budget
            )
            if checked is not None:
                task["schema"], refs = checked
                if refs is not None:
                    sources.schema_refs[index] = refs
    if "labels_path" in document:
        target = _resolve(base, document["labels_path"], shown, "$.labels_path", problems, roots)
        if target is not None:
            file_shown = _shown_ref(shown, document["labels_path"])
            document["labels"], sources.labels = _read_labels(target, file_shown, problems)
        del document["labels_path"]
    else:
        sources.labels = [(shown, f"$.labels[{i}]") for i in range(len(document.get("labels", [])))]
    return sources


def _shown_ref(shown: str, relative: str) -> str:
    """A referenced file named the way its suite is (relative to the rootdir)."""
    return os.path.normpath(os.path.join(os.path.dirname(shown), relative))


def _resolve(
    base: Path, relative: str, shown: str, where: str, problems: Problems, roots: Roots
) -> Path | None:
    # a name of control characters or blanks ("\r") would print as nothing: quote it then
    named = clip(relative) if relative.isprintable() and relative.strip() else quoted(relative)
    return resolve_file(base / relative, shown, where, problems, named, inside=roots)


def _read_cases(
    target: Path, file_shown: str, shown: str, where: str, problems: Problems
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    before = len(problems.found)
    read = _read_valid_entries(target, file_shown, problems, "case")
    if read is not None and not read[1] and len(problems.found) == before:
        problems.add(shown, where, f"{target.name} holds no cases")
    return read or ([], [])


_CASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _plain_case(entry: Any) -> bool:
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


def _read_labels(
    target: Path, file_shown: str, problems: Problems
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    def unwrap(loaded: Any) -> Any:
        # evalmine's labels files may hold {labels: [...]} as well as the list itself.
        if isinstance(loaded, dict) and list(loaded) == ["labels"]:
            return loaded["labels"]
        return loaded

    return _read_valid_entries(target, file_shown, problems, "label", unwrap) or ([], [])


def _read_valid_entries(
    target: Path,
    file_shown: str,
    problems: Problems,
    definition: str,
    unwrap: Callable[[Any], Any] | None = None,
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]] | None:
    """The valid entries of a cases or labels file, each with its file and line or index;
    None when the file does not hold a list (problem added)."""
    entries = read_entries(target, file_shown, problems, unwrap, definition)
    if entries is None:
        problems.add(file_shown, "$", f"a {definition}s file holds a list of {definition}s")
        return None
    valid, origins = [], []
    for entry_where, entry in entries:
        if entry is not None and (
            (definition == "case" and _plain_case(entry))
            or _validate(entry, file_shown, problems, definition, entry_where)
        ):
            valid.append(entry)
            origins.append((file_shown, entry_where))
    return valid, origins


def _params_of(
    defaults: dict[str, Any], raw: dict[str, Any], where: str, shown: str, problems: Problems
) -> tuple[dict[str, Any], str | None]:
    """Defaults, then the task's ``params``, then params keys written on the task itself
    (evalmine's form); one key set both ways is ambiguous and refused. Also returns the JSON
    path of the system prompt in use."""
    params = raw.get("params", {})
    direct = {k: raw[k] for k in PARAM_KEYS if k in raw and k != "system"}
    for key in sorted(set(direct) & set(params)):
        problems.add(shown, f"{where}.{key}", f"set both here and in params.{key}; keep one")
    merged = {**defaults, **params, **direct}
    if "system" in raw:
        system_where: str | None = f"{where}.system"
    elif "system" in params:
        system_where = f"{where}.params.system"
    elif "system" in defaults:
        system_where = "$.defaults.system"
    else:
        system_where = None
    merged["system"] = raw.get("system", merged.get("system"))
    return merged, system_where


def _template(text: str, shown: str, where: str, problems: Problems) -> Template | None:
    try:
        return parse_template(text)
    except ValueError as exc:
        problems.add(shown, where, str(exc))
        return None


def _params(merged: dict[str, Any]) -> Params:
    """The parameters of a merged params mapping (defaults, task, variant), defaults filled in."""
    return Params(
        max_tokens=int(merged.get("max_tokens", DEFAULT_MAX_TOKENS)),
        timeout_s=float(merged.get("timeout_s", DEFAULT_TIMEOUT_S)),
        temperature=merged.get("temperature"),
        top_p=merged.get("top_p"),
        stop=tuple(merged.get("stop", ())),
    )


_TaskTemplates = tuple[Template | None, Template | None]


def _task_variants(
    suite_variants: dict[str, Any],
    raw: dict[str, Any],
    where: str,
    merged: dict[str, Any],
    templates: _TaskTemplates,
    shown: str,
    problems: Problems,
) -> dict[str, Variant]:
    """The variants a task can be asked with: the suite's, then its own (a task's variant
    replaces the suite's of the same name, it is not merged with it). Each overrides what it
    names and keeps the rest of the task: its ``params`` key by key over the task's."""
    declared = {name: (spec, f"$.variants.{name}") for name, spec in suite_variants.items()}
    declared |= {
        name: (spec, f"{where}.variants.{name}") for name, spec in raw.get("variants", {}).items()
    }
    prompt_template, system_template = templates
    variants: dict[str, Variant] = {}
    for name, (spec, at) in declared.items():
        own = spec.get("params", {})
        if "system" in spec and "system" in own:
            problems.add(shown, f"{at}.system", "set both here and in params.system; keep one")
        variant = Variant(
            name=name,
            where=at,
            prompt=spec.get("prompt", raw["prompt"]),
            system=spec.get("system", own.get("system", merged["system"])),
            params=_params({**merged, **own}),
            schema_mode=spec.get("schema_mode"),
            prompt_template=(
                _template(spec["prompt"], shown, f"{at}.prompt", problems)
                if "prompt" in spec
                else prompt_template
            ),
        )
        if "system" in spec or "system" in own:
            system_at = f"{at}.system" if "system" in spec else f"{at}.params.system"
            system = (
                _template(variant.system, shown, system_at, problems) if variant.system else None
            )
        else:
            system = system_template
        variants[name] = dataclasses.replace(variant, system_template=system)
    return variants


def _variant_placeholders(
    variants: Iterable[Variant], prompt: Template | None, system: Template | None
) -> list[tuple[str, str]]:
    """The placeholders of the variants' own prompts, each with where it is, for the check
    that every case has their variables (a prompt the variant keeps was checked already)."""
    names: list[tuple[str, str]] = []
    for variant in variants:
        if variant.prompt_template is not None and variant.prompt_template is not prompt:
            place = f"prompt of variant {quoted(variant.name)}"
            names += [(name, place) for name in variant.prompt_template.names]
        if variant.system_template is not None and variant.system_template is not system:
            place = f"system prompt of variant {quoted(variant.name)}"
            names += [(name, place) for name in variant.system_template.names]
    return names


def _declared_variants(document: dict[str, Any]) -> tuple[str, ...]:
    """Every variant name: the suite's, then each task's own, in file order."""
    names = list(document.get("variants", {}))
    for raw in document["tasks"]:
        names += [name for name in raw.get("variants", {}) if name not in names]
    return tuple(names)


def _refuse_missing_variants(
    models: Any, names: tuple[str, ...], tasks: list[Task], shown: str, problems: Problems
) -> None:
    """A ``MODEL@VARIANT`` in the suite's models whose variant some task does not declare."""
    for index, entry in enumerate(models):
        _model, variant = split_contender(entry, names)
        if variant is None:
            continue
        without = [task.id for task in tasks if variant not in task.variants]
        if without:
            problems.add(
                shown, f"$.models[{index}]", missing_variant_problem(entry, variant, without)
            )


def _build(
    document: dict[str, Any], path: Path, shown: str, sources: _Sources, problems: Problems
) -> Suite:
    defaults = document.get("defaults", {})
    tasks: list[Task] = []
    seen_tasks: set[str] = set()
    for index, raw in enumerate(document["tasks"]):
        where = f"$.tasks[{index}]"
        if raw["id"] in seen_tasks:
            problems.add(shown, f"{where}.id", f"duplicate task id {quoted(raw['id'])}")
        seen_tasks.add(raw["id"])
        merged, system_where = _params_of(defaults, raw, where, shown, problems)
        system = merged["system"]
        params = _params(merged)
        prompt_template = _template(raw["prompt"], shown, f"{where}.prompt", problems)
        system_template = (
            _template(system, shown, system_where or where, problems) if system else None
        )
        variants = _task_variants(
            document.get("variants", {}),
            raw,
            where,
            merged,
            (prompt_template, system_template),
            shown,
            problems,
        )
        cases = _build_cases(
            raw,
            sources.cases.get(index, []),
            prompt_template,
            system_template,
            problems,
            _variant_placeholders(variants.values(), prompt_template, system_template),
        )
        tasks.append(
            Task(
                id=raw["id"],
                kind=raw["kind"],
                prompt=raw["prompt"],
                system=system,
                schema=raw.get("schema"),
                rubric=raw.get("rubric"),
                judge=bool(raw.get("judge", True)),
                params=params,
                cases=tuple(cases),
                schema_refs=sources.schema_refs.get(index),
                prompt_template=prompt_template,
                system_template=system_template,
                checks=tuple(
                    _check_spec(entry, f"{where}.checks[{number}]")
                    for number, entry in enumerate(raw.get("checks", ()))
                ),
                regression=bool(raw.get("regression", False)),
                judges=_judges(raw.get("judges", ()), shown, where, problems),
                variants=variants,
            )
        )
    _refuse_repeated_models(document.get("models", ()), shown, problems)
    variant_names = _declared_variants(document)
    _refuse_missing_variants(document.get("models", ()), variant_names, tasks, shown, problems)
    judge_raw = document.get("judge", {})
    calibration = judge_raw.get("calibration", {})
    criteria = judge_raw.get("criteria", {})
    audit = judge_raw.get("audit", {})
    # one labels list holds both kinds: a criterion label is the one naming a criterion
    entries = list(zip(document.get("labels", []), sources.labels, strict=True))
    preference = [(raw, origin) for raw, origin in entries if "criterion" not in raw]
    binary = [(raw, origin) for raw, origin in entries if "criterion" in raw]
    judge = JudgeConfig(
        model=judge_raw.get("model"),
        rubric=judge_raw.get("rubric", ""),
        min_kappa=float(calibration.get("min_kappa", DEFAULT_MIN_KAPPA)),
        min_labels=int(calibration.get("min_labels", DEFAULT_MIN_LABELS)),
        min_pairs=int(calibration.get("min_pairs", DEFAULT_MIN_PAIRS)),
        on_below_floor=calibration.get("on_below_floor", "flag"),
        max_tokens=int(judge_raw.get("max_tokens", DEFAULT_JUDGE_MAX_TOKENS)),
        temperature=float(judge_raw.get("temperature", DEFAULT_JUDGE_TEMPERATURE)),
        min_labels_per_class=int(
            criteria.get("min_labels_per_class", DEFAULT_MIN_LABELS_PER_CLASS)
        ),
        min_recall=float(criteria.get("min_recall", DEFAULT_MIN_RECALL)),
        audit_fraction=(None if audit.get("fraction") is None else float(audit["fraction"])),
        pairs=judge_raw.get("pairs", "baseline"),
    )
    return Suite(
        path=path,
        name=document["suite"],
        description=document.get("description", ""),
        models=tuple(document.get("models", ())),
        max_cost_usd=document.get("limits", {}).get("max_cost_usd"),
        judge=judge,
        tasks=tuple(tasks),
        labels=tuple(_build_labels(preference, tasks, problems)),
        criterion_labels=tuple(_build_criterion_labels(binary, tasks, problems)),
        hash=suite_hash(document),
        document=document,
        endpoints=dict(document.get("endpoints", {})),
        mover_threshold=float(
            document.get("report", {}).get("mover_threshold", DEFAULT_MOVER_THRESHOLD)
        ),
        gate=_gate(document.get("gate"), shown, problems),
        shown=shown,
        variant_names=variant_names,
        batch=document.get("batch", False),
    )


def _refuse_repeated_models(models: Any, shown: str, problems: Problems) -> None:
    """A model listed twice would be answered, scored and judged twice under one name."""
    first: dict[str, int] = {}
    for index, model in enumerate(models):
        if model in first:
            problems.add(
                shown,
                f"$.models[{index}]",
                f"model {quoted(model)} is listed twice (also at $.models[{first[model]}])",
            )
        else:
            first[model] = index


def _gate(raw: dict[str, Any] | None, shown: str, problems: Problems) -> GateConfig | None:
    if raw is None:
        return None
    try:
        return GateConfig(
            raw["metric"],
            float(raw.get("indifference", DEFAULT_INDIFFERENCE_POINTS)),
            float(raw.get("minor_regression", DEFAULT_MINOR_REGRESSION_POINTS)),
        )
    except ValueError as exc:
        problems.add(shown, "$.gate", str(exc))
        return None


def _build_cases(
    raw: dict[str, Any],
    origins: list[tuple[str, str]],
    prompt: Template | None,
    system: Template | None,
    problems: Problems,
    also: Sequence[tuple[str, str]] = (),
) -> list[Case]:
    """Cases in order; a duplicate id and a placeholder without a variable (of the task's
    prompts, or ``also``: the variants') are reported where the case is written (the suite,
    or the cases file and its line)."""
    names = [(n, "prompt") for n in prompt.names] if prompt else []
    names += [(n, "system prompt") for n in system.names] if system else []
    names += list(also)
    cases: list[Case] = []
    seen: set[str] = set()
    for raw_case, (file, where) in zip(raw.get("cases", []), origins, strict=True):
        if raw_case["id"] in seen:
            problems.add(
                file,
                _field(where, "id"),
                f"duplicate case id {quoted(raw_case['id'])} in task {quoted(raw['id'])}",
            )
        seen.add(raw_case["id"])
        values = dict(raw_case.get("vars", {}))
        for name, place in names:
            if name not in values:
                problems.add(
                    file,
                    where,
                    f"placeholder {{{{ {name} }}}} in the {place} has no variable {name!r} "
                    f"(task {quoted(raw['id'])}, case {quoted(raw_case['id'])})",
                )
        cases.append(
            Case(
                id=raw_case["id"],
                vars=values,
                gold=raw_case.get("gold", NO_GOLD),
                expected=dict(raw_case.get("expected", {})),
            )
        )
    return cases


def _check_spec(entry: str | dict[str, Any], where: str) -> CheckSpec:
    """``- number`` or ``- number: {tolerance: 0.01}`` (the schema allows exactly one key)."""
    if isinstance(entry, str):
        return CheckSpec(entry, {}, where)
    ((name, options),) = entry.items()
    return CheckSpec(name, dict(options or {}), where)


def _judges(raw: Any, shown: str, where: str, problems: Problems) -> tuple[Criterion, ...]:
    """A task's binary judges; a name used twice in one task is refused where it repeats."""
    judges: list[Criterion] = []
    for number, entry in enumerate(raw):
        if any(judge.name == entry["name"] for judge in judges):
            problems.add(
                shown,
                f"{where}.judges[{number}].name",
                f"duplicate judge name {quoted(entry['name'])} in this task",
            )
            continue
        judges.append(Criterion(entry["name"], entry["criterion"]))
    return tuple(judges)


_TaskIndex = dict[str, tuple[Task, set[str]]]


def _task_index(tasks: list[Task]) -> _TaskIndex:
    return {task.id: (task, {case.id for case in task.cases}) for task in tasks}


def _labelled_task(
    raw: dict[str, Any], index: _TaskIndex, file: str, where: str, problems: Problems
) -> Task | None:
    """The labelled task when its task and case exist; else adds the problem, None."""
    if raw["task"] not in index:
        problems.add(file, _field(where, "task"), f"no task {quoted(raw['task'])} in this suite")
        return None
    task, cases = index[raw["task"]]
    if raw["case"] not in cases:
        problems.add(
            file,
            _field(where, "case"),
            f"task {quoted(raw['task'])} has no case {quoted(raw['case'])}",
        )
        return None
    return task


def _build_criterion_labels(
    entries: list[tuple[dict[str, Any], tuple[str, str]]],
    tasks: list[Task],
    problems: Problems,
) -> list[CriterionLabel]:
    index = _task_index(tasks)
    labels: list[CriterionLabel] = []
    seen: set[tuple[str, str, str, str]] = set()
    for raw, (file, where) in entries:
        task = _labelled_task(raw, index, file, where, problems)
        if task is None:
            continue
        names = [judge.name for judge in task.judges]
        if raw["criterion"] not in names:
            problems.add(
                file,
                _field(where, "criterion"),
                f"task {quoted(raw['task'])} has no judge {quoted(raw['criterion'])} "
                f"(its judges: {', '.join(names) or 'none'})",
            )
            continue
        identity = (raw["task"], raw["case"], raw["model"], raw["criterion"])
        if identity in seen:
            problems.add(file, where, "duplicate label for this task, case, model and criterion")
        seen.add(identity)
        labels.append(
            CriterionLabel(**{k: raw[k] for k in CriterionLabel.__dataclass_fields__ if k in raw})
        )
    return labels


def _build_labels(
    entries: list[tuple[dict[str, Any], tuple[str, str]]],
    tasks: list[Task],
    problems: Problems,
) -> list[Label]:
    index = _task_index(tasks)
    labels: list[Label] = []
    seen: set[tuple[str, str, str, str]] = set()
    for raw, (file, where) in entries:
        if _labelled_task(raw, index, file, where, problems) is None:
            continue
        if raw["baseline"] == raw["candidate"]:
            problems.add(file, where, "baseline and candidate are the same model")
            continue
        # A pair labelled twice (in either order) would be counted twice in kappa.
        identity = (raw["task"], raw["case"], *sorted((raw["baseline"], raw["candidate"])))
        if identity in seen:
            problems.add(file, where, "duplicate label for this task, case and model pair")
        seen.add(identity)
        labels.append(Label(**{k: raw[k] for k in Label.__dataclass_fields__ if k in raw}))
    return labels


def _field(where: str, name: str) -> str:
    """The path of a field of an entry: ``$.labels[0].task``; a JSONL line stays ``line 3``."""
    return f"{where}.{name}" if where.startswith("$") else where
