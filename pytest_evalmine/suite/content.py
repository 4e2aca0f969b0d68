"""A loaded task's content, hashed field by field (spec: "Compare"): what a later run reads to
say which tasks changed between two runs, and in what."""

from __future__ import annotations

from typing import Any

from .canonical import sha256_hex
from .model import NO_GOLD, Case, Task, Variant

# What a task asks and how its answers are checked. Cases are not among them (nor in
# ``hash``): a case added or removed is a case only in one run; ``cases`` hashes them apart.
TASK_CONTENT_FIELDS = ("prompt", "system", "params", "checks", "schema")
# What a variant overrides, as it applies to one task (the suite's variant or the task's own).
VARIANT_FIELDS = ("prompt", "system", "params", "schema_mode")


def task_content_hashes(task: Task) -> dict[str, Any]:
    """sha256 of each of a task's ``TASK_CONTENT_FIELDS`` (the system prompt and the
    parameters after the suite's defaults, the schema inlined), ``hash`` over them all,
    ``cases`` over its cases (ids, vars, gold, expected) and ``variants``: per variant the
    task can be asked with, the hashes of what the variant asks (``VARIANT_FIELDS``)."""
    content = {
        "prompt": task.prompt,
        "system": task.system,
        "params": task.params.for_key(),
        "checks": [[check.name, check.options] for check in task.checks],
        "schema": task.schema,
    }
    return {
        "hash": sha256_hex(content),
        **{name: sha256_hex(content[name]) for name in content},
        "cases": sha256_hex([_case(case) for case in task.cases]),
        "variants": {name: _variant(variant) for name, variant in sorted(task.variants.items())},
    }


def _case(case: Case) -> dict[str, Any]:
    shown: dict[str, Any] = {"id": case.id, "vars": case.vars, "expected": case.expected}
    if case.gold is not NO_GOLD:
        shown["gold"] = case.gold
    return shown


def _variant(variant: Variant) -> dict[str, str]:
    content = {
        "prompt": variant.prompt,
        "system": variant.system,
        "params": variant.params.for_key(),
        "schema_mode": variant.schema_mode,
    }
    return {"hash": sha256_hex(content), **{name: sha256_hex(content[name]) for name in content}}
