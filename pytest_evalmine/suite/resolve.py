"""Resolution (spec: "Suite file", paths): a task's ``schema_path`` and ``cases_path`` and the
suite's ``labels_path`` replaced by the files' contents, each file held to the suite's data roots
and its entries validated, keeping where each case and label came from so that a problem found
later names the file the author has to edit.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .problems import Problems, clip, quoted
from .reading import Roots, file_roots, parse_json, read_entries, read_text, resolve_file
from .refs import SchemaRefs
from .task_schema import SchemaBudget, check_task_schema
from .validate import plain_case, validate_instance


@dataclass
class Sources:
    """Where each case and label came from (file and JSON path or line), so errors found
    after inlining name the file the author has to edit."""

    cases: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    labels: list[tuple[str, str]] = field(default_factory=list)
    schema_refs: dict[int, SchemaRefs] = field(default_factory=dict)


def resolve_files(
    document: dict[str, Any], path: Path, shown: str, roots: Sequence[Path] = ()
) -> Sources:
    """The resolve stage of a suite load: the files the validated ``document`` names read
    into it (``_inline_files``), or one ``SuiteError`` with every problem found. ``roots``:
    the folders besides the suite's own that those files may lie in."""
    problems = Problems()
    sources = _inline_files(document, path, shown, problems, file_roots(path, roots))
    problems.raise_any()
    return sources


def _inline_files(
    document: dict[str, Any], path: Path, shown: str, problems: Problems, roots: Roots
) -> Sources:
    """Replace ``schema_path``, ``cases_path`` and ``labels_path`` by their contents.

    Paths are relative to the suite file. The suite hash is taken after inlining, so an edit
    to a referenced file changes the hash.
    """
    base = path.parent
    sources = Sources()
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
        _inline_references(task, sources.cases.get(index, []), base, shown, problems, roots)
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


def _inline_references(
    task: dict[str, Any],
    origins: list[tuple[str, str]],
    base: Path,
    shown: str,
    problems: Problems,
    roots: Roots,
) -> None:
    """A case's ``reference: {file: PATH}`` replaced by the file's text (spec: "Reference
    answers"): relative to the suite file and held to its data roots, as ``cases_path`` is.
    Inlined before the suite hash is taken, so an edit to the file changes it."""
    cases = task.get("cases")
    if not isinstance(cases, list):
        return
    for number, case in enumerate(cases):
        reference = case.get("reference") if isinstance(case, dict) else None
        if not isinstance(reference, dict):
            continue
        file, where = origins[number] if number < len(origins) else (shown, "$")
        target = _resolve(base, reference["file"], file, f"{where}.reference.file", problems, roots)
        case = cases[number] = dict(case)
        if target is None:
            del case["reference"]
            continue
        case["reference"] = read_text(target, _shown_ref(shown, reference["file"]))


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
            (definition == "case" and plain_case(entry))
            or validate_instance(entry, file_shown, problems, definition, entry_where)
        ):
            valid.append(entry)
            origins.append((file_shown, entry_where))
    return valid, origins
