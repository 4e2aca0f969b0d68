"""The subschemas of a task schema (spec: "Suite file", task schemas), found by the shape of
each keyword's value; values of data keywords (``enum``, ``const``, ``default``, ...) are not
schemas and are skipped. ``dialect`` is ``task_schema.Dialect``: its ``keywords``."""

from __future__ import annotations

from typing import Any

from .reading import path_key

# Subschema positions, by the shape of the keyword's value.
_ONE_SCHEMA = (
    "additionalProperties",
    "additionalItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_SCHEMA_MAPS = (
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")


def subschemas(schema: Any, dialect: Any) -> list[tuple[Any, str]]:
    """Every subschema of ``schema`` (itself first) with its path, ``$`` the root; values of
    data keywords (``enum``, ``const``, ``default``, ...) are not schemas and are skipped."""
    found: list[tuple[Any, str]] = []
    stack: list[tuple[Any, str]] = [(schema, "$")]
    while stack:
        node, path = stack.pop()
        found.append((node, path))
        if isinstance(node, dict):
            stack.extend(reversed(list(children(node, path, dialect))))
    return found


def children(node: dict[str, Any], path: str, dialect: Any) -> list[tuple[Any, str]]:
    children: list[tuple[Any, str]] = []
    for key, value in node.items():
        if key not in dialect.keywords:
            continue
        at = f"{path}.{path_key(key)}"
        if (key == "items" and isinstance(value, list)) or key in _SCHEMA_LISTS:
            if isinstance(value, list):
                children.extend((item, f"{at}[{i}]") for i, item in enumerate(value))
        elif key in _ONE_SCHEMA or key == "items":
            children.append((value, at))
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            children.extend(
                (item, f"{at}.{path_key(name)}")
                for name, item in value.items()
                # ``dependencies`` also maps names to lists of names, which are not schemas
                if isinstance(item, (dict, bool))
            )
    return children
