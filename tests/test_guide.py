"""The README is a front page and the user guide (docs/guide/) holds the rest (issue 29): the
README stays short, every relative link of the docs resolves, and every `pytest` or `evalmine`
command of their bash blocks runs as written or says what it needs (issue 31)."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from .test_doc_examples import load_script

ROOT = Path(__file__).resolve().parents[1]
README_MOST_LINES = 200
# The README's two commands, as .ci/run runs them from a fresh clone.
THE_TWO_COMMANDS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . "
    "&& pytest examples/ --evalmine-fake",
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev]" && pytest -n 2',
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


@pytest.fixture(scope="module")
def doc_examples() -> ModuleType:
    return load_script()


def linked_documents() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *sorted((ROOT / "docs").rglob("*.md")),
    ]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as -."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text("utf-8"), flags=re.M | re.S)
    return {slug(heading) for heading in HEADING.findall(text)}


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text("utf-8"), flags=re.M | re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{path.relative_to(root)}: {target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{path.relative_to(root)}: {target}: no such heading")
    return broken


def test_the_readme_is_a_front_page(doc_examples: ModuleType) -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= README_MOST_LINES
    lines = readme.splitlines()
    for command in THE_TWO_COMMANDS:
        assert command in lines, f"README's command changed: {command}"
    assert set(doc_examples.marked_blocks(readme)) == {"run-summary"}
    # It links every page of the guide.
    guide = {path.name for path in (ROOT / "docs" / "guide").glob("*.md")} - {"index.md"}
    linked = {Path(target.partition("#")[0]).name for target in LINK.findall(readme)}
    assert guide <= linked, sorted(guide - linked)


def test_the_ci_runs_the_readmes_two_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    assert 'python -m pip install --quiet -e ".[dev]"' in ci
    assert "\npytest examples/ --evalmine-fake -q -p no:cacheprovider\n" in ci
    assert "\npytest -n 2 || status=$?\n" in ci


def test_every_relative_link_of_the_docs_resolves() -> None:
    documents = linked_documents()
    assert ROOT / "docs" / "guide" / "index.md" in documents
    broken = [problem for path in documents for problem in broken_links(path)]
    assert not broken, "\n".join(broken)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## What changed, and `compare`\n")
    page.write_text(
        "[ok](other.md#what-changed-and-compare) [a](missing.md) [b](other.md#nothing)\n"
        "[web](https://example.com) [self](#a-heading)\n\n## A heading\n"
        "```bash\n[not a link](in-a-block.md)\n```\n"
    )
    assert broken_links(page, tmp_path) == [
        "page.md: missing.md: no such file",
        "page.md: other.md#nothing: no such heading",
    ]


SAMPLE = """text
```bash
pytest examples/ --evalmine-fake -m "evalmine(kind='#x')"   # a comment
# needs a key and
# a server:
pytest evals/ --evalmine-models=a/b \\
    --evalmine-endpoint=x=http://h,free
export KEY=...   # not a command of ours
evalmine plan s.yaml --delta 5  # exits 4
python3 -m venv .venv && pytest -n 2
```
```yaml
pytest: not a command
```
"""


def test_the_docs_commands_are_found_with_their_comments(doc_examples: ModuleType) -> None:
    found = doc_examples.doc_commands(SAMPLE, "x.md")
    assert [(c.where, c.text, c.needs, c.expected_exit) for c in found] == [
        ("x.md:3", "pytest examples/ --evalmine-fake -m \"evalmine(kind='#x')\"", False, 0),
        (
            "x.md:6",
            "pytest evals/ --evalmine-models=a/b --evalmine-endpoint=x=http://h,free",
            True,
            0,
        ),
        ("x.md:9", "evalmine plan s.yaml --delta 5", False, 4),
    ]
    unmarked = doc_examples.DocCommand("x.md:1", "pytest --evalmine-suite=gsm8k-160", "")
    assert doc_examples.unmarked_network_commands([*found, unmarked]) == [unmarked]


def test_every_command_of_the_docs_runs_as_written(
    doc_examples: ModuleType, tmp_path: Path
) -> None:
    """Each command that needs nothing runs in a copy of the project and exits as documented;
    a command that does not (the last, added here) is reported with its place."""
    commands = doc_examples.all_doc_commands()
    assert not doc_examples.unmarked_network_commands(commands)
    runnable = [command for command in commands if not command.needs]
    assert len(runnable) >= 10 and any(c.text.startswith("pytest ") for c in runnable)
    wrong = doc_examples.DocCommand("wrong.md:1", "evalmine runs no-such-suite", "")
    problems = doc_examples.run_doc_commands([*commands, wrong], tmp_path)
    assert len(problems) == 1 and problems[0].startswith(
        "wrong.md:1: evalmine runs no-such-suite exited 4, not 0"
    ), "\n\n".join(problems)


def test_the_variant_example_runs_on_the_example_suite(
    doc_examples: ModuleType, tmp_path: Path
) -> None:
    """The guide's `MODEL@VARIANT` example names the example suite, which declares the
    variant: run at $0 it exits 0 (it exited 10, 'not a declared variant', when the suite
    declared none), and it is not a command of another suite's folder."""
    variant = [c for c in doc_examples.all_doc_commands() if "@concise" in c.text]
    assert variant and all(c.text.startswith("pytest examples/ ") for c in variant)
    runnable = [c for c in variant if not c.needs]
    assert runnable, "a keyless (--evalmine-fake) form of the variant example"
    assert doc_examples.run_doc_commands(runnable, tmp_path) == []
