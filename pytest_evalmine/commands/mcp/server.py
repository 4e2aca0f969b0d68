"""``evalmine-mcp``: an MCP server (stdio) for agents (spec: "MCP server").

Tools run a suite (pytest in a child process, so a crash, a hang or an import cached between
runs cannot reach the server), read and compare stored runs, and list suites. Every result is
a typed record: numbers, flags and node ids, never an answer's text, the numbers rounded as the
terminal prints them. A refusal (a path outside the suite root, a cap above the ceiling, a suite
that does not load, the plugin's own refusal before spending) is a result with
``status: "refused"``, not an exception, so the agent reads why.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from ... import exitcodes
from ...engine.catalog import SuiteInfo, describe_suite, find_suite_files
from ...engine.stored import RunDigest, StoredRun, digest, find_run, latest_run, list_runs
from ...errors import EvalmineError
from ...options import project_folders
from ...reports.render import milliseconds, money, number, percent

try:  # the tools' argument descriptions; pydantic comes with the SDK (the `mcp` extra)
    from pydantic import Field
except ImportError:  # pragma: no cover - main() says the SDK is missing
    Field = None  # only the SDK reads the annotations that name it

ROOT_ENV = "EVALMINE_MCP_SUITE_ROOT"
MAX_COST_ENV = "EVALMINE_MCP_MAX_COST"
CEILING_ENV = "EVALMINE_MCP_MAX_COST_CEILING"
TIMEOUT_ENV = "EVALMINE_MCP_TIMEOUT"
DEFAULT_MAX_COST_USD = 1.00
DEFAULT_CEILING_USD = 5.00
DEFAULT_TIMEOUT_S = 1800.0
REPORT_DIR = "reports"

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


@dataclass
class Refusal:
    status: Literal["refused"]
    code: str  # path_outside_root, over_ceiling, bad_request, suite_error, not_found,
    # refused_before_spending
    reason: str


def refusal(code: str, reason: str) -> Refusal:
    return Refusal("refused", code, reason)


@dataclass
class PairedDigest:
    """One paired comparison of report.json's ``paired`` (spec: "Paired comparison"), in
    points (x 100) as the terminal prints them; never its example answers."""

    candidate: str
    baseline: str
    metric: str  # all_pass or score
    verdict: str  # the plain-words line the terminal and report.md print
    cases: int  # cases answered by both (n)
    observations: int  # paired repeats
    excluded_cases: int
    delta_points: float | None
    interval_points: list[float] | None
    noise_floor_points: float | None  # None: unknown (no case has two repeats)
    beyond_noise: bool | None
    worse: int
    better: int
    same: int


@dataclass
class GateRowDigest:
    candidate: str
    verdict: str  # ship, hold, investigate or block
    delta_points: float | None
    interval_points: list[float] | None
    trusted: bool
    reason: str


@dataclass
class GateDigest:
    """The release gate (spec: "Release gate"): the run's verdict, the most severe over its
    candidates, or ``not_applicable`` (no gate, no run, or no candidate to gate) with why."""

    verdict: Literal["ship", "hold", "investigate", "block", "not_applicable"]
    note: str | None  # why not applicable; None when the gate gave a verdict
    metric: str | None = None
    indifference_points: float | None = None
    minor_regression_points: float | None = None
    regression_failures: int = 0
    candidates: list[GateRowDigest] = field(default_factory=list)


NO_GATE_NOTE = "no release gate: the suite has no gate: and the run had no --evalmine-gate"


def no_gate(why: str = NO_GATE_NOTE) -> GateDigest:
    return GateDigest("not_applicable", why)


@dataclass
class RunSuiteResult:
    status: Literal["completed", "failed"]
    exit_code: int
    exit_meaning: str
    max_cost_usd: float
    run: RunDigest | None  # None when pytest ended without writing a report
    paired: list[PairedDigest] = field(default_factory=list)
    gate: GateDigest = field(default_factory=no_gate)


@dataclass
class RunBrief:
    run_id: str
    created_utc: str
    models: list[str]
    items: int
    outcomes: dict[str, int]
    spent_usd: float
    partial: bool
    headline_eligible: bool | None


@dataclass
class RunList:
    status: Literal["ok"]
    suite: str
    runs: list[RunBrief] = field(default_factory=list)


@dataclass
class SuiteList:
    status: Literal["ok"]
    folder: str
    suites: list[SuiteInfo] = field(default_factory=list)


@dataclass
class RunView:
    status: Literal["ok"]
    run: RunDigest
    paired: list[PairedDigest] = field(default_factory=list)
    gate: GateDigest = field(default_factory=no_gate)


@dataclass
class CrossRunMetricDigest:
    """One metric of one model pair, run B against run A (spec: "Compare"), in points and
    shares as ``evalmine compare`` prints them; the worse and better cases by id, never their
    answers."""

    metric: str  # all_pass or score
    verdict: str  # the plain-words line
    cases: int  # cases both runs answered (n)
    observations: int  # paired repeats
    a_mean: float | None  # all_pass: a share; score: the mean checker score
    a_interval: list[float] | None
    b_mean: float | None
    b_interval: list[float] | None
    delta_points: float | None
    interval_points: list[float] | None
    worse: int
    better: int
    same: int
    noise_floor_points: float | None  # None: unknown (neither run has two repeats of a case)
    noise_floor_a_points: float | None
    noise_floor_b_points: float | None
    excess_points: float | None  # |delta| - floor; None without a floor
    excess_interval_points: list[float] | None
    beyond_noise: bool | None
    excluded_cases: int
    worse_cases: list[str] = field(default_factory=list)  # task/case, up to five
    better_cases: list[str] = field(default_factory=list)


@dataclass
class CrossRunModelDigest:
    model_a: str
    model_b: str
    digest_a: str | None  # the build run A recorded for its model (an Ollama digest)
    digest_b: str | None
    changed_answers: int  # cases whose parsed answer differs between the runs
    changed_answers_of: int
    changed_answers_share: float | None
    changed_answers_interval: list[float] | None
    excluded: dict[str, int]  # reason -> cases left out
    metrics: list[CrossRunMetricDigest] = field(default_factory=list)


@dataclass
class TaskChange:
    task: str
    fields: list[str] | None  # prompt, system, params, checks, schema; None: not recorded


@dataclass
class WinRatesSideBySide:
    baseline: str
    candidate: str
    a_win_rate: float | None
    a_interval: list[float] | None
    a_headline_eligible: bool
    b_win_rate: float | None
    b_interval: list[float] | None
    b_headline_eligible: bool


@dataclass
class CrossRunDigest:
    """Run B against run A case by case (report.json ``changes.cases``), without answers."""

    run_a: str
    run_b: str
    tasks_changed: list[TaskChange]
    tasks_only_in_a: list[str]
    tasks_only_in_b: list[str]
    cases_only_in_a: int
    cases_only_in_b: int
    models: list[CrossRunModelDigest]
    win_rates: list[WinRatesSideBySide]
    note: str | None  # why no model pair was compared


@dataclass
class Comparison:
    status: Literal["ok"]
    run_a: str
    run_b: str
    changes: dict[str, Any]  # spec "Compare": what changed from run_a to run_b
    cases: CrossRunDigest | None = None  # each model of both runs, case by case


@dataclass(frozen=True)
class Limits:
    """The server's settings, from its environment when it starts."""

    root: Path
    max_cost_usd: float = DEFAULT_MAX_COST_USD
    ceiling_usd: float = DEFAULT_CEILING_USD
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str]) -> Limits:
        def number(name: str, default: float) -> float:
            raw = environ.get(name)
            try:
                return float(raw) if raw else default
            except ValueError:
                raise EvalmineError(f"{name}={raw!r} is not a number") from None

        return cls(
            root=Path(environ.get(ROOT_ENV) or os.getcwd()).resolve(),
            max_cost_usd=number(MAX_COST_ENV, DEFAULT_MAX_COST_USD),
            ceiling_usd=number(CEILING_ENV, DEFAULT_CEILING_USD),
            timeout_s=number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S),
        )

    @property
    def report_root(self) -> Path:
        return self.root / REPORT_DIR


class OutsideRoot(EvalmineError):
    pass


def confine(root: Path, given: str) -> Path:
    """``given`` (relative to the root, or absolute) with every symlink and ``..`` resolved;
    refused unless the result lies inside the root."""
    if "\x00" in given:
        raise OutsideRoot(f"{given!r}: not a path")
    resolved = (root / given).resolve()
    if resolved != root and root not in resolved.parents:
        raise OutsideRoot(f"{given}: resolves outside the suite root {root}")
    return resolved


class Tools:
    """The tools' logic. ``build_server`` registers six methods as MCP tools: a method's
    docstring is the tool's description, its annotations the input and output schemas."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    # read-only ----------------------------------------------------------------------------
    def list_suites(
        self,
        folder: Annotated[
            str, Field(description="a folder under the suite root, searched with its subfolders")
        ] = ".",
    ) -> SuiteList | Refusal:
        """Suite files (*.eval.yaml) under a folder of the suite root, with their tasks,
        cases, models, judge and labels; a suite that does not load shows its error."""
        try:
            where = confine(self.limits.root, folder)
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        if not where.is_dir():
            return refusal("not_found", f"{folder}: no such folder under the suite root")
        suites = [
            describe_suite(path, self.limits.root)
            for path in find_suite_files(where)
            if self._inside(path)
        ]
        return SuiteList("ok", _shown(where, self.limits.root), suites)

    def list_runs(
        self,
        suite: Annotated[
            str, Field(description="a suite's name, or its suite file under the suite root")
        ],
    ) -> RunList | Refusal:
        """A suite's stored runs, oldest first (suite name, or its file)."""
        try:
            name = self._suite_name(suite)
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        except EvalmineError as exc:
            return refusal("suite_error", str(exc))
        runs = [_brief(run) for run in list_runs(self.limits.report_root, name)]
        return RunList("ok", name, runs)

    def show_run(
        self,
        run: Annotated[
            str,
            Field(description="a run id, or a run folder or its report.json under the root"),
        ],
    ) -> RunView | Refusal:
        """One stored run in numbers and flags, with its paired comparison and release gate
        (as run_suite returns them)."""
        return self._view(lambda: self._find(run))

    def last_report(
        self,
        suite: Annotated[
            str, Field(description="a suite's name, or its suite file under the suite root")
        ],
    ) -> RunView | Refusal:
        """The latest run of a suite, as show_run returns it."""
        return self._view(lambda: latest_run(self.limits.report_root, self._suite_name(suite)))

    def compare(
        self,
        run_a: Annotated[
            str,
            Field(description="the earlier run: a run id, a run folder or its report.json"),
        ],
        run_b: Annotated[
            str, Field(description="the later run: a run id, a run folder or its report.json")
        ],
        models: Annotated[
            list[str] | None,
            Field(
                description="which models to compare case by case: 'M' (a model of both runs) "
                "or 'A=M1,B=M2' (M1 of run_a against M2 of run_b, e.g. another build); "
                "default every model both runs have"
            ),
        ] = None,
    ) -> Comparison | Refusal:
        """What changed from run_a to run_b (run ids, run folders or report.json paths):
        cost, latency, calibration, win-rate movements (same suite) or task changes, and each
        model case by case over the cases both runs answered, even when the suite changed:
        each run's score, the paired delta with its interval, worse and better cases, the
        share of changed answers, the noise floor and the verdict in words."""
        from ...engine.stored import cases_between
        from ...reports.compare import compare

        try:
            before, after = self._find(run_a), self._find(run_b)
            changes = compare(after.report(), before.report())
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        except EvalmineError as exc:
            return refusal("not_found", str(exc))
        try:
            cases = cases_between(before, after, models or ())
        except EvalmineError as exc:
            return refusal("bad_request", str(exc))
        return Comparison(
            "ok", before.run_id, after.run_id, _rounded_changes(changes), _cross_run_digest(cases)
        )

    # spending -----------------------------------------------------------------------------
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
            _shown(suite_file, self.limits.root),
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
            Field(description="provider/model strings, baseline first; default: the suite's list"),
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
            Field(description="the model the others are compared with; default the first"),
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
                shown=_shown(suite_file, self.limits.root),
                roots=project_folders(self.limits.root),
            )
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        except EvalmineError as exc:
            return refusal("suite_error", str(exc))
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

    # helpers ------------------------------------------------------------------------------
    def _inside(self, path: Path) -> bool:
        try:
            confine(self.limits.root, str(path))
        except OutsideRoot:
            return False
        return True

    def _suite_name(self, suite: str) -> str:
        """A suite's name as its report folder has it: given directly, or read from a suite
        file under the root."""
        if not suite.endswith((".yaml", ".yml")):
            if not suite.replace("-", "").replace("_", "").replace(".", "").isalnum() or suite in {
                ".",
                "..",
            }:
                raise EvalmineError(f"{suite!r} is neither a suite name nor a suite file")
            return suite
        from ...suite.loader import load_suite

        path = confine(self.limits.root, suite)
        shown = _shown(path, self.limits.root)
        return load_suite(path, shown=shown, roots=project_folders(self.limits.root)).name

    def _find(self, reference: str) -> StoredRun:
        if "/" in reference or os.sep in reference or reference.startswith("."):
            confine(self.limits.root, reference)  # a path, even one that does not exist
        run = find_run(reference, self.limits.report_root, self.limits.root)
        confine(self.limits.root, str(run.run_dir))
        return run

    def _digested(self, run: StoredRun) -> RunView:
        report = run.report()
        return RunView(
            "ok",
            _rounded_digest(digest(run, self.limits.root)),
            [_paired_digest(entry) for entry in report.get("paired") or []],
            _gate_digest(report.get("gate")),
        )

    def _view(self, locate: Any) -> RunView | Refusal:
        try:
            return self._digested(locate())
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        except EvalmineError as exc:
            return refusal("not_found", str(exc))


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path != root else "."


def _brief(run: StoredRun) -> RunBrief:
    report = run.report()
    headline = report.get("headline")
    return RunBrief(
        run_id=report["run_id"],
        created_utc=report.get("created_utc", ""),
        models=report["models"],
        items=report["items"],
        outcomes=report["outcomes"],
        spent_usd=dollars(report["cost"]["spent_usd"]),
        partial=bool(report["partial"]),
        headline_eligible=None if headline is None else bool(headline["headline_eligible"]),
    )


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


# Numbers as the terminal prints them: each is read back from the terminal's own text for it
# (reports.render), so an agent and a person see the same digits and the
# two cannot drift apart. Floats arrive unrounded (0.04908990000000001) from the sums.
def dollars(value: float | None) -> float | None:
    """$0.0491: four decimals, six below a tenth of a cent (``money``)."""
    return None if value is None else float(money(value).replace("$", ""))


def share(value: float | None) -> float | None:
    """A rate the terminal prints as a percent with one decimal (``percent``): 0.518."""
    return None if value is None else round(float(percent(value).rstrip("%")) / 100, 3)


def kappa(value: float | None) -> float | None:
    """Two decimals (``number``), as kappa and its interval are printed."""
    return None if value is None else float(number(value))


def seconds(value: float | None) -> float | None:
    """A latency to the millisecond (``milliseconds``), in seconds."""
    return None if value is None else round(float(milliseconds(value).split()[0]) / 1000, 3)


def points(value: float | None) -> float | None:
    """A fraction as points (x 100) with one decimal, as the paired and gate lines print."""
    return None if value is None else float(number(100 * value, 1))


def _each(rounding: Any, values: list[float] | None) -> list[float] | None:
    return None if values is None else [rounding(v) for v in values]


def _rounded_digest(run: RunDigest) -> RunDigest:
    cal = run.calibration
    return replace(
        run,
        spent_usd=dollars(run.spent_usd),
        if_uncached_usd=dollars(run.if_uncached_usd),
        cap_usd=dollars(run.cap_usd),
        calibration=None
        if cal is None
        else replace(cal, kappa=kappa(cal.kappa), interval=_each(kappa, cal.interval)),
        win_rates=[
            replace(r, win_rate=share(r.win_rate), interval=_each(share, r.interval))
            for r in run.win_rates
        ],
        models=[
            replace(
                m,
                schema_pass_rate=share(m.schema_pass_rate),
                latency_p50_s=seconds(m.latency_p50_s),
                latency_p95_s=seconds(m.latency_p95_s),
                cost_usd=dollars(m.cost_usd),
                cost_if_uncached_usd=dollars(m.cost_if_uncached_usd),
            )
            for m in run.models
        ],
    )


def _rounded_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """Compare's numbers (spec: "Compare") as its "What changed" section prints them."""
    cal = changes["calibration"]
    rounded = {
        **changes,
        "cost": {
            name: {key: dollars(value) for key, value in delta.items()}
            for name, delta in changes["cost"].items()
        },
        "latency": [
            {
                **row,
                "p50_change_s": seconds(row["p50_change_s"]),
                "p95_change_s": seconds(row["p95_change_s"]),
            }
            for row in changes["latency"]
        ],
        "calibration": {
            **cal,
            **{key: kappa(cal[key]) for key in ("kappa_now", "kappa_before", "kappa_change")},
        },
    }
    for moves in ("win_rate_movements", "movers"):
        if moves in changes:
            rounded[moves] = [
                {**m, **{key: share(m[key]) for key in ("now", "before", "change")}}
                for m in changes[moves]
            ]
    return rounded


def _cross_run_digest(cases: dict[str, Any]) -> CrossRunDigest:
    tasks = cases["tasks"]
    return CrossRunDigest(
        run_a=cases["run_a"],
        run_b=cases["run_b"],
        tasks_changed=[TaskChange(t["task"], t["fields"]) for t in tasks["changed"]],
        tasks_only_in_a=list(tasks["only_in_a"]),
        tasks_only_in_b=list(tasks["only_in_b"]),
        cases_only_in_a=len(cases["cases_only_in_a"]),
        cases_only_in_b=len(cases["cases_only_in_b"]),
        models=[_cross_run_model(pair) for pair in cases["models"]],
        win_rates=[
            WinRatesSideBySide(
                baseline=row["baseline"],
                candidate=row["candidate"],
                a_win_rate=share(row["a"]["win_rate"]),
                a_interval=_low_high(row["a"]["interval"], share),
                a_headline_eligible=bool(row["a"]["headline_eligible"]),
                b_win_rate=share(row["b"]["win_rate"]),
                b_interval=_low_high(row["b"]["interval"], share),
                b_headline_eligible=bool(row["b"]["headline_eligible"]),
            )
            for row in cases["win_rates"]
        ],
        note=cases["note"],
    )


def _cross_run_model(pair: dict[str, Any]) -> CrossRunModelDigest:
    changed = pair["changed_answers"]
    return CrossRunModelDigest(
        model_a=pair["model_a"],
        model_b=pair["model_b"],
        digest_a=(pair["build_a"] or {}).get("digest"),
        digest_b=(pair["build_b"] or {}).get("digest"),
        changed_answers=changed["successes"],
        changed_answers_of=changed["n"],
        changed_answers_share=share(changed["rate"]),
        changed_answers_interval=_low_high(changed["interval"], share),
        excluded=dict(pair["excluded"]),
        metrics=[_cross_run_metric(m) for m in pair["metrics"]],
    )


def _cross_run_metric(m: dict[str, Any]) -> CrossRunMetricDigest:
    # A share prints as a percent, a mean checker score with two decimals.
    side = share if m["metric"] == "all_pass" else kappa
    floor, excess = m["noise_floor"], m["excess"] or {}
    return CrossRunMetricDigest(
        metric=m["metric"],
        verdict=m["verdict"],
        cases=m["cases"],
        observations=m["observations"],
        a_mean=side(m["a"]["mean"]),
        a_interval=_low_high(m["a"]["interval"], side),
        b_mean=side(m["b"]["mean"]),
        b_interval=_low_high(m["b"]["interval"], side),
        delta_points=points(m["delta"]),
        interval_points=_low_high(m["interval"], points),
        worse=m["worse"],
        better=m["better"],
        same=m["same"],
        noise_floor_points=points(floor["floor"]),
        noise_floor_a_points=points(floor["a"]),
        noise_floor_b_points=points(floor["b"]),
        excess_points=points(excess.get("value")),
        excess_interval_points=_low_high(excess.get("interval"), points),
        beyond_noise=m["beyond_noise"],
        excluded_cases=m["excluded_cases"],
        worse_cases=[f"{e['task']}/{e['case']}" for e in m["worse_examples"]],
        better_cases=[f"{e['task']}/{e['case']}" for e in m["better_examples"]],
    )


def _low_high(interval: dict[str, float] | None, rounding: Any) -> list[float] | None:
    return None if interval is None else [rounding(interval["low"]), rounding(interval["high"])]


def _paired_digest(entry: dict[str, Any]) -> PairedDigest:
    return PairedDigest(
        candidate=entry["candidate"],
        baseline=entry["baseline"],
        metric=entry["metric"],
        verdict=entry["verdict"],
        cases=entry["cases"],
        observations=entry.get("observations", entry["cases"]),
        excluded_cases=entry.get("excluded_cases") or 0,
        delta_points=points(entry.get("delta")),
        interval_points=_low_high(entry.get("interval"), points),
        noise_floor_points=points((entry.get("noise_floor") or {}).get("floor")),
        beyond_noise=entry.get("beyond_noise"),
        worse=entry["worse"],
        better=entry["better"],
        same=entry["same"],
    )


def _in_points(value: float | None) -> float | None:
    """A number already in points, with the one decimal the gate's lines print."""
    return None if value is None else float(number(value, 1))


def _gate_digest(gate: dict[str, Any] | None) -> GateDigest:
    if gate is None:
        return no_gate()
    return GateDigest(
        verdict=gate["verdict"],
        note=gate.get("note"),  # why a gate did not apply (one model), as report.json says
        metric=gate["metric"],
        indifference_points=gate["indifference_points"],
        minor_regression_points=gate["minor_regression_points"],
        regression_failures=gate.get("regression_failures", 0),
        candidates=[
            GateRowDigest(
                candidate=row["candidate"],
                verdict=row["verdict"],
                delta_points=_in_points(row.get("delta_points")),
                interval_points=_low_high(row.get("interval_points"), _in_points),
                trusted=bool(row["trusted"]),
                reason=row["reason"],
            )
            for row in gate.get("candidates") or []
        ],
    )


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


def build_server(limits: Limits) -> Any:
    """The MCP server with its six tools."""
    from mcp.server import MCPServer

    tools = Tools(limits)
    server = MCPServer(
        "evalmine",
        instructions=(
            "Run pytest-evalmine suites and read their results. Win rates flagged "
            "UNCALIBRATED (dagger) must not be reported as headline numbers."
        ),
    )

    for tool in (
        tools.run_suite,
        tools.compare,
        tools.last_report,
        tools.list_suites,
        tools.list_runs,
        tools.show_run,
    ):
        server.tool()(tool)
    return server


def main() -> None:
    """Entry point of ``evalmine-mcp``: serve on stdin/stdout until the client leaves."""
    try:
        limits = Limits.from_env(os.environ)
    except EvalmineError as exc:
        print(f"evalmine-mcp: {exc}", file=sys.stderr)
        raise SystemExit(4) from None
    try:
        server = build_server(limits)
    except ImportError:
        print(
            "evalmine-mcp: the MCP SDK is not installed: pip install 'pytest-evalmine[mcp]'",
            file=sys.stderr,
        )
        raise SystemExit(4) from None
    server.run("stdio")


if __name__ == "__main__":
    main()
