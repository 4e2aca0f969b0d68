"""Suites on disk (spec: "Command line"): find them under a folder, describe them, and
validate one with zero network: the loader reads every referenced file and renders every
prompt, and every model (the judge too) must resolve against the price table."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EvalmineError
from ..options import project_folders
from .session import EvalSession, relative_to

# Never walked: tool caches and environments, which can hold thousands of files.
SKIPPED_FOLDERS = {"node_modules", "__pycache__"}


def find_suite_files(folder: Path, pattern: str = "*.eval.yaml") -> list[Path]:
    """Suite files under ``folder``, sorted, skipping hidden folders and caches. Symlinked
    folders are not followed, so a walk never leaves the folder it was given."""
    found = []
    for current, folders, files in os.walk(folder):
        folders[:] = sorted(
            f for f in folders if not f.startswith(".") and f not in SKIPPED_FOLDERS
        )
        found += [Path(current) / f for f in files if fnmatch.fnmatch(f, pattern)]
    return sorted(found)


@dataclass
class SuiteInfo:
    """A suite as a listing shows it; ``error`` is the loader's line when it does not load."""

    path: str
    name: str | None = None
    description: str = ""
    tasks: int = 0
    cases: int = 0
    models: list[str] = field(default_factory=list)
    judge: str | None = None
    labels: int = 0
    max_cost_usd: float | None = None
    error: str | None = None


def describe_suite(path: Path, rootdir: Path) -> SuiteInfo:
    from ..suite.loader import load_suite

    shown = relative_to(path, rootdir)
    try:
        suite = load_suite(path, shown=shown, roots=project_folders(rootdir))
    except EvalmineError as exc:
        return SuiteInfo(path=shown, error=str(exc))
    return SuiteInfo(
        path=shown,
        name=suite.name,
        description=suite.description,
        tasks=len(suite.tasks),
        cases=sum(len(task.cases) for task in suite.tasks),
        models=list(suite.models),
        judge=suite.judge.model,
        labels=len(suite.labels),
        max_cost_usd=suite.max_cost_usd,
    )


@dataclass
class Validated:
    path: str
    suite: str
    items: int
    models: list[str]
    judge: str | None
    variants: list[str] = field(default_factory=list)


def validate(session: EvalSession, path: Path) -> Validated:
    """Load (every file read, every prompt rendered, each variant's too) and price every
    model of the run (a contender ``MODEL@VARIANT`` as its model) and the judge, as a run
    would before spending. Raises ``SuiteError`` or ``PriceError``."""
    suite = session.load(path)
    specs = session.specs_for(suite)
    models = session.models_for(suite)
    judge = session.judge_model_for(suite)
    session.check_suffixes(suite, session.prices.lookup)
    judges = dict.fromkeys([*([judge] if judge else []), *session.judge_models_for(suite)])
    for model in [*(suite.contender(m)[0] for m in models), *judges]:
        session.prices.lookup(model)
    return Validated(
        path=relative_to(path, session.rootdir),
        suite=suite.name,
        items=len(specs),
        models=models,
        judge=judge,
        variants=list(suite.variant_names),
    )
