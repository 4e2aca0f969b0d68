"""The ``run_suite`` tool, the only one that spends: pytest in a child process under a cap the
server allows (refused above its ceiling, never clamped), with an environment of its own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

from ... import exitcodes
from ...engine.stored import list_runs
from ...errors import EvalmineError
from ...options import check_models_option, project_folders
from .base import ToolBase
from .limits import CEILING_ENV, REPORT_DIR, Field, Limits, OutsideRoot, confine, shown_path
from .records import Refusal, RunSuiteResult, no_gate, refusal

# The child's environment: enough to run Python and reach providers, nothing else of the
# server's (an agent's host may hold unrelated secrets in its environment).
PASSED_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "SYSTEMROOT",
    "PYTHONPATH",
    "EVALMINE_HOME",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
)


class RunSuiteTool(ToolBase):
    """Run a suite file and return its numbers."""

    def cap_for(self, suite_limit: float | None, max_cost: float | None) -> float | Refusal:
        """The run's cap: the request when given (refused above the ceiling, never clamped),
        else the smaller of the suite's limit and the server's default."""
        if max_cost is None:
            return min(self.limits.max_cost_usd, suite_limit or self.limits.max_cost_usd)
        if not max_cost > 0:
            return refusal("bad_request", f"max_cost must be above $0 (got {max_cost})")
        if max_cost > self.limits.ceiling_usd:
            return refusal(
                "over_ceiling",
                f"max_cost ${max_cost:.2f} is above this server's ceiling "
                f"${self.limits.ceiling_usd:.2f} ({CEILING_ENV}); ask for less",
            )
        return max_cost

    def pytest_command(
        self,
        suite_file: Path,
        cap: float,
        models: list[str] | None,
        baseline: str | None,
        no_cache: bool,
        fake: bool,
    ) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "pytest",
            shown_path(suite_file, self.limits.root),
            "-p",
            "pytest_evalmine.plugin",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--rootdir={self.limits.root}",
            f"--evalmine-report-dir={REPORT_DIR}",
            f"--evalmine-max-cost={cap!r}",
        ]
        if models:
            command.append("--evalmine-models=" + ",".join(models))
        if baseline:
            command.append(f"--evalmine-baseline={baseline}")
        if no_cache:
            command.append("--evalmine-no-cache")
        if fake:
            command.append("--evalmine-fake")
        return command

    def child_environment(self, key_variables: list[str]) -> dict[str, str]:
        env = {
            name: os.environ[name] for name in (*PASSED_ENV, *key_variables) if name in os.environ
        }
        # Only our plugin: another installed plugin must not change or break an agent's run.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        return env

    async def run_suite(
        self,
        suite: Annotated[str, Field(description="the suite file, a path under the suite root")],
        models: Annotated[
            list[str] | None,
            Field(
                description="provider/model strings, baseline first, each once; default (left "
                "out): the suite's list; an empty list is refused"
            ),
        ] = None,
        max_cost: Annotated[
            float | None,
            Field(
                description="the run's cap in USD; default the smaller of the suite's limit and "
                "the server's default; above the server's ceiling is refused, never clamped"
            ),
        ] = None,
        baseline: Annotated[
            str | None,
            Field(
                description="the model the others are compared with, one of the models; "
                "default the first"
            ),
        ] = None,
        no_cache: Annotated[
            bool, Field(description="call every model again instead of replaying cached answers")
        ] = False,
        fake: Annotated[
            bool, Field(description="answer with the offline fake adapter, at no cost")
        ] = False,
    ) -> RunSuiteResult | Refusal:
        """Run a suite file with pytest in a child process and return its numbers: run id,
        report paths, headline eligibility and why, calibration, win rates (dagger = not
        headline-eligible), per-model scorecard, cost, failing node ids, the paired comparison
        of each candidate with the baseline (verdict in words, delta, interval, noise floor)
        and the release gate's verdict. A refusal before spending carries the plugin's own
        line (an unknown model, a missing key, or the estimate over the cap)."""
        from ...suite.loader import load_suite

        try:
            suite_file = confine(self.limits.root, suite)
            if not suite_file.is_file():
                return refusal("not_found", f"{suite}: no such suite file under the suite root")
            loaded = load_suite(
                suite_file,
                shown=shown_path(suite_file, self.limits.root),
                roots=project_folders(self.limits.root),
            )
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        except EvalmineError as exc:
            return refusal("suite_error", str(exc))
        wrong = models_problem(models, baseline, list(loaded.models))
        if wrong is not None:
            return refusal("bad_request", wrong)
        cap = self.cap_for(loaded.max_cost_usd, max_cost)
        if isinstance(cap, Refusal):
            return cap
        command = self.pytest_command(suite_file, cap, models, baseline, no_cache, fake)
        keys = sorted(
            {str(e["api_key_env"]) for e in loaded.endpoints.values() if e.get("api_key_env")}
        )
        before = {run.run_id for run in list_runs(self.limits.report_root, loaded.name)}
        code, output = await _run_child(command, self.child_environment(keys), self.limits)
        if code is None:
            why = f"timed out after {self.limits.timeout_s:.0f} s"
            return RunSuiteResult("failed", -1, why, cap, None, gate=no_gate(f"no run: {why}"))
        if code == exitcodes.REFUSED_BEFORE_SPENDING:
            return refusal("refused_before_spending", refusal_line(output))
        new_runs = [
            r for r in list_runs(self.limits.report_root, loaded.name) if r.run_id not in before
        ]
        # Any exit that left a run folder (0, 1, budget and gate codes) has numbers to return.
        if not new_runs:
            gate = no_gate("no run: pytest wrote no report")
            return RunSuiteResult("failed", code, exitcodes.meaning(code), cap, None, gate=gate)
        view = self._digested(new_runs[-1])
        return RunSuiteResult(
            "completed", code, exitcodes.meaning(code), cap, view.run, view.paired, view.gate
        )


def models_problem(
    models: list[str] | None, baseline: str | None, suite_models: list[str]
) -> str | None:
    """Why the run's models cannot run, in the plugin's own words, before a child is started:
    the child's usage error (exit 4) would say only its code's meaning. None when they can."""
    if models is not None and not [m for m in models if m.strip()]:
        return (
            "models: [] names no model; leave models out to run the suite's "
            f"({', '.join(suite_models) or 'none'})"
        )
    chosen = [m.strip() for m in models if m.strip()] if models else suite_models
    if models:
        try:
            check_models_option(",".join(chosen))
        except ValueError as exc:
            return str(exc).replace("--evalmine-models", "models")
    if baseline and baseline not in chosen:
        return f"baseline {baseline!r} is not among the models {chosen}"
    return None


REFUSAL_PREFIX = f"evalmine: exit {exitcodes.REFUSED_BEFORE_SPENDING}: "


def refusal_line(output: str) -> str:
    """Why the plugin refused, from the run's last line (spec: "Terminal summary"),
    ``evalmine: exit 10: REASON``, where REASON is the refusal's own line: the unpriced
    model, the missing key or the estimate over the cap. A refused run writes no report, so
    this line is all it leaves; it never holds an answer (no item ran)."""
    for line in reversed(output.splitlines()):
        if line.startswith(REFUSAL_PREFIX):
            return line[len(REFUSAL_PREFIX) :].strip()
    return exitcodes.meaning(exitcodes.REFUSED_BEFORE_SPENDING)


async def _run_child(
    command: list[str], env: dict[str, str], limits: Limits
) -> tuple[int | None, str]:
    """Run pytest; (exit code, its output), or (None, output) when it outlived the timeout
    and was killed."""
    import subprocess

    import anyio

    process = await anyio.open_process(
        command, cwd=limits.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    chunks: list[bytes] = []
    async with process:
        with anyio.move_on_after(limits.timeout_s) as scope:
            assert process.stdout is not None
            async for chunk in process.stdout:
                chunks.append(chunk)
            await process.wait()
        if scope.cancelled_caught:
            process.kill()
            await process.wait()
            return None, b"".join(chunks).decode("utf-8", "replace")
    return process.returncode, b"".join(chunks).decode("utf-8", "replace")
