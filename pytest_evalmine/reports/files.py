"""Run reports on disk (spec: "Report files"): answers.jsonl, report.json, report.md, latest.json.

Every file is written to a temporary name in its folder and renamed into place, so a reader
never sees half a report and a crash never leaves one.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from ..judging.headline import DAGGER
from ..redaction import printable, redact
from ..run.records import AnswerRecord
from .html_page import html_pieces
from .render import if_uncached_text, markdown_table, money
from .sections import Section, flagged, number, percent, report_sections
from .suite_index import Comparer, suite_index_html
from .summary import RunSummary, failure_reason


def write_run(
    summary: RunSummary,
    report_root: Path,
    *,
    move_latest: bool = True,
    report: dict[str, Any] | None = None,
    compare_runs: Comparer | None = None,
) -> Path:
    """Write the run folder and, when ``move_latest``, point ``latest.json`` at it; returns
    the run folder. ``report``: ``summary.to_json()`` when the caller has built it already
    (it is the largest part of writing a big run's files); ``compare_runs``: how the suite's
    index compares two run folders (the engine's reading of stored runs)."""
    suite_dir = report_root / summary.suite_name
    run_dir = suite_dir / summary.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    # The rows as the files hold them; report.html's cases view reads them too.
    answers = AnswerRows(summary.records)
    atomic_write(run_dir / "answers.jsonl", jsonl_lines(answers))
    pairs = summary.headline.pair_dicts if summary.headline else []
    if summary.headline is not None:
        atomic_write(run_dir / "pairs.jsonl", jsonl_lines(pairs))
    verdicts = [v.to_dict() for v in summary.binary.verdicts] if summary.binary else []
    if summary.binary is not None:
        atomic_write(run_dir / "verdicts.jsonl", jsonl_lines(verdicts))
    if report is None:
        report = summary.to_json()
    atomic_write(run_dir / "report.json", json.dumps(report, indent=2) + "\n")
    atomic_write(run_dir / "report.md", render_markdown(summary))
    page = html_pieces(report, pairs, answers, verdicts, summary.label_suggestions)
    atomic_write(run_dir / "report.html", page)
    if move_latest:
        pointer = {
            "run_id": summary.run_id,
            "path": f"{summary.run_id}/report.json",
            "suite_hash": summary.suite_hash,
        }
        atomic_write(suite_dir / "latest.json", json.dumps(pointer, indent=2) + "\n")
    atomic_write(suite_dir / "index.html", suite_index_html(suite_dir, compare_runs))
    return run_dir


class AnswerRows(Sequence[dict[str, Any]]):
    """answers.jsonl's rows, each built when it is read (``AnswerRecord.to_dict``, which
    shares the record's lists): report.html reads them several times, and 20,000 rows held at
    once as dicts were some 25 MB more at the end of a large run."""

    def __init__(self, records: Sequence[AnswerRecord]) -> None:
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [record.to_dict() for record in self._records[index]]
        return self._records[index].to_dict()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (record.to_dict() for record in self._records)


def jsonl_lines(rows: Iterable[Any]) -> Iterator[str]:
    """One JSON object a line, keys sorted: the form of every jsonl file the tool writes."""
    return (_JSONL.encode(row) + "\n" for row in rows)


# Built once: json.dumps builds an encoder per call when given options.
_JSONL = json.JSONEncoder(ensure_ascii=False, sort_keys=True)


def atomic_write(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text``, or its pieces (a large run's files are never held whole) joined into
    chunks of about ``_CHUNK_CHARS``, under a temporary name, then rename it into place. Each
    chunk is redacted on its own: pieces are whole lines, elements or JSON values, so a key
    never spans two chunks (``_chunks`` says why a chunk redacts all its pieces would)."""
    # Texts were redacted where they entered the run; this pass guards what was not (the
    # command line, say), so no report file can hold a loaded key.
    pieces = [text] if isinstance(text, str) else _chunks(text)
    handle, temporary = _new_temporary(path)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            for piece in pieces:
                stream.write(redact(piece))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _new_temporary(path: Path) -> tuple[int, str]:
    """A new, empty file beside ``path`` under a name nobody else uses, open for writing.
    Created with mode 0666, so the kernel applies the umask as it does to any file the user
    creates: a report gets the permissions any other file would (mkstemp's are 0600). The
    umask itself is never read by setting it: that is process-wide, and a thread creating a
    file meanwhile would get wide permissions."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        temporary = str(path.parent / f".{path.name}.{secrets.token_hex(6)}")
        try:
            return os.open(temporary, flags, 0o666), temporary
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


# Pieces are joined up to about this many characters before a chunk is redacted and written:
# a redact() and a write() per piece were a quarter of writing a 3,000-case run's files
# (report.html alone is some 30,000 pieces).
_CHUNK_CHARS = 1 << 16


def _chunks(pieces: Iterable[str]) -> Iterator[str]:
    """The pieces joined into chunks of about ``_CHUNK_CHARS``. A piece joins the chunk only
    after a character that is no word character (``\\w``), so a key shape's ``\\b`` holds at
    each seam as it does at the start of a piece: a chunk's redaction finds all that its
    pieces' would (and more only where a key's run crosses a seam)."""
    chunk: list[str] = []
    size = 0
    last = ""  # the chunk's last character
    for piece in pieces:
        if not piece:
            continue
        if chunk and (size >= _CHUNK_CHARS or last.isalnum() or last == "_"):
            yield "".join(chunk)
            chunk, size = [], 0
        chunk.append(piece)
        size += len(piece)
        last = piece[-1]
    if chunk:
        yield "".join(chunk)


def render_markdown(summary: RunSummary) -> str:
    lines = [
        f"# {summary.suite_name}: run {summary.run_id}",
        "",
        f"Suite `{summary.suite_file}`, sha256 `{summary.suite_hash}`.",
        f"Models: {', '.join(f'`{m}`' for m in summary.models)} (baseline first); "
        f"adapters: {summary.adapter_routing}.",
        *([f"Builds: {summary.builds}."] if summary.builds else []),
        "",
    ]
    if summary.partial:
        lines += [
            f"> **PARTIAL RUN**: {summary.partial_reason}. Numbers below cover only what ran.",
            "",
        ]
    if summary.shard is not None:
        lines += [
            f"> **SHARD {summary.shard['index']} OF {summary.shard['count']}** of run "
            f"`{summary.run_name}`: a partial run of this shard's items only; "
            f"`evalmine merge {summary.run_name}` builds the whole run once every shard ran.",
            "",
        ]
    if summary.merged_from:
        lines += [
            f"Run `{summary.run_name}`, merged from {len(summary.merged_from)} shards: "
            f"{', '.join(f'`{run_id}`' for run_id in summary.merged_from)}.",
            "",
        ]
    if summary.redactions:
        lines += [
            f"> **{summary.redactions} API key(s) redacted**: a provider sent back a key this "
            "run loaded, or one shaped like a key, in an answer or an error; every copy kept "
            "or shown reads [redacted].",
            "",
        ]
    for section in report_sections(summary):
        lines += _markdown_section(section)
    problems = [r for r in summary.records if r.outcome != "passed"]
    if problems:
        lines += ["## Items that did not pass", ""]
        rows = [(r.task, r.case, r.shown_model, r.outcome, failure_reason(r)) for r in problems]
        lines += [*markdown_table(("task", "case", "model", "outcome", "why"), rows), ""]
    lines += ["## How to reproduce", "", "```", summary.command, "```", ""]
    lines += ["## Decision log entry (paste into DECISIONS.md and complete)", ""]
    lines += decision_entry(summary)
    # Answers and check output are quoted in it: nothing of theirs may act on a terminal
    # that shows the file (cat report.md).
    return printable("\n".join(lines) + "\n")


def _markdown_section(section: Section) -> list[str]:
    lines = [f"## {section.title}", ""]
    for text in section.lines + section.detail_lines:
        lines += [text, ""]
    for headers, rows in section.tables + section.detail_tables:
        lines += [*markdown_table(headers, rows), ""]
    for text in section.footer:
        lines += [text, ""]
    return lines


def decision_entry(summary: RunSummary) -> list[str]:
    """A DECISIONS.md entry prefilled with the numbers, blanks left for the person: the
    tool never writes DECISIONS.md itself."""
    headline = summary.headline
    lines = [
        "```markdown",
        f"## {summary.run_id[:8]}: {summary.suite_name}, "
        f"{' vs '.join(summary.models[1:]) or '-'} against {summary.models[0]}",
        "",
        f"- Run: `{summary.run_id}` (suite sha256 `{summary.suite_hash[:12]}`)",
    ]
    if headline is not None:
        cal = headline.calibration
        lines.append(
            f"- Calibration: {cal.status}, kappa {number(cal.kappa.value)} on {cal.kappa.n} "
            f"labels (judge {headline.judge.model})"
        )
        for rate in headline.overall:
            lines.append(f"- Win rate {rate.candidate}: {flagged(rate)} ({rate.title()})")
        if not headline.headline_eligible:
            lines.append(
                f"- {DAGGER} Not headline-eligible: the judge is not shown to agree with you."
            )
    for score in summary.scores:
        lines.append(
            f"- {score.model}: passed {score.passed}/{score.items}, schema "
            f"{percent(score.schema_all.value)}, p50 {number(score.latency_p50_s, 3)} s"
        )
    lines += [
        f"- Cost this run: {money(summary.spent_usd)} ({if_uncached_text(summary)})",
        "- Decision: ____",
        "- Why: ____",
        "```",
        "",
    ]
    return lines
