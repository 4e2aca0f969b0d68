"""The package's import rule (spec: "Package layout"): imports go downward only, the core
never imports pytest or the pytest glue, and no two modules import each other, directly or
around a longer loop. Read from the source with ``ast``, so lazy imports inside functions
count as much as the ones at the top of a module."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import FrameType

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_evalmine"
NAME = "pytest_evalmine"

# Lowest first. A module may import its own layer and the layers before it.
LAYERS = [
    {"errors", "exitcodes", "options", "redaction"},
    {"suite", "stats"},
    {"adapters"},
    {"run"},
    {"scoring"},
    {"judging"},
    {"reports"},
    {"engine"},
    {"plugin", "commands"},
]
# The modules of the package root: the foundations every layer imports (the pytest glue
# lives in plugin/, each other layer in its own folder).
ROOT_MODULES = {"__init__", "errors", "exitcodes", "options", "redaction"}
MAX_ROOT_MODULES = 6
COMMANDS = "pytest_evalmine.commands"  # the evalmine command and the MCP server
ROOT_MODULE = NAME  # pytest_evalmine/__init__.py: version and lazy re-exports
# Loading a suite, lowest first: a stage reaches (imports, directly or through a helper such as
# template or task_schema) only the stages before it, and load_suite calls each once in order.
SUITE_PIPELINE = ["model", "reading", "validate", "resolve", "build", "loader"]
SUITE_STAGES = ["reading", "validate", "resolve", "build"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    parts = module.split(".")
    if module == ROOT_MODULE:
        return 0
    group = parts[1]
    for rank, names in enumerate(LAYERS):
        if group in names:
            return rank
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS and the spec")


def imports_of(path: Path, module: str, typing_too: bool = True) -> set[str]:
    """Every module (of this package, or pytest) that ``path`` imports, anywhere in it;
    without ``typing_too``, not those under ``if TYPE_CHECKING:`` (never imported at run
    time: they name types)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    tree = ast.parse(path.read_text("utf-8"))
    if not typing_too:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            # `from . import x` and `from .pkg import mod` may name modules
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def package_graph(typing_too: bool = True) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for target in imports_of(path, module, typing_too):
            if target == "pytest" or target.startswith("pytest."):
                targets.add("pytest")
            elif target in modules and target != module:
                targets.add(target)
        graph[module] = targets
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    found: set[str] = set()
    pending = [start]
    while pending:
        for target in graph.get(pending.pop(), ()):
            if target not in found:
                found.add(target)
                pending.append(target)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle among the modules, or None (depth-first search with colours)."""
    colour = dict.fromkeys(graph, 0)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if colour[target] == 1:
                return [*stack[stack.index(target) :], target]
            if colour[target] == 0 and (cycle := visit(target)):
                return cycle
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if colour[node] == 0 and (cycle := visit(node)):
            return cycle
    return None


def unresolved_imports() -> list[str]:
    """``from X import ...`` inside the package whose X is no module of it: a relative import
    left one level off after a move (it fails only when its line runs, maybe never in a test)."""
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    missing = []
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = module.split(".")
                if path.name != "__init__.py":
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
                if target not in modules:
                    missing.append(f"{module}:{node.lineno} imports from {target}")
    return missing


def test_every_relative_import_names_a_module() -> None:
    assert unresolved_imports() == []


def test_no_import_cycles() -> None:
    assert find_cycle(package_graph()) is None, " -> ".join(find_cycle(package_graph()) or [])


def test_core_never_imports_pytest() -> None:
    offenders = [
        module
        for module, targets in package_graph().items()
        if "pytest" in targets and layer_of(module) < layer_of(f"{NAME}.plugin")
    ]
    assert offenders == []


def test_imports_only_go_downward() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in package_graph().items()
        for target in targets
        if target != "pytest" and layer_of(target) > layer_of(module) and module != ROOT_MODULE
    ]
    assert upward == []


def test_commands_and_glue_stay_apart() -> None:
    """The two top-layer neighbours never import each other: the commands run pytest as a
    user would, and loading the plugin never loads a command (or the MCP SDK)."""
    crossings = [
        f"{module} imports {target}"
        for module, targets in package_graph().items()
        for target in targets
        if target != "pytest"
        and layer_of(module) == layer_of(target) == layer_of(f"{NAME}.plugin")
        and module.startswith(COMMANDS) != target.startswith(COMMANDS)
    ]
    assert crossings == []


def test_the_root_holds_only_the_foundations() -> None:
    """A newcomer finds the plugin in plugin/ and each layer in its folder: the root keeps
    the modules every layer imports, and no more than a handful of them."""
    root = {path.stem for path in PACKAGE.glob("*.py")}
    assert root == ROOT_MODULES and len(root) <= MAX_ROOT_MODULES


def test_every_subpackage_says_what_it_owns() -> None:
    inits = [init for init in PACKAGE.rglob("__init__.py") if init.parent != PACKAGE]
    assert any(init.parent.name == "mcp" for init in inits), "nested packages are checked too"
    for init in inits:
        doc = ast.get_docstring(ast.parse(init.read_text("utf-8")))
        assert doc and len(doc.split()) >= 20, f"{init} needs a docstring: what it owns, imports"


MAX_MODULE_LINES = 800
# Modules still being split under issue 29 in other branches: each entry goes once its split
# lands (the test below says so), and no other module may pass the limit meanwhile.
SPLIT_PENDING: set[str] = set()


def module_lengths() -> dict[str, int]:
    return {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text("utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def too_long(lengths: dict[str, int], pending: set[str]) -> list[str]:
    """Modules over the limit that are not pending a split, and pending entries that no
    longer need their exemption."""
    over = {name for name, lines in lengths.items() if lines > MAX_MODULE_LINES}
    return sorted(f"{name}: {lengths[name]} lines" for name in over - pending) + sorted(
        f"{name}: no longer over {MAX_MODULE_LINES} lines, drop it from SPLIT_PENDING"
        for name in pending - over
    )


def test_no_package_module_exceeds_800_lines() -> None:
    assert too_long(module_lengths(), SPLIT_PENDING) == []


def test_the_length_rule_catches_a_long_module_and_a_stale_exemption() -> None:
    lengths = {"a.py": 801, "b.py": 800, "c.py": 10}
    assert too_long(lengths, set()) == ["a.py: 801 lines"]
    assert too_long(lengths, {"a.py"}) == []
    assert too_long(lengths, {"a.py", "c.py"}) == [
        "c.py: no longer over 800 lines, drop it from SPLIT_PENDING"
    ]


def test_the_entry_points_name_what_the_package_holds() -> None:
    """pyproject.toml's console scripts and pytest plugin name modules (and functions) that
    exist, so a module moved without its entry point fails here, not for the first user."""
    import importlib

    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text("utf-8"))["project"]
    targets = [*project["scripts"].values(), *project["entry-points"]["pytest11"].values()]
    assert "pytest_evalmine.commands.mcp.server:main" in targets
    for target in targets:
        module, _, attribute = target.partition(":")
        loaded = importlib.import_module(module)
        assert not attribute or callable(getattr(loaded, attribute, None)), target


def test_suite_pipeline_imports_only_earlier_stages() -> None:
    graph = package_graph(typing_too=False)
    stages = [f"{NAME}.suite.{stage}" for stage in SUITE_PIPELINE]
    assert all(stage in graph for stage in stages), sorted(set(stages) - set(graph))
    upward = [
        f"{stage} reaches {later}"
        for rank, stage in enumerate(stages)
        for later in stages[rank + 1 :]
        if later in reachable(graph, stage)
    ]
    assert upward == []


def test_loading_a_suite_enters_each_stage_once() -> None:
    """load_suite calls one function of each stage module, in pipeline order, and nothing
    else of the package: read on the example suite, which has a schema file, a cases file,
    variants and labels, so every stage has work to do."""
    import sys

    from pytest_evalmine.suite.loader import load_suite

    code = load_suite.__code__
    entered: list[str] = []

    def record(frame: FrameType, event: str, _arg: object) -> None:
        module = frame.f_globals.get("__name__", "")
        called_by_load_suite = frame.f_back is not None and frame.f_back.f_code is code
        if event == "call" and called_by_load_suite and module.startswith(f"{NAME}."):
            entered.append(module.removeprefix(f"{NAME}.suite."))

    sys.setprofile(record)
    try:
        suite = load_suite(PACKAGE.parent / "examples" / "support-desk.eval.yaml")
    finally:
        sys.setprofile(None)
    assert suite.tasks and suite.labels
    assert entered == SUITE_STAGES


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
    ],
)
def test_cycle_finder_finds_cycles(graph: dict[str, set[str]], expected: list[str] | None) -> None:
    assert find_cycle(graph) == expected


def test_rules_catch_an_upward_and_a_pytest_import(tmp_path: Path) -> None:
    """The checks above would fail on the shapes they guard against."""
    module = tmp_path / "pytest_evalmine" / "stats" / "bad.py"
    module.parent.mkdir(parents=True)
    module.write_text("import pytest\nfrom ..reports import files\n")
    found = imports_of(module, "pytest_evalmine.stats.bad")
    assert "pytest" in found
    assert "pytest_evalmine.reports.files" in found
    assert layer_of("pytest_evalmine.reports.files") > layer_of("pytest_evalmine.stats.bad")


def test_an_import_for_typing_only_is_told_apart(tmp_path: Path) -> None:
    """The pipeline rule reads what a module imports when it runs: a type named under
    ``if TYPE_CHECKING:`` is no import, anything else is, however far it is reached."""
    module = tmp_path / "pytest_evalmine" / "suite" / "model.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "from typing import TYPE_CHECKING\nfrom .template import parse_template\n"
        "if TYPE_CHECKING:\n    from .refs import SchemaRefs\n"
    )
    name = "pytest_evalmine.suite.model"
    assert "pytest_evalmine.suite.refs" in imports_of(module, name)
    assert "pytest_evalmine.suite.refs" not in imports_of(module, name, typing_too=False)
    assert "pytest_evalmine.suite.template" in imports_of(module, name, typing_too=False)
    graph = {"model": {"template"}, "template": {"problems", "reading"}, "reading": set()}
    assert reachable(graph, "model") == {"template", "problems", "reading"}


def test_public_names_are_lazy_and_importable() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pytest_evalmine as p\n"
        "assert 'pytest_evalmine.adapters.base' not in sys.modules\n"
        "from pytest_evalmine import AdapterRegistry, Request, Response, Usage, EvalClient\n"
        "assert Response.__module__ == 'pytest_evalmine.adapters.base'\n"
        "print(sorted(p.__all__))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "AdapterRegistry" in result.stdout


# A contributor's clone has nothing beside it: the package and its docs cite public sources
# and name the EVALMINE_DATA override, never a folder next to this repository.
OUTSIDE_THE_REPOSITORY = re.compile(r"(^|[^.\w])\.\./shared\b|/work/shared\b|/shared/reference/")
PUBLISHED = [PACKAGE, PACKAGE.parent / "docs", PACKAGE.parent / "README.md"]
PUBLISHED.append(PACKAGE.parent / "CONTRIBUTING.md")


def published_files() -> list[Path]:
    files: list[Path] = []
    for root in PUBLISHED:
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        files += [f for f in candidates if f.suffix in {".py", ".md", ".yaml", ".json", ".js"}]
    return files


def test_the_package_and_docs_name_no_path_outside_the_repository() -> None:
    files = published_files()
    assert any(f.name == "anthropic.py" for f in files) and any(f.name == "spec.md" for f in files)
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE_THE_REPOSITORY.search(line)
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("line", "outside"),
    [
        ("see /work/shared/reference/wire-formats.md", True),
        ("looked in <repo>/../shared/data", True),
        ("a bare ../shared/data path", True),
        ("shared by every worker", False),
        ("EVALMINE_DATA points at the data sets", False),
    ],
)
def test_the_outside_path_rule_tells_one_from_the_other(line: str, outside: bool) -> None:
    assert bool(OUTSIDE_THE_REPOSITORY.search(line)) is outside
