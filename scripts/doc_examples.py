"""README's output examples, regenerated from real runs of the example suite on the fake adapter.

Each example is a block between two markers in README.md:

    <!-- generated: NAME (a note for maintainers) -->
    ```
    ...what a real run printed, masked...
    ```
    <!-- end generated -->

``--write`` replaces every marked block with what the tool prints now; ``--check`` exits 1 with
a unified diff when a block drifted (tests/test_doc_examples.py runs it). Nothing else of the
file is touched, and the file is read and written back at once, so edits elsewhere in it
survive.

The runs happen in a temporary folder (a copy of examples/, its own EVALMINE_HOME, no plugin
but ours, 80 columns), so the repository's reports/ and cache are never touched. Only what
differs between machines or runs is masked: the run token (time and random part) of run ids,
timestamps, the temporary folder, durations and latencies (the fake adapter's latency is
measured wall-clock time). Every figure the tool computes stays as printed.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
README = REPO / "README.md"
EXAMPLE_SUITE = "examples/support-desk.eval.yaml"
WIDTH = 80  # what a CI log or a pipe gets: the width the README promises the summary fits
JSON_WIDTH = 92  # the MCP transcript's JSON, wrapped where it stops fitting a README line
CHILD_TIMEOUT_S = 300

BEGIN = re.compile(r"^<!-- generated: (?P<name>[a-z0-9-]+)\b.*-->$")
END = "<!-- end generated -->"
ELIDED = "..."  # a line this script puts where it leaves entries out

# Masks: the spec's own notation for a run token (section 11), so the run id's format shows.
RUN_TOKEN = re.compile(r"\b\d{8}T\d{6}\.\d{3}Z_[0-9a-f]{6}\b")
RUN_TOKEN_MASK = "yyyymmddThhmmss.mmmZ_xxxxxx"
TIMESTAMP = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
TIMESTAMP_MASK = "yyyy-mm-ddThh:mm:ss+00:00"
LATENCY = re.compile(r"\b(p50|p95) \d+ ms\b")
# One letter for the digits, so the masked line keeps the width it had when the tool wrapped it.
LATENCY_MASK = r"\1 N ms"
PYTEST_FINAL = re.compile(r"^=+ (?P<outcome>.+) in \d+\.\d+s(?: \(\d+:\d\d:\d\d\))? =+$")
DURATION_MASK = "<T>s"
# A live progress line printed every 5 s while waiting (how many depends on the machine's
# speed); the line with the total (done == total) is printed once, always.
PROGRESS = re.compile(r"^evalmine: (?P<done>\d+)/(?P<total>\d+) .*spent$")
# Sections of the run's summary shown in part: their first entries, then ELIDED.
EXCERPTS = {
    "-- Per task, worst first --": (re.compile(r"^\S"), 3),
    "-- Label next --": (re.compile(r"^- "), 3),
}
# The unknown-key example: a typo in the third task of a copy of the example suite.
TYPO_FILE = "examples/x.eval.yaml"
TYPO_TASK = 2
PYTEST_COMMAND = ("pytest", "examples/", "--evalmine-fake")


@dataclass(frozen=True)
class Block:
    text: str
    fence: str = ""  # the code fence's language


# running things -----------------------------------------------------------------------------
def child_environment(home: Path) -> dict[str, str]:
    """The caller's environment without anything that changes what a run prints (pytest and
    evalmine settings, colour, width), plus a cache of the run's own and no plugin but ours:
    what `pip install -e .` and the README's command give."""
    dropped = ("PYTEST_", "EVALMINE_", "COV_CORE_")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(dropped)
        and name not in {"COLUMNS", "LINES", "PY_COLORS", "FORCE_COLOR", "NO_COLOR"}
    }
    env.update(
        COLUMNS=str(WIDTH),
        LINES="24",
        PY_COLORS="0",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        EVALMINE_HOME=str(home),
    )
    return env


def new_project(tmp: Path, name: str) -> Path:
    """A project folder holding a copy of examples/ and an empty pytest.ini, so pytest's
    rootdir is the project whatever lies above the temporary folder."""
    project = tmp / name
    shutil.copytree(EXAMPLES, project / "examples")
    (project / "pytest.ini").write_text("[pytest]\n")
    return project


def run(command: list[str], cwd: Path, env: dict[str, str], expect: int) -> str:
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != expect:
        raise RuntimeError(
            f"{' '.join(command)} exited {done.returncode}, not {expect}:\n{done.stdout}"
        )
    return done.stdout


def pytest_run(project: Path, home: Path) -> str:
    """`pytest examples/ --evalmine-fake`, as the README's first command runs it."""
    command = [sys.executable, "-m", *PYTEST_COMMAND, "-p", "pytest_evalmine.plugin"]
    return run(command, project, child_environment(home), expect=0)


# masking and excerpts ----------------------------------------------------------------------
def mask(text: str, tmp: Path) -> str:
    text = RUN_TOKEN.sub(RUN_TOKEN_MASK, text)
    text = TIMESTAMP.sub(TIMESTAMP_MASK, text)
    text = LATENCY.sub(LATENCY_MASK, text)
    # The temporary folder, also as the OS spells it after resolving symlinks (macOS /private).
    for spelling in sorted({str(tmp.resolve()), str(tmp)}, key=len, reverse=True):
        text = text.replace(spelling, "<tmp>")
    return text


def pytest_separator(title: str, width: int = WIDTH) -> str:
    """A line like pytest's ``==== title ====`` (its terminal writer's own arithmetic)."""
    half = max((width - len(title) - 2) // 2, 1)
    line = f"{'=' * half} {title} {'=' * half}"
    return line + "=" if len(line) + 1 <= width else line


def run_lines(output: str, tmp: Path) -> list[str]:
    """A run's output from pytest's first progress line on (the header above it names this
    machine's Python and paths), masked, without the live progress lines."""
    lines = mask(output, tmp).splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"collected \d+ items?", line))
    kept = []
    for line in lines[start + 1 :]:
        progress = PROGRESS.match(line)
        if progress and progress["done"] != progress["total"]:
            continue
        final = PYTEST_FINAL.match(line)
        if final:
            line = pytest_separator(f"{final['outcome']} in {DURATION_MASK}")
        kept.append(line)
    while kept and not kept[0]:
        kept.pop(0)
    return kept


def excerpt(lines: list[str]) -> list[str]:
    """The sections in EXCERPTS cut to their first entries (an entry: its first line and the
    indented lines continuing it), with ELIDED where the rest was."""
    shown: list[str] = []
    rule: tuple[re.Pattern[str], int] | None = None
    entries = 0
    eliding = False
    for line in lines:
        if line.startswith(("-- ", "report:", "=")):
            rule, entries, eliding = EXCERPTS.get(line), 0, False
        elif rule is not None:
            starts_entry = rule[0].match(line) is not None
            if starts_entry:
                entries += 1
                eliding = entries > rule[1]
                if eliding and entries == rule[1] + 1:
                    shown.append(ELIDED)
            elif not line.startswith(" "):
                eliding = False  # a line of the section's own, after its entries
            if eliding:
                continue
        shown.append(line)
    return shown


# the blocks --------------------------------------------------------------------------------
def terminal_blocks(tmp: Path) -> dict[str, Block]:
    """The first run's summary, and how the second (cached) run's output differs from it."""
    project, home = new_project(tmp, "project"), tmp / "home"
    first = run_lines(pytest_run(project, home), tmp)
    second = run_lines(pytest_run(project, home), tmp)
    diff = difflib.unified_diff(first, second, "first run", "second run", n=0, lineterm="")
    changed = [ELIDED if line.startswith("@@") else line for line in diff]
    # The command, then ELIDED for pytest's header (this machine's Python, paths, plugins).
    shown = [f"$ {' '.join(PYTEST_COMMAND)}", ELIDED, *excerpt(first)]
    return {
        "run-output": Block("\n".join(shown)),
        "rerun-diff": Block("\n".join(changed), fence="diff"),
    }


def unknown_key_block(tmp: Path) -> dict[str, Block]:
    """`evalmine validate` on a copy of the example suite whose third task misspells
    `prompt`."""
    project = new_project(tmp, "typo")
    suite = project / EXAMPLE_SUITE
    lines = suite.read_text().splitlines(keepends=True)
    prompts = [i for i, line in enumerate(lines) if line.startswith("    prompt:")]
    lines[prompts[TYPO_TASK]] = lines[prompts[TYPO_TASK]].replace("prompt:", "promt:", 1)
    suite.unlink()
    (project / TYPO_FILE).write_text("".join(lines))
    command = ["evalmine", "validate", TYPO_FILE]
    output = run(
        [sys.executable, "-m", "pytest_evalmine.commands.cli", *command[1:]],
        project,
        child_environment(tmp / "home-typo"),
        expect=2,
    )
    if f"$.tasks[{TYPO_TASK}]: unknown key 'promt'" not in output:
        raise RuntimeError(f"the typo was not reported as an unknown key:\n{output}")
    shown = ["$ " + " ".join(command), *mask(output, tmp).splitlines()]
    return {"unknown-key": Block("\n".join(shown))}


class Masked(str):
    """A value shown bare in the transcript's JSON (it is not what the server sent)."""


def shown_value(value: Any, key: str = "") -> Any:
    """A tool's result as the transcript shows it: latencies masked (measured time), floats
    rounded to 4 places (the last digits of a sum can differ between numpy builds)."""
    if "latency" in key and isinstance(value, (int, float)):
        return Masked("<latency>")
    if isinstance(value, dict):
        return {k: shown_value(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [shown_value(v, key) for v in value]
    if isinstance(value, float):
        return round(value, 4)
    return value


def inline_json(value: Any) -> str:
    if isinstance(value, Masked):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {inline_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(inline_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def wrapped_json(value: Any, indent: int = 0, column: int = 0) -> list[str]:
    """JSON a container a line, each container inline when it fits JSON_WIDTH from
    ``column`` (where it starts); the first line carries no indent of its own."""
    one_line = inline_json(value)
    if column + len(one_line) <= JSON_WIDTH or not isinstance(value, (dict, list)) or not value:
        return [one_line]
    pairs = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    lines = [opening]
    for position, (key, inner) in enumerate(pairs):
        prefix = " " * (indent + 2) + ("" if key is None else f"{json.dumps(key)}: ")
        inner_lines = wrapped_json(inner, indent + 2, len(prefix))
        lines += [prefix + inner_lines[0], *inner_lines[1:]]
        if position < len(pairs) - 1:
            lines[-1] += ","
    return [*lines, " " * indent + closing]


MCP_CALLS: list[dict[str, Any]] = [
    {"suite": EXAMPLE_SUITE, "fake": True},
    {"suite": "../../etc/passwd"},
    {"suite": EXAMPLE_SUITE, "max_cost": 20},
]


def mcp_block(tmp: Path) -> dict[str, Block]:
    """A session with the real `evalmine-mcp` over stdio, driven by the MCP SDK's client:
    list the tools, run the example suite on the fake adapter, two refusals."""
    import anyio
    import mcp

    from pytest_evalmine.commands.mcp.limits import ROOT_ENV

    project = new_project(tmp, "mcp")
    env = child_environment(tmp / "home-mcp")
    env[ROOT_ENV] = str(project)
    server = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "pytest_evalmine.commands.mcp.server"],
        env=env,
        cwd=str(project),
    )

    async def session() -> list[str]:
        lines = ["> tools/list"]
        async with mcp.Client(server) as client:
            for tool in (await client.list_tools()).tools:
                lines.append(f"  {tool.name}({', '.join(tool.input_schema['properties'])})")
            for arguments in MCP_CALLS:
                result = await client.call_tool("run_suite", arguments)
                if result.is_error:
                    raise RuntimeError(f"run_suite {arguments}: {result.content}")
                lines.append(f"> tools/call run_suite {json.dumps(arguments)}")
                lines += wrapped_json(shown_value(result.structured_content))
        return lines

    return {"mcp-transcript": Block(mask("\n".join(anyio.run(session)), tmp))}


GENERATORS: list[Callable[[Path], dict[str, Block]]] = [
    terminal_blocks,
    unknown_key_block,
    mcp_block,
]


def generate(workdir: Path | None = None) -> dict[str, Block]:
    """Every block, from real runs in ``workdir`` (a new temporary folder when None)."""
    if workdir is not None:
        return {name: block for make in GENERATORS for name, block in make(workdir).items()}
    with tempfile.TemporaryDirectory(prefix="evalmine-docs-") as tmp:
        return generate(Path(tmp))


# the markdown ------------------------------------------------------------------------------
def marked_blocks(text: str) -> dict[str, tuple[int, int]]:
    """Each block's name -> the lines between its markers (start, end: END's index)."""
    lines = text.splitlines()
    found: dict[str, tuple[int, int]] = {}
    for index, line in enumerate(lines):
        begin = BEGIN.match(line)
        if not begin:
            continue
        end = next((j for j in range(index + 1, len(lines)) if lines[j] == END), None)
        if end is None or begin["name"] in found:
            raise ValueError(f"README.md:{index + 1}: {begin['name']!r} unclosed or repeated")
        found[begin["name"]] = (index + 1, end)
    return found


def fenced(block: Block) -> list[str]:
    return [f"```{block.fence}", *block.text.splitlines(), "```"]


def rewritten(text: str, blocks: dict[str, Block]) -> str:
    """``text`` with every marked block replaced; a marker without a block, or a block without
    a marker, is an error (a renamed block must not go stale silently)."""
    spans = marked_blocks(text)
    if set(spans) != set(blocks):
        raise ValueError(
            f"README.md markers {sorted(spans)} do not match the generated blocks {sorted(blocks)}"
        )
    lines = text.splitlines()
    for name, (start, end) in sorted(spans.items(), key=lambda item: -item[1][0]):
        lines[start:end] = fenced(blocks[name])
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def drift(text: str, blocks: dict[str, Block]) -> str:
    """A unified diff from README's blocks to what the tool prints now; empty when none
    drifted."""
    lines = text.splitlines()
    spans = marked_blocks(text)
    diffs = []
    for name in sorted(set(spans) | set(blocks)):
        start, end = spans.get(name, (0, 0))
        want = fenced(blocks[name]) if name in blocks else []
        # Words compared, not line breaks: a masked latency of 10 ms or more on a loaded
        # machine wraps a scorecard entry elsewhere without changing what it says.
        if " ".join(want).split() == " ".join(lines[start:end]).split():
            continue
        diffs += difflib.unified_diff(
            lines[start:end],
            want,
            f"README.md ({name})",
            f"generated ({name})",
            lineterm="",
        )
    return "\n".join(diffs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite README.md's marked blocks")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when one drifted")
    args = parser.parse_args(argv)
    blocks = generate()
    # Read and write back at once: others may be editing the rest of the file.
    text = README.read_text()
    if args.write:
        new = rewritten(text, blocks)
        if new != text:
            README.write_text(new)
        print(f"README.md: {len(blocks)} blocks, {'rewritten' if new != text else 'unchanged'}")
        return 0
    difference = drift(text, blocks)
    if difference:
        print(difference)
        print("\nREADME.md's examples drifted: python scripts/doc_examples.py --write")
        return 1
    print(f"README.md: {len(blocks)} blocks match a real run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
