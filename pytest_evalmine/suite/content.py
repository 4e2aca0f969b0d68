"""A loaded task's content, hashed field by field (spec: "Compare"): what a later run reads to
say which tasks changed between two runs, and in what."""

from __future__ import annotations

from .canonical import sha256_hex
from .model import Task

# What a task asks and how its answers are checked. Cases are not among them: a case added or
# removed is a case only in one run, not a changed task.
TASK_CONTENT_FIELDS = ("prompt", "system", "params", "checks", "schema")


def task_content_hashes(task: Task) -> dict[str, str]:
    """sha256 of each of a task's ``TASK_CONTENT_FIELDS`` (the system prompt and the
    parameters after the suite's defaults, the schema inlined), and ``hash`` over them all."""
    content = {
        "prompt": task.prompt,
        "system": task.system,
        "params": task.params.for_key(),
        "checks": [[check.name, check.options] for check in task.checks],
        "schema": task.schema,
    }
    return {"hash": sha256_hex(content), **{name: sha256_hex(content[name]) for name in content}}
