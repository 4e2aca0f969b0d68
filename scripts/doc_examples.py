"""The docs' output examples, regenerated from real runs of the example suite on the fake adapter,
and the docs' commands, run as written.

Each example is a block between two markers in README.md or a page of the user guide
(docs/guide/*.md), each block in one place:

    <!-- generated: NAME (a note for maintainers) -->
    ```
    ...what a real run printed, masked...
    ```
    <!-- end generated -->

``--write`` replaces every marked block with what the tool prints now; ``--check`` exits 1 with
a unified diff when a block drifted (tests/test_doc_examples.py runs it). Nothing else of the
files is touched, and each file is read and written back at once, so edits elsewhere in it
survive.

The runs happen in a temporary folder (a copy of examples/, its own EVALMINE_HOME, no plugin
but ours, 80 columns), so the repository's reports/ and cache are never touched. Only what
differs between machines or runs is masked: the run token (time and random part) of run ids,
timestamps, the temporary folder, durations and latencies (the fake adapter's latency is
measured wall-clock time). Every figure the tool computes stays as printed.

Every `pytest ...` or `evalmine ...` line of a ```bash block in those files runs as written
(``doc_commands`` finds them, ``run_doc_commands`` runs them in a copy of the project, in
order, after one run of the example suite) unless its comment, or the comment lines just
above it, say what it needs (`# needs ANTHROPIC_API_KEY`, a server, run ids); `# exits N`
names an exit code other than 0. tests/test_guide.py runs them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
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
GUIDE = REPO / "docs" / "guide"
EXAMPLE_SUITE = "examples/support-desk.eval.yaml"
WIDTH = 80  # what a CI log or a pipe gets: the width the docs promise the summary fits
JSON_WIDTH = 92  # the MCP transcript's JSON, wrapped where it stops fitting a docs line
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
# The front page's excerpt of the same run: the sections that answer "did it help, and can the
# number be trusted", the lines of what it cost and called, and the run's last lines.
FRONT_PAGE_SECTIONS = (
    "-- Calibration --",
    "-- Win rates (candidate vs baseline) --",
    "-- Paired comparison (per case, stratified by task) --",
)
FRONT_PAGE_LINES = ("cost:", "calls:")
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


def front_page(lines: list[str]) -> list[str]:
    """The summary's FRONT_PAGE_SECTIONS and FRONT_PAGE_LINES (each with the indented lines
    continuing it) and everything before and after the summary's sections; one ELIDED where
    lines were left out."""
    shown: list[str] = []
    keeping = True  # the lines before the first section: pytest's progress, the summary's head
    line_kept = False
    for line in lines:
        if line.startswith(("-- ", "report:", "=")):
            keeping = line in FRONT_PAGE_SECTIONS or not line.startswith("-- ")
            line_kept = False
        elif not keeping and not line.startswith(" "):
            line_kept = line.startswith(FRONT_PAGE_LINES)
        if keeping or line_kept:
            shown.append(line)
        elif shown[-1:] != [ELIDED]:
            shown.append(ELIDED)
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
    head = [f"$ {' '.join(PYTEST_COMMAND)}", ELIDED]
    return {
        "run-summary": Block("\n".join([*head, *front_page(first)])),
        "run-output": Block("\n".join([*head, *excerpt(first)])),
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


# The named-run walkthrough: one name given to two runs, a prompt edited in between.
RUN_NAME = "nightly"
EDIT = ("polite and empathetic", "warm, polite and empathetic")  # in the polite-rewrite prompt
# What the command line shows of it: the same edit, as a user's shell would make it.
EDIT_COMMAND = f"sed -i 's/{EDIT[0]}/{EDIT[1]}/' {EXAMPLE_SUITE}"
# `evalmine runs` prints the date to the minute; `compare` prints latency deltas (measured).
MINUTE = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d\b")
MINUTE_MASK = "yyyy-mm-dd hh:mm"
LATENCY_DELTA = re.compile(r"\b(p50|p95) [+-]\d+ ms\b")
LATENCY_DELTA_MASK = r"\1 +N ms"


def named_runs_block(tmp: Path) -> dict[str, Block]:
    """Two runs named alike, a prompt edited between them; `evalmine runs` lists both under
    the name, and `evalmine compare NAME~1 NAME` says what the edit changed."""
    project, home = new_project(tmp, "named"), tmp / "home-named"
    env = child_environment(home)
    suite = project / EXAMPLE_SUITE
    named = [*PYTEST_COMMAND, f"--evalmine-run-name={RUN_NAME}"]
    shown: list[str] = []

    def shell(words: list[str], argv: list[str], keep_from: str | None = None) -> None:
        output = run(argv, project, env, expect=0)
        lines = [
            LATENCY_DELTA.sub(LATENCY_DELTA_MASK, MINUTE.sub(MINUTE_MASK, line))
            for line in mask(output, tmp).splitlines()
        ]
        if keep_from is not None:  # a run: its last lines, where its reports are
            start = next(i for i, line in enumerate(lines) if line.startswith(keep_from))
            lines = [ELIDED, *run_lines("collected 0 items\n" + "\n".join(lines[start:]), tmp)]
        shown.extend([f"$ {' '.join(words)}", *lines])

    pytest_argv = [sys.executable, "-m", *named, "-p", "pytest_evalmine.plugin"]
    shell(named, pytest_argv, keep_from="report:")
    text = suite.read_text()
    if EDIT[0] not in text:
        raise RuntimeError(f"{EXAMPLE_SUITE} no longer says {EDIT[0]!r}: change EDIT")
    suite.write_text(text.replace(EDIT[0], EDIT[1], 1))
    shown.append(f"$ {EDIT_COMMAND}")
    shell(named, pytest_argv, keep_from="report:")
    cli = [sys.executable, "-m", "pytest_evalmine.commands.cli"]
    for words in (["runs", "support-desk"], ["compare", f"{RUN_NAME}~1", RUN_NAME]):
        shell(["evalmine", *words], [*cli, *words])
    return {"named-runs": Block("\n".join(shown))}


GENERATORS: list[Callable[[Path], dict[str, Block]]] = [
    terminal_blocks,
    unknown_key_block,
    mcp_block,
    named_runs_block,
]


def generate(workdir: Path | None = None) -> dict[str, Block]:
    """Every block, from real runs in ``workdir`` (a new temporary folder when None)."""
    if workdir is not None:
        return {name: block for make in GENERATORS for name, block in make(workdir).items()}
    with tempfile.TemporaryDirectory(prefix="evalmine-docs-") as tmp:
        return generate(Path(tmp))


# the markdown ------------------------------------------------------------------------------
def documents() -> list[Path]:
    """The files whose blocks and commands are kept true: README.md and the guide's pages."""
    return [README, *sorted(GUIDE.glob("*.md"))]


def shown_path(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def marked_blocks(text: str, shown: str = "README.md") -> dict[str, tuple[int, int]]:
    """Each block's name -> the lines between its markers (start, end: END's index)."""
    lines = text.splitlines()
    found: dict[str, tuple[int, int]] = {}
    for index, line in enumerate(lines):
        begin = BEGIN.match(line)
        if not begin:
            continue
        end = next((j for j in range(index + 1, len(lines)) if lines[j] == END), None)
        if end is None or begin["name"] in found:
            raise ValueError(f"{shown}:{index + 1}: {begin['name']!r} unclosed or repeated")
        found[begin["name"]] = (index + 1, end)
    return found


def fenced(block: Block) -> list[str]:
    return [f"```{block.fence}", *block.text.splitlines(), "```"]


def rewritten(text: str, blocks: dict[str, Block], shown: str = "README.md") -> str:
    """``text`` with every marked block replaced; a marker without a block is an error (a
    renamed block must not go stale silently)."""
    spans = marked_blocks(text, shown)
    if not set(spans) <= set(blocks):
        raise ValueError(
            f"{shown} markers {sorted(set(spans) - set(blocks))} do not match the generated "
            f"blocks {sorted(blocks)}"
        )
    lines = text.splitlines()
    for name, (start, end) in sorted(spans.items(), key=lambda item: -item[1][0]):
        lines[start:end] = fenced(blocks[name])
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def placements(texts: dict[str, str], blocks: dict[str, Block]) -> dict[str, str]:
    """Each block's name -> the one document holding its markers; a block marked in two
    documents, in none, or a marker without a block is an error."""
    placed: dict[str, str] = {}
    for shown, text in texts.items():
        for name in marked_blocks(text, shown):
            if name in placed:
                raise ValueError(f"block {name!r} is marked in {placed[name]} and in {shown}")
            placed[name] = shown
    if set(placed) != set(blocks):
        raise ValueError(
            f"the docs' markers {sorted(placed)} do not match the generated blocks {sorted(blocks)}"
        )
    return placed


def drift(text: str, blocks: dict[str, Block], shown: str = "README.md") -> str:
    """A unified diff from the text's blocks to what the tool prints now; empty when none
    drifted. Only the blocks marked in ``text`` are compared."""
    lines = text.splitlines()
    spans = marked_blocks(text, shown)
    diffs = []
    for name in sorted(spans):
        start, end = spans[name]
        want = fenced(blocks[name]) if name in blocks else []
        # Words compared, not line breaks: a masked latency of 10 ms or more on a loaded
        # machine wraps a scorecard entry elsewhere without changing what it says.
        if " ".join(want).split() == " ".join(lines[start:end]).split():
            continue
        diffs += difflib.unified_diff(
            lines[start:end],
            want,
            f"{shown} ({name})",
            f"generated ({name})",
            lineterm="",
        )
    return "\n".join(diffs)


# the commands ------------------------------------------------------------------------------
COMMAND = re.compile(r"^(?:\$ )?(?:pytest|evalmine)(?:\s|$)")
NEEDS = re.compile(r"\bneeds\b")
EXITS = re.compile(r"#\s*exits (\d+)\b")
# What may reach a network or a provider: a line naming one must say what it needs.
NETWORKED = re.compile(r"https?://|--evalmine-(?:endpoint|suite|batch)\b")
PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@dataclass(frozen=True)
class DocCommand:
    where: str  # document:line
    text: str  # the command, continuation lines joined, without its comment
    comment: str  # the comment after it and the comment line just above it

    @property
    def needs(self) -> bool:
        return NEEDS.search(self.comment) is not None

    @property
    def expected_exit(self) -> int:
        found = EXITS.search(self.comment)
        return int(found[1]) if found else 0


def split_comment(line: str) -> tuple[str, str]:
    """A shell line -> (the command, its trailing ``# comment``), quotes respected."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip(), line[index:]
    return line.rstrip(), ""


def doc_commands(text: str, shown: str) -> list[DocCommand]:
    """The `pytest` and `evalmine` command lines of the ```bash blocks of ``text``."""
    found: list[DocCommand] = []
    in_bash = False
    above = ""  # the comment lines just above the current line
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line, number = lines[index], index + 1
        index += 1
        if line.startswith("```"):
            in_bash, above = (not in_bash and line.strip() == "```bash"), ""
            continue
        if not in_bash:
            continue
        while line.endswith("\\") and index < len(lines):
            line = line[:-1].rstrip() + " " + lines[index].strip()
            index += 1
        command, comment = split_comment(line.strip())
        if COMMAND.match(command):
            found.append(
                DocCommand(f"{shown}:{number}", command.removeprefix("$ "), f"{above} {comment}")
            )
        # Comment lines just above a command are its comment too.
        above = f"{above} {comment}" if not command and comment else ""
    return found


def unmarked_network_commands(commands: list[DocCommand]) -> list[DocCommand]:
    """Commands that may reach a network or a provider without saying what they need."""
    return [c for c in commands if NETWORKED.search(c.text) and not c.needs]


def command_argv(command: DocCommand) -> list[str]:
    """The argv that runs a documented command with this interpreter and this package."""
    words = shlex.split(command.text)
    if words[0] == "pytest":
        return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *words[1:]]
    return [sys.executable, "-m", "pytest_evalmine.commands.cli", *words[1:]]


def run_doc_commands(commands: list[DocCommand], tmp: Path) -> list[str]:
    """Run every command that needs nothing, in order, in one copy of the project after one
    run of the example suite; the problems found (a wrong exit code, with its output)."""
    project, home = new_project(tmp, "commands"), tmp / "home-commands"
    env = child_environment(home)
    # As a user's shell runs them: pytest loads its installed plugins; no provider key is
    # there, so nothing documented as keyless can spend.
    for name in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", *PROVIDER_KEYS):
        env.pop(name, None)
    pytest_run(project, tmp / "home-commands")
    problems = []
    for command in commands:
        if command.needs:
            continue
        if NETWORKED.search(command.text):
            raise ValueError(f"{command.where}: {command.text!r} may reach a network: # needs ...")
        done = subprocess.run(
            command_argv(command),
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
        if done.returncode != command.expected_exit:
            tail = "\n".join(done.stdout.splitlines()[-15:])
            problems.append(
                f"{command.where}: {command.text} exited {done.returncode}, "
                f"not {command.expected_exit}:\n{tail}"
            )
    return problems


def all_doc_commands() -> list[DocCommand]:
    return [
        command
        for path in documents()
        for command in doc_commands(path.read_text("utf-8"), shown_path(path))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the docs' marked blocks")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when one drifted")
    args = parser.parse_args(argv)
    blocks = generate()
    # Each file read and written back at once: others may be editing the rest of it.
    texts = {shown_path(path): path.read_text("utf-8") for path in documents()}
    placed = placements(texts, blocks)
    if args.write:
        for shown in sorted(set(placed.values())):
            new = rewritten(texts[shown], blocks, shown)
            if new != texts[shown]:
                (REPO / shown).write_text(new, "utf-8")
            count = sum(1 for where in placed.values() if where == shown)
            print(f"{shown}: {count} blocks, {'rewritten' if new != texts[shown] else 'unchanged'}")
        return 0
    difference = "\n".join(
        filter(None, (drift(text, blocks, shown) for shown, text in texts.items()))
    )
    if difference:
        print(difference)
        print("\nThe docs' examples drifted: python scripts/doc_examples.py --write")
        return 1
    print(f"{len(blocks)} blocks in {len(set(placed.values()))} files match a real run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
