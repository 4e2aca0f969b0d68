"""Suite loading (spec: "Suite file"): ``load_suite``, and the names other modules import.

A suite goes through four stages, a module each, that ``load_suite`` calls once each, in this
order: ``reading`` (bytes -> YAML document, within limits) -> ``validate`` (the document
against the suite schema, problems in an author's words) -> ``resolve`` (schema, cases and
labels files read in, held to the data roots) -> ``build`` (document -> ``Suite``, the records
of ``model``). A stage imports only the stages before it (tests/test_layout.py).
Each stage raises every problem it found at once, as one ``SuiteError`` with one line each,
sorted by file and path. Imports no pytest; jsonschema and PyYAML are imported when a suite is
loaded, not at plugin import.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .build import build_suite, suite_hash
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
    NO_GOLD,
    Case,
    CheckSpec,
    Criterion,
    CriterionLabel,
    JudgeConfig,
    Label,
    Params,
    Rendered,
    Suite,
    Task,
    Variant,
)
from .reading import read_suite
from .resolve import resolve_files
from .validate import (
    SUITE_VERSION,
    model_problem,
    schema_problem,
    validate_suite,
)

# What other modules import from here: the records, the defaults and the checks they share.
__all__ = [
    "DEFAULT_JUDGE_MAX_TOKENS",
    "DEFAULT_JUDGE_TEMPERATURE",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MIN_KAPPA",
    "DEFAULT_MIN_LABELS",
    "DEFAULT_MIN_LABELS_PER_CLASS",
    "DEFAULT_MIN_PAIRS",
    "DEFAULT_MIN_RECALL",
    "DEFAULT_MOVER_THRESHOLD",
    "DEFAULT_TIMEOUT_S",
    "NO_GOLD",
    "SUITE_VERSION",
    "Case",
    "CheckSpec",
    "Criterion",
    "CriterionLabel",
    "JudgeConfig",
    "Label",
    "Params",
    "Rendered",
    "Suite",
    "Task",
    "Variant",
    "load_suite",
    "model_problem",
    "schema_problem",
    "suite_hash",
]


def load_suite(path: str | Path, shown: str | None = None, roots: Sequence[Path] = ()) -> Suite:
    """Load, validate and render a suite; every problem found raises one ``SuiteError``
    with one line each (up to a limit), sorted by file and path.

    ``shown`` is how errors name the file (relative to the rootdir); files the suite refers
    to are named relative to it the same way. ``roots``: the folders besides the suite's own
    that those files may lie in (the rootdir, then the ini key ``evalmine_data_roots``'s);
    a file anywhere else is refused, unread."""
    path = Path(path)
    shown = shown or str(path)
    document = validate_suite(read_suite(path, shown), shown)
    sources = resolve_files(document, path, shown, roots)
    return build_suite(document, path, shown, sources)
