"""The terminal summary: the compact form of report.md, in the same order, fitted to the
terminal's width (80 columns in CI), each line with a style the plugin turns into colour
through pytest's terminal writer (so ``--color`` and ``NO_COLOR`` apply); and the run's
verdict, the last line pytest prints."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from ..exitcodes import REFUSED_BEFORE_SPENDING, meaning
from ..judging.headline import DAGGER
from .render import money, text_table
from .sections import Section, report_sections
from .summary import RunSummary

FLAG, OK, TITLE = "flag", "ok", "title"
FLAG_TEXT = f"{DAGGER} UNCALIBRATED"
_NBSP = "\u00a0"
# A flagged number ("51.8% [42.0%, 61.6%]† UNCALIBRATED", a ranking's "+0.19 [-0.07, +0.42]†
# UNCALIBRATED") is never split across lines.
_FLAGGED = re.compile(r"[-+\d.]+%?(?: \[[^\]]*\])?" + re.escape(FLAG_TEXT))
_STATUS = re.compile(r"\bstatus ([A-Z_]+):")
CONTINUATION = "    "
PAGE_NOTE = "(the page to open in a browser; report.md beside it)"


@dataclass(frozen=True)
class Line:
    text: str
    style: str | None = None  # FLAG (red), OK (green), TITLE (bold), or plain


def terminal_lines(
    summary: RunSummary,
    report_dir: str | None,
    width: int = 80,
    not_written: str | None = None,
    page_written: bool = True,
    index: str | None = None,
) -> list[Line]:
    """The suite's summary, ending with the reports to open as paths that open from where the
    user stands (``report_dir``: the run folder, relative to the working folder): report.html
    (report.md when the page was not written, ``page_written``), the suite's index
    (``index``) and, flagged, why some of its files were not written (``not_written``)."""
    lines = [
        f"suite {summary.suite_name} (sha256 {summary.suite_hash[:12]}) run {summary.run_id}",
        f"models: {', '.join(summary.models)} (baseline first); adapters: "
        f"{summary.adapter_routing}",
        *([f"builds: {summary.builds}"] if summary.builds else []),
    ]
    styled = [Line(text) for line in lines for text in fit(line, width)]
    if summary.partial:
        styled += [Line(t, FLAG) for t in fit(f"PARTIAL RUN: {summary.partial_reason}", width)]
    for section in report_sections(summary):
        if section.in_terminal:
            styled += terminal_section(section, width)
    if report_dir is not None:
        # A path is never split: a run folder's is about 70 characters, so a long one wraps
        # whole onto its own line.
        page = f"{report_dir}/report.html" if page_written else f"{report_dir}/report.md"
        styled += [Line(text) for text in fit(f"report: {page}", width)]
        if page_written:
            styled += [Line(text) for text in fit(CONTINUATION + PAGE_NOTE, width)]
    if index is not None:
        styled += [Line(text) for text in fit(f"runs of this suite: {index}", width)]
    if not_written is not None:
        styled += [Line(t, FLAG) for t in fit(f"REPORTS NOT WRITTEN: {not_written}", width)]
    return styled


def terminal_section(section: Section, width: int = 80) -> list[Line]:
    lines = [Line(f"-- {section.title} --", TITLE)]
    for text in section.lines:
        lines += styled(text, width)
    for headers, rows in section.tables:
        for text in fit_table(headers, rows, width):
            lines.append(Line(text, style_of(text)))
    for text in section.footer:
        lines += styled(text, width)
    return lines


def styled(text: str, width: int) -> list[Line]:
    """``text`` fitted to ``width``; every piece keeps the style of the whole line."""
    style = style_of(text)
    return [Line(piece, style) for piece in fit(text, width)]


def style_of(text: str) -> str | None:
    """Red for anything flagged or a failed calibration gate, green for a passed one."""
    if DAGGER in text or "UNCALIBRATED" in text:
        return FLAG
    status = _STATUS.search(text)
    if status:
        return OK if status.group(1) == "OK" else FLAG
    return None


def fit(text: str, width: int) -> list[str]:
    """Wrap at ``width``; continuation lines are indented under the line's own indent."""
    if len(text) <= width:
        return [text]
    indent = text[: len(text) - len(text.lstrip(" "))]
    protected = _FLAGGED.sub(lambda m: m.group(0).replace(" ", _NBSP), text)
    pieces = textwrap.wrap(
        protected,
        width,
        subsequent_indent=indent + CONTINUATION,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [piece.replace(_NBSP, " ") for piece in pieces]


def fit_table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """The table when it fits; otherwise one entry per row, ``first cell: header value; ...``,
    wrapped between cells (a cell is never split)."""
    table = text_table(headers, rows)
    if max(len(line) for line in table) <= width:
        return table
    lines = []
    for row in rows:
        cells = [
            f"{header} {value}".strip().replace(" ", _NBSP)
            for header, value in zip(headers[1:], row[1:], strict=True)
        ]
        entry = f"{row[0]}: " + "; ".join(cells)
        lines += [
            piece.replace(_NBSP, " ")
            for piece in textwrap.wrap(
                entry,
                width,
                subsequent_indent=CONTINUATION,
                break_long_words=False,
                break_on_hyphens=False,
            )
        ]
    return lines


def verdict_line(
    summaries: Sequence[RunSummary],
    exit_code: int,
    refusal: str | None = None,
    why: str | None = None,
) -> Line:
    """The last line of the run: the exit code and why (a refusal's own reason when there is
    one: a missing key is not "over the cap"; ``why`` when the run says more than the code's
    meaning: reports not written, nothing run); when the tests ran to their own outcome (0 or
    1), also whether the win rates may be read as a headline."""
    if why is None:
        why = refusal if refusal and exit_code == REFUSED_BEFORE_SPENDING else meaning(exit_code)
    text = f"evalmine: exit {exit_code}: {why}"
    headlines = [s.headline for s in summaries if s.headline is not None]
    flagged = any(not h.headline_eligible for h in headlines)
    if exit_code in (0, 1):
        if flagged:
            text += f"; win rate {FLAG_TEXT}, not a headline"
        elif headlines:
            text += "; win rates headline-eligible"
        elif summaries:
            text += "; no judge, no win rate"
    return Line(text, FLAG if exit_code != 0 or flagged else OK)


def other_runs_lines(other_runs: dict[str, float]) -> list[str]:
    """Runs on the same cache whose calls this run waited for instead of paying again."""
    return [
        f"another run on this cache ({token}) was making the same calls: this run used its "
        f"answers; that run has committed {money(committed)} against its own cap (each "
        "run's cap covers that run only)"
        for token, committed in sorted(other_runs.items())
    ]
