"""One run against another in words (spec: "Compare"): the verdicts on each metric and on the
changed answers, and the lines the terminal, report.md and ``evalmine compare`` print, all
read from the dict ``reports.cross_run`` computes (report.json's ``changes.cases``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..judging.headline import DAGGER
from ..scoring.paired import ALL_PASS, METRIC_WORDS, SCORE
from .render import number, percent

LISTED = 5  # cases only in one run named in the text (report.json lists them all)
NO_FLOOR = (
    "the noise floor is unknown: neither run has two repeats of a case "
    "(--evalmine-repeat=2 or more in either run measures it)"
)
# Why a case of a model pair is not compared (report.json ``excluded``), in report words.
EXCLUDED = {
    "only_in_run_a": "only in run A",
    "only_in_run_b": "only in run B",
    "no_answer_in_a": "no answer in A (error, not run or replay miss)",
    "no_answer_in_b": "no answer in B (error, not run or replay miss)",
    "no_answer_in_either": "answered by neither",
    "no_common_repeat": "no repeat answered in both runs",
}


def changed_task_words(change: dict[str, Any]) -> str:
    """``polite (prompt, cases; variant terse: system)``: one task's change in report words."""
    parts = [", ".join(change["fields"])] if change.get("fields") else []
    parts += [
        f"variant {name}: {', '.join(fields)}"
        for name, fields in (change.get("variants") or {}).items()
    ]
    return change["task"] + (f" ({'; '.join(parts)})" if parts else "")


def answers_verdict(pair: dict[str, Any]) -> str:
    """Whether the parsed answers changed beyond what a run's own repeats change: beyond when
    the excess's interval lies above 0 for every run that has repeats (evalpair's rule)."""
    changed = pair["changed_answers"]
    if not changed or changed.get("rate") is None:
        return "no case answered by both runs"
    share = f"the answers changed on {percent(changed['rate'])} of cases"
    excess = {s: e for s, e in pair["changed_beyond_repeats"].items() if e and e["interval"]}
    if not excess:
        return (
            f"{share}; whether that is beyond repeat noise is unknown: neither run has two "
            "repeats of a case (--evalmine-repeat=2 or more measures it)"
        )
    churn = pair["changed_between_repeats"]
    against = ", ".join(
        f"{side.upper()} {percent(churn[side]['rate'])}" for side in excess if churn.get(side)
    )
    by = "; ".join(
        f"excess over {side.upper()}'s repeats {_pts(e['value'])} points "
        f"[{_pts(e['interval']['low'])}, {_pts(e['interval']['high'])}]"
        for side, e in excess.items()
    )
    beyond = all(e["interval"]["low"] > 0 for e in excess.values())
    scores = [m.get("beyond_noise") for m in pair["metrics"]]
    if beyond:
        moved = "" if any(scores) else ", the scores did not"
        return f"{share} against {against} between repeats: beyond repeat noise{moved} ({by})"
    return f"{share} against {against} between repeats: not beyond repeat noise ({by})"


# words ----------------------------------------------------------------------------------------
def _pts(value: float, sign: bool = True) -> str:
    return f"{100 * value:+.1f}" if sign else f"{100 * value:.1f}"


def verdict(m: dict[str, Any]) -> str:
    """One comparison in plain words, in points (spec: "Compare"): the delta's, then the
    floor's clause, which always gives the excess over the floor with its interval."""
    what = METRIC_WORDS[m["metric"]]
    delta, interval = m.get("delta"), m.get("interval")
    if delta is None or interval is None:
        return f"B and A: no case answered by both runs on {what}"
    low, high = interval["low"], interval["high"]
    numbers = f"{_pts(delta)} points [{_pts(low)}, {_pts(high)}] over {m['cases']} cases"
    counts = f"{m['worse']} worse, {m['better']} better"
    if low <= 0 <= high:
        text = f"B cannot be told apart from A on {what}: {numbers}, an interval that includes 0"
    else:
        text = f"B scores {'higher' if low > 0 else 'lower'} than A on {what}: {numbers}"
    return f"{text}; {counts}; {floor_clause(m)}"


def floor_clause(m: dict[str, Any]) -> str:
    """Where the change stands against the noise floor: beyond it only when the excess's
    interval lies above 0."""
    floor, excess = m["noise_floor"]["floor"], m.get("excess")
    if floor is None or excess is None:
        return NO_FLOOR
    if m["beyond_noise"]:
        return (
            f"beyond the noise floor of {_pts(floor, False)} points by "
            f"{_pts(excess['value'], False)} points [{_pts(excess['interval']['low'], False)}, "
            f"{_pts(excess['interval']['high'], False)}]"
        )
    return (
        f"not beyond the noise floor of {_pts(floor, False)} points: excess "
        f"{_pts(excess['value'])} points [{_pts(excess['interval']['low'])}, "
        f"{_pts(excess['interval']['high'])}], an interval that does not lie above 0"
    )


def _rate(stored: dict[str, Any] | None) -> str:
    if not stored or stored.get("rate") is None:
        return "-"
    interval = stored.get("interval")
    shown = f" [{percent(interval['low'])}, {percent(interval['high'])}]" if interval else ""
    return f"{stored['successes']}/{stored['n']} {percent(stored['rate'])}{shown}"


def _score(side: dict[str, Any], metric: str) -> str:
    if side.get("mean") is None:
        return "-"
    interval = side.get("interval")
    show = percent if metric == ALL_PASS else number
    return show(side["mean"]) + (
        f" [{show(interval['low'])}, {show(interval['high'])}]" if interval else ""
    )


def _build(build: dict[str, Any] | None) -> str:
    return f" (digest {str(build['digest'])[:19]})" if build and build.get("digest") else ""


def _answer(value: Any) -> str:
    """A parsed answer on one line: text quoted, JSON as JSON, cut at 80 characters."""
    if isinstance(value, str):
        text = " ".join(value.split())
        return json.dumps(text if len(text) <= 80 else text[:77] + "...", ensure_ascii=False)
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= 80 else text[:77] + "..."


def _first(cases: Sequence[dict[str, str]]) -> str:
    """`` (t/c1, t/c2 and 3 more)``: the first cases of a list, named; "" for none."""
    if not cases:
        return ""
    names = ", ".join(f"{c['task']}/{c['case']}" for c in cases[:LISTED])
    more = len(cases) - LISTED
    return f" ({names}{f' and {more} more' if more > 0 else ''})"


METRIC_LINES = {ALL_PASS: "all checks pass", SCORE: "checker score (tasks with checks)"}


def cross_run_lines(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The comparison as text: (lines for the terminal and report.md, detail lines for
    report.md and ``evalmine compare`` only: the examples and the cases named)."""
    lines = [f"case by case: A = run {data['run_a']}, B = run {data['run_b']}"]
    detail: list[str] = []
    for why in data.get("partial") or ():
        lines.append(f"partial comparison: {why}")
    if data.get("same_run"):
        lines.append(f"A and B are the same run ({data['run_a']}): nothing can have changed")
    suites = data.get("suites") or {}
    if suites and not suites.get("same"):
        lines.append(
            f"the suites differ: A is a run of suite {suites['a']!r}, B of suite "
            f"{suites['b']!r}; tasks and cases are paired by their ids (--allow-other-suite)"
        )
    only_a, only_b = data.get("models_only_in_a") or [], data.get("models_only_in_b") or []
    if only_a or only_b:
        lines.append(
            f"contenders only in A: {', '.join(only_a) or 'none'}; only in B: "
            f"{', '.join(only_b) or 'none'} (not compared)"
        )
    tasks = data["tasks"]
    changed = [changed_task_words(t) for t in tasks["changed"]]
    lines.append(
        f"tasks changed: {', '.join(changed) or 'none'}; only in A: "
        f"{', '.join(tasks['only_in_a']) or 'none'}; only in B: "
        f"{', '.join(tasks['only_in_b']) or 'none'}"
        + (
            ""
            if tasks["compared_by"] == "task_content"
            else " (by whole-task hash, cases included)"
        )
    )
    only_a, only_b = data["cases_only_in_a"], data["cases_only_in_b"]
    lines.append(
        f"cases only in A: {len(only_a)}{_first(only_a)}; only in B: {len(only_b)}{_first(only_b)}"
    )
    if data.get("note"):
        lines.append(data["note"])
    if data.get("by"):
        lines.append(
            f"grouped by {data['by']['field']} (as {data['by']['source']} gives it): each "
            "group's interval is a 95 % interval of its own, not a joint one"
        )
    for pair in data["models"]:
        lines.append(
            f"A {pair['model_a']}{_build(pair['build_a'])} -> "
            f"B {pair['model_b']}{_build(pair['build_b'])}:"
        )
        for m in pair["metrics"]:
            lines.append(_numbers(m))
            lines.append(f"verdict: {m['verdict']}")
            lines.extend(group_lines(m, (data.get("by") or {}).get("field", "")))
            for label in ("worse", "better"):
                for e in m[f"{label}_examples"]:
                    detail.append(
                        f"{label} ({m['metric']}): {e['task']}/{e['case']}: "
                        f"{_answer(e['a_answer'])} -> {_answer(e['b_answer'])}"
                    )
        churn = pair["changed_between_repeats"]
        repeats = (
            f"; between a run's own repeats: A {_rate(churn['a'])}, B {_rate(churn['b'])}"
            if churn["a"] or churn["b"]
            else ""
        )
        lines.append(f"parsed answer changed: {_rate(pair['changed_answers'])} of cases{repeats}")
        lines.append(f"answers: {pair['answers_verdict']}")
        if pair["excluded"]:
            lines.append(
                "left out: " + ", ".join(f"{EXCLUDED[r]} {n}" for r, n in pair["excluded"].items())
            )
    for row in data["win_rates"]:
        lines.append(
            f"win rate of {row['candidate']} over {row['baseline']} (judge): A "
            f"{_win_rate(row['a'])}, B {_win_rate(row['b'])}"
        )
    return lines, detail


def _numbers(m: dict[str, Any]) -> str:
    what = METRIC_LINES[m["metric"]]
    if m.get("delta") is None or m.get("interval") is None:
        return f"{what}: no case answered by both runs"
    interval = m["interval"]
    mcnemar = m.get("mcnemar")
    tested = (
        f"; McNemar exact p {mcnemar['p_value']:.3g}, mid-p {mcnemar['mid_p_value']:.3g}"
        if mcnemar
        else ""
    )
    floor = m["noise_floor"]
    floors = (
        "noise floor unknown"
        if floor["floor"] is None
        else f"noise floor {_pts(floor['floor'], False)} pts (A {_floor_text(floor['a'])}, "
        f"B {_floor_text(floor['b'])})"
    )
    return (
        f"{what}: A {_score(m['a'], m['metric'])}, B {_score(m['b'], m['metric'])}; delta "
        f"{_pts(m['delta'])} pts [{_pts(interval['low'])}, {_pts(interval['high'])}] over "
        f"{m['cases']} cases; worse {m['worse']}, better {m['better']}, same {m['same']}"
        f"{tested}; {floors}"
    )


def _floor_text(value: float | None) -> str:
    return "-" if value is None else _pts(value, False)


def _win_rate(side: dict[str, Any]) -> str:
    if side.get("win_rate") is None:
        return "-"
    interval = side.get("interval")
    shown = f" [{percent(interval['low'])}, {percent(interval['high'])}]" if interval else ""
    text = f"{percent(side['win_rate'])}{shown} (n={side.get('n')})"
    return text if side.get("headline_eligible") else f"{text}{DAGGER} UNCALIBRATED"


def group_lines(m: dict[str, Any], field: str) -> list[str]:
    """``--by FIELD``: one line per group of cases, with its verdict."""
    return [f"  {_group_line(g, m['metric'], field)}" for g in m.get("groups") or ()]


def _group_line(group: dict[str, Any], metric: str, field: str) -> str:
    name = f"{field} = {group['value']}" if group["value"] is not None else f"(no {field})"
    show = percent if metric == ALL_PASS else number
    delta, interval = group.get("delta"), group.get("interval")
    if delta is None or interval is None:
        return f"{name}: no case answered by both runs"
    low, high = interval["low"], interval["high"]
    if low <= 0 <= high:
        said = "cannot be told apart (the interval includes 0)"
    else:
        said = f"B {'higher' if low > 0 else 'lower'} than A"
    return (
        f"{name}: {group['cases']} cases, A {show(group['a_mean'])}, B "
        f"{show(group['b_mean'])}; delta {_pts(delta)} pts [{_pts(low)}, {_pts(high)}]; worse "
        f"{group['worse']}, better {group['better']}, same {group['same']}: {said}"
    )
