"""Execution checks (spec: "Execution checks", M18): run each code block of an answer in
the sandbox, in order; the last block's run is the verdict, earlier ones are recorded.

Runs are never cached: every run of the suite executes them again. The whole selection's
execution checks run at once, on a bounded pool of threads, after the answers arrive.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..suite.model import NO_GOLD
from .checks import Check
from .sandbox import STOPPING, CheckSandbox, Limits, RunResult, check_sandbox, sandbox_env

FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
EXTENSIONS = {
    "python": "py", "py": "py", "python3": "py", "bash": "sh", "sh": "sh", "shell": "sh",
    "javascript": "js", "js": "js", "typescript": "ts", "ts": "ts", "ruby": "rb", "go": "go",
    "rust": "rs", "c": "c", "cpp": "cpp", "c++": "cpp", "java": "java", "sql": "sql",
}  # fmt: skip
WORKERS = max(1, min(4, os.cpu_count() or 1))
# answer_timeout_s, unless the check sets it: this many runs of timeout_s.
ANSWER_RUNS = 3


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
    timeout_s = float(options.get("timeout_s", defaults.timeout_s))
    return Limits(
        timeout_s=timeout_s,
        cpu_s=int(options.get("cpu_s", defaults.cpu_s)),
        memory_mb=int(options.get("memory_mb", defaults.memory_mb)),
        file_mb=int(options.get("file_mb", defaults.file_mb)),
        max_procs=int(options.get("max_procs", defaults.max_procs)),
        output_kb=int(options.get("output_kb", defaults.output_kb)),
        # a larger timeout_s of the suite's own keeps its meaning: three runs' worth
        answer_timeout_s=float(options.get("answer_timeout_s", ANSWER_RUNS * timeout_s)),
        max_blocks=int(options.get("max_blocks", defaults.max_blocks)),
        disk_mb=int(options.get("disk_mb", defaults.disk_mb)),
        max_files=int(options.get("max_files", defaults.max_files)),
    )


def execute(job: ExecJob) -> Check:
    """Setup (when given), then the ``run`` command once per code block with ``$ANSWER`` the
    block's file, all in one sandbox (one fresh directory) removed afterwards. The answer's
    runs share ``answer_timeout_s``: each gets the smaller of its ``timeout_s`` and what is
    left; an answer of more than ``max_blocks`` blocks runs none."""
    limits = limits_from(job.options)
    blocks = code_blocks(job.text)
    if len(blocks) > limits.max_blocks:
        return _not_run(
            f"{len(blocks)} code blocks, more than max_blocks {limits.max_blocks}: none run"
        )
    deadline = time.monotonic() + limits.answer_timeout_s
    with check_sandbox() as box:
        extra = {"ANSWER_TEXT": str(box.write_file("answer.txt", job.text))}
        if job.reference is not NO_GOLD:
            gold = json.dumps(job.reference, ensure_ascii=False)
            extra["GOLD"] = str(box.write_file("gold.json", gold))
        env = sandbox_env(extra, str(box.workdir))
        runs: list[dict[str, Any]] = []
        setup = job.options.get("setup")
        if setup:
            result, ended = _run_within(box, str(setup), limits, env, deadline, "setup", runs)
            if ended is not None:
                return ended
            if not result.passed:
                return _verdict(result, "setup", runs)
        for number, (extension, code) in enumerate(blocks, start=1):
            path = box.write_file(f"answer_{number}.{extension}", code)
            which = f"block {number} of {len(blocks)}"
            result, ended = _run_within(
                box, str(job.options["run"]), limits, {**env, "ANSWER": str(path)}, deadline,
                which, runs, block=number,
            )  # fmt: skip
            if ended is not None:
                return ended
        return _verdict(result, f"block {len(blocks)} of {len(blocks)}", runs)


def _run_within(
    box: CheckSandbox,
    command: str,
    limits: Limits,
    env: Mapping[str, str],
    deadline: float,
    which: str,
    runs: list[dict[str, Any]],
    block: Any = "setup",
) -> tuple[RunResult, Check | None]:
    """One run, given the smaller of its ``timeout_s`` and the answer's time left; the
    check's verdict as well when the answer ends here (its time ran out, or the run was
    stopped)."""
    left = deadline - time.monotonic()
    if left <= 0:
        why = (
            f"the answer's {limits.answer_timeout_s:g} s (answer_timeout_s) ran out before {which}"
        )
        return _empty_run(), _not_run(why, runs)
    cut = left < limits.timeout_s
    result = box.run(
        command, dataclasses.replace(limits, timeout_s=min(limits.timeout_s, left)), env
    )
    runs.append({"block": block, **result.summary()})
    if result.timed_out and cut:
        return result, _verdict(
            result, f"{which}; the answer's {limits.answer_timeout_s:g} s ran out", runs
        )
    if result.stopped:
        return result, _verdict(result, which, runs)
    return result, None


def _empty_run() -> RunResult:
    return RunResult(None, False, "", "", False, 0.0, False)


def _not_run(why: str, runs: list[dict[str, Any]] | None = None) -> Check:
    return Check(
        "exec", False, why, score=0.0, expected="exit 0", got="not run", runs=tuple(runs or ())
    )


def _verdict(result: RunResult, which: str, runs: list[dict[str, Any]]) -> Check:
    if result.stopped:
        got, why = "stopped", f"stopped: {result.stopped} ({which})"
    elif result.timed_out:
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
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evalmine-exec")
    try:
        return dict(zip((job.key for job in jobs), pool.map(execute, jobs), strict=True))
    except KeyboardInterrupt:
        # A Ctrl-C stops every run now (each sandbox is still cleaned up) instead of waiting
        # for the checks in flight and the queue: up to their timeouts, answer after answer.
        STOPPING.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        STOPPING.clear()
