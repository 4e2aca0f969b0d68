"""The docs' output examples (README.md and docs/guide/) are what the tool prints now
(scripts/doc_examples.py): each marked block is regenerated from real runs of the example suite
on the fake adapter and compared."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

TERMINAL_WIN_RATE = re.compile(r"gemini-2\.5-flash: ([\d.]+)% \[([\d.]+)%, ([\d.]+)%\]")
MCP_WIN_RATE = re.compile(r'"win_rate": ([\d.]+),\s+"interval": \[([\d.]+), ([\d.]+)\]')
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "doc_examples.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_examples", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def doc_examples() -> ModuleType:
    return load_script()


def documents(doc_examples: ModuleType) -> dict[str, str]:
    return {
        doc_examples.shown_path(path): path.read_text("utf-8") for path in doc_examples.documents()
    }


def block_lines(doc_examples: ModuleType, shown: str, name: str) -> list[str]:
    text = documents(doc_examples)[shown]
    start, end = doc_examples.marked_blocks(text, shown)[name]
    return text.splitlines()[start:end]


def test_the_docs_examples_match_a_real_run(doc_examples: ModuleType, tmp_path: Path) -> None:
    """Two pytest runs, one `evalmine validate`, an MCP session (its run_suite a third run)
    and the named-run walkthrough (two more runs, `evalmine runs` and `compare`)."""
    blocks = doc_examples.generate(tmp_path)
    texts = documents(doc_examples)
    placed = doc_examples.placements(texts, blocks)
    assert placed["run-summary"] == "README.md"
    assert placed["run-output"] == "docs/guide/getting-started.md"
    assert placed["named-runs"] == "docs/guide/comparing-changes.md"
    difference = "\n".join(
        doc_examples.drift(text, blocks, shown) for shown, text in texts.items()
    ).strip()
    assert not difference, (
        "the docs' examples drifted from a real run "
        f"(python scripts/doc_examples.py --write):\n{difference}"
    )
    # The MCP server's run of the same suite has the terminal's win rate and interval.
    (printed,) = TERMINAL_WIN_RATE.findall(blocks["run-output"].text)
    (returned,) = MCP_WIN_RATE.findall(blocks["mcp-transcript"].text)
    for percent, fraction in zip(printed, returned, strict=True):
        assert abs(float(percent) - 100 * float(fraction)) <= 0.1, (printed, returned)
    assert re.search(r"^\+calls: 0 made, \d+ cached", blocks["rerun-diff"].text, re.M)
    named_walkthrough(blocks["named-runs"].text)
    # The front page's excerpt is lines of the whole output, in its order.
    whole = blocks["run-output"].text.splitlines()
    shown = [line for line in blocks["run-summary"].text.splitlines() if line != "..."]
    rest = iter(whole)
    assert all(line in rest for line in shown) and len(shown) < len(whole)


def named_walkthrough(text: str) -> None:
    """The named-run walkthrough: two runs under one name, listed by `evalmine runs` with that
    name, and `evalmine compare nightly~1 nightly` pairing the earlier with the later, naming
    the task whose prompt was edited between them."""
    lines = text.splitlines()
    commands = [line for line in lines if line.startswith("$ ")]
    assert commands == [
        "$ pytest examples/ --evalmine-fake --evalmine-run-name=nightly",
        "$ sed -i 's/polite and empathetic/warm, polite and empathetic/' "
        "examples/support-desk.eval.yaml",
        "$ pytest examples/ --evalmine-fake --evalmine-run-name=nightly",
        "$ evalmine runs support-desk",
        "$ evalmine compare nightly~1 nightly",
    ]
    listed = lines[lines.index("$ evalmine runs support-desk") + 3 :][:2]
    assert [row.split()[1] for row in listed] == ["nightly", "nightly"]
    first, second = (row.split()[0] for row in listed)
    assert first != second
    compared = lines[lines.index("$ evalmine compare nightly~1 nightly") + 1 :]
    assert compared[0] == f"{first} -> {second}"
    # The edit is the task's prompt, which its variant `concise` is built from too.
    assert (
        "tasks changed: polite-rewrite (prompt; variant concise: prompt); only in A: none; "
        "only in B: none" in compared
    )


def test_the_summary_fits_80_columns_as_the_docs_say(doc_examples: ModuleType) -> None:
    for shown, name in [
        ("docs/guide/getting-started.md", "run-output"),
        ("README.md", "run-summary"),
    ]:
        lines = block_lines(doc_examples, shown, name)
        summary = lines[lines.index("=" * 35 + " evalmine " + "=" * 35) :]
        assert len(summary) > 30, shown
        # A path is never split: the page's (about 85 characters) has a line of its own.
        wide = [line for line in summary if len(line) > 80]
        assert all(" " not in line.strip() and line.endswith("/report.html") for line in wide)
        assert len(wide) <= 1, shown


BLOCKED = """intro
<!-- generated: one (a note) -->
```
old one
```
<!-- end generated -->
middle, edited by someone else
<!-- generated: two -->
```diff
old two
```
<!-- end generated -->
end
"""


def test_only_the_marked_blocks_are_rewritten(doc_examples: ModuleType) -> None:
    Block = doc_examples.Block
    blocks = {"one": Block("new one\nline 2"), "two": Block("+new two", fence="diff")}
    new = doc_examples.rewritten(BLOCKED, blocks)
    assert new == BLOCKED.replace("old one", "new one\nline 2").replace("old two", "+new two")
    assert doc_examples.drift(new, blocks) == ""
    difference = doc_examples.drift(BLOCKED, blocks)
    assert "-old one" in difference and "+new one" in difference and "+new two" in difference


def test_a_marker_without_its_block_is_an_error(doc_examples: ModuleType) -> None:
    with pytest.raises(ValueError, match="do not match"):
        doc_examples.rewritten(BLOCKED, {"one": doc_examples.Block("x")})
    with pytest.raises(ValueError, match="unclosed"):
        doc_examples.marked_blocks("<!-- generated: one -->\n```\nx\n```\n")


def test_each_block_is_marked_in_exactly_one_document(doc_examples: ModuleType) -> None:
    Block = doc_examples.Block
    blocks = {"one": Block("1"), "two": Block("2")}
    one_only = BLOCKED.split("middle")[0]
    assert doc_examples.placements({"a.md": BLOCKED, "b.md": "no block"}, blocks) == {
        "one": "a.md",
        "two": "a.md",
    }
    with pytest.raises(ValueError, match=r"'one' is marked in a\.md and in b\.md"):
        doc_examples.placements({"a.md": BLOCKED, "b.md": one_only}, blocks)
    with pytest.raises(ValueError, match="do not match"):
        doc_examples.placements({"a.md": one_only}, blocks)


def test_the_front_page_keeps_its_sections_and_says_where_it_cut(
    doc_examples: ModuleType,
) -> None:
    lines = [
        "evalmine: 5/5 answers",
        "-- Calibration --",
        "kappa 0.5",
        "-- Scorecard --",
        "m1: passed 5/5;",
        "    score 1.00",
        "cost: $0.01 this run;",
        "    cap $2",
        "calls: 5 made",
        "-- Per task, worst first --",
        "t1: 50%",
        "report: reports/x/",
        "    report.md",
        "= 5 passed =",
    ]
    assert doc_examples.front_page(lines) == [
        "evalmine: 5/5 answers",
        "-- Calibration --",
        "kappa 0.5",
        "...",
        "cost: $0.01 this run;",
        "    cap $2",
        "calls: 5 made",
        "...",
        "report: reports/x/",
        "    report.md",
        "= 5 passed =",
    ]


def test_an_excerpt_keeps_the_first_entries_and_says_where_it_cut(
    doc_examples: ModuleType,
) -> None:
    lines = [
        "-- Label next --",
        "5 pairs where a label would teach the most:",
        *[line for n in range(5) for line in (f"- pair {n}", f"    continued {n}")],
        "(the terminal shows 5)",
        "-- Paired comparison --",
        "- not an entry of Label next",
    ]
    assert doc_examples.excerpt(lines) == [
        *lines[:8],
        "...",
        "(the terminal shows 5)",
        "-- Paired comparison --",
        "- not an entry of Label next",
    ]


def test_masks_keep_figures_and_hide_what_changes_between_runs(
    doc_examples: ModuleType, tmp_path: Path
) -> None:
    text = (
        f"run 20261201T110553.164Z_968cc5-b78057fe-6d0f9ab7 at 2026-12-01T11:07:06+00:00\n"
        f"latency p50 12 ms (n=28); p95 0 ms; kappa -0.33 [-0.51, -0.05]\n{tmp_path}/mcp"
    )
    assert doc_examples.mask(text, tmp_path).splitlines() == [
        "run yyyymmddThhmmss.mmmZ_xxxxxx-b78057fe-6d0f9ab7 at yyyy-mm-ddThh:mm:ss+00:00",
        "latency p50 N ms (n=28); p95 N ms; kappa -0.33 [-0.51, -0.05]",
        "<tmp>/mcp",
    ]
    assert doc_examples.pytest_separator("56 passed in <T>s") == (
        "=" * 30 + " 56 passed in <T>s " + "=" * 31
    )


def test_a_block_wrapped_elsewhere_has_not_drifted(doc_examples: ModuleType) -> None:
    text = "x\n<!-- generated: demo -->\n```\na b\nc\n```\n<!-- end generated -->\n"
    rewrapped = doc_examples.Block("a\nb c")
    assert doc_examples.drift(text, {"demo": rewrapped}) == ""
    changed = doc_examples.Block("a b\nd")
    assert "+d" in doc_examples.drift(text, {"demo": changed})
