"""Execution checks (spec: "Execution checks", M18): run each code block of an answer in
the sandbox, in order; the last block's run is the verdict, earlier ones are recorded.

Runs are never cached: every run of the suite executes them again. The whole selection's
execution checks run at once, on a bounded pool of threads, after the answers arrive.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..suite.model import NO_GOLD
from .checks import Check
from .sandbox import Limits, RunResult, check_sandbox, sandbox_env

FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
EXTENSIONS = {
    "python": "py", "py": "py", "python3": "py", "bash": "sh", "sh": "sh", "shell": "sh",
    "javascript": "js", "js": "js", "typescript": "ts", "ts": "ts", "ruby": "rb", "go": "go",
    "rust": "rs", "c": "c", "cpp": "cpp", "c++": "cpp", "java": "java", "sql": "sql",
}  # fmt: skip
WORKERS = max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class ExecJob:
    """One execution check of one answer; ``key`` is the caller's handle for the result."""

    key: Any
    text: str
    options: Mapping[str, Any]
    reference: Any


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(file extension, code) of each fenced block in order; no block: the whole text."""
    blocks = [(EXTENSIONS.get(lang.lower(), "txt"), code) for lang, code in FENCE.findall(text)]
    return blocks or [("txt", text)]


def limits_from(options: Mapping[str, Any]) -> Limits:
    defaults = Limits()
    return Limits(
        timeout_s=float(options.get("timeout_s", defaults.timeout_s)),
        cpu_s=int(options.get("cpu_s", defaults.cpu_s)),
        memory_mb=int(options.get("memory_mb", defaults.memory_mb)),
        file_mb=int(options.get("file_mb", defaults.file_mb)),
        max_procs=int(options.get("max_procs", defaults.max_procs)),
        output_kb=int(options.get("output_kb", defaults.output_kb)),
    )


def execute(job: ExecJob) -> Check:
    """Setup (when given), then the ``run`` command once per code block with ``$ANSWER`` the
    block's file, all in one sandbox (one fresh directory) removed afterwards."""
    limits = limits_from(job.options)
    with check_sandbox() as box:
        extra = {"ANSWER_TEXT": str(box.write_file("answer.txt", job.text))}
        if job.reference is not NO_GOLD:
            gold = json.dumps(job.reference, ensure_ascii=False)
            extra["GOLD"] = str(box.write_file("gold.json", gold))
        env = sandbox_env(extra, str(box.workdir))
        runs: list[dict[str, Any]] = []
        setup = job.options.get("setup")
        if setup:
            result = box.run(str(setup), limits, env)
            runs.append({"block": "setup", **result.summary()})
            if not result.passed:
                return _verdict(result, "setup", runs)
        blocks = code_blocks(job.text)
        for number, (extension, code) in enumerate(blocks, start=1):
            path = box.write_file(f"answer_{number}.{extension}", code)
            result = box.run(str(job.options["run"]), limits, {**env, "ANSWER": str(path)})
            runs.append({"block": number, **result.summary()})
        return _verdict(result, f"block {len(blocks)} of {len(blocks)}", runs)


def _verdict(result: RunResult, which: str, runs: list[dict[str, Any]]) -> Check:
    if result.timed_out:
        got, why = "timed out", f"timed out ({which})"
    else:
        got = f"exit {result.exit_code}"
        last = result.stderr.strip().splitlines()[-1:] if not result.passed else []
        why = f"exit {result.exit_code} ({which})" + (f": {last[0][:200]}" if last else "")
    network = "isolated" if result.network_isolated else "not isolated"
    return Check(
        "exec",
        result.passed,
        f"{why}; network: {network}",
        score=1.0 if result.passed else 0.0,
        expected="exit 0",
        got=got,
        runs=tuple(runs),
    )


def run_exec_checks(jobs: Sequence[ExecJob], workers: int = WORKERS) -> dict[Any, Check]:
    """Every job on a pool of at most ``workers`` threads; results by job key."""
    if not jobs:
        return {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evalmine-exec") as pool:
        return dict(zip((job.key for job in jobs), pool.map(execute, jobs), strict=True))
