"""Bounded reading of suite files and the files they reference (spec: "Suite file", limits):
YAML, JSON, JSONL, and cases in CSV.

Every way a file can be wrong ends as ``SuiteError`` lines, never a traceback: the YAML
parser's own exceptions (of any class), nesting, aliases that expand past a bound, YAML tags
that are not JSON values, duplicate keys, keys that are not strings, numbers that are not
finite, overlong strings and files, and pasted API keys. Each distinct YAML node is looked at
once, so a file with aliases costs time in proportion to its size, not to its expansion.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SuiteError

# Also imported from here by refs.py and task_schema.py.
from .problems import Problems, clip, path_key, quoted

MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_STRING_CHARS = 1_000_000
# Values after alias expansion: later steps (validation, hashing) walk the expanded tree.
MAX_NODES = 1_000_000
MAX_DEPTH = 64
MAX_INT_DIGITS = 19

# Real key formats: a random base64url body, which always mixes digits, upper and lower
# case. Words joined by dashes (``sk-learn-pipeline-with-gridsearch-cv``) are not keys.
# Tighter than ``redaction.KEY_PATTERNS`` on purpose: redacting a near miss from a message
# costs nothing, refusing a suite over one stops the user.
_KEY_BODY = r"[A-Za-z0-9_\-]{32,}"
API_KEY_PATTERNS = (
    ("Anthropic", re.compile(rf"\bsk-ant-(?:[a-z]+\d\d-)?({_KEY_BODY})")),
    ("OpenAI", re.compile(rf"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?({_KEY_BODY})")),
    ("Google", re.compile(r"\bAIza([0-9A-Za-z_\-]{35})(?![0-9A-Za-z_\-])")),
)

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL = (f"{_TAG}{name}" for name in ("str", "int", "float", "bool"))
_SEQ, _MAP, _MERGE = (f"{_TAG}{name}" for name in ("seq", "map", "merge"))
_SCALAR_TAGS = {_STR, _INT, _FLOAT, _BOOL, f"{_TAG}null"}
_JSON_TYPES = "strings, numbers, booleans, null, lists and mappings"


def looks_like_api_key(text: str) -> str | None:
    """The provider whose key format ``text`` contains, or None."""
    if "sk-" not in text and "AIza" not in text:
        return None
    for provider, pattern in API_KEY_PATTERNS:
        for match in pattern.finditer(text):
            body = match.group(1)
            if any(c.isdigit() for c in body) and body.lower() != body and body.upper() != body:
                return provider
    return None


def _read_limited(path: Path, shown: str) -> bytes:
    """The bytes of the regular file ``path``, at most ``MAX_FILE_BYTES``. Opened without
    blocking and checked on the open descriptor, so a file swapped for a FIFO or a device
    after ``resolve_file`` looked at it is refused rather than read (a FIFO would wait for a
    writer forever, ``/dev/zero`` never ends); read with a bound, so a file whose size says
    0 (``/proc``) or that grows cannot be read past the limit."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as stream:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise SuiteError(shown, "", f"{_kind(mode)}, not a file")
        size = os.fstat(descriptor).st_size
        if size > MAX_FILE_BYTES:
            raise SuiteError(
                shown, "", f"file of {size} bytes; the limit is {MAX_FILE_BYTES} bytes"
            )
        data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise SuiteError(
            shown, "", f"file of more than {MAX_FILE_BYTES} bytes; the limit is {MAX_FILE_BYTES}"
        )
    return data


def read_bytes(path: Path, shown: str) -> bytes:
    """The file's bytes, for a reader that decodes them itself (a CSV file names the line of
    a byte that is not UTF-8)."""
    try:
        return _read_limited(path, shown)
    except OSError as exc:
        raise SuiteError(shown, "", f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL byte in the path
        raise SuiteError(shown, "", f"cannot read: {exc}") from None


def read_text(path: Path, shown: str) -> str:
    data = read_bytes(path, shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteError(shown, "", f"not UTF-8 text (byte {exc.start})") from None


# YAML -------------------------------------------------------------------------------------
_LOADER: list[type] = []


def _loader_class() -> type:
    """libyaml's parser when PyYAML was built with it (much faster), else the pure one; the
    safe constructor either way. Dates stay strings: a case variable ``due: 2024-05-01``
    means the text the author wrote, and JSON has no date type."""
    if not _LOADER:
        import yaml

        base = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

        class SuiteYamlLoader(base):  # type: ignore[misc, valid-type]
            pass

        SuiteYamlLoader.yaml_implicit_resolvers = {
            first: [(tag, rx) for tag, rx in resolvers if tag != f"{_TAG}timestamp"]
            for first, resolvers in base.yaml_implicit_resolvers.items()
        }
        _LOADER.append(SuiteYamlLoader)
    return _LOADER[0]


def parse_yaml(text: str, shown: str) -> Any:
    """The YAML document as JSON values, or ``SuiteError`` with every problem found."""
    loader = _loader_class()(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise SuiteError(shown, "", f"nested deeper than {MAX_DEPTH} levels") from None
        except Exception as exc:  # PyYAML raises more than YAMLError on odd input
            raise SuiteError(shown, "", _yaml_problem(exc)) from None
        if node is None:
            return None
        problems = Problems()
        _check_nodes(node, shown, problems, loader)
        problems.raise_any()
        try:
            return _construct(node, loader, {})
        except Exception as exc:
            raise SuiteError(shown, "", _yaml_problem(exc)) from None
    finally:
        loader.dispose()


def read_suite(path: Path, shown: str) -> Any:
    """The read stage of a suite load: the suite file's YAML document as JSON values, its
    size, nesting, aliases, tags and strings held to the limits above."""
    return parse_yaml(read_text(path, shown), shown)


def _construct(node: Any, loader: Any, built: dict[int, Any]) -> Any:
    """The JSON value of a checked node tree. PyYAML's constructor took half the time of a
    10,000-case suite; after the node walk every node is known to be a string-keyed mapping,
    a sequence or a JSON scalar, so most of its work is not needed. An alias yields the same
    object, as PyYAML's does; a mapping with a merge key (``<<``) is left to PyYAML, whose
    merge rules are subtle. Recursion is bounded by the walk's depth limit."""
    ident = id(node)
    if ident in built:
        return built[ident]
    kind, tag = node.id, node.tag
    if kind == "scalar":
        if tag == _STR:
            value: Any = node.value
        elif tag == _INT:
            value = loader.construct_yaml_int(node)
        elif tag == _FLOAT:
            value = loader.construct_yaml_float(node)
        elif tag == _BOOL:
            value = loader.construct_yaml_bool(node)
        else:
            value = None
    elif kind == "sequence":
        value = [_construct(child, loader, built) for child in node.value]
    elif any(key.tag == _MERGE for key, _ in node.value):
        value = loader.construct_object(node, deep=True)
    else:
        value = {key.value: _construct(child, loader, built) for key, child in node.value}
    built[ident] = value
    return value


def _yaml_problem(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc) or type(exc).__name__
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return clip(f"not valid YAML{where}: {' '.join(str(problem).split())}", 200)


class _Refused(Exception):
    """Stops the node walk: the document cannot be looked at any further."""


def _check_nodes(root: Any, shown: str, problems: Problems, loader: Any) -> None:
    """A fast pass over the distinct nodes without paths; only when it finds something, a
    second pass that names where (most suites are clean, and paths cost time)."""
    try:
        if _walk_nodes(root, loader, None):
            _walk_nodes(root, loader, (shown, problems))
    except _Refused as refused:
        problems.add(shown, *refused.args)
    except Exception as exc:  # e.g. a float the constructor cannot read
        problems.add(shown, "", _yaml_problem(exc))


def _walk_nodes(root: Any, loader: Any, report: tuple[str, Problems] | None) -> bool:
    """Each distinct node once (an alias is not followed twice), with the expanded size and
    depth computed per node from its children's, so an alias bomb is refused in time linear
    in the file. Without ``report``: True as soon as anything is wrong. With it: adds every
    problem, with its path, and raises ``_Refused`` for what stops the walk."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, str, bool]] = [(root, "$", False)]
    while stack:
        node, where, finished = stack.pop()
        ident = id(node)
        if finished:
            open_nodes.discard(ident)
            size, depth = 1, 0
            for child in _children(node):
                # A scalar the fast pass checked in place has no entry: size and depth 1.
                size += sizes.get(id(child), 1)
                depth = max(depth, depths.get(id(child), 1))
            sizes[ident], depths[ident] = size, depth + 1
            if size > MAX_NODES or depth + 1 > MAX_DEPTH:
                if report is None:
                    return True
                if size > MAX_NODES:
                    raise _Refused(
                        where,
                        f"expands to more than {MAX_NODES} values through YAML aliases "
                        "(an alias bomb)",
                    )
                raise _Refused(where, f"nested deeper than {MAX_DEPTH} levels")
            continue
        if ident in sizes:
            continue
        if ident in open_nodes or len(open_nodes) > MAX_DEPTH:
            if report is None:
                return True
            if ident in open_nodes:
                raise _Refused(where, "a YAML alias refers to a node that contains it")
            raise _Refused(where, f"nested deeper than {MAX_DEPTH} levels")
        found = _node_problems(node, loader)
        if found:
            if report is None:
                return True
            for suffix, problem in found:
                report[1].add(report[0], where + suffix, problem)
        if node.id == "scalar":
            sizes[ident] = depths[ident] = 1
            continue
        open_nodes.add(ident)
        stack.append((node, where, True))
        if report is None:
            # Most nodes are scalars: checked here, they skip the stack's round trip.
            for child in _children(node):
                if child.id != "scalar":
                    stack.append((child, where, False))
                elif _node_problems(child, loader):
                    return True
        elif node.id == "sequence":
            stack.extend((child, f"{where}[{i}]", False) for i, child in enumerate(node.value))
        else:
            for key, value in node.value:
                name = "" if key.tag == _MERGE else f".{path_key(key.value)}"
                stack += [(key, where, False), (value, where + name, False)]
    return False


def _children(node: Any) -> list[Any]:
    # Node kinds by their ``id`` rather than isinstance: the loader class is built once, and
    # PyYAML may have been imported again since (pytest's in-process runs do that).
    if node.id == "sequence":
        return node.value
    if node.id == "mapping":
        return [part for pair in node.value for part in pair]
    return []


def _node_problems(node: Any, loader: Any) -> list[tuple[str, str]]:
    """What is wrong with this node itself, as (path suffix, problem) pairs."""
    tag = node.tag
    line = f" (line {node.start_mark.line + 1})" if node.start_mark else ""
    if node.id == "scalar":
        if tag == _STR:
            return [("", p) for p in _string_problems(node.value)]
        if tag == _MERGE:
            return []
        if tag not in _SCALAR_TAGS:
            return [("", f"YAML tag {tag} is not allowed{line}: {_JSON_TYPES}")]
        if tag == _INT and sum(c.isdigit() for c in node.value) > MAX_INT_DIGITS:
            return [("", f"an integer of more than {MAX_INT_DIGITS} digits{line}")]
        if tag == _FLOAT and not math.isfinite(loader.construct_yaml_float(node)):
            return [("", f"{clip(node.value)} is not a finite number{line}")]
        return []
    if node.id == "sequence":
        return [] if tag == _SEQ else [("", f"YAML tag {tag} is not allowed{line}: {_JSON_TYPES}")]
    if tag != _MAP:
        return [("", f"YAML tag {tag} is not allowed{line}: {_JSON_TYPES}")]
    found: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for key, _value in node.value:
        if key.tag == _MERGE:
            continue
        key_line = key.start_mark.line + 1 if key.start_mark else 0
        if key.id != "scalar" or key.tag != _STR:
            shown_key = clip(key.value) if key.id == "scalar" else "a collection"
            hint = (
                " (YAML reads yes, no, on, off, true and false as booleans)"
                if key.tag == _BOOL
                else ""
            )
            found.append(
                ("", f"key {shown_key} at line {key_line} is not a string; quote it{hint}")
            )
            continue
        if key.value in seen:
            found.append(
                (
                    f".{path_key(key.value)}",
                    f"duplicate key {quoted(key.value)} (lines {seen[key.value]} and {key_line})",
                )
            )
        else:
            seen[key.value] = key_line
        found += [("", p) for p in _string_problems(key.value)]
    return found


def _string_problems(text: str) -> list[str]:
    if len(text) > MAX_STRING_CHARS:
        return [f"a string of {len(text)} characters; the limit is {MAX_STRING_CHARS}"]
    provider = looks_like_api_key(text)
    if provider is not None:
        # Checked before validation, whose messages quote values: never echo a key.
        return [f"looks like an API key ({provider} format); keys belong in the environment"]
    return []


def check_string(text: str, shown: str, where: str, problems: Problems) -> None:
    for problem in _string_problems(text):
        problems.add(shown, where, problem)


# JSON -------------------------------------------------------------------------------------
def parse_json(text: str, shown: str, where: str, problems: Problems) -> Any:
    """One JSON value, or ``None`` with the problems added (duplicate keys, NaN and
    Infinity, nesting, overlong strings and numbers, API keys)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise ValueError(f"duplicate key {quoted(key)}")
            result[key] = value
        return result

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not a finite number")

    try:
        value = json.loads(text, object_pairs_hook=unique, parse_constant=no_constants)
    except RecursionError:
        problems.add(shown, where, f"nested deeper than {MAX_DEPTH} levels")
        return None
    except ValueError as exc:
        problems.add(shown, where, f"not valid JSON: {clip(str(exc), 200)}")
        return None
    before = len(problems.found)
    for item, item_where, depth in _walk_values(value, where):
        if depth > MAX_DEPTH:
            problems.add(shown, item_where, f"nested deeper than {MAX_DEPTH} levels")
            break
        if isinstance(item, str):
            check_string(item, shown, item_where, problems)
        elif isinstance(item, float) and not math.isfinite(item):
            problems.add(shown, item_where, "not a finite number")
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 10**19:
            problems.add(shown, item_where, "an integer this large is not allowed")
        elif isinstance(item, dict):
            for key in item:
                check_string(key, shown, item_where, problems)
    return value if len(problems.found) == before else None


def _walk_values(value: Any, where: str) -> Iterator[tuple[Any, str, int]]:
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        item, item_where, depth = stack.pop()
        yield item, item_where, depth
        if depth > MAX_DEPTH:
            return
        if isinstance(item, dict):
            stack.extend((v, f"{item_where}.{clip(k, 40)}", depth + 1) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{item_where}[{i}]", depth + 1) for i, v in enumerate(item))


def read_entries(
    path: Path,
    shown: str,
    problems: Problems,
    unwrap: Callable[[Any], Any] | None = None,
    definition: str = "",
) -> list[tuple[str, Any]] | None:
    """Entries of a JSONL file (one per line, blank lines skipped), of a YAML/JSON list
    (``unwrap`` may take the list out of a mapping first) or, for cases (``definition``
    ``case``), of a CSV file, each with where it stands: the line in a JSONL or CSV file,
    the index in a list. None (problems added) when unreadable."""
    if definition == "case" and path.suffix.lower() == ".csv":
        return read_csv_cases(path, shown, problems)
    text = read_text(path, shown)
    if path.suffix == ".jsonl":
        entries = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                value = parse_json(line, shown, f"line {number}", problems)
                entries.append((f"line {number}", value))
        return entries
    loaded = parse_yaml(text, shown)
    if unwrap is not None:
        loaded = unwrap(loaded)
    if loaded is None:
        loaded = []
    if not isinstance(loaded, list):
        return None
    return [(f"$[{index}]", entry) for index, entry in enumerate(loaded)]


# CSV cases -------------------------------------------------------------------------------
# The header row names the columns, each further row is one case, in file order. Parsing is
# Python's ``csv`` module (the excel dialect: commas, double quotes, quoted cells may span
# lines, CRLF or LF) in strict mode, so a stray quote is an error rather than a guess. Checked
# here is what only a table can get wrong (the header, rows of the wrong width, bytes that
# are not UTF-8) and the limits every suite string has; the case itself (its id, duplicate
# ids, placeholders) is the loader's to check, as for a JSONL line.
BOM = b"\xef\xbb\xbf"
ID_COLUMN = "id"
GOLD_COLUMNS = ("gold", "expected")  # one column, two names: other eval tools say `expected`
EXPECTED_PREFIX = "expected."  # `expected.number`: the case's `expected` value for one check
# The schema's patterns for variable names (``case.vars``) and check names (``check_name``):
# checked once in the header rather than once per row by the schema.
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CHECK_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,79}")
_OTHER_SEPARATORS = (";", "\t", "|")


@dataclass
class _CaseColumns:
    """What each column of the header row holds, by its index."""

    id: int
    gold: int | None = None
    variables: list[tuple[str, int]] = field(default_factory=list)
    expected: list[tuple[str, int]] = field(default_factory=list)
    width: int = 0

    def case(self, row: list[str]) -> dict[str, Any]:
        """The case a row spells, in the JSONL case's shape (so the suite hash of a CSV file
        is that of the JSONL file it converts to). An empty gold or expected cell gives no
        value (a spreadsheet has no other way to leave one out); an empty variable is ''."""
        case: dict[str, Any] = {"id": row[self.id]}
        if self.variables:
            case["vars"] = {name: row[index] for name, index in self.variables}
        if self.gold is not None and row[self.gold].strip():
            case["gold"] = row[self.gold]
        expected = {name: row[index] for name, index in self.expected if row[index].strip()}
        if expected:
            case["expected"] = expected
        return case

    def paths(self) -> list[str]:
        """Where each column's cell sits in the case, as the loader's paths say it."""
        found = [""] * self.width
        found[self.id] = ".id"
        if self.gold is not None:
            found[self.gold] = ".gold"
        for name, index in self.variables:
            found[index] = f".vars.{name}"
        for name, index in self.expected:
            found[index] = f".expected.{name}"
        return found


def read_csv_cases(path: Path, shown: str, problems: Problems) -> list[tuple[str, Any]]:
    """Cases of a CSV file, each with the line its row starts on (``line 3``); a row with a
    problem is ``None`` (problems added), as a bad JSONL line is. Blank rows are skipped."""
    data = read_bytes(path, shown)
    skip = len(BOM) if data.startswith(BOM) else 0
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = skip + exc.start
        # +b"x": the line the bad byte is on, also right after a line break
        line = len((data[:offset] + b"x").splitlines())
        problems.add(shown, f"line {line}", f"not UTF-8 text (byte {offset})")
        return []
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    # The module's own limit (131,072) is below the one every suite string has; it is
    # process-wide, so it is raised for this read only.
    limit = csv.field_size_limit(MAX_STRING_CHARS)
    try:
        return _cases(reader, shown, problems)
    finally:
        csv.field_size_limit(limit)


def _cases(reader: Any, shown: str, problems: Problems) -> list[tuple[str, Any]]:
    columns: _CaseColumns | None = None
    cell_paths: list[str] = []
    entries: list[tuple[str, Any]] = []
    while True:
        # reader.line_num is the line a row ends on; a quoted cell may span lines.
        where = f"line {reader.line_num + 1}"
        try:
            row = next(reader)
        except StopIteration:
            return entries
        except csv.Error as exc:
            # The reader cannot find the next row's start after this: stop here.
            problems.add(shown, where, _csv_problem(str(exc)))
            return entries
        if not any(cell.strip() for cell in row):
            continue
        if columns is None:
            columns = _header(row, shown, where, problems)
            if columns is None:
                return []  # every row would repeat the header's problem
            cell_paths = columns.paths()
            continue
        if len(row) != columns.width:
            problems.add(
                shown,
                where,
                f"{_many(len(row), 'cell')}, the header has {_many(columns.width, 'column')} "
                '(a value holding a comma or a line break is written in double quotes: "a, b")',
            )
            entries.append((where, None))
            continue
        before = len(problems.found)
        for cell, cell_path in zip(row, cell_paths, strict=True):
            check_string(cell, shown, where + cell_path, problems)
        entries.append((where, columns.case(row) if len(problems.found) == before else None))


def _header(row: list[str], shown: str, where: str, problems: Problems) -> _CaseColumns | None:
    """The header row's columns, or None with every problem of the header added."""
    before = len(problems.found)
    separator = next((s for s in _OTHER_SEPARATORS if len(row) == 1 and s in row[0]), None)
    if separator is not None:
        problems.add(
            shown,
            where,
            f"the header row is one column, {quoted(row[0])}: columns are separated by "
            f"commas, not {separator!r}",
        )
        return None
    seen: dict[str, int] = {}
    columns = _CaseColumns(id=-1, width=len(row))
    gold_names: list[str] = []
    for index, name in enumerate(row):
        number = index + 1
        found = len(problems.found)
        check_string(name, shown, where, problems)
        if len(problems.found) > found:
            continue  # a pasted key: no other message may quote it
        if not name.strip():
            problems.add(shown, where, f"column {number} of the header has no name")
            continue
        if name in seen:
            problems.add(
                shown,
                where,
                f"column {quoted(name)} is named twice (columns {seen[name]} and {number})",
            )
            continue
        seen[name] = number
        if name == ID_COLUMN:
            columns.id = index
        elif name in GOLD_COLUMNS:
            columns.gold = index
            gold_names.append(name)
        elif name.startswith(EXPECTED_PREFIX):
            check = name.removeprefix(EXPECTED_PREFIX)
            if _CHECK_NAME.fullmatch(check) is None:
                problems.add(
                    shown, where, f"column {quoted(name)}: {quoted(check)} is not a check name"
                )
            columns.expected.append((check, index))
        elif name.lower() in (ID_COLUMN, *GOLD_COLUMNS):
            # A variable named `Gold` would leave every case without its gold, silently.
            problems.add(
                shown,
                where,
                f"column {quoted(name)}: names are case-sensitive; write {name.lower()!r}",
            )
        elif name != name.strip():
            problems.add(shown, where, f"column {quoted(name)} has spaces around its name")
        elif _VARIABLE_NAME.fullmatch(name) is None:
            problems.add(
                shown,
                where,
                f"column {quoted(name)} is not a variable name (letters, digits and _, not "
                "starting with a digit)",
            )
        else:
            columns.variables.append((name, index))
    if len(gold_names) > 1:
        problems.add(
            shown, where, "columns 'gold' and 'expected' are one value under two names; keep one"
        )
    if columns.id < 0 and ID_COLUMN not in {name.strip().lower() for name in seen}:
        problems.add(shown, where, f"the header row has no {ID_COLUMN!r} column")
    return columns if len(problems.found) == before else None


def _many(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _csv_problem(message: str) -> str:
    if message.startswith("field larger than field limit"):
        return f"a cell longer than {MAX_STRING_CHARS} characters, the limit for any suite string"
    if message == "unexpected end of data":
        return "not valid CSV: a quoted cell opened in this row is never closed"
    if "expected after '\"'" in message:
        return f'not valid CSV: {message} (a quote inside a quoted cell is written twice: "")'
    return f"not valid CSV: {clip(message, 200)}"


@dataclass(frozen=True)
class Roots:
    """The folders a suite may read a referenced file from, and how a refusal names them
    (spec: "Suite file", paths)."""

    folders: tuple[Path, ...]
    named: str


def file_roots(suite_file: Path, project: Sequence[Path] = ()) -> Roots:
    """Where a suite's cases, labels and schema files may lie: its own folder and the
    ``project`` folders (the rootdir, then the folders the ini key ``evalmine_data_roots``
    names)."""
    folders = (Path(suite_file).parent, *project)
    if not project:
        return Roots(folders, "the suite's folder")
    if len(project) == 1:
        named = "the rootdir and the suite's folder (the ini key evalmine_data_roots names more)"
    else:
        named = "the rootdir, the suite's folder and the folders evalmine_data_roots names"
    return Roots(folders, named)


def resolve_file(
    candidate: Path,
    shown: str,
    where: str,
    problems: Problems,
    named: str,
    inside: Path | Roots | None = None,
) -> Path | None:
    """``candidate`` resolved (symlinks followed) when it is a regular file inside
    ``inside`` (a folder, or ``Roots``); else None with the problem added. The one rule for
    every file a suite refers to (cases, labels, schemas and the files their ``$ref``s
    name). Where it points is checked before anything else is looked at, so nothing outside
    is even tested for existence; a directory, FIFO, device or socket is named as such and
    never opened. ``named`` is how the problem names the reference."""
    roots = Roots((inside,), "the suite's folder") if isinstance(inside, Path) else inside
    try:
        path = candidate.resolve()
        outside = roots is not None and not any(
            path.is_relative_to(folder.resolve()) for folder in roots.folders
        )
        mode = None if outside else os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        problems.add(shown, where, f"{named}: file not found")
        return None
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long, no permission
        problems.add(shown, where, f"{named}: not a usable file path ({clip(str(exc))})")
        return None
    if outside:
        assert roots is not None
        problems.add(shown, where, f"{named} points outside {roots.named}")
    elif mode is not None and stat.S_ISDIR(mode):
        problems.add(shown, where, f"{named}: a directory, not a file")
    elif mode is not None and not stat.S_ISREG(mode):
        problems.add(shown, where, f"{named}: {_kind(mode)}, not a file (not opened)")
    else:
        return path
    return None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
