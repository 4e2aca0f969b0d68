"""The data of report.html's cases view and criterion labelling (spec: "report.html"): every
answer of the run as one row, the cases' prompts once each, the judge's passes per case, and
the binary judges' verdicts to label PASS/FAIL. Pure functions over the records as the run's
files hold them (dicts), so a stored run renders the same as a live one.

Rows are built one at a time (generators): with 10,000 cases x 2 models the page's data is
written piece by piece, never held whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..run.records import with_repeat
from .labelling import Suggestion

CASE_SEPARATOR = "\x1f"
# The cases view (filled by cases.js from the page's data): every answer as a row, filtered,
# searched, sorted and shown a page of rows at a time, so 20,000 rows cost what 100 do.
CASES_VIEW = """<section id="cases"><h2>Cases</h2>
<p class="muted">Every answer of the run, one row each. Filter, search prompts, answers, case
ids and check messages (<kbd>Esc</kbd> clears), sort by a column's header; a row opens its case
(<kbd>Tab</kbd> to it, <kbd>Enter</kbd>). A link such as <code>#cases?task=triage</code> opens
this view filtered.</p>
<div id="cases-filters" class="filters">
<label>task <select id="f-task"><option value="">all</option></select></label>
<label>model <select id="f-model"><option value="">all</option></select></label>
<label>outcome <select id="f-outcome"><option value="">all</option></select></label>
<label><input id="f-flagged" type="checkbox"> flagged (label next)</label>
<label><input id="f-flip" type="checkbox"> flips</label>
<label><input id="f-failed" type="checkbox"> check failures</label>
<input id="f-search" type="search" aria-label="search prompts, answers, case ids and check messages"
placeholder="search prompts, answers, case ids, checks">
</div>
<p><span id="cases-count" role="status"></span>
<button id="cases-prev" type="button" aria-label="previous page">&larr;</button>
<span id="cases-page"></span>
<button id="cases-next" type="button" aria-label="next page">&rarr;</button>
<button id="export-csv" type="button">Export CSV</button>
<button id="export-json" type="button">Export JSON</button></p>
<p id="cases-empty" class="empty" hidden></p>
<div class="table-wrap"><table id="cases-table"><thead><tr>
<th data-sort="task"><button type="button">task</button></th>
<th data-sort="case"><button type="button">case</button></th>
<th data-sort="model"><button type="button">model</button></th>
<th data-sort="outcome"><button type="button">outcome</button></th>
<th data-sort="checks"><button type="button">checks</button></th>
<th data-sort="score"><button type="button">score</button></th>
<th data-sort="cost"><button type="button">cost</button></th>
<th data-sort="latency"><button type="button">latency</button></th>
<th data-sort="judge"><button type="button">judge verdict</button></th>
<th data-sort="flip"><button type="button">flip</button></th>
<th data-sort="label"><button type="button">label</button></th></tr></thead>
<tbody id="cases-body"></tbody></table></div>
<div id="case-detail" hidden><h3 id="case-title"></h3>
<p><label><input id="case-diff" type="checkbox"> show differences from the baseline's answer
</label> <label><input id="case-markdown" type="checkbox"> render Markdown</label>
<label><input id="case-raw" type="checkbox"> show the stored records</label>
<button id="case-close" type="button">close</button></p>
<h4>Prompt</h4><div id="case-prompt" class="prompt"></div>
<div id="case-answers" class="answers"></div><div id="case-judge"></div></div>
</section>
"""


def case_key(task: str, case: str) -> str:
    return f"{task}{CASE_SEPARATOR}{case}"


@dataclass(frozen=True)
class SharedRows:
    """Where the cases view's data holds each answer (its row in ``items``) and each case's
    prompt (its row in ``case_list``), so a labelling entry names them instead of carrying a
    second copy: with 10,000 pairs the copies were a third of the page."""

    records: Sequence[dict[str, Any]]
    answers: dict[tuple[str, str, str], int]  # repeat 0's rows
    cases: list[dict[str, Any]]
    case_index: dict[str, int]

    @classmethod
    def of(
        cls,
        records: Sequence[dict[str, Any]],
        cases: list[dict[str, Any]],
        case_index: dict[str, int],
    ) -> SharedRows:
        answers = {
            (r["task"], r["case"], r["model"]): row
            for row, r in enumerate(records)
            if not r.get("repeat")
        }
        return cls(records, answers, cases, case_index)

    def answer_row(
        self, task: str, case: str, model: str, text: str, checks: list[dict[str, Any]]
    ) -> int | None:
        """The row of this answer when it shows ``text`` and ``checks``, else None (then the
        entry keeps its own copy)."""
        row = self.answers.get((task, case, model))
        if row is None:
            return None
        record = self.records[row]
        shown = record.get("text") or record.get("error") or ""
        return row if shown == text and check_rows(record.get("checks")) == checks else None

    def case_row(self, task: str, case: str, prompt: str) -> int | None:
        row = self.case_index.get(case_key(task, case))
        return row if row is not None and self.cases[row]["prompt"] == prompt else None


def case_list(
    records: Sequence[dict[str, Any]],
    pairs: Sequence[dict[str, Any]],
    verdicts: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each task x case once, in the answers' order, with its rendered prompt (from the
    judge's pairs or the binary judges' verdicts, which carry it; empty when neither ran) and
    the judge's verdicts on it, model names shown: the cases view is not blind. Returns the
    list and the index of each case by ``case_key``."""
    index: dict[str, int] = {}
    cases: list[dict[str, Any]] = []

    def entry(task: str, case: str) -> dict[str, Any]:
        key = case_key(task, case)
        if key not in index:
            index[key] = len(cases)
            cases.append({"task": task, "case": case, "prompt": "", "judge": []})
        return cases[index[key]]

    for record in records:
        entry(record["task"], record["case"])
    for verdict in verdicts:
        found = entry(verdict["task"], verdict["case"])
        if not found["prompt"] and verdict.get("prompt"):
            found["prompt"] = verdict["prompt"]
    for pair in pairs:
        found = entry(pair["task"], pair["case"])
        if pair.get("prompt"):
            found["prompt"] = pair["prompt"]
        found["judge"].append(_judge_entry(pair))
    return cases, index


def _judge_entry(pair: dict[str, Any]) -> dict[str, Any]:
    """One pair's verdict for the case view: both passes, each with which model it showed
    first, which it preferred and why."""
    passes = []
    for judge_pass in pair.get("passes") or []:
        first, second = (
            (pair["baseline"], pair["candidate"])
            if judge_pass.get("order") == "baseline_first"
            else (pair["candidate"], pair["baseline"])
        )
        slot = judge_pass.get("winner_slot")
        passes.append(
            {
                "first": first,
                "winner": {"1": first, "2": second, "tie": "tie"}.get(slot or "", "none"),
                "reason": judge_pass.get("reason") or judge_pass.get("error") or "",
                # the pass as pairs.jsonl stores it, for "show the stored records"
                "raw": _stored(judge_pass),
            }
        )
    return {
        "baseline": pair["baseline"],
        "candidate": pair["candidate"],
        "excluded": pair.get("excluded"),
        "outcome": pair.get("outcome") or "",
        "category": pair.get("category"),
        "flip": bool(pair.get("flip")),
        "label": pair.get("label"),
        "passes": passes,
    }


def case_items(
    records: Sequence[dict[str, Any]],
    pairs: Sequence[dict[str, Any]],
    index: dict[str, int],
    suggestions: Sequence[Suggestion],
) -> Iterator[dict[str, Any]]:
    """One row per answer: what the table shows and filters on. A candidate's row carries its
    pair's verdict (``win``, ``loss``, ``tie``, ``soft_win``, ``soft_loss``, ``flip``, or the
    exclusion), flip and human label; the baseline's rows carry none (its pairs are shown
    on each candidate's row). ``flagged``: the pair is in "Label next"."""
    by_pair = {(p["task"], p["case"], p["candidate"]): p for p in pairs}
    # The item holds these itself (under its own names); ``raw`` has the record's other fields.
    flagged = {(s.task, s.case, s.candidate) for s in suggestions}
    for record in records:
        key = (record["task"], record["case"], record["model"])
        pair = by_pair.get(key) if not record.get("repeat") else None
        yield {
            "case": index[case_key(record["task"], record["case"])],
            "model": with_repeat(record["model"], record.get("repeat") or 0),
            "outcome": record.get("outcome") or "",
            "checks": check_rows(record.get("checks")),
            "score": _number(record.get("score")),
            "cost": _number(record.get("cost_usd")),
            "latency": _number(record.get("latency_s")),
            "text": record.get("text") or record.get("error") or "",
            "judge": (pair.get("excluded") or pair.get("outcome") or "") if pair else "",
            "flip": bool(pair and pair.get("flip")),
            "label": (pair.get("label") or "") if pair else "",
            "flagged": key in flagged,
            "tokens": _sorted(record.get("tokens")) or None,
            "finish": record.get("finish_reason") or "",
            "raw": _raw_rest(record),
        }


# An answer's fields its cases-view row carries already; "show the stored records" puts them
# back (the text once in the page: the budget of 800 bytes per answer).
_ROW_FIELDS = frozenset(
    ("task", "case", "outcome", "text", "score", "cost_usd", "latency_s", "finish_reason")
)


def _raw_rest(record: dict[str, Any]) -> dict[str, Any]:
    """The answers.jsonl row minus what the item carries, minus nulls and ``parsed`` (the
    answer's own JSON: its text again); the checks only when the row's differ (a check's
    score, expected, got)."""
    rest = {
        k: v
        for k, v in record.items()
        if k not in _ROW_FIELDS and k not in ("parsed", "tokens") and v is not None
    }
    if check_rows(rest.get("checks")) == rest.get("checks", []):
        rest.pop("checks", None)
    return _sorted(rest)


def _stored(judge_pass: dict[str, Any]) -> dict[str, Any]:
    """A judge's pass as stored, minus nulls and its reason when shown (the page puts it
    back)."""
    shown = bool(judge_pass.get("reason"))
    return _sorted(
        {k: v for k, v in judge_pass.items() if v is not None and (k != "reason" or not shown)}
    )


def _sorted(value: Any) -> Any:
    """Keys sorted at every level, as the jsonl files hold them: the live page is then the
    page rendered again from the run's files, byte for byte."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def criterion_items(
    verdicts: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    binary: dict[str, Any],
) -> Iterator[dict[str, Any]]:
    """The binary judges' usable verdicts (PASS or FAIL) for the criterion labelling panel,
    in the run's order: the answer, its prompt, the criterion's text, the judge's verdict
    (shown once the person has chosen), the suite's label of it if any (``labelled``) and
    the label line's fields. ``binary``: report.json's ``binary_judges``."""
    if not verdicts:  # no binary judges: no answer texts to gather
        return
    criterion_texts = binary.get("criterion_texts") or {}
    labelled = {
        (x.get("task"), x.get("case"), x.get("model"), x.get("criterion")): x.get("label")
        for x in binary.get("criterion_labels") or []
    }
    texts = {
        (r["task"], r["case"], r["model"]): r.get("text") or ""
        for r in records
        if not r.get("repeat")
    }
    for verdict in verdicts:
        if verdict.get("label") not in ("PASS", "FAIL"):
            continue
        task, case, model, name = (
            verdict["task"],
            verdict["case"],
            verdict["model"],
            verdict["criterion"],
        )
        yield {
            "task": task,
            "case": case,
            "criterion": name,
            "text": (criterion_texts.get(task) or {}).get(name, ""),
            "prompt": verdict.get("prompt") or "",
            "answer": texts.get((task, case, model), ""),
            "judge": {"label": verdict["label"], "critique": verdict.get("critique") or ""},
            "labelled": labelled.get((task, case, model, name)),
            "fields": criterion_label_fields(task, case, model, name),
        }


def criterion_label_fields(task: str, case: str, model: str, criterion: str) -> str:
    """A criterion label's naming fields as YAML flow-mapping text (JSON strings, which YAML
    reads unchanged), as the suite loader reads them."""
    values = {"task": task, "case": case, "model": model, "criterion": criterion}
    return ", ".join(
        f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in values.items()
    )


def check_rows(checks: Any) -> list[dict[str, Any]]:
    """An answer's checks as the page shows them: name, passed, the reason."""
    return [
        {
            "name": str(c.get("name", "")),
            "passed": bool(c.get("passed")),
            "message": str(c.get("message") or ""),
        }
        for c in checks or []
    ]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
