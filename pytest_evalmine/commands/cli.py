"""``evalmine``: the command line beside pytest (spec: "Command line"). Each subcommand is a
few lines over the engine: the loader validates, the price table prices, stored runs are read
and rendered by ``engine.stored``. Runs themselves are pytest's: ``pytest SUITE``."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .. import __version__, exitcodes
from ..errors import EvalmineError, PriceError, RefusedError, SuiteError
from ..options import add_options, ini_data_roots, project_folders, resolve
from ..redaction import printable

if TYPE_CHECKING:
    from ..run.store import StoreBackend

USAGE_ERROR = 4
SUITE_ERROR = 2  # as pytest reports a suite that does not load: a collection error

# The run options `validate` and `prices --for` honour, from the plugin's option table.
RUN_OPTIONS = ("models", "baseline", "judge", "prices", "endpoint")


class Parser(argparse.ArgumentParser):
    """argparse, with pytest's usage-error code (4) instead of argparse's 2, which pytest
    (and so the plugin) uses for an interrupted run."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def build_parser() -> Parser:
    parser = Parser(
        prog="evalmine",
        description="pytest-evalmine without pytest: validate suites, show prices, list and "
        "read stored runs, re-render and compare reports. Run a suite with pytest "
        "(pytest SUITE --evalmine-models=...).",
        epilog="Exit codes: 0 ok; 2 a suite does not load; 4 usage error, or no such run or "
        "suite file; 10 a model has no price (a run would be refused before spending); merge: "
        "a pytest run's code, or 18 (a shard missing, or partials that disagree).",
    )
    parser.add_argument("--version", action="version", version=f"pytest-evalmine {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary, description=summary)
        sub.add_argument(
            "--rootdir",
            type=Path,
            default=None,
            help="the project folder: the paths given, the report dir and the cache are under "
            "it (default: the rootdir pytest would pick from here and the paths given, so the "
            "runs `pytest SUITE` wrote are found; the paths given are then from here)",
        )
        return sub

    def report_dir(sub: argparse.ArgumentParser) -> None:
        add_options(sub.add_argument, None, names=("report_dir",), prefix="--")

    validate = command(
        "validate",
        "check suites with zero network: every referenced file read, every prompt rendered, "
        "every model (and the judge) priced. Exit 0, or the first problem's code.",
    )
    validate.add_argument("suites", nargs="+", metavar="SUITE", help="suite files")
    add_options(validate.add_argument, None, names=RUN_OPTIONS, prefix="--")

    prices = command(
        "prices", "the price table (USD per million tokens) and the date it is pinned to"
    )
    prices.add_argument(
        "--for", dest="suite", metavar="SUITE", help="only the rows a suite's models use"
    )
    add_options(prices.add_argument, None, names=RUN_OPTIONS, prefix="--")

    suites = command(
        "suites",
        "suite files under a folder, with tasks, cases, models, labels; the built-in suites",
    )
    suites.add_argument("folder", nargs="?", default=".", help="default: the current folder")
    suites.add_argument(
        "--glob", default="*.eval.yaml", help="suite file pattern (default *.eval.yaml)"
    )

    runs = command(
        "runs",
        "a suite's stored runs, oldest first: id, name, date, models, cases, pass rate, "
        "spend, verdict",
    )
    runs.add_argument("suite", metavar="SUITE", help="suite name or suite file")
    report_dir(runs)

    last = command("last", "print the latest run's report.md (or report.json with --json)")
    last.add_argument("suite", metavar="SUITE", help="suite name or suite file")
    last.add_argument("--json", action="store_true", help="print report.json instead")
    report_dir(last)

    report = command(
        "report",
        "render a stored run's report.md again from its report.json, answers.jsonl and "
        "pairs.jsonl (no call, no cost); the suite file must be unchanged",
    )
    report.add_argument(
        "run", metavar="RUN", help="run id, run name (NAME, NAME~K), run folder or report.json"
    )
    report_dir(report)

    compare = command(
        "compare",
        "what changed from RUN_A to RUN_B, and each model of both runs case by case: scores, "
        "the paired delta, worse and better cases, changed answers, the noise floor",
    )
    compare.add_argument(
        "run_a",
        metavar="RUN_A",
        help="the earlier run: id, name (NAME, NAME~K), folder or report.json",
    )
    compare.add_argument(
        "run_b",
        metavar="RUN_B",
        help="the later run: id, name (NAME, NAME~K), folder or report.json",
    )
    compare.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="M | A=M1,B=M2",
        help="compare only model M (in both runs), or M1 of RUN_A with M2 of RUN_B (another "
        "build or tag); repeatable. Default: every model both runs have",
    )
    compare.add_argument(
        "--allow-other-suite",
        action="store_true",
        help="pair runs of two different suites by their task and case ids (refused otherwise)",
    )
    compare.add_argument(
        "--by",
        metavar="FIELD",
        help="also each metric's paired delta per group of cases by FIELD: a key of the "
        "cases' vars, task or gold (read from the runs' suite file)",
    )
    compare.add_argument("--json", action="store_true", help="print the changes as JSON")
    report_dir(compare)

    plan = command(
        "plan",
        "with zero network: the smallest delta the suite can detect, and the cases, labels "
        "and repeats a question needs (from the suite's latest run, else stated assumptions)",
    )
    plan.add_argument("suite", metavar="SUITE", help="suite file")
    add_options(
        plan.add_argument, None, names=("models", "baseline", "repeat", "kappa_gate"), prefix="--"
    )
    report_dir(plan)
    add_plan_options(plan)

    merge = command(
        "merge",
        "build the one run of run NAME from the partial runs its shards wrote "
        "(--evalmine-run-name=NAME --evalmine-shard=K/N): its reports, the comparison with "
        "the previous run, the release gate and a pytest run's exit code; exit 18 naming the "
        "missing shards while one is absent, or what differs when two partials disagree",
    )
    merge.add_argument("name", metavar="NAME", help="the run name every shard was given")
    add_options(merge.add_argument, None, names=("fail_under_calibration",), prefix="--")
    merge.add_argument(
        "--junitxml", metavar="PATH", type=Path, help="also write a JUnit XML file of the run"
    )
    report_dir(merge)

    batches = command(
        "batches",
        "the provider batches of the cache (EVALMINE_HOME, default ROOTDIR/.evalmine) still in "
        "flight: provider, batch id, state, counts; a rerun of the suite collects them",
    )
    batches.add_argument(
        "action", nargs="?", choices=("cancel",), help="cancel ID: cancel that batch"
    )
    batches.add_argument(
        "batch", nargs="?", metavar="ID", help="our local id (em-...) or the provider's"
    )
    batches.add_argument("--all", action="store_true", help="collected batches too")
    batches.add_argument("--json", action="store_true", help="print the batches as JSON")
    add_options(batches.add_argument, None, names=("endpoint", "store"), prefix="--")
    return parser


# (flag, Assumptions field, what it is): each overrides what the previous run measured.
PLAN_OPTIONS = (
    ("--delta", "delta_points", "the paired delta to detect, in points (default 5)"),
    ("--discordance", "discordance", "share of cases passing for one model only (0.20)"),
    ("--agreement", "agreement", "share of labels where judge and people agree (0.70)"),
    ("--power", "power", "chance of detecting the delta (0.80)"),
    ("--alpha", "alpha", "1 - the intervals' confidence (0.05)"),
    ("--half-width", "half_width_points", "the PPI interval's half-width, in points (10)"),
    ("--rho", "rho", "correlation of the judge's verdict with the human label (0.5)"),
    ("--floor-precision", "floor_precision", "relative precision of the noise floor (0.25)"),
)


def add_plan_options(plan: argparse.ArgumentParser) -> None:
    for flag, dest, text in PLAN_OPTIONS:
        plan.add_argument(flag, dest=f"plan_{dest}", type=float, metavar="X", help=text)
    plan.add_argument("--json", action="store_true", help="print the figures as JSON")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        try:
            _place(args)
            code = COMMANDS[args.command](args)
        except FileNotFoundError as exc:  # a suite or run file named that is not there
            code = _fail(exc, USAGE_ERROR)
        except SuiteError as exc:
            code = _fail(exc, SUITE_ERROR)
        except (PriceError, RefusedError) as exc:
            code = _fail(exc, exitcodes.REFUSED_BEFORE_SPENDING)
        except EvalmineError as exc:
            code = _fail(exc, USAGE_ERROR)
        sys.stdout.flush()  # here, not at exit: a reader gone is seen while it can be caught
        return code
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of our output stopped reading (``evalmine runs S | head -1``): what it
    wanted it has, so this is no error and no traceback (spec "Command line"). Standard output
    is pointed at the null device, so the interpreter's last flush has nowhere to fail."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def _fail(exc: Exception, code: int) -> int:
    print(f"evalmine: {cli_flags(str(exc))}", file=sys.stderr)
    return code


def cli_flags(text: str) -> str:
    """A message from the engine names the plugin's flags (``--evalmine-models``); the
    command's own are the same table without the prefix (``--models``): name those."""
    for flag in CLI_FLAGS:
        text = text.replace(f"--evalmine-{flag}", f"--{flag}")
    return text


# The plugin's options the command has under its own name (``--NAME``), longest first so that
# one flag's name never rewrites part of another's.
CLI_FLAGS = tuple(
    sorted(
        {name.replace("_", "-") for name in (*RUN_OPTIONS, "report_dir", "repeat")},
        key=len,
        reverse=True,
    )
)


def _place(args: argparse.Namespace) -> None:
    """``args.rootdir``, and ``args.base``, the folder the paths given are relative to: both
    ``--rootdir`` when it is given (as before pytest's rule was followed), else pytest's
    rootdir for the paths given, which are then relative to the working directory, as
    pytest's own arguments are."""
    from .rootdir import pytest_rootdir

    args.rootdir_given = args.rootdir is not None
    if args.rootdir_given:
        args.base = args.rootdir
        return
    args.base = Path.cwd()
    given = [path for path in _paths_given(args) if (args.base / path).exists()]
    args.rootdir = pytest_rootdir(given, args.base)


def _paths_given(args: argparse.Namespace) -> list[str]:
    """The command's arguments that name files or folders: what pytest's rule starts from."""
    named = [
        *(getattr(args, "suites", None) or ()),
        getattr(args, "folder", None),
        getattr(args, "run", None),
        getattr(args, "run_a", None),
        getattr(args, "run_b", None),
    ]
    suite = getattr(args, "suite", None)
    if suite is not None and suite.endswith((".yaml", ".yml")):
        named.append(suite)
    return [str(path) for path in named if path is not None]


def _where(args: argparse.Namespace) -> str:
    """Why a command that found no run looked where it did (nothing to add when told by
    ``--rootdir``), with a leading space."""
    if args.rootdir_given:
        return ""
    return (
        f" (the rootdir pytest picks from {args.base} and the paths given; the runs of a suite "
        "file outside this project are under that file's rootdir: name the suite file, or "
        "give --rootdir)"
    )


@contextlib.contextmanager
def _looking(args: argparse.Namespace) -> Iterator[None]:
    """A run not found: the error says where the command looked, and why there."""
    try:
        yield
    except EvalmineError as exc:
        if not str(exc).startswith("no run"):
            raise
        raise EvalmineError(f"{exc}{_where(args)}") from None


def _session(args: argparse.Namespace) -> Any:
    from ..engine.session import EvalSession, Settings

    # The command reads one ini key, from the pytest configuration file of --rootdir: where
    # a suite's data may lie (spec "Command line"); every other setting is an option here.
    def ini(dest: str) -> Any:
        return ini_data_roots(args.rootdir) if dest == "evalmine_data_roots" else None

    values = resolve(lambda dest: getattr(args, dest, None), ini)
    return EvalSession(settings=Settings(values), rootdir=args.rootdir.resolve())


def _report_root(args: argparse.Namespace) -> Path:
    return args.rootdir / (args.evalmine_report_dir or "reports")


def _suite_name(args: argparse.Namespace) -> str:
    """A suite given by name (its report folder) or by its file."""
    if args.suite.endswith((".yaml", ".yml")):
        from ..suite.loader import load_suite

        roots = project_folders(args.rootdir)
        return load_suite(suite_file(args, args.suite), shown=args.suite, roots=roots).name
    return str(args.suite)


def suite_file(args: argparse.Namespace, given: str) -> Path:
    """A suite file the user named, under ``--rootdir``; one that is not there is a usage
    error (exit 4, spec "Command line"), as a run that is not there is."""
    path = args.base / given
    if not path.is_file():
        raise EvalmineError(f"{given}: no such suite file")
    return path


# subcommands ------------------------------------------------------------------------------
def cmd_validate(args: argparse.Namespace) -> int:
    from ..engine.catalog import validate
    from ..reports.render import counted
    from ..run.endpoints import base_urls_from, base_urls_line

    session = _session(args)
    line = base_urls_line(base_urls_from())  # a bad variable: exit 4, from main
    if line is not None:
        print(line)
    worst = 0
    for given in args.suites:
        try:
            done = validate(session, suite_file(args, given))
        except SuiteError as exc:
            print(cli_flags(str(exc)), file=sys.stderr)
            worst = worst or SUITE_ERROR
            continue
        except PriceError as exc:
            print(f"{given}: {cli_flags(str(exc))}", file=sys.stderr)
            worst = worst or exitcodes.REFUSED_BEFORE_SPENDING
            continue
        except EvalmineError as exc:  # a file not there, no models: a usage error
            print(f"evalmine: {cli_flags(str(exc))}", file=sys.stderr)
            worst = worst or USAGE_ERROR
            continue
        judge = f"judge {done.judge}" if done.judge else "no judge"
        models = ", ".join(done.models)
        items = counted(done.items, "item")
        variants = f"; variants {', '.join(done.variants)}" if done.variants else ""
        print(f"ok {done.path}: suite {done.suite}, {items}, {models}; {judge}{variants}")
    return worst


def cmd_prices(args: argparse.Namespace) -> int:
    from ..reports.render import text_table

    session = _session(args)
    table = session.prices
    rows = list(table.all_rows())
    if args.suite:
        suite = session.load(suite_file(args, args.suite))
        wanted = [suite.contender(model)[0] for model in session.models_for(suite)]
        if judge := session.judge_model_for(suite):
            wanted.append(judge)
        wanted += session.judge_models_for(suite)
        rows = []
        for model in dict.fromkeys(wanted):
            row = table.lookup(model)
            rows.append(row if row.model == model else _named(row, model))
    print(f"prices pinned {table.pinned}, USD per million tokens")
    body = [
        (
            row.model,
            _price(row.input),
            _price(row.output),
            _price(row.cached_input),
            _price(row.cache_write),
            row.read,
        )
        for row in sorted(rows, key=lambda r: r.model)
    ]
    for line in text_table(("model", "input", "output", "cached in", "cache write", "read"), body):
        print(line)
    return 0


def _named(row: Any, model: str) -> Any:
    import dataclasses

    return dataclasses.replace(row, model=f"{model} (row {row.model})")


def _price(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def cmd_suites(args: argparse.Namespace) -> int:
    from ..engine.catalog import describe_suite, find_suite_files
    from ..reports.render import counted
    from ..suite.builtin import BUILTIN_SUITES

    root = args.rootdir.resolve()
    found = find_suite_files(args.base / args.folder, args.glob)
    if not found:
        print(f"no suite files ({args.glob}) under {args.folder}")
    for path in found:
        info = describe_suite(path, root)
        if info.error:
            print(f"{info.path}: does not load: {info.error}")
            continue
        print(
            f"{info.path}: suite {info.name}, {counted(info.tasks, 'task')}, "
            f"{counted(info.cases, 'case')}, {counted(info.labels, 'label')}; "
            f"models {', '.join(info.models) or '-'}; "
            f"judge {info.judge or '-'}"
        )
    for suite in BUILTIN_SUITES.values():
        print(f"built-in {suite.name} (--evalmine-suite={suite.name}): {suite.description}")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from ..engine.stored import list_runs
    from ..reports.render import money, percent, text_table

    name = _suite_name(args)
    runs = list_runs(_report_root(args), name)
    if not runs:
        raise EvalmineError(f"no run of suite {name!r} under {_report_root(args)}{_where(args)}")
    rows = []
    for run in runs:
        report = run.report()
        models = report.get("models") or []
        items = report["items"]
        passed = report["outcomes"].get("passed", 0)
        rows.append(
            (
                run.run_id,
                report.get("run_name") or "-",
                _date(report.get("created_utc", "")),
                ", ".join(models),
                str(_cases(report)),
                f"{passed}/{items} {percent(passed / items if items else None)}",
                money(report["cost"]["spent_usd"]),
                _verdict(report) + (" PARTIAL" if report["partial"] else ""),
            )
        )
    headers = ("run", "name", "date", "models", "cases", "passed", "spent", "verdict")
    for line in text_table(headers, rows):
        print(line)
    return 0


def _date(created_utc: str) -> str:
    """``2025-06-01T09:30:12+00:00`` as ``2025-06-01 09:30`` (UTC, as the run id's)."""
    return created_utc[:16].replace("T", " ") or "-"


def _cases(report: dict[str, Any]) -> int:
    """The cases a run asked: its items over its models and repeats."""
    asked = max(1, len(report.get("models") or ()) * int(report.get("repeats", 1)))
    return -(-report["items"] // asked)


def _verdict(report: dict[str, Any]) -> str:
    """The release gate's verdict when the run had a gate, else the headline's state."""
    gate = report.get("gate")
    if gate and gate.get("verdict") and gate["verdict"] != "not_applicable":
        return f"gate {gate['verdict']}"
    return _headline_word(report)


def _headline_word(report: dict[str, Any]) -> str:
    from ..judging.headline import DAGGER

    headline = report.get("headline")
    if headline is None:
        return "no judge"
    return "eligible" if headline["headline_eligible"] else f"{DAGGER}UNCALIBRATED"


def cmd_last(args: argparse.Namespace) -> int:
    from ..engine.stored import latest_run

    with _looking(args):
        run = latest_run(_report_root(args), _suite_name(args))
    target = run.report_path if args.json else run.run_dir / "report.md"
    sys.stdout.write(target.read_text("utf-8"))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..engine.stored import find_run, rerender

    with _looking(args):
        run = find_run(args.run, _report_root(args), args.base)
    for path in rerender(run, args.rootdir):
        print(f"wrote {path}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from ..engine.stored import comparison, find_run
    from ..reports.sections import changes_section
    from ..reports.terminal import terminal_section

    with _looking(args):
        before = find_run(args.run_a, _report_root(args), args.base)
        after = find_run(args.run_b, _report_root(args), args.base)
    changes = comparison(before, after, args.model, args.allow_other_suite, args.by, args.rootdir)
    if args.json:
        print(json.dumps(changes, indent=2))
        return 0
    print(f"{before.run_id} -> {after.run_id}")
    section = changes_section(changes)
    for line in terminal_section(section, width=100):
        print(printable(line.text))
    for text in section.detail_lines:
        print(printable(text))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from ..reports.compare import find_previous
    from ..reports.compare import load as load_report
    from ..reports.power_section import (
        Assumptions,
        power_figures,
        power_from_report,
        power_lines,
        with_assumptions,
    )
    from ..stats.estimators import CATEGORIES

    session = _session(args)
    suite = session.load(suite_file(args, args.suite))
    models = session.models_for(suite)
    given = {dest: getattr(args, f"plan_{dest}") for _, dest, _ in PLAN_OPTIONS}
    try:
        assume = with_assumptions(Assumptions(), **given)
        shares = [sum(label.prefer == c for label in suite.labels) for c in CATEGORIES]
        judged = session.judge_model_for(suite) is not None
        previous = find_previous(_report_root(args), suite.name)
        if previous is not None:
            report = load_report(previous)
            figures = power_from_report(
                report,
                models=models,
                label_shares=shares,
                min_kappa=suite.judge.min_kappa,
                judged=judged,
                assume=assume,
                source=f"run {report.get('run_id')} and assumptions",
            )
        else:
            figures = power_figures(
                cases=sum(len(task.cases) for task in suite.tasks),
                repeats=session.settings.repeat,
                candidates=[(models[0], m) for m in models[1:]],
                judged=judged,
                min_kappa=suite.judge.min_kappa,
                labels=len(suite.labels),
                label_shares=shares,
                source="assumptions (no previous run)",
                assume=assume,
            )
    except ValueError as exc:
        raise EvalmineError(f"plan: {exc}") from None
    panel_line = None
    if previous is not None:
        figures["panel"], panel_line = _plan_panel(suite, previous, models, args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"plan for suite {suite.name} ({args.suite}): {', '.join(models)}")
    for line in power_lines(figures):
        print(line)
    if panel_line:
        print(panel_line)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from ..engine.merge import MergeRefused, merge_run, merged_exit_code
    from ..engine.session import relative_to
    from ..reports.junit import write_junit

    try:
        finished = merge_run(
            args.name,
            _report_root(args),
            args.rootdir,
            fail_under_calibration=bool(args.evalmine_fail_under_calibration),
        )
    except MergeRefused as exc:
        return _fail(exc, exc.code)
    for item in finished:
        summary = item.summary
        where = relative_to(item.run_dir, args.rootdir) if item.run_dir else "not written"
        print(
            f"merged run {args.name}, suite {summary.suite_name}: {len(summary.records)} items "
            f"from {len(summary.merged_from or ())} shards, ${summary.spent_usd:.4f}: {where}"
        )
        if item.not_written:
            print(f"evalmine: reports not written: {item.not_written}", file=sys.stderr)
        if summary.latest_note:
            print(summary.latest_note)
    if args.junitxml is not None:
        write_junit(args.junitxml, [item.summary for item in finished])
    code = merged_exit_code(finished)
    print(f"exit {code}: {exitcodes.meaning(code)}")
    return code


def _plan_panel(
    suite: Any, previous: Path, models: list[str], args: argparse.Namespace
) -> tuple[dict[str, Any] | None, str | None]:
    """The previous run's panel on the suite's labels as they are now: the cheapest panel or
    single juror that passes the calibration floor (spec: "Judge panel"); (None, None) when
    that run had one judge."""
    from ..engine.stored import StoredRun
    from ..judging.panel import panel_from_run
    from ..reports.panel_section import cheapest_line

    gate_on = getattr(args, "kappa_gate", None) or "point"
    report = panel_from_run(suite, StoredRun(previous.parent).pairs(), models, gate_on=gate_on)
    if report is None:
        return None, None
    data = report.to_dict()
    return (
        {
            "gate_on": gate_on,
            "cheapest_passing": data["cheapest_passing"],
            "jurors": data["jurors"],
        },
        "judge panel: " + cheapest_line(data["cheapest_passing"]),
    )


def cmd_batches(args: argparse.Namespace) -> int:
    import datetime as dt

    from ..reports.render import text_table

    if args.action == "cancel":
        return _cancel_batch(args)
    if args.batch is not None:
        raise EvalmineError(f"batches: {args.batch!r}: did you mean `batches cancel ID`?")
    store = _existing_store(args)
    if store is None:  # never create a cache to say it is empty
        listed: list[dict[str, Any]] = []
        where = str(_cache_file(args))
    else:
        try:
            listed = store.batches(open_only=not args.all)
            where = store.location
        finally:
            store.close()
    if args.json:
        print(json.dumps(listed, indent=2))
        return 0
    if not listed:
        print(f"no batch in flight in {where}" if not args.all else f"no batch in {where}")
        return 0
    rows = [
        (
            entry["provider"],
            entry["batch_id"] or "(not accepted yet)",
            entry["state"] if entry["state"] != "submitted" else entry["provider_state"] or "-",
            str(entry["requests"]),
            ", ".join(f"{k} {v}" for k, v in sorted(entry["counts"].items())) or "-",
            dt.datetime.fromtimestamp(entry["created_at"], dt.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC"
            ),
        )
        for entry in listed
    ]
    for line in text_table(("provider", "batch", "state", "calls", "counts", "submitted"), rows):
        print(line)
    return 0


def _cache_file(args: argparse.Namespace) -> Path:
    from ..options import cache_path

    return cache_path(args.rootdir)


def _existing_store(args: argparse.Namespace) -> StoreBackend | None:
    """The store ``--store`` (or ``EVALMINE_STORE``) names, else the SQLite file when it
    exists (None when it does not: a listing never creates one)."""
    from ..run.store.location import open_store, store_location

    location = store_location(args.evalmine_store)
    if location is None and not _cache_file(args).is_file():
        return None
    return open_store(location, _cache_file(args))


def _cancel_batch(args: argparse.Namespace) -> int:
    from ..adapters.builtin import default_registry
    from ..run.batch_cancel import cancel_batch
    from ..run.endpoints import parse_option

    if not args.batch:
        raise EvalmineError("batches cancel: which batch? give its id (`evalmine batches`)")
    store = _existing_store(args)
    if store is None:
        raise EvalmineError(
            f"batches cancel: no batch {args.batch!r}: there is no cache {_cache_file(args)}"
        )
    endpoints = [parse_option(spec) for spec in args.evalmine_endpoint or ()]
    try:
        done = cancel_batch(store, args.batch, default_registry(endpoints=endpoints))
    finally:
        store.close()
    batch = done.batch
    counts = ", ".join(f"{k} {v}" for k, v in sorted(done.counts.items()))
    print(
        f"canceled batch {batch['provider']} {batch['batch_id']} ({batch['local_id']}, "
        f"{batch['requests']} calls): {done.state}{f' ({counts})' if counts else ''}"
    )
    if done.released:
        print(
            f"it ran nothing: released {done.released} reservation(s), "
            f"${done.released_usd:.6f}, of run {batch['run_token']}"
        )
    else:
        print(
            "a rerun of its suite reads what ran (billed, stored) and releases the "
            "reservations of the requests the provider canceled"
        )
    return 0


COMMANDS = {
    "batches": cmd_batches,
    "plan": cmd_plan,
    "validate": cmd_validate,
    "prices": cmd_prices,
    "suites": cmd_suites,
    "runs": cmd_runs,
    "last": cmd_last,
    "report": cmd_report,
    "compare": cmd_compare,
    "merge": cmd_merge,
}


if __name__ == "__main__":
    raise SystemExit(main())
