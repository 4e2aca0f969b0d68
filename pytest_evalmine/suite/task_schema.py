"""Task schemas (spec: "Suite file", task schemas): what a schema must be before a suite loads.

A task schema is a JSON object (or ``true``, read as ``{}``) of a JSON Schema dialect
``jsonschema`` knows (2020-12 unless its ``$schema`` names another), valid against that
dialect's metaschema. The metaschema allows any other key, so a typo (``propetries``,
``reuqired``) would be taken as an annotation and the schema check would pass everything:
every key of every subschema must be a keyword of the dialect, taken from the metaschema
itself. A schema no answer can satisfy is refused where that is plain from its structure
(``false`` or an empty ``enum`` where a value is required, bounds that cross, a ``$ref`` loop
through required values), so a run does not spend its budget on answers that must fail.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin

from .reading import Problems, clip, path_key, quoted
from .refs import SchemaRefs, collect_refs
from .schema_loops import find_in_place_loop
from .schema_walk import subschemas

DEFAULT_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# The satisfiability analysis gives up (and accepts) past this many steps: it only refuses
# what it has shown, so a schema too large to finish is loaded and checked per answer.
MAX_ANALYSIS_STEPS = 200_000
# Subschemas an explanation follows before it names the place it got to (Python's recursion).
MAX_EXPLAINED_STEPS = 100
# The work of loading a schema is bounded by its size, not only by its bytes: the metaschema
# check costs about a millisecond a subschema (a 13 MB schema took minutes). Counted over
# every task schema of a suite and the files their $refs name.
MAX_SUBSCHEMAS = 5_000
MAX_SCHEMA_VALUES = 100_000


@dataclass
class SchemaBudget:
    """What a suite's task schemas have used of ``MAX_SUBSCHEMAS`` and
    ``MAX_SCHEMA_VALUES``."""

    subschemas: int = 0
    values: int = 0


@dataclass(frozen=True)
class Dialect:
    """A JSON Schema draft: its validator class and its keywords."""

    uri: str
    validator: Any
    keywords: frozenset[str]
    # Drafts 4 to 7 ignore every keyword next to ``$ref``.
    legacy: bool
    # Before 2020-12 a list ``items`` is a tuple, continued by ``additionalItems``.
    tuple_items: bool


def check_task_schema(
    value: Any,
    schema_file: Path,
    shown: str,
    where: str,
    suite_dir: Path,
    problems: Problems,
    budget: SchemaBudget | None = None,
) -> tuple[dict[str, Any], SchemaRefs | None] | None:
    """The schema to keep (``true`` becomes ``{}``) and the files its ``$ref``s name; None
    with problems added when it is refused. ``where`` is the schema's own path (``$`` in a
    schema file, ``$.tasks[0].schema`` inline); problems inside it extend that path.
    ``budget``: what the suite's other task schemas used of the size bounds."""
    budget = budget if budget is not None else SchemaBudget()
    if value is True:
        return {}, None
    if value is False:
        problems.add(shown, where, "the schema is false: no answer satisfies it")
        return None
    if not isinstance(value, dict):
        problems.add(
            shown, where, f"a task schema is a JSON object (or true), not {_kind_of(value)}"
        )
        return None
    dialect = dialect_of(value, shown, where, problems)
    if dialect is None or not check_schema_document(value, dialect, shown, where, problems, budget):
        return None

    def check_referenced(document: dict[str, Any], document_shown: str) -> bool:
        # a file a $ref names is a schema too, of the task schema's dialect unless it says
        named = dialect_of(document, document_shown, "$", problems, default=dialect.uri)
        return named is not None and check_schema_document(
            document, named, document_shown, "$", problems, budget
        )

    refs = collect_refs(value, schema_file, shown, where, suite_dir, problems, check_referenced)
    if refs is None:
        return None
    unsatisfiable = find_unsatisfiable(value, dialect)
    if unsatisfiable is not None:
        inside, problem = unsatisfiable
        problems.add(shown, where + inside.removeprefix("$"), problem)
        return None
    in_place = find_in_place_loop(refs, dialect, _dialect, shown, where)
    if in_place is not None:
        problems.add(*in_place)
        return None
    return value, refs


def dialect_of(
    schema: dict[str, Any], shown: str, where: str, problems: Problems, default: str | None = None
) -> Dialect | None:
    """The dialect ``$schema`` names (``default``, else 2020-12, without one); None with a
    problem for one ``jsonschema`` does not know."""
    named = schema.get("$schema", default or DEFAULT_DIALECT)
    if not isinstance(named, str):
        problems.add(shown, f"{where}.$schema", f"$schema is a URI string, not {_kind_of(named)}")
        return None
    dialect = _dialect(named)
    if dialect is None:
        known = ", ".join(_name(cls) for cls in _supported())
        problems.add(
            shown,
            f"{where}.$schema",
            f"$schema {quoted(named)} is not a JSON Schema dialect this plugin checks "
            f"(known: {known})",
        )
    return dialect


def check_schema_document(
    schema: dict[str, Any],
    dialect: Dialect,
    shown: str,
    where: str,
    problems: Problems,
    budget: SchemaBudget | None = None,
) -> bool:
    """The schema within the size bounds, against its dialect's metaschema, then every key
    of every subschema a keyword of the dialect; True when nothing was wrong (problems added
    otherwise)."""
    from jsonschema.exceptions import SchemaError

    too_large = _over_budget(schema, dialect, budget if budget is not None else SchemaBudget())
    if too_large:
        problems.add(shown, where, too_large)
        return False
    try:
        dialect.validator.check_schema(schema)
    except SchemaError as exc:
        inside = "".join(f"[{p}]" if isinstance(p, int) else f".{path_key(p)}" for p in exc.path)
        problems.add(shown, where + inside, f"not a valid JSON Schema: {clip(exc.message, 200)}")
        return False
    before = len(problems.found)
    for node, inside in subschemas(schema, dialect):
        if not isinstance(node, dict):
            continue
        for key in node:
            if key not in dialect.keywords:
                problems.add(shown, where + inside.removeprefix("$"), _unknown(key, dialect))
    return len(problems.found) == before


def _over_budget(schema: Any, dialect: Dialect, budget: SchemaBudget) -> str | None:
    """Why ``schema`` does not fit what is left of ``budget`` (None: it fits, and is added)."""
    left = MAX_SCHEMA_VALUES - budget.values
    values = _count_values(schema, left + 1)
    if values > left:
        return (
            f"the schema holds over {left:,} JSON values ({MAX_SCHEMA_VALUES:,} at most, "
            "counting every task schema of the suite and the files their $refs name): "
            "too large to load and check answers against in bounded time"
        )
    found = len(subschemas(schema, dialect))
    if budget.subschemas + found > MAX_SUBSCHEMAS:
        return (
            f"the schema has {found:,} subschemas ({MAX_SUBSCHEMAS:,} at most, counting every "
            "task schema of the suite and the files their $refs name): too large to load and "
            "check answers against in bounded time"
        )
    budget.values += values
    budget.subschemas += found
    return None


def _count_values(value: Any, stop_at: int) -> int:
    """How many JSON values ``value`` holds (itself included), counting no further than
    ``stop_at``."""
    count, stack = 0, [value]
    while stack and count < stop_at:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


# Dialects --------------------------------------------------------------------------------


def _supported() -> tuple[Any, ...]:
    import jsonschema

    # Drafts older than 4 spell requirements differently (``required: true`` on a property).
    return (
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    )


def _name(cls: Any) -> str:
    """``draft-07``, ``2020-12``: the part of the metaschema's URI that names the dialect."""
    return str(cls.META_SCHEMA["$schema"]).split("/")[-2]


@lru_cache(maxsize=16)
def _dialect(uri: str) -> Dialect | None:
    import jsonschema
    from jsonschema import validators

    cls = validators.validator_for({"$schema": uri}, default=None)
    if cls not in _supported():
        return None
    legacy = (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator)
    return Dialect(
        uri=uri,
        validator=cls,
        keywords=frozenset(cls.VALIDATORS) | _metaschema_keywords(cls.META_SCHEMA),
        legacy=cls in legacy,
        tuple_items=cls is not jsonschema.Draft202012Validator,
    )


def _metaschema_keywords(metaschema: dict[str, Any]) -> frozenset[str]:
    """The ``properties`` of a metaschema and of the vocabulary metaschemas its ``allOf``
    names (2019-09 and 2020-12 split the keywords into vocabularies)."""
    from jsonschema_specifications import REGISTRY

    keywords: set[str] = set()
    base = str(metaschema.get("$id", metaschema.get("id", "")))
    pending, seen = [(metaschema, base)], {base}
    while pending:
        document, uri = pending.pop()
        keywords.update(document.get("properties", {}))
        for part in document.get("allOf", []):
            ref = part.get("$ref") if isinstance(part, dict) else None
            if not isinstance(ref, str):
                continue
            target = urljoin(uri, ref)
            if target not in seen:
                seen.add(target)
                pending.append((REGISTRY.contents(target), target))
    return frozenset(keywords)


def _unknown(key: str, dialect: Dialect) -> str:
    elsewhere = [
        _name(other.validator)
        for other in (_dialect(cls.META_SCHEMA["$schema"]) for cls in _supported())
        if other is not None and key in other.keywords
    ]
    if elsewhere:
        return (
            f"unknown keyword {quoted(key)} (a keyword of {', '.join(elsewhere)}, "
            f"not of {_name(dialect.validator)})"
        )
    close = difflib.get_close_matches(key, sorted(dialect.keywords), n=1, cutoff=0.6)
    if not close:
        lowered = {k.lower(): k for k in dialect.keywords}
        close = [lowered[key.lower()]] if key.lower() in lowered else []
    hint = f" (did you mean {quoted(close[0])}?)" if close else ""
    return f"unknown keyword {quoted(key)}{hint}"


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else type(value).__name__


# Satisfiability --------------------------------------------------------------------------
# Each subschema's requirement is a small tree: Fail, Need (a subschema that must itself be
# satisfiable), All, Any. A least fixpoint over the subschemas marks those that have a finite
# instance; one never marked has none, including a $ref loop through required values (each
# finite instance would have to contain a smaller one of itself).


@dataclass(frozen=True)
class _Fail:
    path: str
    text: str


@dataclass(frozen=True)
class _Need:
    node: Any
    path: str  # where the required subschema is
    label: str  # why it is required, for the message
    at: str  # the keyword's own path ($ref, required)
    descends: bool  # the subschema applies to a value inside the answer, not the answer
    ref: str | None = None  # the reference followed, for a $ref


@dataclass(frozen=True)
class _All:
    parts: tuple[Any, ...]


@dataclass(frozen=True)
class _Any:
    parts: tuple[Any, ...]
    path: str
    text: str


_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")


@dataclass
class _Analysis:
    root: dict[str, Any]
    dialect: Dialect
    paths: dict[int, str] = field(default_factory=dict)
    anchors: dict[str, Any] = field(default_factory=dict)
    requirements: dict[int, Any] = field(default_factory=dict)
    nodes: dict[int, Any] = field(default_factory=dict)

    def resolve(self, ref: str) -> Any | None:
        """The local subschema a ``#...`` reference names; None for any other reference."""
        if not ref.startswith("#"):
            return None
        pointer = unquote(ref[1:])
        if pointer and not pointer.startswith("/"):
            return self.anchors.get(pointer)
        target: Any = self.root
        for raw in pointer.split("/")[1:] if pointer else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdecimal() and int(part) < len(target):
                target = target[int(part)]
            else:
                return None
        return target if isinstance(target, (dict, bool)) and id(target) in self.paths else None

    def requirement(self, node: Any, path: str) -> Any:
        if node is True:
            return _All(())
        if node is False:
            return _Fail(path, "false")
        if not isinstance(node, dict):
            return _All(())
        parts: list[Any] = []
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = self.resolve(ref)
            if target is not None:
                label = f"$ref {quoted(ref)} points to it"
                parts.append(_Need(target, self.paths[id(target)], label, path, False, ref))
            if self.dialect.legacy:
                return _All(tuple(parts))
        for key in ("allOf",):
            for i, item in enumerate(node.get(key) or ()):
                label = f"{key} requires every branch"
                parts.append(_Need(item, f"{path}.{key}[{i}]", label, path, False))
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                parts.append(
                    _Any(
                        tuple(
                            _Need(
                                b, f"{path}.{key}[{i}]", f"it is the only {key} branch", path, False
                            )
                            for i, b in enumerate(branches)
                        ),
                        f"{path}.{key}",
                        f"none of the {key} branches can be satisfied",
                    )
                )
        negated = node.get("not")
        if negated is True or negated == {}:
            parts.append(_Fail(f"{path}.not", "not refuses every value"))
        types = self.allowed_types(node, path, parts)
        by_type = [self.type_requirement(kind, node, path) for kind in types]
        if len(by_type) == 1:
            parts.append(by_type[0])
        elif by_type:
            parts.append(_Any(tuple(by_type), path, f"no value of {', '.join(types)} fits"))
        return _All(tuple(parts))

    def allowed_types(self, node: dict[str, Any], path: str, parts: list[Any]) -> list[str]:
        declared = node.get("type", list(_TYPES))
        types = [declared] if isinstance(declared, str) else list(declared)
        if node.get("enum") == []:
            parts.append(_Fail(f"{path}.enum", "enum lists no value"))
            return []
        values = None
        if "const" in node:
            values, keyword = [node["const"]], "const"
        elif isinstance(node.get("enum"), list):
            values, keyword = node["enum"], "enum"
        if values is None:
            return types
        fitting = [kind for kind in types if any(_is_type(v, kind) for v in values)]
        if not fitting:
            parts.append(_Fail(f"{path}.{keyword}", f"no {keyword} value is of type {declared}"))
        return fitting

    def type_requirement(self, kind: str, node: dict[str, Any], path: str) -> Any:
        if kind == "object":
            return self.object_requirement(node, path)
        if kind == "array":
            return self.array_requirement(node, path)
        if kind == "string":
            return _crossed(node, path, "minLength", "maxLength")
        if kind in ("number", "integer"):
            return _number_range(node, path, integer=kind == "integer")
        return _All(())

    def object_requirement(self, node: dict[str, Any], path: str) -> Any:
        parts: list[Any] = [_crossed(node, path, "minProperties", "maxProperties")]
        required = list(dict.fromkeys(node.get("required") or ()))
        if not isinstance(node.get("required"), list):
            required = []  # draft 4's metaschema already refused a non-list
        most = node.get("maxProperties")
        if isinstance(most, (int, float)) and len(required) > most:
            parts.append(
                _Fail(path, f"{len(required)} required properties but maxProperties {most}")
            )
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties", True)
        for name in required:
            label = f"{quoted(name)} is required"
            if name in properties:
                at = f"{path}.properties.{path_key(name)}"
                parts.append(_Need(properties[name], at, label, f"{path}.required", True))
            elif not node.get("patternProperties"):
                at = f"{path}.additionalProperties"
                parts.append(
                    _Need(extra, at, f"{label} and only additionalProperties can hold it", at, True)
                )
        return _All(tuple(parts))

    def array_requirement(self, node: dict[str, Any], path: str) -> Any:
        parts: list[Any] = [_crossed(node, path, "minItems", "maxItems")]
        fewest = node.get("minItems", 0)
        fewest = int(fewest) if isinstance(fewest, (int, float)) else 0
        items = node.get("items")
        if self.dialect.tuple_items and isinstance(items, list):
            prefix, rest, rest_key = items, node.get("additionalItems"), "additionalItems"
        elif self.dialect.tuple_items:
            prefix, rest, rest_key = [], items, "items"
        else:
            prefix, rest, rest_key = node.get("prefixItems") or [], items, "items"
        prefix_key = "items" if self.dialect.tuple_items else "prefixItems"
        for i in range(min(fewest, len(prefix))):
            label = f"minItems {fewest} needs item {i}"
            at = f"{path}.{prefix_key}[{i}]"
            parts.append(_Need(prefix[i], at, label, f"{path}.minItems", True))
        if fewest > len(prefix) and rest is not None:
            label = f"minItems {fewest} needs item {len(prefix)}"
            parts.append(_Need(rest, f"{path}.{rest_key}", label, f"{path}.minItems", True))
        if "contains" in node and node.get("minContains", 1) != 0:
            at = f"{path}.contains"
            parts.append(_Need(node["contains"], at, "contains needs a match", at, True))
            if node.get("maxItems") == 0:
                parts.append(_Fail(path, "contains needs an item but maxItems is 0"))
        return _All(tuple(parts))


def find_unsatisfiable(schema: dict[str, Any], dialect: Dialect) -> tuple[str, str] | None:
    """``(path, problem)`` when no finite JSON value satisfies ``schema`` for a reason its
    structure shows; None otherwise (also when the analysis would take too long)."""
    analysis = _Analysis(schema, dialect)
    listed = subschemas(schema, dialect)
    for node, path in listed:
        analysis.paths.setdefault(id(node), path)
        analysis.nodes[id(node)] = node
        if isinstance(node, dict):
            anchor = node.get("$anchor")
            if isinstance(anchor, str):
                analysis.anchors.setdefault(anchor, node)
    for key, node in analysis.nodes.items():
        analysis.requirements[key] = analysis.requirement(node, analysis.paths[key])
    satisfiable = _fixpoint(analysis)
    if satisfiable is None or id(schema) in satisfiable:
        return None
    root = id(schema)
    return _explain(analysis, satisfiable, analysis.requirements[root], (_Step(root, False),))


def _fixpoint(analysis: _Analysis) -> set[int] | None:
    """The ids of subschemas with a finite instance; None when it would take too long."""
    dependents: dict[int, list[int]] = {}
    for key, requirement in analysis.requirements.items():
        for need in _needs(requirement):
            dependents.setdefault(id(need.node), []).append(key)
    satisfiable: set[int] = set()
    pending = list(analysis.requirements)
    steps = 0
    while pending:
        key = pending.pop()
        if key in satisfiable:
            continue
        steps += 1
        if steps > MAX_ANALYSIS_STEPS:
            return None
        if _holds(analysis.requirements[key], satisfiable):
            satisfiable.add(key)
            pending.extend(k for k in dependents.get(key, ()) if k not in satisfiable)
    return satisfiable


def _needs(requirement: Any) -> list[_Need]:
    if isinstance(requirement, _Need):
        return [requirement]
    if isinstance(requirement, (_All, _Any)):
        return [need for part in requirement.parts for need in _needs(part)]
    return []


def _holds(requirement: Any, satisfiable: set[int]) -> bool:
    if isinstance(requirement, _Fail):
        return False
    if isinstance(requirement, _Need):
        return requirement.node is True or id(requirement.node) in satisfiable
    if isinstance(requirement, _All):
        return all(_holds(part, satisfiable) for part in requirement.parts)
    return any(_holds(part, satisfiable) for part in requirement.parts)


def _explain(
    analysis: _Analysis, satisfiable: set[int], requirement: Any, chain: tuple[_Step, ...]
) -> tuple[str, str] | None:
    """The first reason ``requirement`` fails, as ``(path, problem)``. ``chain`` holds the
    subschemas followed to get here, the last one the requirement's own; None for a loop that
    never descends into the answer (``$ref: '#'``, which refs.py refuses in its own words)."""
    ending = ": no answer satisfies the schema"
    if isinstance(requirement, _Fail):
        return requirement.path, requirement.text + ending
    if isinstance(requirement, (_All, _Any)):
        failing = [p for p in requirement.parts if not _holds(p, satisfiable)]
        if isinstance(requirement, _Any) and len(failing) != 1:
            return requirement.path, requirement.text + ending
        reasons = (_explain(analysis, satisfiable, part, chain) for part in failing)
        return next((reason for reason in reasons if reason is not None), None)
    need: _Need = requirement
    if need.node is False:
        return need.path, f"false, yet {need.label}{ending}"
    if len(chain) >= MAX_EXPLAINED_STEPS:  # a chain of a thousand $refs: name where it starts
        return need.path, f"nothing satisfies this subschema, yet {need.label}{ending}"
    key = id(need.node)
    followed = [step.key for step in chain]
    if key in followed:
        loop = [step.descends for step in chain[followed.index(key) : -1]] + [need.descends]
        if not any(loop):
            return None
        return need.at, (
            f"$ref {quoted(need.ref)} loops back to {need.path} through values it requires: "
            "no finite answer satisfies the schema"
        )
    here = _Step(chain[-1].key, need.descends)
    steps = (*chain[:-1], here, _Step(key, False))
    return _explain(analysis, satisfiable, analysis.requirements[key], steps)


@dataclass(frozen=True)
class _Step:
    key: int  # id() of a subschema
    descends: bool  # the way out of it goes into a value inside the answer


def _crossed(node: dict[str, Any], path: str, low_key: str, high_key: str) -> Any:
    low, high = node.get(low_key), node.get(high_key)
    if _number(low) and _number(high) and low > high:
        return _Fail(path, f"{low_key} {low} is above {high_key} {high}")
    return _All(())


def _number_range(node: dict[str, Any], path: str, *, integer: bool) -> Any:
    low, high = node.get("minimum"), node.get("maximum")
    low_open = high_open = False
    for key, bound in (("exclusiveMinimum", "low"), ("exclusiveMaximum", "high")):
        value = node.get(key)
        if value is True:  # draft 4: the bound next to it is exclusive
            low_open, high_open = (True, high_open) if bound == "low" else (low_open, True)
        elif _number(value):
            if bound == "low" and (not _number(low) or value >= low):
                low, low_open = value, True
            elif bound == "high" and (not _number(high) or value <= high):
                high, high_open = value, True
    if not (_number(low) and _number(high)):
        return _All(())
    if integer:
        smallest = math.floor(low) + 1 if low_open else math.ceil(low)
        largest = math.ceil(high) - 1 if high_open else math.floor(high)
        empty = smallest > largest
    else:
        empty = low > high or (low == high and (low_open or high_open))
    if not empty:
        return _All(())
    what = "integer" if integer else "number"
    return _Fail(path, f"no {what} lies between the bounds {low} and {high}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return _number(value) and float(value).is_integer()
    return _number(value)
