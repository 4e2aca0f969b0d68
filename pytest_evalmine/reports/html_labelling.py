"""The page's labelling views: pairs labelled blind (A and B from a hash of the pair) and the
binary judges' criteria labelled PASS or FAIL, with the data their script reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .cases_view import SharedRows, check_rows
from .html_markup import num
from .labelling import KIND_TAGS, a_side, audit_order, label_fields, pair_id

# Criterion labelling (binary judges): one answer and one criterion at a time, PASS or FAIL.
CRITERION_PANEL = """<h2>Label criteria (PASS/FAIL)</h2>
<p class="muted">One answer, its prompt and one criterion of its task at a time. Choose
<kbd>p</kbd> PASS or <kbd>f</kbd> FAIL (with an optional note); the judge's verdict opens once
you have chosen. "Copy criterion labels" gives YAML lines for the suite's <code>labels:</code>
list, as the suite loader reads criterion labels.</p>
<section id="criterion-labelling" hidden>
<div id="crit-top" class="lab-bar"><button id="crit-prev" type="button">&larr; previous</button>
<button id="crit-next" type="button">next &rarr;</button>
<button id="crit-open" type="button">next unlabelled</button>
<label><input id="crit-advance" type="checkbox"> advance on choice</label>
<span id="crit-position"></span><span class="grow"></span><span id="crit-progress"></span></div>
<p><strong id="crit-where"></strong> <em id="crit-existing"></em></p>
<h3>Criterion <span id="crit-name"></span></h3><div id="crit-text" class="prompt"></div>
<h3>Prompt</h3><div id="crit-prompt" class="prompt"></div>
<h3>Answer</h3><div id="crit-answer" class="answer-text"></div>
<div class="choices"><button id="crit-PASS" type="button">PASS <kbd>p</kbd></button>
<button id="crit-FAIL" type="button">FAIL <kbd>f</kbd></button>
<input id="crit-note" type="text" aria-label="note (optional)" placeholder="note (optional)"></div>
<details id="crit-judge" class="judge"><summary id="crit-judge-summary"></summary>
<div id="crit-judge-body"></div></details>
<p><button id="crit-copy" type="button">Copy criterion labels</button>
<span id="crit-status"></span></p>
<textarea id="crit-yaml" readonly aria-label="criterion labels as YAML"></textarea>
</section>
"""


def labelling_data(
    report: dict[str, Any],
    judged: Sequence[dict[str, Any]],
    suggestions: Sequence[Any],
    *,
    lazy: bool = False,
    shared: SharedRows | None = None,
) -> dict[str, Any]:
    """What the labelling script needs, with the A/B mapping already resolved: for each pair
    the side shown as A, what A and B mean as a label's ``prefer``, and the label's fields.
    ``lazy``: the pairs' entries as a generator, built one at a time as the page is written
    (10,000 entries held at once were the page's largest cost in memory). ``shared``: the
    cases view's rows, which the entries then name (``item``, ``case_row``) instead of
    copying the answers' texts, checks and the prompt."""
    index = {(p["task"], p["case"], p["candidate"]): i for i, p in enumerate(judged)}
    tags = {
        index[(s.task, s.case, s.candidate)]: [KIND_TAGS[kind] for kind in s.kinds]
        for s in suggestions
    }
    built = (_pair_entry(pair, tags.get(i, []), shared) for i, pair in enumerate(judged))
    entries: Iterator[dict[str, Any]] | list[dict[str, Any]] = built if lazy else list(built)
    already = sum(1 for p in judged if p.get("label"))
    return {
        "run_id": report.get("run_id", ""),
        "labels_key": bool((report.get("suite") or {}).get("label_counts")),
        "already_labelled": already,
        "pairs": entries,
        "next_order": [index[(s.task, s.case, s.candidate)] for s in suggestions],
        "audit_order": audit_order(judged),
    }


def _audit_progress(report: dict[str, Any], judged: Sequence[dict[str, Any]]) -> str:
    """How many of the audit sample's pairs are labelled: only their labels enter the
    prediction-powered estimate (spec: "Prediction-powered estimates")."""
    sample = [p for p in judged if p.get("audit")]
    if not sample:
        return ""
    labelled = sum(1 for p in sample if p.get("label"))
    fraction = ((report.get("headline") or {}).get("audit") or {}).get("fraction")
    return (
        f'<p id="audit-progress">Audit sample: <strong>{labelled} of {len(sample)}</strong> '
        f"pairs labelled (fraction {num(fraction)} of the pairs, by a hash of task, case and "
        'candidate). Only their labels enter the human-preference estimate; "label the audit '
        'sample" shows them in their own random order, so stopping early keeps a random '
        "sample.</p>\n"
    )


def _pair_entry(
    pair: dict[str, Any], tags: list[str], shared: SharedRows | None = None
) -> dict[str, Any]:
    identifier = pair_id(pair)
    a = a_side(identifier)
    b = "candidate" if a == "baseline" else "baseline"
    letter = {a: "A", b: "B", "tie": "tie"}
    passes = []
    for judge_pass in pair.get("passes") or []:
        slot = judge_pass.get("winner_slot")
        first, second = (
            ("baseline", "candidate")
            if judge_pass.get("order") == "baseline_first"
            else ("candidate", "baseline")
        )
        winner = {"1": first, "2": second, "tie": "tie"}.get(slot or "")
        passes.append(
            {
                "first": letter[first],
                "winner": letter.get(winner or "", "none"),
                "reason": judge_pass.get("reason") or "",
            }
        )
    label = pair.get("label")
    return {
        "id": identifier,
        "task": pair["task"],
        "case": pair["case"],
        **_prompt_or_row(pair, shared),
        "A": _side(pair, a, shared),
        "B": _side(pair, b, shared),
        "prefer": {"A": a, "B": b},
        "fields": label_fields(pair),
        "labelled": letter.get(label) if label else None,
        "judge": {
            "choice": letter.get(pair.get("category") or "", "none"),
            "outcome": pair.get("outcome") or "",
            "passes": passes,
        },
        "tags": tags,
    }


def _prompt_or_row(pair: dict[str, Any], shared: SharedRows | None) -> dict[str, Any]:
    prompt = pair.get("prompt") or ""
    row = shared.case_row(pair["task"], pair["case"], prompt) if shared else None
    return {"prompt": prompt} if row is None else {"case_row": row}


def _side(pair: dict[str, Any], side: str, shared: SharedRows | None) -> dict[str, Any]:
    """One answer of a labelling entry: the cases view's row holding it when that row shows
    the same text and checks, else its own text and checks."""
    text, checks = pair.get(f"{side}_text") or "", check_rows(pair.get(f"{side}_checks"))
    row = (
        shared.answer_row(pair["task"], pair["case"], pair[side], text, checks) if shared else None
    )
    return {"text": text, "checks": checks} if row is None else {"item": row}


def labelling_html(
    report: dict[str, Any], judged: Sequence[dict[str, Any]], suggestions: Sequence[Any]
) -> Iterator[str]:
    if not judged:
        yield (
            '<section id="labelling-empty"><h2>Label pairs blind</h2><p>No judged pairs in '
            "this run.</p></section>"
        )
        return
    yield _audit_progress(report, judged)
    yield """<h2>Label pairs blind</h2>
<p class="muted">Model names are hidden; which answer is A comes from a hash of the pair. Choose
with the buttons or <kbd>1</kbd> prefer A, <kbd>2</kbd> tie, <kbd>3</kbd> prefer B;
<kbd>&larr;</kbd> <kbd>&rarr;</kbd> move, <kbd>n</kbd> next unlabelled, <kbd>d</kbd> show where
the answers differ, <kbd>c</kbd> copy labels. The judge's verdict opens once you have chosen.
Progress stays in this browser (per run); "Copy labels" gives YAML entries for the suite's
<code>labels:</code> list or a <code>labels_path</code> file.</p>
<section id="labelling" hidden>
<div id="lab-top" class="lab-bar"><label>Order <select id="lab-order">
<option value="next">label next first</option>
<option value="audit">label the audit sample</option>
<option value="suite">suite order</option></select></label>
<button id="lab-prev" type="button">&larr; previous</button>
<button id="lab-next" type="button">next &rarr;</button>
<button id="lab-open" type="button">next unlabelled <kbd>n</kbd></button>
<label><input id="lab-advance" type="checkbox"> advance on choice</label>
<label><input id="lab-diff" type="checkbox"> show differences <kbd>d</kbd></label>
<span id="lab-position"></span><span class="grow"></span><span id="lab-progress"></span></div>
<p><strong id="lab-where"></strong> <span id="lab-tags" class="tags"></span>
<em id="lab-existing"></em></p>
<h3>Prompt</h3><div id="lab-prompt" class="prompt"></div>
<div class="answers"><div><h3>Answer A</h3><ul id="lab-a-checks" class="checks"></ul>
<div id="lab-a" class="answer-text"></div></div>
<div><h3>Answer B</h3><ul id="lab-b-checks" class="checks"></ul>
<div id="lab-b" class="answer-text"></div></div></div>
<div class="choices"><button id="choose-A" type="button">Prefer A <kbd>1</kbd></button>
<button id="choose-tie" type="button">Tie <kbd>2</kbd></button>
<button id="choose-B" type="button">Prefer B <kbd>3</kbd></button>
<input id="lab-note" type="text" aria-label="note (optional)" placeholder="note (optional)"></div>
<details id="lab-judge" class="judge"><summary id="lab-judge-summary"></summary>
<div id="lab-judge-body"></div></details>
<p><button id="copy-labels" type="button">Copy labels <kbd>c</kbd></button>
<span id="copy-status"></span></p>
<textarea id="labels-yaml" readonly aria-label="labels as YAML"></textarea>
</section>"""
