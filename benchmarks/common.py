"""What every benchmark shares: how the measured pytest processes start, the ticket suite the
scale benchmarks write, and the best of repeated timings."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def pytest_command(*args: str, all_plugins: bool = False) -> list[str]:
    """``python -m pytest``, loading this project's plugin by name unless every plugin is
    autoloaded (its entry point would register it a second time); run it with
    ``child_environment(all_plugins)``."""
    plugin = [] if all_plugins else ["-p", "pytest_evalmine.plugin"]
    return [sys.executable, "-m", "pytest", *plugin, *args]


def best_of(repeat: int, work: Callable[[], object]) -> float:
    """The shortest of ``repeat`` timings of ``work``, in seconds (the least disturbed by the
    machine's other load)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def child_environment(all_plugins: bool = False) -> dict[str, str]:
    """This environment, with Python's bytecode cache on and, unless ``all_plugins``, pytest's
    plugin autoload off.

    Bytecode cache: a user's machine writes ``__pycache__`` (pytest caches its rewritten plugin
    modules there too), so a measured process should not compile some 140 modules on every
    start, as it would under PYTHONDONTWRITEBYTECODE. Each benchmark runs one unmeasured process
    first to fill it.

    Autoload: a user's virtualenv holds this project and its dependencies; this machine's
    holds the dev extra and more, whose plugins load into every pytest process (hypothesis's
    imports hypothesis and trio and runs a full garbage collection: about 0.5 s of CPU a
    process here). Those are not this plugin's cost; report.py measures the 800-request run
    with them too, so the difference stays visible.
    """
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if all_plugins:
        environment.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    else:
        environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return environment


def write_ticket_suite(
    folder: Path,
    name: str,
    cases: int,
    *,
    judge: bool = True,
    checks: str | None = None,
    gold: Any = None,
) -> Path:
    """``NAME.eval.yaml`` of one task over ``cases`` support tickets (cases.jsonl beside it),
    two fake models, judged by the fake judge or with ``judge: false``; ``checks`` (YAML
    flow text) and each case's ``gold`` when given."""
    task_lines = [
        "  - id: answer",
        "    kind: answer",
        '    prompt: "Ticket {{ n }}: {{ text }}"',
        *(["    judge: false"] if not judge else []),
        *([f"    checks: {checks}"] if checks else []),
        "    cases_path: cases.jsonl",
    ]
    suite = folder / f"{name}.eval.yaml"
    suite.write_text(
        "\n".join(
            [
                "version: 1",
                f"suite: {name}",
                "models: [fake/a, fake/b]",
                *(["judge: {model: fake/judge}"] if judge else []),
                "defaults: {max_tokens: 64}",
                "limits: {max_cost_usd: 1000}",
                "tasks:",
                *task_lines,
            ]
        )
        + "\n"
    )
    with (folder / "cases.jsonl").open("w") as out:
        for i in range(cases):
            text = f"customer {i} asks whether the refund window is 30 days for order {i * 7}"
            case: dict[str, Any] = {"id": f"case-{i}", "vars": {"n": i, "text": text}}
            if gold is not None:
                case["gold"] = gold
            out.write(json.dumps(case) + "\n")
    return suite
