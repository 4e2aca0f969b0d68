"""The loaded suite's records (spec: "Suite file"): ``Suite``, ``Task``, ``Case``, ``Label`` and
the rest, with the defaults a suite may leave out. What every other layer reads; ``build`` makes
them, and nothing here reads or checks a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..options import (
    GateConfig,
)
from .template import Template, parse_template
from .variants import missing_variant_problem, split_contender

if TYPE_CHECKING:  # a field's type only: refs reads files, which the records never do
    from .refs import SchemaRefs

DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MIN_KAPPA = 0.40
DEFAULT_MIN_LABELS = 10
# Below this many judged pairs a win-rate row is shown but never a headline.
DEFAULT_MIN_PAIRS = 10
DEFAULT_JUDGE_MAX_TOKENS = 300
DEFAULT_JUDGE_TEMPERATURE = 0.0
DEFAULT_MOVER_THRESHOLD = 0.15
# A binary criterion's judge is trusted only with this many test-split labels of each class
# and each recall's Wilson lower bound at least this high (spec: "Binary judges").
DEFAULT_MIN_LABELS_PER_CLASS = 10
DEFAULT_MIN_RECALL = 0.6
# A panel's vote rules (spec: "Judge panel"): majority is the one there is.
MAJORITY = "majority"
VOTE_RULES = (MAJORITY,)


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


class _NoGold:
    """The sentinel for "this case names no gold value" (a gold of ``null`` is a value)."""

    def __repr__(self) -> str:
        return "NO_GOLD"


NO_GOLD: Any = _NoGold()


@dataclass(frozen=True)
class CheckSpec:
    """One entry of a task's ``checks`` list: a checker name and its options."""

    name: str
    options: dict[str, Any]
    where: str  # the entry's path in the suite, for error lines


@dataclass(frozen=True)
class Case:
    id: str
    vars: dict[str, Any]
    gold: Any = NO_GOLD
    expected: dict[str, Any] = field(default_factory=dict)
    # The reference answer the judge is shown (spec: "Reference answers"); None: none.
    reference_answer: str | None = None

    def reference(self, check: CheckSpec) -> Any:
        """What ``check`` compares with: the case's ``expected`` entry for the check, else
        the check's ``value`` option, else the case's ``gold`` (``NO_GOLD`` when none)."""
        if check.name in self.expected:
            return self.expected[check.name]
        if "value" in check.options:
            return check.options["value"]
        return self.gold


@dataclass(frozen=True)
class Criterion:
    """One binary judge of a task: a named PASS/FAIL criterion."""

    name: str
    criterion: str


@dataclass(frozen=True)
class Variant:
    """A named variant as it applies to one task (spec: "Variants"): the task's prompt, system
    prompt, parameters and schema mode with the variant's overrides applied."""

    name: str
    where: str  # the declaration's path in the suite (the suite's variants or the task's)
    prompt: str
    system: str | None
    params: Params
    # "prompted": the schema goes in the prompt instead of native structured output.
    schema_mode: str | None = None
    prompt_template: Template | None = field(default=None, repr=False, compare=False)
    system_template: Template | None = field(default=None, repr=False, compare=False)


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
    # Files the schema's ``$ref``s point to (URI -> schema), all inside the suite's folder.
    schema_refs: SchemaRefs | None = field(default=None, repr=False, compare=False)
    prompt_template: Template | None = field(default=None, repr=False, compare=False)
    system_template: Template | None = field(default=None, repr=False, compare=False)
    checks: tuple[CheckSpec, ...] = ()
    regression: bool = False
    judges: tuple[Criterion, ...] = ()
    # The variants this task can be asked with: the suite's, then the task's own (which
    # replace a suite variant of the same name), by name.
    variants: dict[str, Variant] = field(default_factory=dict, repr=False)
    # ``judge: {panel: [...]}`` on the task: its own jurors instead of the suite's
    panel: tuple[str, ...] = ()


@dataclass(frozen=True)
class Label:
    task: str
    case: str
    baseline: str
    candidate: str
    prefer: str
    note: str = ""


@dataclass(frozen=True)
class CriterionLabel:
    """A person's PASS/FAIL for one answer (task, case, model) on one binary criterion."""

    task: str
    case: str
    model: str
    criterion: str
    label: str
    note: str = ""


@dataclass(frozen=True)
class JudgeConfig:
    model: str | None = None
    rubric: str = ""
    min_kappa: float = DEFAULT_MIN_KAPPA
    min_labels: int = DEFAULT_MIN_LABELS
    min_pairs: int = DEFAULT_MIN_PAIRS
    on_below_floor: str = "flag"
    max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS
    temperature: float = DEFAULT_JUDGE_TEMPERATURE
    min_labels_per_class: int = DEFAULT_MIN_LABELS_PER_CLASS
    min_recall: float = DEFAULT_MIN_RECALL
    # judge.audit.fraction: the share of pairs in the audit sample; None: about 30 per
    # candidate (judging/audit.py)
    audit_fraction: float | None = None
    # judge.pairs: "baseline" (each candidate against the baseline) or "all" (every two
    # models, for the ranking; win rates still read the baseline's pairs only)
    pairs: str = "baseline"
    # judge.panel: the jurors of a panel (spec: "Judge panel"); empty: the one judge.model
    panel: tuple[str, ...] = ()
    vote: str = "majority"


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
    mover_threshold: float = DEFAULT_MOVER_THRESHOLD
    gate: GateConfig | None = None
    # How messages and reports name the file: relative to the rootdir when inside it.
    shown: str = ""
    criterion_labels: tuple[CriterionLabel, ...] = ()
    # Every declared variant name: the suite's, then the tasks' own, in file order.
    variant_names: tuple[str, ...] = ()
    # ``batch``: true (or an ``--evalmine-batch`` value) sends its calls as provider batches.
    batch: bool | str = False

    def contender(self, entry: str) -> tuple[str, str | None]:
        """``(model, variant)`` of a model list entry, ``MODEL`` or ``MODEL@VARIANT``."""
        return split_contender(entry, self.variant_names)

    def variant_problem(self, entry: str) -> str | None:
        """Why the model list entry ``entry`` cannot be asked every task (its variant is
        declared on some tasks only), or None."""
        _model, variant = self.contender(entry)
        if variant is None:
            return None
        without = [task.id for task in self.tasks if variant not in task.variants]
        return missing_variant_problem(entry, variant, without) if without else None

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def case(self, task_id: str, case_id: str) -> Case:
        """A task's case by id, from an index built on first use (the judge asks for every
        case of a large suite)."""
        return self._cases[(task_id, case_id)]

    @cached_property
    def _cases(self) -> dict[tuple[str, str], Case]:
        return {(task.id, case.id): case for task in self.tasks for case in task.cases}

    def render(self, task: Task, case: Case, variant: str | None = None) -> Rendered:
        """The task's prompts for ``case``, or those of its variant ``variant``."""
        asked: Task | Variant = task.variants[variant] if variant else task
        prompt = asked.prompt_template or parse_template(asked.prompt)
        system = asked.system_template or (parse_template(asked.system) if asked.system else None)
        return Rendered(
            system=system.render(case.vars) if system is not None else None,
            prompt=prompt.render(case.vars),
        )
