"""``$ref`` loops that never descend into the answer (spec: "Suite file", bounded work per
schema): a chain of subschemas that apply to the same value over and over, reachable from
the task schema through the answer's properties and items too, would recurse until Python
gives up on every answer that reaches it. ``dialect`` is ``task_schema.Dialect``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

from .reading import quoted
from .refs import SchemaRefs
from .schema_walk import children, subschemas

# Subschemas that apply to the same value one after another ($ref, allOf, anyOf, oneOf,
# not, if/then/else, dependentSchemas): each costs the answer check a few of Python's
# thousand stack frames, so a longer chain could never check an answer.
MAX_IN_PLACE_CHAIN = 64
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


def find_in_place_loop(
    refs: SchemaRefs,
    dialect: Any,
    dialect_named: Callable[[str], Any],
    shown: str,
    where: str,
) -> tuple[str, str, str] | None:
    """``(file, path, problem)`` for a chain of subschemas, reachable from the task schema,
    that apply to the same value over and over (a loop of $refs through ``not``, ``allOf``,
    a property's subschema, ...: checking an answer that reaches it recurses until Python
    gives up) or more than ``MAX_IN_PLACE_CHAIN`` in a row; None when there is none."""
    graph = _SchemaGraph(refs, dialect, dialect_named, shown, where)
    root = graph.root
    if root is None:
        return None
    # Depth-first over the in-place edges from every reachable subschema: a subschema met
    # again while on the path is a loop; ``chain`` is the longest run of edges below one.
    chain: dict[int, int] = {}
    on_path: set[int] = set()
    for start in graph.reachable(root):
        if start in chain:
            continue
        stack: list[tuple[int, int]] = [(start, 0)]
        on_path.add(start)
        while stack:
            key, next_edge = stack[-1]
            edges = graph.in_place[key]
            if next_edge == len(edges):
                stack.pop()
                on_path.discard(key)
                chain[key] = max((chain[target] + 1 for target, _ in edges), default=0)
                if chain[key] > MAX_IN_PLACE_CHAIN:
                    file, path = graph.where[key]
                    return (
                        file,
                        path,
                        (
                            f"more than {MAX_IN_PLACE_CHAIN} subschemas ($ref, allOf, anyOf, "
                            "oneOf, not, if/then/else) apply to the same value one after another "
                            "from here: checking an answer would exhaust Python's recursion"
                        ),
                    )
                continue
            stack[-1] = (key, next_edge + 1)
            target, at = edges[next_edge]
            if target in on_path:
                file, _ = graph.where[key]
                return (
                    file,
                    at,
                    (
                        f"{graph.what[key, next_edge]} loops back to {graph.where[target][1]} "
                        "without descending into the answer: checking an answer that reaches it "
                        "would never end"
                    ),
                )
            if target not in chain:
                on_path.add(target)
                stack.append((target, 0))
    return None


class _SchemaGraph:
    """The subschemas of a task schema and its files (by ``id()``), with two kinds of edge:
    ``in_place`` to those that apply to the same value (with the keyword's path), ``inner``
    to every subschema below or referred to."""

    def __init__(
        self,
        refs: SchemaRefs,
        dialect: Any,
        dialect_named: Callable[[str], Any],
        shown: str,
        where: str,
    ) -> None:
        self.where: dict[int, tuple[str, str]] = {}
        self.in_place: dict[int, list[tuple[int, str]]] = {}
        self.what: dict[tuple[int, int], str] = {}
        self.inner: dict[int, list[int]] = {}
        self.nodes: dict[int, Any] = {}
        self.root: int | None = None
        resolver = refs.registry().resolver()
        names = dict(refs.shown)
        listed = []
        for uri, document in refs.documents:
            is_root = uri == refs.root_uri
            file = shown if is_root else names.get(uri, uri)
            base_path = where if is_root else "$"
            named = dialect_named(str(document.get("$schema", dialect.uri))) or dialect
            inside = subschemas(document, named)
            for node, path in inside:
                self.where.setdefault(id(node), (file, base_path + path.removeprefix("$")))
                self.nodes[id(node)] = node
            if is_root:
                self.root = id(document)
            listed.append((inside, uri, named, base_path))
        # edges once every file's subschemas are known: a $ref may point to a later file
        for inside, uri, named, base_path in listed:
            for node, path in inside:
                self._edges(node, path, uri, named, resolver, base_path)

    def _edges(
        self, node: Any, path: str, uri: str, dialect: Any, resolver: Any, base: str
    ) -> None:
        key = id(node)
        if key in self.in_place:
            return
        in_place: list[tuple[int, str]] = []
        self.in_place[key] = in_place
        self.inner[key] = []
        if not isinstance(node, dict):
            return
        shown_path = base + path.removeprefix("$")
        for keyword in _REF_KEYWORDS:
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue
            try:
                target = resolver.lookup(urljoin(uri, ref)).contents
            except Exception:
                continue
            if id(target) in self.nodes:
                self.what[key, len(in_place)] = f"{keyword} {quoted(ref)}"
                in_place.append((id(target), f"{shown_path}.{keyword}"))
                self.inner[key].append(id(target))
        for child, at in children(node, path, dialect):
            self.inner[key].append(id(child))
            keyword = at[len(path) + 1 :].split(".")[0].split("[")[0]
            if dialect.legacy and "$ref" in node:
                continue  # drafts 4 to 7 ignore every keyword next to $ref
            if keyword in _IN_PLACE_ONE or keyword in _IN_PLACE_LISTS or keyword in _IN_PLACE_MAPS:
                self.what[key, len(in_place)] = keyword
                in_place.append((id(child), base + at.removeprefix("$")))

    def reachable(self, root: int) -> list[int]:
        seen, stack, order = {root}, [root], []
        while stack:
            key = stack.pop()
            order.append(key)
            for target in self.inner.get(key, ()):
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return order
