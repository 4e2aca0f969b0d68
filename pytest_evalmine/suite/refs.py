"""``$ref`` in task schemas (spec: "Suite file", schema references): resolved only inside the
suite, at load time.

A reference is a ``#`` pointer (or anchor) into the same schema, or a relative path to a JSON
file under the suite's folder (which may refer on, up to ``MAX_REF_DEPTH`` files deep). Remote
references (any URI scheme) are refused when the suite loads, so checking an answer never
touches the network; the answer check validates against a registry holding only these files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from .bounded_validation import bounded_validator
from .reading import Problems, clip, parse_json, quoted, read_text, resolve_file

MAX_REF_DEPTH = 8
MAX_REF_FILES = 32
# Keywords whose values are data, not subschemas: a "$ref" key inside them is not a reference.
DATA_KEYWORDS = ("const", "enum", "default", "examples")


@dataclass(frozen=True)
class SchemaRefs:
    """A task schema with the suite files it refers to, by URI (the root included)."""

    root_uri: str
    documents: tuple[tuple[str, Any], ...]
    # How problems name each referenced file (by URI), as the suite's other files are named.
    shown: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def registry(self) -> Any:
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        return Registry().with_resources(
            (uri, Resource.from_contents(doc, default_specification=DRAFT202012))
            for uri, doc in self.documents
        )

    def validator(self) -> Any:
        """A validator that resolves references only among ``documents``, never remotely,
        its work bounded inside ``bounded_validation.bounded_check``."""
        return bounded_validator({"$ref": self.root_uri}, self.registry())


def offline_validator(schema: dict[str, Any], refs: SchemaRefs | None = None) -> Any:
    """The validator for an answer check: the suite's own files, no network."""
    if refs is not None:
        return refs.validator()
    from referencing import Registry

    return bounded_validator(schema, Registry())


def collect_refs(
    schema: dict[str, Any],
    schema_file: Path,
    shown: str,
    where: str,
    suite_dir: Path,
    problems: Problems,
    check_document: Callable[[dict[str, Any], str], bool] | None = None,
) -> SchemaRefs | None:
    """Every file the schema refers to, checked; None (problems added) when a reference is
    remote, leaves the suite's folder, is missing, points to nothing or loops in place.
    ``check_document(schema, shown)`` checks each referenced file's schema (False: refused,
    problems added), as the task schema itself was checked."""
    before = len(problems.found)
    root_base = urljoin(schema_file.resolve().as_uri(), str(schema.get("$id", "")))
    documents: dict[str, Any] = {root_base.partition("#")[0]: schema}
    names: dict[str, str] = {}
    pending = [(schema, schema_file, root_base, shown, where, 0)]
    references: list[tuple[str, str, str, str]] = []
    while pending:
        document, file, base, doc_shown, doc_where, depth = pending.pop()
        for ref, ref_where in _refs_in(document, doc_where, doc_shown, problems):
            target = ref.partition("#")[0]
            references.append((ref, urljoin(base, ref), doc_shown, ref_where))
            if not target:
                continue
            if urlsplit(target).scheme or target.startswith("//"):
                problems.add(
                    doc_shown,
                    ref_where,
                    f"$ref {quoted(ref)} is remote; references resolve only inside the suite "
                    "('#/...' pointers and JSON files under the suite's folder)",
                )
                continue
            uri = urljoin(base, target)
            if uri in documents:
                continue
            if depth + 1 > MAX_REF_DEPTH or len(documents) >= MAX_REF_FILES:
                problems.add(
                    doc_shown,
                    ref_where,
                    f"$ref {quoted(ref)}: schema files refer on more than {MAX_REF_DEPTH} deep "
                    f"or number more than {MAX_REF_FILES}",
                )
                continue
            path = resolve_file(
                file.parent / unquote(target),
                doc_shown,
                ref_where,
                problems,
                f"$ref {quoted(ref)}",
                inside=suite_dir,
            )
            if path is None:
                continue
            ref_shown = os.path.normpath(os.path.join(os.path.dirname(doc_shown), unquote(target)))
            content = parse_json(read_text(path, ref_shown), ref_shown, "$", problems)
            if not isinstance(content, dict):
                if content is not None:
                    problems.add(ref_shown, "$", "a referenced schema is a JSON object")
                continue
            if check_document is not None and not check_document(content, ref_shown):
                continue
            documents[uri] = content
            names[uri] = ref_shown
            pending.append((content, path, uri, ref_shown, "$", depth + 1))
    if len(problems.found) > before:
        return None
    refs = SchemaRefs(root_base.partition("#")[0], tuple(documents.items()), tuple(names.items()))
    _check_resolvable(refs, references, shown, where, problems)
    return None if len(problems.found) > before else refs


def _refs_in(document: Any, where: str, shown: str, problems: Problems) -> list[tuple[str, str]]:
    found = []
    stack: list[tuple[Any, str]] = [(document, where)]
    while stack:
        value, value_where = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                item_where = f"{value_where}.{clip(key, 40)}"
                if key in ("$ref", "$dynamicRef") and isinstance(item, str):
                    found.append((item, item_where))
                elif key == "$id" and value is not document:
                    problems.add(
                        shown,
                        item_where,
                        "$id inside a task schema is not supported: references resolve "
                        "against the schema's own file",
                    )
                elif key not in DATA_KEYWORDS:
                    stack.append((item, item_where))
        elif isinstance(value, list):
            stack.extend((item, f"{value_where}[{i}]") for i, item in enumerate(value))
    return found


def _check_resolvable(
    refs: SchemaRefs,
    references: list[tuple[str, str, str, str]],
    shown: str,
    where: str,
    problems: Problems,
) -> None:
    """Every reference resolves among the suite's files, and validating does not loop: a
    reference that comes back to itself without descending into the answer (``$ref: '#'``)
    would recurse until Python gives up."""
    from referencing.exceptions import Unresolvable

    before = len(problems.found)
    resolver = refs.registry().resolver()
    for ref, uri, ref_shown, ref_where in references:
        try:
            resolver.lookup(uri)
        except Unresolvable:
            problems.add(ref_shown, ref_where, f"$ref {quoted(ref)} points to nothing")
    if len(problems.found) > before:
        return
    validator = refs.validator()
    try:
        for probe in (None, {}, [], "", 0):
            validator.is_valid(probe)
    except RecursionError:
        problems.add(
            shown,
            where,
            "the schema's $ref chain loops without descending into the answer "
            "(e.g. $ref: '#'); checking an answer would never end",
        )
    except Exception as exc:  # anything else the lookups above did not reach
        problems.add(shown, where, f"the schema cannot be used: {clip(str(exc), 200)}")
