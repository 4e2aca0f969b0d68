"""The one option table (spec: "Options"): pytest flags, ini keys and environment variables.

Every entry becomes ``--evalmine-NAME`` and the ini key ``evalmine_NAME``; a command-line
value wins over the ini value. The CLI and the MCP server read the same table.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_CAP_USD = 2.00
# Far above the largest answer max_tokens allows; a body past it is not held in memory.
DEFAULT_MAX_RESPONSE_MB = 8.0
GATE_METRICS = ("win_rate", "all_pass", "score")
# Each repeat is a paid call: more than this is a mistake far more often than a plan.
MAX_REPEATS = 20
DEFAULT_INDIFFERENCE_POINTS = 1.0
DEFAULT_MINOR_REGRESSION_POINTS = 2.0
CAP_ENV = "EVALMINE_MAX_COST"
HOME_ENV = "EVALMINE_HOME"
# Kubernetes Indexed Jobs give each pod its 0-based index here (``--evalmine-shard=auto/N``).
SHARD_INDEX_ENV = "JOB_COMPLETION_INDEX"
# A run name is a folder-safe, URL-safe slug: it names the run on every machine and in
# ``evalmine merge NAME``; ``~`` stays free for the tool's own suffixes (``NAME~2``).
RUN_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class GateConfig:
    """The release gate's primary metric and its windows in points (spec: "Release gate")."""

    metric: str
    indifference: float = DEFAULT_INDIFFERENCE_POINTS
    minor_regression: float = DEFAULT_MINOR_REGRESSION_POINTS

    def __post_init__(self) -> None:
        if self.metric not in GATE_METRICS:
            raise ValueError(f"gate metric {self.metric!r} is not one of {', '.join(GATE_METRICS)}")
        if not 0 <= self.indifference <= self.minor_regression:
            raise ValueError(
                f"gate windows need 0 <= indifference ({self.indifference:g}) <= "
                f"minor regression ({self.minor_regression:g})"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "indifference": self.indifference,
            "minor_regression": self.minor_regression,
        }


def gate_from_spec(spec: str) -> GateConfig:
    """``METRIC[,indifference=POINTS][,minor=POINTS]`` (``--evalmine-gate``)."""
    metric, *rest = [part.strip() for part in spec.split(",")]
    windows: dict[str, float] = {}
    for part in rest:
        key, _, value = part.partition("=")
        name = {"indifference": "indifference", "minor": "minor_regression"}.get(key)
        if name is None or not value:
            raise ValueError(
                f"--evalmine-gate: {part!r} is not indifference=POINTS or minor=POINTS"
            )
        windows[name] = parse_number(value, f"--evalmine-gate {key}", minimum=0.0)
    try:
        return GateConfig(metric, **windows)
    except ValueError as exc:
        raise ValueError(f"--evalmine-gate: {exc}") from None


@dataclass(frozen=True)
class Option:
    name: str
    help: str
    kind: str = "string"  # string | bool | int | float | list | width
    default: Any = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    ini: bool = True
    cli: bool = True
    # Bounds of a numeric option, inclusive.
    minimum: float | None = None
    maximum: float | None = None
    # The value of the flag given without one (``--evalmine-batch`` alone: ``on``).
    const: str | None = None

    @property
    def flag(self) -> str:
        return "--evalmine-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "evalmine_" + self.name

    def parse(self, raw: Any, source: str | None = None) -> Any:
        """Turn an ini string (or a command-line value) into the option's type. ``source``
        names where the value came from in the error (default: the flag)."""
        if raw is None or raw == "" or raw == []:
            return self.default
        if self.kind == "bool":
            return raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes", "on")
        if self.kind in ("int", "float"):
            return parse_number(
                raw,
                source or self.flag,
                integer=self.kind == "int",
                minimum=self.minimum,
                maximum=self.maximum,
            )
        if self.kind == "list":
            return list(raw) if isinstance(raw, list) else [line for line in raw if line]
        if self.kind == "width":
            return self._parse_width(raw, source or self.flag)
        value = str(raw)
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.flag}: {value!r} is not one of {', '.join(self.choices)}")
        return value

    def _parse_width(self, raw: Any, source: str) -> Width:
        text = str(raw).strip()
        fixed = text.startswith(FIXED_WIDTH_PREFIX)
        number = text.removeprefix(FIXED_WIDTH_PREFIX) if fixed else text
        if not number.isdecimal():
            raise ValueError(f"{source}: {text!r} is not N or fixed:N (a whole number)")
        limit = parse_number(
            number, source, integer=True, minimum=self.minimum, maximum=self.maximum
        )
        return Width(int(limit), fixed)


@dataclass(frozen=True)
class Shard:
    """``--evalmine-shard=K/N``: this process runs the K-th (1-based) of N slices."""

    index: int
    count: int

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def run_name_from(raw: str | None) -> str | None:
    """``--evalmine-run-name``: None, or a slug (``ValueError`` naming the option otherwise)."""
    if raw is None:
        return None
    if not RUN_NAME_PATTERN.fullmatch(raw):
        raise ValueError(
            f"--evalmine-run-name: {raw!r} is not a run name: 1 to 64 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit (e.g. nightly-2024-06-01)"
        )
    return raw


def shard_from(spec: str | None, run_name: str | None, environ: Any = os.environ) -> Shard | None:
    """``--evalmine-shard``: ``K/N`` (1 <= K <= N) or ``auto/N``, K from the 0-based
    ``JOB_COMPLETION_INDEX`` plus one; None without the option. ``ValueError`` naming the
    option for anything else, and for a shard without ``--evalmine-run-name`` (its partial
    run could never be merged)."""
    if spec is None:
        return None
    text = spec.strip()
    given, sep, total = text.partition("/")
    if not sep or not total.strip().isdecimal():
        raise ValueError(f"--evalmine-shard: {text!r} is not K/N or auto/N (whole numbers)")
    count = int(total)
    if count < 1:
        raise ValueError(f"--evalmine-shard: {text!r}: N must be at least 1")
    if given.strip() == "auto":
        raw = environ.get(SHARD_INDEX_ENV)
        if raw is None or not raw.strip():
            raise ValueError(
                f"--evalmine-shard={text}: auto needs {SHARD_INDEX_ENV} (set by a Kubernetes "
                "Indexed Job); give K/N elsewhere"
            )
        if not raw.strip().isdecimal():
            raise ValueError(f"{SHARD_INDEX_ENV}={raw!r} is not a whole number")
        index = int(raw) + 1
        where = f" ({SHARD_INDEX_ENV}={raw.strip()})"
    elif given.strip().isdecimal():
        index, where = int(given), ""
    else:
        raise ValueError(f"--evalmine-shard: {text!r} is not K/N or auto/N (whole numbers)")
    if not 1 <= index <= count:
        raise ValueError(
            f"--evalmine-shard={text}{where}: shard {index} is not between 1 and {count}"
        )
    if run_name is None:
        raise ValueError(
            f"--evalmine-shard={text}: a shard needs --evalmine-run-name=NAME (the same on "
            "every shard), so that `evalmine merge NAME` can find its partial runs"
        )
    return Shard(index, count)


# ``fixed:N``: N calls at once, never adapted (as an endpoint's ``concurrency: fixed:N``).
FIXED_WIDTH_PREFIX = "fixed:"


@dataclass(frozen=True)
class Width:
    """``--evalmine-concurrency``: ``N`` is the ceiling each provider's adaptive width stays
    under; ``fixed:N`` holds every provider at N."""

    limit: int
    fixed: bool = False


OPTIONS: tuple[Option, ...] = (
    Option(
        "models",
        "comma-separated model strings (provider/model, or provider/model@VARIANT for one of the "
        "suite's variants); the first is the baseline",
        metavar="M1,M2",
    ),
    Option("baseline", "the baseline model when it is not the first of the list", metavar="MODEL"),
    Option(
        "fake",
        "route every model string to the deterministic fake adapter",
        kind="bool",
        default=False,
    ),
    Option(
        "max_cost",
        f"cost cap in USD for this run (env {CAP_ENV}; suite limit; default {DEFAULT_CAP_USD:.2f})",
        kind="float",
        metavar="USD",
        minimum=0.0,
    ),
    Option(
        "no_cache", "ignore cached answers (they are still written)", kind="bool", default=False
    ),
    Option(
        "record",
        "new: call on cache miss; all: call everything; none: replay only, a miss fails the item",
        default="new",
        choices=("new", "all", "none"),
    ),
    Option(
        "concurrency",
        "concurrent calls per provider: N is the ceiling of a width that adapts to each "
        "server; fixed:N holds every provider at N",
        kind="width",
        default=Width(8),
        metavar="[fixed:]N",
        minimum=1,
        maximum=1024,
    ),
    Option(
        "retries",
        "retries of a retryable provider error",
        kind="int",
        default=2,
        metavar="N",
        minimum=0,
        maximum=20,
    ),
    Option(
        "batch",
        "send the uncached calls of batched providers (on: openai, anthropic, google; or a "
        "list naming them or an endpoint whose server has /v1/batches) as provider batches at "
        "the batch price; fallback=online retries a request the batch did not answer online; "
        "poll=DURATION between polls (default 30s)",
        metavar="on|PROVIDER,...[,fallback=online][,poll=DURATION]",
        const="on",
    ),
    Option(
        "batch_wait",
        "the longest a run waits for its batches (90s, 30m, 2h); then a partial report, exit "
        "17, and a rerun collects the calls still in batch at no new cost",
        metavar="DURATION",
    ),
    Option(
        "max_response_mb",
        "largest provider response body read, in MB; a larger one is an error, never an answer",
        kind="float",
        default=DEFAULT_MAX_RESPONSE_MB,
        metavar="MB",
        minimum=0.01,
        maximum=1024,
    ),
    Option(
        "report_dir",
        "where run reports are written: a folder inside the rootdir (relative to it, or an "
        "absolute path inside it)",
        default="reports",
        metavar="DIR",
    ),
    Option("prices", "extra price table YAML; its rows win over the shipped ones", metavar="FILE"),
    Option(
        "fake_latency",
        "simulated latency of the fake adapter in seconds",
        kind="float",
        default=0.0,
        metavar="S",
        minimum=0.0,
        maximum=3600.0,
    ),
    Option(
        "fake_fault",
        "inject a fault into the fake adapter: KIND[,model=M][,prompt=TEXT][,count=N] (repeatable)",
        kind="list",
        default=[],
        metavar="SPEC",
    ),
    Option(
        "endpoint",
        "a named OpenAI-compatible or Ollama endpoint: NAME=BASE_URL[,kind=ollama][,key_env=VAR]"
        "[,free|input=P,output=P][,rpm=N][,prompted] (repeatable)",
        kind="list",
        default=[],
        metavar="SPEC",
    ),
    Option(
        "rpm",
        "requests per minute for one provider: PROVIDER=N (repeatable)",
        kind="list",
        default=[],
        metavar="PROVIDER=N",
    ),
    Option(
        "judge", "judge model (provider/model); default: the suite's judge.model", metavar="MODEL"
    ),
    Option(
        "fail_under_calibration",
        "exit 12 when a win rate is not headline-eligible "
        "(as the suite's on_below_floor: fail does)",
        kind="bool",
        default=False,
    ),
    Option(
        "kappa_gate",
        "gate calibration on the kappa point estimate or on its interval's lower bound",
        default="point",
        choices=("point", "lower"),
    ),
    Option(
        "gate",
        "release gate on METRIC (win_rate, all_pass or score), windows in points "
        "(default indifference=1, minor=2); exit 13 on Block, 15 on Investigate",
        metavar="METRIC[,indifference=P][,minor=P]",
    ),
    Option(
        "compare",
        "compare with an earlier run: a run id of the same suite, or the path "
        "of a run folder or report.json (default: the suite's previous run)",
        metavar="RUN",
    ),
    Option(
        "compare_by",
        "in the comparison with an earlier run, each metric's paired delta per group of cases "
        "by FIELD: a key of the cases' vars, task or gold",
        metavar="FIELD",
    ),
    Option(
        "run_name",
        "a name for this run; the latest run of a name is NAME, earlier ones NAME~1, NAME~2; "
        "the same on every shard, so `evalmine merge NAME` builds one run from their partial runs",
        metavar="NAME",
    ),
    Option(
        "recording",
        "a reviewable recording per suite: 'beside' (SUITE.recording.jsonl next to the suite "
        "file) or a folder (FOLDER/NAME.recording.jsonl); written after runs that may call, "
        "read before runs that read the cache",
        metavar="beside|DIR",
    ),
    Option(
        "suite",
        "run a built-in suite by name, as `evalmine suites` lists them (repeatable; data "
        "downloaded on first use, or read from EVALMINE_DATA)",
        kind="list",
        default=[],
        metavar="NAME",
    ),
    Option(
        "limit",
        "only the first N cases of each task, in file order",
        kind="int",
        minimum=1,
        metavar="N",
    ),
    Option(
        "repeat",
        "ask every task x case x model N times, each repeat its own request and cache entry "
        "(N >= 2 measures the noise floor)",
        kind="int",
        default=1,
        metavar="N",
        minimum=1,
        maximum=MAX_REPEATS,
    ),
    Option(
        "update_latest",
        "point latest.json at this run even when it is a subset, partial or missed replays",
        kind="bool",
        default=False,
    ),
    Option(
        "store",
        "the cache database: a postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE URL shared by "
        "every machine of a team (env EVALMINE_STORE; default: the SQLite file under "
        "EVALMINE_HOME)",
        metavar="URL",
    ),
    Option(
        "shard",
        f"run the K-th of N slices of the selected items (by a stable hash of suite, task "
        f"and case); auto/N reads K-1 from {SHARD_INDEX_ENV}; needs --evalmine-run-name",
        metavar="K/N|auto/N",
    ),
    Option("glob", "file name pattern of suite files (ini only)", default="*.eval.yaml", cli=False),
    Option(
        "data_roots",
        "folders, one a line, relative to the rootdir, that a suite's cases_path, labels_path "
        "and schema_path may point into besides the rootdir and the suite's folder (ini only)",
        kind="list",
        default=(),
        cli=False,
    ),
)


def add_options(
    add: Callable[..., Any],
    add_ini: Callable[..., Any] | None,
    *,
    names: tuple[str, ...] | None = None,
    prefix: str = "--evalmine-",
) -> None:
    """Declare the options (every one, or those in ``names``) through ``add`` (argparse-like)
    and ``add_ini`` (pytest's addini). The ``evalmine`` command declares some as ``--NAME``."""
    for option in OPTIONS:
        if names is not None and option.name not in names:
            continue
        kwargs: dict[str, Any] = {"dest": option.dest, "help": option.help, "default": None}
        if option.kind == "bool":
            kwargs["action"] = "store_true"
        elif option.kind == "list":
            kwargs["action"] = "append"
        else:
            kwargs["metavar"] = option.metavar
            if option.choices:
                kwargs["choices"] = option.choices
            if option.const is not None:
                kwargs["nargs"], kwargs["const"] = "?", option.const
        if option.cli:
            add(prefix + option.name.replace("_", "-"), **kwargs)
        if add_ini is not None and option.ini:
            ini_type = {"bool": "bool", "list": "linelist"}.get(option.kind, "string")
            add_ini(option.dest, option.help, type=ini_type, default=None)


def resolve(get_option: Callable[[str], Any], get_ini: Callable[[str], Any]) -> dict[str, Any]:
    """Values by option name: command line, then ini, then the table's default."""
    values: dict[str, Any] = {}
    for option in OPTIONS:
        raw = get_option(option.dest) if option.cli else None
        source = option.flag
        if raw is None or raw is False or raw == []:
            raw = get_ini(option.dest) if option.ini else None
            source = f"ini {option.dest}"
        values[option.name] = option.parse(raw, source)
    return values


def parse_number(
    raw: Any,
    what: str,
    *,
    integer: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
) -> Any:
    """A finite number within bounds, or ``ValueError`` with one line naming ``what``.
    NaN and infinity are refused: every comparison with NaN is false, so a NaN cap would
    never stop a run."""
    text = str(raw).strip()
    try:
        value: float = int(text) if integer else float(text)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise ValueError(f"{what}: {text!r} is not {kind}") from None
    if not math.isfinite(value):
        raise ValueError(f"{what}: {text!r} is not a finite number")
    if minimum is not None and value < minimum:
        raise ValueError(f"{what}: {text} is below the minimum of {minimum:g}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{what}: {text} is above the maximum of {maximum:g}")
    return value


def check_values(values: dict[str, Any]) -> None:
    """The start-up checks that need no more than this module (``ValueError``): the cap's
    environment variable and the record mode. ``resolve`` has parsed every number already."""
    cap_from(values["max_cost"], [])
    record_mode(values["no_cache"], values["record"])
    if values.get("gate"):
        gate_from_spec(values["gate"])
    if values.get("models"):
        check_models_option(values["models"])
    shard_from(values.get("shard"), run_name_from(values.get("run_name")))


def check_models_option(text: str) -> None:
    """``--evalmine-models`` naming a model twice is refused (``ValueError``): it would be
    answered, scored and judged twice under one name. (A suite's ``models`` list is checked
    where it is written, at load time.)"""
    models = [model.strip() for model in text.split(",") if model.strip()]
    repeated = sorted({model for model in models if models.count(model) > 1})
    if repeated:
        raise ValueError(
            f"--evalmine-models: {', '.join(repeated)} is named more than once ({text}); "
            "name each model once"
        )


# Options whose values only a higher layer can parse (endpoint, rate and fault specs).
SPEC_OPTIONS = ("endpoint", "rpm", "fake_fault")


def check_given(get_option: Callable[[str], Any]) -> None:
    """A flag given an empty value (``--evalmine-models=``, often an unset shell variable) is
    refused: read as absent, it would run the suite's models, judge or report folder instead
    of the ones the command meant to name (``ValueError``)."""
    for option in OPTIONS:
        if not option.cli or option.kind == "bool":
            continue
        raw = get_option(option.dest)
        given = raw if isinstance(raw, list) else [raw]
        if any(isinstance(value, str) and not value.strip() for value in given):
            raise ValueError(f"{option.flag}: empty value (leave the option out for its default)")


def report_root(rootdir: Path, report_dir: str) -> Path:
    """The folder run reports are written under: ``report_dir`` relative to the rootdir, or
    an absolute path, either way strictly inside the rootdir, read as written (``..`` taken
    away) or with symlinks resolved. ``ValueError`` for anything else (``/``, ``../../x``, the
    rootdir itself): a run writes its reports only where the project keeps them."""
    root = Path(os.path.abspath(rootdir))
    folder = Path(os.path.abspath(root / report_dir))
    resolved_root = root.resolve()
    for candidate, inside in ((folder, root), (folder.resolve(), resolved_root)):
        if candidate != inside and candidate.is_relative_to(inside):
            _check_folder(folder, root, report_dir)
            return folder
    raise ValueError(
        f"--evalmine-report-dir={report_dir}: {folder} is not a folder inside the rootdir "
        f"{root}; give a folder under it (default: reports)"
    )


def _check_folder(folder: Path, root: Path, report_dir: str) -> None:
    """``ValueError`` when the report folder, or a folder it would be made in, is a file:
    found at start-up, not when the reports are written after the money is spent."""
    for part in (folder, *folder.parents):
        if part == root:
            return
        if part.exists() and not part.is_dir():
            raise ValueError(
                f"--evalmine-report-dir={report_dir}: {part} is a file, not a folder; "
                "give a folder (it is made when missing)"
            )


def evalmine_home(rootdir: Path) -> Path:
    """The folder the cache lives in: ``EVALMINE_HOME``, else ``ROOTDIR/.evalmine``."""
    return Path(os.environ.get(HOME_ENV) or rootdir / ".evalmine")


def cache_path(rootdir: Path) -> Path:
    """The run's cache file (the session's store, ``evalmine batches``' listing)."""
    return evalmine_home(rootdir) / "cache.sqlite"


def record_mode(no_cache: bool, record: str) -> str:
    """The effective record mode: ``--evalmine-no-cache`` is ``all``. Raises ``ValueError``
    for the one contradiction."""
    if no_cache:
        if record == "none":
            raise ValueError("--evalmine-no-cache contradicts --evalmine-record=none")
        return "all"
    return record


def cap_from(option_value: float | None, suite_limits: list[float]) -> tuple[float, str]:
    """The cost cap and where it came from: option > environment > suite limit > default."""
    if option_value is not None:
        return option_value, "--evalmine-max-cost"
    env = os.environ.get(CAP_ENV)
    if env:
        return parse_number(env, CAP_ENV, minimum=0.0), CAP_ENV
    if suite_limits:
        source = "suite limits.max_cost_usd"
        return min(parse_number(v, source, minimum=0.0) for v in suite_limits), source
    return DEFAULT_CAP_USD, "default"


# Where pytest looks for its configuration in a folder, in its order, and the table each file
# must have to count (pytest.ini counts even without one).
PYTEST_CONFIG_FILES = (
    ("pytest.ini", "pytest"),
    (".pytest.ini", "pytest"),
    ("pyproject.toml", "tool.pytest.ini_options"),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)


def project_folders(rootdir: Path, data_roots: Any = None) -> tuple[Path, ...]:
    """The folders a suite under ``rootdir`` may read its cases, labels and schema files
    from, besides its own folder: the rootdir, then each folder of the ini key
    ``evalmine_data_roots`` (relative to the rootdir, or absolute). ``data_roots`` None: the
    key as the pytest configuration file in ``rootdir`` has it (``ini_data_roots``), for the
    command line and the MCP server, which run without pytest."""
    folders = ini_data_roots(rootdir) if data_roots is None else list(data_roots)
    return (Path(rootdir), *(Path(rootdir) / folder for folder in folders))


def ini_data_roots(rootdir: Path) -> list[str]:
    """``evalmine_data_roots`` from the pytest configuration file of ``rootdir`` (the first
    of ``PYTEST_CONFIG_FILES`` that counts), as pytest reads a ``linelist`` key: one folder a
    line, blank lines dropped. The ``evalmine`` command reads this key only, from its
    ``--rootdir``; every other setting it takes from its own options."""
    import configparser

    for name, table in PYTEST_CONFIG_FILES:
        path = Path(rootdir) / name
        if not path.is_file():
            continue
        if name == "pyproject.toml":
            section = _toml_table(path, table.split("."))
            if section is None:
                continue
            value = section.get("evalmine_data_roots", [])
        else:
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            try:
                parser.read(path, encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError) as exc:
                raise ValueError(f"{path}: cannot read: {exc}") from None
            if not parser.has_section(table):
                if name == "pytest.ini":
                    return []
                continue
            value = parser.get(table, "evalmine_data_roots", fallback="")
        lines = value.splitlines() if isinstance(value, str) else [str(v) for v in value]
        return [line.strip() for line in lines if line.strip()]
    return []


def _toml_table(path: Path, keys: list[str]) -> dict[str, Any] | None:
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest brings tomli
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        table: Any = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None
    for key in keys:
        table = table.get(key) if isinstance(table, dict) else None
    return table if isinstance(table, dict) else None
