"""Building (spec: "Suite file"): the validated, inlined document becomes a ``Suite``: parameters
merged (defaults, task, variant), templates parsed once, variants applied, cases and labels
checked against the tasks they name, and the suite hash taken.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..options import (
    DEFAULT_INDIFFERENCE_POINTS,
    DEFAULT_MINOR_REGRESSION_POINTS,
    GateConfig,
)
from .canonical import sha256_hex
from .model import (
    DEFAULT_JUDGE_MAX_TOKENS,
    DEFAULT_JUDGE_TEMPERATURE,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MIN_KAPPA,
    DEFAULT_MIN_LABELS,
    DEFAULT_MIN_LABELS_PER_CLASS,
    DEFAULT_MIN_PAIRS,
    DEFAULT_MIN_RECALL,
    DEFAULT_MOVER_THRESHOLD,
    DEFAULT_TIMEOUT_S,
    MAJORITY,
    NO_GOLD,
    VOTE_RULES,
    Case,
    CheckSpec,
    Criterion,
    CriterionLabel,
    JudgeConfig,
    Label,
    Params,
    Suite,
    Task,
    Variant,
)
from .problems import Problems, quoted
from .resolve import Sources
from .template import Template, parse_template
from .variants import missing_variant_problem, split_contender

RUN_CHOICES = ("models", "limits", "endpoints", "gate")
PARAM_KEYS = ("temperature", "max_tokens", "timeout_s", "top_p", "stop", "system")


def suite_hash(document: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the inlined suite without ``models``, ``limits`` and
    ``endpoints``.

    The model list, the budget and where models are served are choices of a run, not of the
    suite: the same tasks and labels compared across different models keep one suite hash.
    """
    content = {k: v for k, v in document.items() if k not in RUN_CHOICES}
    return sha256_hex(content)


def _params_of(
    defaults: dict[str, Any], raw: dict[str, Any], where: str, shown: str, problems: Problems
) -> tuple[dict[str, Any], str | None]:
    """Defaults, then the task's ``params``, then params keys written on the task itself
    (evalmine's form); one key set both ways is ambiguous and refused. Also returns the JSON
    path of the system prompt in use."""
    params = raw.get("params", {})
    direct = {k: raw[k] for k in PARAM_KEYS if k in raw and k != "system"}
    for key in sorted(set(direct) & set(params)):
        problems.add(shown, f"{where}.{key}", f"set both here and in params.{key}; keep one")
    merged = {**defaults, **params, **direct}
    if "system" in raw:
        system_where: str | None = f"{where}.system"
    elif "system" in params:
        system_where = f"{where}.params.system"
    elif "system" in defaults:
        system_where = "$.defaults.system"
    else:
        system_where = None
    merged["system"] = raw.get("system", merged.get("system"))
    return merged, system_where


def _template(text: str, shown: str, where: str, problems: Problems) -> Template | None:
    try:
        return parse_template(text)
    except ValueError as exc:
        problems.add(shown, where, str(exc))
        return None


def _params(merged: dict[str, Any]) -> Params:
    """The parameters of a merged params mapping (defaults, task, variant), defaults filled in."""
    return Params(
        max_tokens=int(merged.get("max_tokens", DEFAULT_MAX_TOKENS)),
        timeout_s=float(merged.get("timeout_s", DEFAULT_TIMEOUT_S)),
        temperature=merged.get("temperature"),
        top_p=merged.get("top_p"),
        stop=tuple(merged.get("stop", ())),
    )


_TaskTemplates = tuple[Template | None, Template | None]


def _task_variants(
    suite_variants: dict[str, Any],
    raw: dict[str, Any],
    where: str,
    merged: dict[str, Any],
    templates: _TaskTemplates,
    shown: str,
    problems: Problems,
) -> dict[str, Variant]:
    """The variants a task can be asked with: the suite's, then its own (a task's variant
    replaces the suite's of the same name, it is not merged with it). Each overrides what it
    names and keeps the rest of the task: its ``params`` key by key over the task's."""
    declared = {name: (spec, f"$.variants.{name}") for name, spec in suite_variants.items()}
    declared |= {
        name: (spec, f"{where}.variants.{name}") for name, spec in raw.get("variants", {}).items()
    }
    prompt_template, system_template = templates
    variants: dict[str, Variant] = {}
    for name, (spec, at) in declared.items():
        own = spec.get("params", {})
        if "system" in spec and "system" in own:
            problems.add(shown, f"{at}.system", "set both here and in params.system; keep one")
        variant = Variant(
            name=name,
            where=at,
            prompt=spec.get("prompt", raw["prompt"]),
            system=spec.get("system", own.get("system", merged["system"])),
            params=_params({**merged, **own}),
            schema_mode=spec.get("schema_mode"),
            prompt_template=(
                _template(spec["prompt"], shown, f"{at}.prompt", problems)
                if "prompt" in spec
                else prompt_template
            ),
        )
        if "system" in spec or "system" in own:
            system_at = f"{at}.system" if "system" in spec else f"{at}.params.system"
            system = (
                _template(variant.system, shown, system_at, problems) if variant.system else None
            )
        else:
            system = system_template
        variants[name] = dataclasses.replace(variant, system_template=system)
    return variants


def _variant_placeholders(
    variants: Iterable[Variant], prompt: Template | None, system: Template | None
) -> list[tuple[str, str]]:
    """The placeholders of the variants' own prompts, each with where it is, for the check
    that every case has their variables (a prompt the variant keeps was checked already)."""
    names: list[tuple[str, str]] = []
    for variant in variants:
        if variant.prompt_template is not None and variant.prompt_template is not prompt:
            place = f"prompt of variant {quoted(variant.name)}"
            names += [(name, place) for name in variant.prompt_template.names]
        if variant.system_template is not None and variant.system_template is not system:
            place = f"system prompt of variant {quoted(variant.name)}"
            names += [(name, place) for name in variant.system_template.names]
    return names


def _declared_variants(document: dict[str, Any]) -> tuple[str, ...]:
    """Every variant name: the suite's, then each task's own, in file order."""
    names = list(document.get("variants", {}))
    for raw in document["tasks"]:
        names += [name for name in raw.get("variants", {}) if name not in names]
    return tuple(names)


def _refuse_missing_variants(
    models: Any, names: tuple[str, ...], tasks: list[Task], shown: str, problems: Problems
) -> None:
    """A ``MODEL@VARIANT`` in the suite's models whose variant some task does not declare."""
    for index, entry in enumerate(models):
        _model, variant = split_contender(entry, names)
        if variant is None:
            continue
        without = [task.id for task in tasks if variant not in task.variants]
        if without:
            problems.add(
                shown, f"$.models[{index}]", missing_variant_problem(entry, variant, without)
            )


def build_suite(document: dict[str, Any], path: Path, shown: str, sources: Sources) -> Suite:
    """The build stage of a suite load: the ``Suite`` of a validated, inlined ``document``,
    or one ``SuiteError`` with every problem found (duplicate ids, placeholders without a
    variable, labels naming no task, case or judge, ...)."""
    problems = Problems()
    suite = _build(document, path, shown, sources, problems)
    problems.raise_any()
    return suite


def _build(
    document: dict[str, Any], path: Path, shown: str, sources: Sources, problems: Problems
) -> Suite:
    defaults = document.get("defaults", {})
    tasks: list[Task] = []
    seen_tasks: set[str] = set()
    for index, raw in enumerate(document["tasks"]):
        where = f"$.tasks[{index}]"
        if raw["id"] in seen_tasks:
            problems.add(shown, f"{where}.id", f"duplicate task id {quoted(raw['id'])}")
        seen_tasks.add(raw["id"])
        merged, system_where = _params_of(defaults, raw, where, shown, problems)
        system = merged["system"]
        params = _params(merged)
        prompt_template = _template(raw["prompt"], shown, f"{where}.prompt", problems)
        system_template = (
            _template(system, shown, system_where or where, problems) if system else None
        )
        variants = _task_variants(
            document.get("variants", {}),
            raw,
            where,
            merged,
            (prompt_template, system_template),
            shown,
            problems,
        )
        cases = _build_cases(
            raw,
            sources.cases.get(index, []),
            prompt_template,
            system_template,
            problems,
            _variant_placeholders(variants.values(), prompt_template, system_template),
        )
        tasks.append(
            Task(
                id=raw["id"],
                kind=raw["kind"],
                prompt=raw["prompt"],
                system=system,
                schema=raw.get("schema"),
                rubric=raw.get("rubric"),
                judge=bool(raw.get("judge", True)),
                panel=_panel(raw.get("judge"), shown, f"{where}.judge", problems),
                params=params,
                cases=tuple(cases),
                schema_refs=sources.schema_refs.get(index),
                prompt_template=prompt_template,
                system_template=system_template,
                checks=tuple(
                    _check_spec(entry, f"{where}.checks[{number}]")
                    for number, entry in enumerate(raw.get("checks", ()))
                ),
                regression=bool(raw.get("regression", False)),
                judges=_judges(raw.get("judges", ()), shown, where, problems),
                variants=variants,
            )
        )
    _refuse_repeated_models(document.get("models", ()), shown, problems)
    variant_names = _declared_variants(document)
    _refuse_missing_variants(document.get("models", ()), variant_names, tasks, shown, problems)
    judge_raw = document.get("judge", {})
    calibration = judge_raw.get("calibration", {})
    criteria = judge_raw.get("criteria", {})
    audit = judge_raw.get("audit", {})
    # one labels list holds both kinds: a criterion label is the one naming a criterion
    entries = list(zip(document.get("labels", []), sources.labels, strict=True))
    preference = [(raw, origin) for raw, origin in entries if "criterion" not in raw]
    binary = [(raw, origin) for raw, origin in entries if "criterion" in raw]
    judge = JudgeConfig(
        model=judge_raw.get("model"),
        rubric=judge_raw.get("rubric", ""),
        min_kappa=float(calibration.get("min_kappa", DEFAULT_MIN_KAPPA)),
        min_labels=int(calibration.get("min_labels", DEFAULT_MIN_LABELS)),
        min_pairs=int(calibration.get("min_pairs", DEFAULT_MIN_PAIRS)),
        on_below_floor=calibration.get("on_below_floor", "flag"),
        max_tokens=int(judge_raw.get("max_tokens", DEFAULT_JUDGE_MAX_TOKENS)),
        temperature=float(judge_raw.get("temperature", DEFAULT_JUDGE_TEMPERATURE)),
        min_labels_per_class=int(
            criteria.get("min_labels_per_class", DEFAULT_MIN_LABELS_PER_CLASS)
        ),
        min_recall=float(criteria.get("min_recall", DEFAULT_MIN_RECALL)),
        audit_fraction=(None if audit.get("fraction") is None else float(audit["fraction"])),
        pairs=judge_raw.get("pairs", "baseline"),
        panel=_panel(judge_raw, shown, "$.judge", problems),
        vote=judge_raw.get("vote", MAJORITY),
    )
    return Suite(
        path=path,
        name=document["suite"],
        description=document.get("description", ""),
        models=tuple(document.get("models", ())),
        max_cost_usd=document.get("limits", {}).get("max_cost_usd"),
        judge=judge,
        tasks=tuple(tasks),
        labels=tuple(_build_labels(preference, tasks, problems)),
        criterion_labels=tuple(_build_criterion_labels(binary, tasks, problems)),
        hash=suite_hash(document),
        document=document,
        endpoints=dict(document.get("endpoints", {})),
        mover_threshold=float(
            document.get("report", {}).get("mover_threshold", DEFAULT_MOVER_THRESHOLD)
        ),
        gate=_gate(document.get("gate"), shown, problems),
        shown=shown,
        variant_names=variant_names,
        batch=document.get("batch", False),
    )


def _panel(raw: Any, shown: str, where: str, problems: Problems) -> tuple[str, ...]:
    """The jurors of ``judge: {panel: [...], vote: ...}`` (spec: "Judge panel"): at least two,
    none twice, and a vote rule this plugin knows; () when ``raw`` declares no panel."""
    if not isinstance(raw, dict) or "panel" not in raw:
        return ()
    jurors = list(raw["panel"])
    if len(jurors) < 2:
        problems.add(
            shown,
            f"{where}.panel",
            f"a panel needs at least 2 jurors ({len(jurors)} given); for one judge write "
            "judge.model",
        )
    for number, juror in enumerate(jurors):
        if juror in jurors[:number]:
            problems.add(
                shown, f"{where}.panel[{number}]", f"juror {quoted(juror)} is listed twice"
            )
    vote = raw.get("vote", MAJORITY)
    if vote not in VOTE_RULES:
        problems.add(
            shown,
            f"{where}.vote",
            f"unknown vote rule {quoted(vote)} (known: {', '.join(VOTE_RULES)})",
        )
    return tuple(dict.fromkeys(jurors))


def _refuse_repeated_models(models: Any, shown: str, problems: Problems) -> None:
    """A model listed twice would be answered, scored and judged twice under one name."""
    first: dict[str, int] = {}
    for index, model in enumerate(models):
        if model in first:
            problems.add(
                shown,
                f"$.models[{index}]",
                f"model {quoted(model)} is listed twice (also at $.models[{first[model]}])",
            )
        else:
            first[model] = index


def _gate(raw: dict[str, Any] | None, shown: str, problems: Problems) -> GateConfig | None:
    if raw is None:
        return None
    try:
        return GateConfig(
            raw["metric"],
            float(raw.get("indifference", DEFAULT_INDIFFERENCE_POINTS)),
            float(raw.get("minor_regression", DEFAULT_MINOR_REGRESSION_POINTS)),
        )
    except ValueError as exc:
        problems.add(shown, "$.gate", str(exc))
        return None


def _build_cases(
    raw: dict[str, Any],
    origins: list[tuple[str, str]],
    prompt: Template | None,
    system: Template | None,
    problems: Problems,
    also: Sequence[tuple[str, str]] = (),
) -> list[Case]:
    """Cases in order; a duplicate id and a placeholder without a variable (of the task's
    prompts, or ``also``: the variants') are reported where the case is written (the suite,
    or the cases file and its line)."""
    names = [(n, "prompt") for n in prompt.names] if prompt else []
    names += [(n, "system prompt") for n in system.names] if system else []
    names += list(also)
    cases: list[Case] = []
    seen: set[str] = set()
    for raw_case, (file, where) in zip(raw.get("cases", []), origins, strict=True):
        if raw_case["id"] in seen:
            problems.add(
                file,
                _field(where, "id"),
                f"duplicate case id {quoted(raw_case['id'])} in task {quoted(raw['id'])}",
            )
        seen.add(raw_case["id"])
        values = dict(raw_case.get("vars", {}))
        for name, place in names:
            if name not in values:
                problems.add(
                    file,
                    where,
                    f"placeholder {{{{ {name} }}}} in the {place} has no variable {name!r} "
                    f"(task {quoted(raw['id'])}, case {quoted(raw_case['id'])})",
                )
        cases.append(
            Case(
                id=raw_case["id"],
                vars=values,
                gold=raw_case.get("gold", NO_GOLD),
                expected=dict(raw_case.get("expected", {})),
                reference_answer=raw_case.get("reference"),
            )
        )
    return cases


def _check_spec(entry: str | dict[str, Any], where: str) -> CheckSpec:
    """``- number`` or ``- number: {tolerance: 0.01}`` (the schema allows exactly one key)."""
    if isinstance(entry, str):
        return CheckSpec(entry, {}, where)
    ((name, options),) = entry.items()
    return CheckSpec(name, dict(options or {}), where)


def _judges(raw: Any, shown: str, where: str, problems: Problems) -> tuple[Criterion, ...]:
    """A task's binary judges; a name used twice in one task is refused where it repeats."""
    judges: list[Criterion] = []
    for number, entry in enumerate(raw):
        if any(judge.name == entry["name"] for judge in judges):
            problems.add(
                shown,
                f"{where}.judges[{number}].name",
                f"duplicate judge name {quoted(entry['name'])} in this task",
            )
            continue
        judges.append(Criterion(entry["name"], entry["criterion"]))
    return tuple(judges)


_TaskIndex = dict[str, tuple[Task, set[str]]]


def _task_index(tasks: list[Task]) -> _TaskIndex:
    return {task.id: (task, {case.id for case in task.cases}) for task in tasks}


def _labelled_task(
    raw: dict[str, Any], index: _TaskIndex, file: str, where: str, problems: Problems
) -> Task | None:
    """The labelled task when its task and case exist; else adds the problem, None."""
    if raw["task"] not in index:
        problems.add(file, _field(where, "task"), f"no task {quoted(raw['task'])} in this suite")
        return None
    task, cases = index[raw["task"]]
    if raw["case"] not in cases:
        problems.add(
            file,
            _field(where, "case"),
            f"task {quoted(raw['task'])} has no case {quoted(raw['case'])}",
        )
        return None
    return task


def _build_criterion_labels(
    entries: list[tuple[dict[str, Any], tuple[str, str]]],
    tasks: list[Task],
    problems: Problems,
) -> list[CriterionLabel]:
    index = _task_index(tasks)
    labels: list[CriterionLabel] = []
    seen: set[tuple[str, str, str, str]] = set()
    for raw, (file, where) in entries:
        task = _labelled_task(raw, index, file, where, problems)
        if task is None:
            continue
        names = [judge.name for judge in task.judges]
        if raw["criterion"] not in names:
            problems.add(
                file,
                _field(where, "criterion"),
                f"task {quoted(raw['task'])} has no judge {quoted(raw['criterion'])} "
                f"(its judges: {', '.join(names) or 'none'})",
            )
            continue
        identity = (raw["task"], raw["case"], raw["model"], raw["criterion"])
        if identity in seen:
            problems.add(file, where, "duplicate label for this task, case, model and criterion")
        seen.add(identity)
        labels.append(
            CriterionLabel(**{k: raw[k] for k in CriterionLabel.__dataclass_fields__ if k in raw})
        )
    return labels


def _build_labels(
    entries: list[tuple[dict[str, Any], tuple[str, str]]],
    tasks: list[Task],
    problems: Problems,
) -> list[Label]:
    index = _task_index(tasks)
    labels: list[Label] = []
    seen: set[tuple[str, str, str, str]] = set()
    for raw, (file, where) in entries:
        if _labelled_task(raw, index, file, where, problems) is None:
            continue
        if raw["baseline"] == raw["candidate"]:
            problems.add(file, where, "baseline and candidate are the same model")
            continue
        # A pair labelled twice (in either order) would be counted twice in kappa.
        identity = (raw["task"], raw["case"], *sorted((raw["baseline"], raw["candidate"])))
        if identity in seen:
            problems.add(file, where, "duplicate label for this task, case and model pair")
        seen.add(identity)
        labels.append(Label(**{k: raw[k] for k in Label.__dataclass_fields__ if k in raw}))
    return labels


def _field(where: str, name: str) -> str:
    """The path of a field of an entry: ``$.labels[0].task``; a JSONL line stays ``line 3``."""
    return f"{where}.{name}" if where.startswith("$") else where
