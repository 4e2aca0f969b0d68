"""Suite loading: YAML -> validated, rendered, hashed ``Suite`` (spec: "Suite file").

Imports no pytest. jsonschema and PyYAML are imported when a suite is loaded, not at plugin
import. Reading is bounded (``reading``), templates are parsed once (``template``), and every
problem found is reported at once, one line each, sorted by file and path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import SuiteError
from .build import _build, suite_hash
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
from .reading import Problems, file_roots, parse_yaml, read_text
from .resolve import _inline_files
from .validate import (
    SUITE_VERSION,
    _refuse_reserved_keys,
    _validate_suite,
    model_problem,
    schema_problem,
    version_problem,
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
    document = parse_yaml(read_text(path, shown), shown)
    if not isinstance(document, dict):
        raise SuiteError(shown, "$", "a suite must be a mapping with version, suite and tasks")
    if "version" in document and document["version"] != SUITE_VERSION:
        # Checked first: the other keys of another version mean nothing to this reader.
        raise SuiteError(shown, "$.version", version_problem(document["version"]))
    problems = Problems()
    _refuse_reserved_keys(document, shown, problems)
    problems.raise_any()
    _validate_suite(document, shown, problems)
    problems.raise_any()
    sources = _inline_files(document, path, shown, problems, file_roots(path, roots))
    problems.raise_any()
    suite = _build(document, path, shown, sources, problems)
    problems.raise_any()
    return suite
