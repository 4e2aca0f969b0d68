"""Suite loading: YAML -> validated, rendered, hashed ``Suite`` (spec: "Suite file").

Imports no pytest. jsonschema is imported when a suite is loaded, not at plugin import.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import SuiteError
from ..redaction import KEY_PATTERNS
from .canonical import sha256_hex

SUITE_VERSION = 1
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# Anything else inside double braces is an expression, which suites may not contain.
BRACES = re.compile(r"\{\{.*?\}\}", re.DOTALL)
RUN_CHOICES = ("models", "limits", "endpoints")
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MIN_KAPPA = 0.40
DEFAULT_MIN_LABELS = 10


@dataclass(frozen=True)
class Params:
    """Generation parameters after defaults and task overrides are merged.

    ``temperature`` and ``top_p`` stay ``None`` unless the suite sets them: several current
    models reject them, so adapters send only what the user asked for.
    """

    max_tokens: int = DEFAULT_MAX_TOKENS
    timeout_s: float = DEFAULT_TIMEOUT_S
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()

    def for_key(self) -> dict[str, Any]:
        """The parameters that can change an answer (timeout cannot, so it is left out)."""
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": list(self.stop),
        }


@dataclass(frozen=True)
class Case:
    id: str
    vars: dict[str, Any]


@dataclass(frozen=True)
class Task:
    id: str
    kind: str
    prompt: str
    system: str | None
    schema: dict[str, Any] | None
    rubric: str | None
    judge: bool
    params: Params
    cases: tuple[Case, ...]


@dataclass(frozen=True)
class Label:
    task: str
    case: str
    baseline: str
    candidate: str
    prefer: str
    note: str = ""


@dataclass(frozen=True)
class JudgeConfig:
    model: str | None = None
    rubric: str = ""
    min_kappa: float = DEFAULT_MIN_KAPPA
    min_labels: int = DEFAULT_MIN_LABELS
    on_below_floor: str = "flag"


@dataclass(frozen=True)
class Rendered:
    """A task prompt after ``{{ name }}`` substitution for one case."""

    system: str | None
    prompt: str


@dataclass(frozen=True)
class Suite:
    path: Path
    name: str
    description: str
    models: tuple[str, ...]
    max_cost_usd: float | None
    judge: JudgeConfig
    tasks: tuple[Task, ...]
    labels: tuple[Label, ...]
    hash: str
    document: dict[str, Any] = field(repr=False, compare=False)
    endpoints: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def render(self, task: Task, case: Case) -> Rendered:
        return Rendered(
            system=_render(task.system, task, case, self.path) if task.system else None,
            prompt=_render(task.prompt, task, case, self.path),
        )


def load_suite(path: str | Path, shown: str | None = None) -> Suite:
    """Load, validate and render a suite; every problem raises one ``SuiteError`` line.

    ``shown`` is how errors name the file (e.g. relative to the rootdir)."""
    path = Path(path)
    shown = shown or str(path)
    document = _read_yaml(path, shown)
    # Before validation, whose messages quote values: a pasted key must never be echoed.
    _refuse_api_keys(document, shown, "$")
    _validate(document, shown)
    _inline_files(document, path.parent, shown)
    return _build(document, path, shown)


def suite_hash(document: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the inlined suite without ``models``, ``limits`` and
    ``endpoints``.

    The model list, the budget and where models are served are choices of a run, not of the
    suite: the same tasks and labels compared across different models keep one suite hash.
    """
    content = {k: v for k, v in document.items() if k not in RUN_CHOICES}
    return sha256_hex(content)


def _read_yaml(path: Path, shown: str) -> dict[str, Any]:
    import yaml

    text = _read_text(path, shown)
    try:
        document = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "unknown place"
        raise SuiteError(shown, "", f"not valid YAML at {where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(shown, "", f"not valid YAML: {_one_line(exc)}") from None
    if not isinstance(document, dict):
        raise SuiteError(shown, "$", "a suite must be a mapping with version, suite and tasks")
    return document


def _read_text(path: Path, shown: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(shown, "", f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SuiteError(shown, "", f"not UTF-8 text (byte {exc.start})") from None


_VALIDATORS: dict[str, Any] = {}


def _validator(definition: str | None = None) -> Any:
    """The suite schema validator, or one for a named ``$defs`` entry (case lines, labels)."""
    key = definition or ""
    if key not in _VALIDATORS:
        from jsonschema import Draft202012Validator

        schema = json.loads(
            resources.files("pytest_evalmine.suite").joinpath("schema.json").read_text("utf-8")
        )
        if definition:
            schema = {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
        _VALIDATORS[key] = Draft202012Validator(schema)
    return _VALIDATORS[key]


def _validate(instance: Any, shown: str, definition: str | None = None, root: str = "$") -> None:
    from jsonschema.exceptions import best_match

    error = best_match(_validator(definition).iter_errors(instance))
    if error is None:
        return
    where = root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
    raise SuiteError(shown, where, _explain(error))


def _explain(error: Any) -> str:
    """Rewrite jsonschema's messages into the words a suite author needs."""
    if error.validator == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(known))
        return f"unknown key {extra[0]!r} (allowed: {', '.join(known)})"
    if error.validator == "const" and list(error.path) == ["version"]:
        return f"unsupported version {error.instance!r}: this plugin reads version {SUITE_VERSION}"
    if error.validator == "not":
        both = error.validator_value.get("required", [])
        return f"use either {' or '.join(both)}, not both"
    if error.validator == "anyOf" and all("required" in s for s in error.validator_value):
        names = [s["required"][0] for s in error.validator_value]
        return f"needs one of: {', '.join(names)}"
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return f"missing required key {missing[0]!r}"
    if error.validator == "pattern" and error.schema.get("pattern", "").startswith("^[a-z0-9]"):
        return f"model {error.instance!r} is not 'provider/model'"
    return error.message


def _inline_files(document: dict[str, Any], base: Path, shown: str) -> None:
    """Replace ``schema_path``, ``cases_path`` and ``labels_path`` by their contents.

    Paths are relative to the suite file. The suite hash is taken after inlining, so an edit
    to a referenced file changes the hash.
    """
    for index, task in enumerate(document["tasks"]):
        where = f"$.tasks[{index}]"
        if "schema_path" in task:
            target = _resolve(base, task["schema_path"], shown, f"{where}.schema_path")
            try:
                task["schema"] = json.loads(target.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise SuiteError(
                    shown, f"{where}.schema_path", f"cannot read JSON: {exc}"
                ) from None
            del task["schema_path"]
        if "cases_path" in task:
            target = _resolve(base, task["cases_path"], shown, f"{where}.cases_path")
            task["cases"] = _read_cases_jsonl(target, shown, f"{where}.cases_path")
            del task["cases_path"]
        if "schema" in task:
            _check_task_schema(task["schema"], shown, f"{where}.schema")
    if "labels_path" in document:
        target = _resolve(base, document["labels_path"], shown, "$.labels_path")
        document["labels"] = _read_labels(target, shown)
        del document["labels_path"]


def _resolve(base: Path, relative: str, shown: str, where: str) -> Path:
    target = (base / relative).resolve()
    if not target.is_file():
        raise SuiteError(shown, where, f"file not found: {relative}")
    return target


def _read_cases_jsonl(target: Path, shown: str, where: str) -> list[dict[str, Any]]:
    cases = [case for _, case in _read_entries(target, "case")]
    if not cases:
        raise SuiteError(shown, where, f"{target.name} holds no cases")
    return cases


def _read_labels(target: Path, shown: str) -> list[dict[str, Any]]:
    return [label for _, label in _read_entries(target, "label")]


def _read_entries(target: Path, definition: str) -> list[tuple[str, Any]]:
    """Entries of a JSONL file (one per line) or a YAML list, each checked where it stands,
    so errors name that file and line or index rather than the suite."""
    import yaml

    shown = str(target)
    text = _read_text(target, shown)
    entries: list[tuple[str, Any]] = []
    if target.suffix == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    entries.append((f"line {number}", json.loads(line)))
                except ValueError as exc:
                    raise SuiteError(shown, f"line {number}", f"not valid JSON: {exc}") from None
    else:
        try:
            loaded = yaml.safe_load(text) or []
        except yaml.YAMLError as exc:
            raise SuiteError(shown, "", f"not valid YAML: {_one_line(exc)}") from None
        if not isinstance(loaded, list):
            raise SuiteError(shown, "$", f"a {definition}s file holds a list of {definition}s")
        entries = [(f"$[{index}]", entry) for index, entry in enumerate(loaded)]
    for where, entry in entries:
        _refuse_api_keys(entry, shown, where)
        _validate(entry, shown, definition, root=where)
    return entries


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _check_task_schema(schema: dict[str, Any], shown: str, where: str) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise SuiteError(shown, where, f"not a valid JSON Schema: {exc.message}") from None


def _refuse_api_keys(value: Any, shown: str, where: str) -> None:
    if isinstance(value, str):
        for provider, pattern in KEY_PATTERNS:
            if pattern.search(value):
                raise SuiteError(
                    shown,
                    where,
                    f"looks like an API key ({provider} format); keys belong in the environment",
                )
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_api_keys(str(key), shown, where)
            _refuse_api_keys(item, shown, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_api_keys(item, shown, f"{where}[{index}]")


def _merge_params(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    merged.update(override)
    return merged


def _build(document: dict[str, Any], path: Path, shown: str) -> Suite:
    defaults = document.get("defaults", {})
    tasks: list[Task] = []
    seen_tasks: set[str] = set()
    for index, raw in enumerate(document["tasks"]):
        if raw["id"] in seen_tasks:
            raise SuiteError(shown, f"$.tasks[{index}].id", f"duplicate task id {raw['id']!r}")
        seen_tasks.add(raw["id"])
        merged = _merge_params(defaults, raw.get("params", {}))
        system = raw.get("system", merged.get("system"))
        params = Params(
            max_tokens=int(merged.get("max_tokens", DEFAULT_MAX_TOKENS)),
            timeout_s=float(merged.get("timeout_s", DEFAULT_TIMEOUT_S)),
            temperature=merged.get("temperature"),
            top_p=merged.get("top_p"),
            stop=tuple(merged.get("stop", ())),
        )
        cases: list[Case] = []
        seen_cases: set[str] = set()
        for case_index, raw_case in enumerate(raw["cases"]):
            if raw_case["id"] in seen_cases:
                raise SuiteError(
                    shown,
                    f"$.tasks[{index}].cases[{case_index}].id",
                    f"duplicate case id {raw_case['id']!r} in task {raw['id']!r}",
                )
            seen_cases.add(raw_case["id"])
            cases.append(Case(id=raw_case["id"], vars=dict(raw_case.get("vars", {}))))
        tasks.append(
            Task(
                id=raw["id"],
                kind=raw["kind"],
                prompt=raw["prompt"],
                system=system,
                schema=raw.get("schema"),
                rubric=raw.get("rubric"),
                judge=bool(raw.get("judge", True)),
                params=params,
                cases=tuple(cases),
            )
        )
    judge_raw = document.get("judge", {})
    calibration = judge_raw.get("calibration", {})
    judge = JudgeConfig(
        model=judge_raw.get("model"),
        rubric=judge_raw.get("rubric", ""),
        min_kappa=float(calibration.get("min_kappa", DEFAULT_MIN_KAPPA)),
        min_labels=int(calibration.get("min_labels", DEFAULT_MIN_LABELS)),
        on_below_floor=calibration.get("on_below_floor", "flag"),
    )
    suite = Suite(
        path=path,
        name=document["suite"],
        description=document.get("description", ""),
        models=tuple(document.get("models", ())),
        max_cost_usd=document.get("limits", {}).get("max_cost_usd"),
        judge=judge,
        tasks=tuple(tasks),
        labels=tuple(_build_labels(document.get("labels", []), tasks, shown)),
        hash=suite_hash(document),
        document=document,
        endpoints=dict(document.get("endpoints", {})),
    )
    for task in suite.tasks:
        for case in task.cases:
            suite.render(task, case)
    return suite


def _build_labels(raw_labels: list[dict[str, Any]], tasks: list[Task], shown: str) -> list[Label]:
    cases_by_task = {task.id: {case.id for case in task.cases} for task in tasks}
    labels: list[Label] = []
    seen: set[tuple[str, str, str, str]] = set()
    for index, raw in enumerate(raw_labels):
        where = f"$.labels[{index}]"
        if raw["task"] not in cases_by_task:
            raise SuiteError(shown, f"{where}.task", f"no task {raw['task']!r} in this suite")
        if raw["case"] not in cases_by_task[raw["task"]]:
            raise SuiteError(
                shown, f"{where}.case", f"task {raw['task']!r} has no case {raw['case']!r}"
            )
        if raw["baseline"] == raw["candidate"]:
            raise SuiteError(shown, where, "baseline and candidate are the same model")
        # A pair labelled twice (in either order) would be counted twice in kappa.
        identity = (raw["task"], raw["case"], *sorted((raw["baseline"], raw["candidate"])))
        if identity in seen:
            raise SuiteError(shown, where, "duplicate label for this task, case and model pair")
        seen.add(identity)
        labels.append(Label(**{k: raw[k] for k in Label.__dataclass_fields__ if k in raw}))
    return labels


def _render(template: str, task: Task, case: Case, path: Path) -> str:
    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in case.vars:
            raise SuiteError(
                str(path),
                f"task {task.id!r} case {case.id!r}",
                f"placeholder {{{{ {name} }}}} has no variable {name!r}",
            )
        return str(case.vars[name])

    for braces in BRACES.finditer(template):
        if not PLACEHOLDER.fullmatch(braces.group(0)):
            raise SuiteError(
                str(path),
                f"task {task.id!r}",
                f"{braces.group(0)!r} is not a placeholder; only {{{{ name }}}} is substituted",
            )
    # re.sub scans the template once, so braces inside substituted values stay literal.
    return PLACEHOLDER.sub(substitute, template)
