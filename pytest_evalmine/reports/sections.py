"""The report's sections in their one order (spec: "report.md", "Terminal summary").

report.md and the terminal summary both render this list, so they cannot drift apart; the
terminal leaves out what is marked ``detail``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..judging.calibration import Calibration
from ..judging.headline import DAGGER, Headline
from ..judging.winrate import WinRate
from ..scoring.paired import ALL_PASS, SCORE
from ..scoring.sandbox import sandbox_line
from ..stats.estimators import Interval
from ..stats.proportions import Proportion
from .compare import routing_note
from .cross_run_text import cross_run_lines
from .labelling import Suggestion, nothing_to_label
from .panel_section import TITLE as PANEL_TITLE
from .panel_section import panel_lines, reference_lines
from .power_section import TITLE as POWER_TITLE
from .power_section import power_lines
from .ranking_section import TITLE as RANKING_TITLE
from .ranking_section import ranking_lines
from .render import (
    HEADERS,
    if_uncached_text,
    money,
    number,
    percent,
    proportion_text,
    scorecard_rows,
)
from .scorecard import TaskScore
from .summary import RunSummary, failure_reason

Table = tuple[Sequence[str], Sequence[Sequence[str]]]
PAIRED_METRICS = {ALL_PASS: "all checks pass", SCORE: "checker score (tasks with checks)"}


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    detail_lines: list[str] = field(default_factory=list)
    detail_tables: list[Table] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)  # after the tables
    # False: report.md and report.html only (planning figures, not the run's result).
    in_terminal: bool = True


def flagged(rate: WinRate) -> str:
    """A win rate as it may be shown: with a dagger and UNCALIBRATED unless eligible."""
    if rate.win_rate is None:
        return "-"
    interval = (
        f" [{percent(rate.interval.low)}, {percent(rate.interval.high)}]" if rate.interval else ""
    )
    text = f"{percent(rate.win_rate)}{interval}"
    return text if rate.headline_eligible else f"{text}{DAGGER} UNCALIBRATED"


def _counts(rate: WinRate) -> str:
    o = rate.outcomes
    return (
        f"W/L/T {o['win']}/{o['loss']}/{o['tie']}, soft {o['soft_win']}/{o['soft_loss']}, "
        f"flips {o['flip']}"
    )


def _kappa_text(cal: Calibration) -> str:
    kappa = cal.kappa
    interval = f" [{number(cal.interval.low)}, {number(cal.interval.high)}]" if cal.interval else ""
    return (
        f"kappa {number(kappa.value)}{interval} ({kappa.band or 'undefined'}), raw agreement "
        f"{proportion_text(cal.agreement)}, n={kappa.n} of {cal.labels_total} labels; "
        f"status {cal.status.upper()}: {cal.reason()}"
    )


def calibration_section(headline: Headline) -> Section:
    cal = headline.calibration
    kappa = cal.kappa
    section = Section("Calibration")
    pooled = " (all candidates)" if len(headline.calibrations) > 1 else ""
    section.lines.append(f"judge {headline.judge.model} vs your labels{pooled}: {_kappa_text(cal)}")
    if len(headline.calibrations) > 1:
        for candidate, own in headline.calibrations.items():
            section.lines.append(f"  for {candidate} (gates its win rates): {_kappa_text(own)}")
    if cal.inverted or cal.unmatched:
        unmatched = ", ".join(f"{k} {v}" for k, v in cal.unmatched.items()) or "none"
        section.detail_lines.append(
            f"Labels with baseline and candidate swapped, inverted: {cal.inverted}. "
            f"Not matched: {unmatched}."
        )
    for pair in cal.unmatched_model_pairs:
        section.lines.append(
            f"{pair['labels']} labels compare {pair['baseline']} with {pair['candidate']}, "
            "which this run did not compare; --evalmine-models="
            f"{pair['baseline']},{pair['candidate']} would match them"
        )
    if headline.by_reference is not None:
        section.lines += reference_lines(headline.by_reference)
    names = ("baseline", "tie", "candidate")
    rows = [
        (f"human: {name}", *(str(v) for v in row))
        for name, row in zip(names, kappa.confusion, strict=True)
    ]
    section.detail_tables.append((("", *(f"judge: {n}" for n in names)), rows))
    if cal.per_task:
        task_rows = [
            (
                row.task,
                str(row.n),
                proportion_text(row.agreement),
                number(row.kappa) if row.kappa is not None else "suppressed (<5)",
            )
            for row in cal.per_task
        ]
        section.detail_tables.append((("task", "labels", "agreement", "kappa"), task_rows))
    return section


def win_rate_section(headline: Headline, scores: Any) -> Section:
    section = Section("Win rates (candidate vs baseline)")
    for rate in headline.overall:
        overrides = headline.check_overrides(rate.candidate)
        section.lines.append(
            f"{rate.candidate}: {flagged(rate)}, {rate.title()}; {_counts(rate)}; "
            f"flip rate {proportion_text(rate.flips)}; backed by {rate.calibration_labels} "
            "labels of this candidate" + (f"; check_override {overrides}" if overrides else "")
        )
        if not rate.headline_eligible:
            section.lines.append(
                f"  {DAGGER} not a headline: " + "; ".join(rate.ineligible_reasons)
            )
        section.lines += ppi_lines(headline, rate.candidate)
    schema = ", ".join(
        f"{s.model} {proportion_text(s.schema_all.proportion)}" for s in scores if s.schema_all.n
    )
    if schema:
        section.lines.append(f"schema pass rates: {schema}")
    bias = headline.bias
    flag = f" {DAGGER} significantly away from 50%" if bias.flagged else ""
    section.lines.append(f"judge position bias: {bias.describe()}{flag}")
    return section


def concurrency_line(used: dict[str, dict[str, Any]]) -> str | None:
    """``concurrency: local 1-2 (final 1, 10 back-offs), box 8 (fixed)``: the providers
    whose width moved or was fixed; None when every one ran at its start throughout (the
    fake adapter, a server that declared its slots and kept up): nothing to say."""
    shown = []
    for provider, row in used.items():
        if row["mode"] != "fixed" and row["min"] == row["max"] and not row["backoffs"]:
            continue
        widths = str(row["min"]) if row["min"] == row["max"] else f"{row['min']}-{row['max']}"
        if row["mode"] == "fixed":
            shown.append(f"{provider} {widths} (fixed)")
        else:
            shown.append(f"{provider} {widths} (final {row['final']}, {row['backoffs']} back-offs)")
    return "concurrency: " + ", ".join(shown) if shown else None


def batch_line(batches: dict[str, Any] | None) -> str | None:
    """``batch: openai 1,800 by batch (1 batch), ollama 200 online; waited 3m12s (the run's
    wall time is the batches')``: which calls went which way (spec "Batch")."""
    if not batches or not batches.get("calls"):
        return None
    per_provider: dict[str, int] = {}
    for entry in batches.get("batches", []):
        per_provider[entry["provider"]] = per_provider.get(entry["provider"], 0) + 1
    shown = []
    for provider, counts in batches["calls"].items():
        parts = []
        if counts.get("batched") or provider in per_provider:
            made = per_provider.get(provider, 0)
            plural = "es" if made != 1 else ""
            parts.append(f"{counts.get('batched', 0):,} by batch ({made} batch{plural})")
        if counts.get("online"):
            parts.append(f"{counts['online']:,} online")
        shown.append(f"{provider} " + ", ".join(parts))
    waited = batches.get("waited_s") or 0.0
    tail = f"; waited {waited:.0f} s for batches (the run's wall time is theirs)" if waited else ""
    return "batch: " + "; ".join(shown) + tail


def ppi_lines(headline: Headline, candidate: str) -> list[str]:
    """The prediction-powered estimate beside the judge's raw rate (spec: "Prediction-powered
    estimates"), with how much of the audit sample is labelled."""
    ppi = headline.ppi.get(candidate)
    if ppi is None:
        return []
    sample = f"audit sample: {ppi.audit_labels} of {ppi.sample_pairs} pairs labelled"
    lines = [f"  {ppi.describe()}; {sample}"]
    if not ppi.headline_eligible:
        lines.append(f"  {DAGGER} not a headline (PPI): " + "; ".join(ppi.ineligible_reasons))
    return lines


def _with_flag(text: str, eligible: bool) -> str:
    return text if eligible or text == "-" else f"{text}{DAGGER} UNCALIBRATED"


def _rate(stored: dict[str, Any]) -> str:
    """A report.json rate (``{successes, n, ...}``) as ``9/10 90% [60-98%]``."""
    return proportion_text(Proportion(stored["successes"], stored["n"]))


def _corrected(stored: dict[str, Any] | None) -> str:
    if stored is None:
        return "-"
    interval = stored["interval"]
    return f"{percent(stored['rate'])} [{percent(interval['low'])}, {percent(interval['high'])}]"


def _ppi_pass_rate(stored: dict[str, Any]) -> str:
    """A criterion's prediction-powered pass rate, ``71.0% [58.2%, 83.1%] from 24 labels``;
    flagged as no headline below the label floor (its interval holds whatever the judge, so
    the judge's eligibility does not gate it)."""
    ppi = stored.get("ppi")
    if ppi is None:
        return "-"
    interval = ppi["interval"]
    text = (
        f"{percent(ppi['estimate'])} [{percent(interval['low'])}, {percent(interval['high'])}] "
        f"from {ppi['labels']} labels"
    )
    return text if stored.get("ppi_eligible") else f"{text}{DAGGER} too few labels"


def binary_section(binary: dict[str, Any]) -> Section:
    """report.json's ``binary_judges`` (so a stored run's page renders it too): all-pass over
    criteria per model, each criterion's pass rate raw and corrected, and each criterion's
    judge against the test-split labels; a number resting on a judge that is not eligible
    carries the dagger."""
    section = Section("Binary judges (PASS/FAIL per criterion)")
    calls = binary["calls"]
    verdicts = binary["verdicts"]
    missing = [f"{k} {v}" for k, v in verdicts["by_status"].items() if k != "ok"]
    section.lines.append(
        f"judge {binary['judge']['model']}: {verdicts['total']} verdicts ({calls['made']} made, "
        f"{calls['cached']} cached)" + ("; no verdict: " + ", ".join(missing) if missing else "")
    )
    section.lines.append(
        f"human labels: the test split ({binary['test_split']['fraction']:.0%} of cases, by a "
        "hash of task and case id) was read once in this run; dev-split labels never enter "
        f"these numbers; a criterion is eligible with >= {binary['min_labels_per_class']} test "
        f"labels of each class and each recall's lower bound >= {binary['min_recall']:.2f}"
    )
    section.tables.append(
        (
            ("model", "all criteria pass", "answers without every verdict"),
            [
                (
                    r["model"],
                    _with_flag(_rate(r["all_pass"]), r["eligible"]),
                    str(r["incomplete_answers"]),
                )
                for r in binary["all_pass"]
            ],
        )
    )
    section.tables.append(
        (
            (
                "model",
                "task",
                "criterion",
                "pass rate",
                "corrected (Rogan-Gladen)",
                "prediction-powered (PPI)",
            ),
            [
                (
                    r["model"],
                    r["task"],
                    r["criterion"],
                    _with_flag(_rate(r["pass_rate"]), r["eligible"]),
                    _with_flag(_corrected(r["corrected"]), r["eligible"]),
                    _ppi_pass_rate(r),
                )
                for r in binary["criteria"]
            ],
        )
    )
    section.tables.append(
        (
            (
                "task",
                "criterion",
                "test labels (dev)",
                "PASS recall",
                "FAIL recall",
                "Youden",
                "eligible",
            ),
            [
                (
                    c["task"],
                    c["criterion"],
                    f"{c['test_labels']} ({c['dev_labels']})",
                    _rate(c["pass_recall"]),
                    _rate(c["fail_recall"]),
                    number(c["youden"]),
                    "yes" if c["eligible"] else f"{DAGGER} no",
                )
                for c in binary["calibration"]
            ],
        )
    )
    section.footer += [
        f"{DAGGER} {c['task']}/{c['criterion']} not eligible: " + "; ".join(c["ineligible_reasons"])
        for c in binary["calibration"]
        if not c["eligible"]
    ]
    return section


def _points(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _answer(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def gate_section(gate: dict[str, Any]) -> Section:
    """From report.json's ``gate``, so report.html of a stored run says the same."""
    verdict = str(gate.get("verdict", "?")).replace("_", " ").upper()
    section = Section(
        f"Release gate: {verdict} ({gate.get('metric')} delta, "
        f"indifference {gate.get('indifference_points', 0):g} pts, minor regression "
        f"{gate.get('minor_regression_points', 0):g} pts)"
    )
    if gate.get("note"):
        section.lines.append(f"the gate does not apply: {gate['note']}")
    for row in gate.get("candidates") or []:
        interval = row.get("interval_points")
        shown = f" [{_points(interval['low'])}, {_points(interval['high'])}]" if interval else ""
        section.lines.append(
            f"{row.get('candidate')}: {_points(row.get('delta_points'))} pts{shown} -> "
            f"{str(row.get('verdict', '?')).upper()}: {row.get('reason', '')}"
        )
    return section


def paired_section(comparisons: Sequence[dict[str, Any]]) -> Section:
    """From report.json's ``paired`` entries, so report.html of a stored run says the same."""
    section = Section("Paired comparison (per case, stratified by task)")
    for c in comparisons:
        what = PAIRED_METRICS.get(c.get("metric", ""), c.get("metric"))
        candidate, baseline = c.get("candidate"), c.get("baseline")
        delta, interval = c.get("delta"), c.get("interval")
        if delta is None or interval is None:
            section.lines.append(f"{candidate}, {what}: no case answered by both models")
            continue
        mcnemar = c.get("mcnemar")
        tested = (
            f"; McNemar exact p {mcnemar['p_value']:.3g}, mid-p {mcnemar['mid_p_value']:.3g}"
            if mcnemar
            else ""
        )
        excluded = c.get("excluded_cases") or 0
        section.lines.append(
            f"{candidate} vs {baseline}, {what}: {percent(c.get('mean_b'))} vs "
            f"{percent(c.get('mean_a'))}, delta {_points(100 * delta)} pts "
            f"[{_points(100 * interval['low'])}, {_points(100 * interval['high'])}] over "
            f"{c.get('cases')} cases; worse {c.get('worse')}, better {c.get('better')}, same "
            f"{c.get('same')}{tested}"
            + (f"; {excluded} cases without both answers left out" if excluded else "")
        )
        section.lines.append(f"verdict: {c.get('verdict')}")
        for label in ("worse", "better"):
            for e in c.get(f"{label}_examples") or []:
                section.detail_lines.append(
                    f"{label} ({c.get('metric')}): {e.get('task')}/{e.get('case')}: {baseline} "
                    f"{_answer(e.get('baseline_answer'))} | {candidate} "
                    f"{_answer(e.get('candidate_answer'))}"
                )
    return section


def scorecard_section(summary: RunSummary) -> Section:
    section = Section("Scorecard")
    if summary.partial:
        section.lines.append(f"PARTIAL RUN: {summary.partial_reason}")
    if summary.items_not_run:
        section.lines.append(
            f"{summary.items_not_run} item(s) were not run by pytest; their answers were "
            "dispatched and are counted and checked here"
        )
    if summary.replay_misses:
        section.lines.append(
            f"REPLAY MISS: {summary.replay_misses} answer(s) or verdict(s) were not in the "
            "cache and --evalmine-record=none forbids calling"
        )
    if summary.latest_note:
        section.lines.append(summary.latest_note)
    headers, rows = list(HEADERS), [list(row) for row in scorecard_rows(summary.scores)]
    if not summary.score_only:
        # Two or more models: one score column per task, rows in the scorecard's model order.
        tasks = [t.task for t in summary.task_scores if t.model == summary.models[0] and t.task]
        for task in tasks:
            headers.append(f"{task} score")
            for row, score in zip(rows, summary.scores, strict=True):
                cell = next(
                    t for t in summary.task_scores if (t.model, t.task) == (score.model, task)
                )
                row.append(_score_cell(cell))
    section.tables.append((headers, rows))
    section.footer.append(
        f"cost: {money(summary.spent_usd)} this run, {if_uncached_text(summary)} "
        f"(answers and judge); cap {money(summary.cap_usd)} ({summary.cap_source}); "
        f"prices pinned {summary.prices_pinned}"
    )
    concurrency = concurrency_line(summary.concurrency)
    if concurrency:
        section.footer.append(concurrency)
    batched = batch_line(summary.batches)
    if batched:
        section.footer.append(batched)
    for warning in (summary.batches or {}).get("warnings", []):
        section.footer.append(f"warning: {warning}")
    # Calls still in a provider batch were sent and have not failed: a line of their own.
    in_batch = summary.answers_in_batch
    in_batch_usd = sum(r.possibly_billed_usd for r in in_batch)
    in_batch_billed = [r for r in in_batch if r.possibly_billed_usd]
    failed_calls = summary.calls_possibly_billed - len(in_batch_billed)
    if failed_calls:
        # Tries, as the cap counts them: a call retried after two lost tries is two.
        tries = summary.tries_possibly_billed - sum(
            r.tries_possibly_billed for r in in_batch_billed
        )
        section.footer.append(
            f"possibly billed: {money(summary.possibly_billed_usd - in_batch_usd)} over "
            f"{tries} {'try' if tries == 1 else 'tries'} that were sent and failed (timeout, "
            f"dropped connection, broken answer; {failed_calls} call(s)); "
            "counted at their worst case toward the cap, not in the cost above"
        )
    if in_batch:
        section.footer.append(
            f"still in a provider batch: {len(in_batch)} call(s), up to {money(in_batch_usd)} "
            "(billed when the batch completes; rerun to collect); counted at their worst case "
            "toward the cap, not in the cost above"
        )
    anomalies = summary.usage_anomalies
    if anomalies:
        first = anomalies[0]
        section.footer.append(
            f"impossible usage from the provider, clamped and costed at the clamp: "
            f"{len(anomalies)} call(s), e.g. {first['task']}/{first['case']} "
            f"({first['model']}, {first['call']}): {first['anomaly']}"
        )
    cache = summary.headline.judge_prompt_cache if summary.headline else None
    if cache and (cache["cached_input_tokens"] or cache["cache_write_tokens"]):
        section.footer.append(prompt_cache_line(cache))
    judge = summary.headline
    judge_calls = (
        f"; judge calls: {judge.judge_calls_made} made, {judge.judge_calls_cached} cached"
        if judge
        else ""
    )
    executed = [c for r in summary.records for c in r.checks if c["name"] == "exec"]
    if executed:
        isolated = all(c["message"].endswith("network: isolated") for c in executed)
        section.footer.append(
            f"execution checks: {len(executed)} run, {sum(c['passed'] for c in executed)} "
            f"passed; network: {'isolated' if isolated else 'not isolated'}"
        )
    if summary.exec_sandbox:
        section.footer.append(sandbox_line(summary.exec_sandbox))
    section.footer.append(
        f"calls: {summary.calls_made} made, {summary.calls_cached} cached{judge_calls}; "
        "outcomes: " + ", ".join(f"{k} {v}" for k, v in summary.outcomes.items())
    )
    return section


def prompt_cache_line(cache: dict[str, int]) -> str:
    """report.json's ``headline.judge_prompt_cache`` in words: the provider's prompt cache
    over the judge calls made this run (priced at its cache rates in the cost above)."""
    return (
        f"prompt cache: judge: {cache['read']:,} of {cache['calls']:,} calls read the cached "
        f"prefix ({cache['cached_input_tokens']:,} input tokens at the cache-read rate, "
        f"{cache['cache_write_tokens']:,} written at the cache-write rate)"
    )


def per_task_section(headline: Headline) -> Section:
    rows = [
        (rate.task or "", rate.candidate, str(rate.n), flagged(rate), _counts(rate))
        for rate in headline.per_task
    ]
    section = Section("Per task, worst first")
    section.tables.append((("task", "candidate", "pairs", "win rate", "counts"), rows))
    return section


def exclusions_section(headline: Headline) -> Section:
    section = Section("Exclusions (pairs not judged)")
    if not headline.excluded:
        section.lines.append("none")
    for candidate, reasons in headline.excluded.items():
        section.lines.append(
            f"{candidate}: " + ", ".join(f"{reason} {n}" for reason, n in reasons.items())
        )
    failures = headline.judge_failures
    if failures:
        # Calls, not pairs: each pair asks the judge in both orders.
        section.lines.append(
            f"judge calls that failed: {sum(failures.values())}; "
            + "; ".join(f"{n} x {reason}" for reason, n in failures.items())
        )
    return section


LABEL_NEXT_SHOWN = 10  # in the terminal; report.md lists up to LABEL_NEXT_LISTED
LABEL_NEXT_LISTED = 50


def label_next_section(headline: Headline, suggestions: Sequence[Suggestion]) -> Section:
    """``suggestions``: ``label_next`` of its pairs (``RunSummary.label_suggestions``)."""
    pairs, min_labels = headline.pair_dicts, headline.calibration.min_labels
    section = Section("Label next")
    if not suggestions:
        section.lines.append(nothing_to_label(pairs, min_labels))
        return section
    section.lines.append(
        f"{len(suggestions)} pairs where a label would teach the most (label them blind in "
        "report.html):"
    )
    section.lines += [s.line() for s in suggestions[:LABEL_NEXT_SHOWN]]
    section.detail_lines += [s.line() for s in suggestions[LABEL_NEXT_SHOWN:LABEL_NEXT_LISTED]]
    if len(suggestions) > LABEL_NEXT_SHOWN:
        section.footer.append(
            f"(the terminal shows {LABEL_NEXT_SHOWN}, report.md "
            f"{min(len(suggestions), LABEL_NEXT_LISTED)}, report.html all {len(suggestions)})"
        )
    return section


def _status(status: str | None) -> str:
    """A run's calibration status; a run that was not judged has none (never "None")."""
    return status or "not judged"


def _signed_ms(change_s: float | None) -> str:
    """A latency change in whole milliseconds, rounded before its sign is chosen: a change of
    -0.2 ms is "+0 ms", never "-0 ms"."""
    if change_s is None:
        return "-"
    return f"{round(1000 * change_s):+d} ms"


def changes_section(changes: dict[str, Any]) -> Section:
    section = Section(f"What changed since {changes['previous_run_id']}")
    routing = routing_note(changes)
    if routing is not None:
        section.lines.append(routing)
    if changes["judge_changed"]:
        section.lines.append(
            "the judge changed (model, rubric, prompt or verdict schema): calibration does not "
            "carry over; relabel or recalibrate before comparing win rates"
        )
    cal = changes["calibration"]
    if cal["status_now"] != cal["status_before"] or cal["kappa_change"]:
        section.lines.append(
            f"calibration: {_status(cal['status_before'])} -> {_status(cal['status_now'])}, "
            f"kappa {number(cal['kappa_before'])} -> {number(cal['kappa_now'])}"
        )
    cost = changes["cost"]["if_uncached_usd"]
    if cost["change"] is not None:
        section.lines.append(f"cost if uncached: {money(cost['before'])} -> {money(cost['now'])}")
    for row in changes["latency"]:
        if row["p50_change_s"] is not None:
            section.detail_lines.append(
                f"{row['model']}: p50 {_signed_ms(row['p50_change_s'])}, p95 "
                f"{_signed_ms(row['p95_change_s'])}"
            )
    if changes["same_suite"]:
        moves = changes.get("win_rate_movements", [])
        rows = [
            (
                m["task"],
                m["candidate"],
                percent(m["before"]),
                percent(m["now"]),
                f"{100 * m['change']:+.1f} pts",
            )
            for m in moves
        ]
        if rows:
            section.tables.append((("task", "candidate", "before", "now", "change"), rows))
            threshold = changes.get("mover_threshold")
            if threshold is not None:
                movers = [f"{m['task']} ({m['candidate']})" for m in changes.get("movers", [])]
                section.lines.append(
                    f"movers (a change of {100 * threshold:.0f} pts or more): "
                    + (", ".join(movers) or "none")
                )
        else:
            section.lines.append("no win-rate movements to compare")
    else:
        section.lines.append(_suite_line(changes))
    _add_cases(section, changes)
    return section


def _suite_line(changes: dict[str, Any]) -> str:
    """What changed in the suite, in the words of the case-by-case lines: their ``tasks
    changed`` names the tasks (by content, cases and variants) when the cases were compared,
    so this line does not name them again in other words."""
    suite = changes["suite_changes"]
    names = suite.get("suites") or {}
    parts = []
    if names and names.get("now") != names.get("before"):
        parts.append(f"the suites differ: {names.get('before')!r} before, {names.get('now')!r} now")
    if not changes.get("cases"):
        parts.append(
            f"tasks added: {', '.join(suite['tasks_added']) or 'none'}; removed: "
            f"{', '.join(suite['tasks_removed']) or 'none'}; changed (by whole-task hash, "
            f"cases included): {', '.join(suite['tasks_modified']) or 'none'}"
        )
    if suite.get("variants_changed"):
        parts.append(f"variants changed: {', '.join(suite['variants_changed'])}")
    labels = ", ".join(
        f"{t} {c['before']}->{c['now']}" for t, c in suite["label_count_changes"].items()
    )
    parts.append(f"label counts changed: {labels or 'none'}")
    return "the suite changed (different suite hash): no win-rate deltas; " + "; ".join(parts)


def _add_cases(section: Section, changes: dict[str, Any]) -> None:
    """The case-by-case comparison with the other run (``changes.cases``), or why not."""
    if changes.get("cases"):
        lines, detail = cross_run_lines(changes["cases"])
        section.lines += lines
        section.detail_lines += detail
    elif changes.get("cases_note"):
        section.lines.append(f"case by case: {changes['cases_note']}")


def _score_cell(row: TaskScore) -> str:
    if row.mean_score is None:
        return "-"
    return f"{row.mean_score:.2f} ({row.passed}/{row.n} passed)"


def _interval(interval: Interval | None, show: Any) -> str:
    return f" [{show(interval.low)}, {show(interval.high)}]" if interval else ""


def scores_section(summary: RunSummary) -> Section:
    """One model or no judged task: each model's pass rate and mean score per task and
    overall, each with its 95 % interval and n, where the judge's sections would stand."""
    section = Section("Scores (95 % intervals: Wilson for the pass rate, bootstrap for the mean)")
    rows = [
        (
            row.model,
            row.task or "(all tasks)",
            str(row.n),
            percent(row.pass_rate) + _interval(row.pass_interval, percent),
            number(row.mean_score) + _interval(row.score_interval, number),
        )
        for row in summary.task_scores
    ]
    headers: tuple[str, ...] = ("model", "task", "n", "pass rate", "mean score")
    if summary.repeats > 1:
        headers += ("noise floor",)
        rows = [
            (*cells, "-" if row.noise_floor is None else f"{100 * row.noise_floor:.1f} pts")
            for cells, row in zip(rows, summary.task_scores, strict=True)
        ]
    section.tables.append((headers, rows))
    unscored = sum(row.not_scored for row in summary.task_scores if row.task is None)
    if unscored:
        section.footer.append(f"not scored (no answer, or a check raised): {unscored} item(s)")
    return section


def power_section(power: dict[str, Any]) -> Section:
    """From report.json's ``power`` (spec: "Power and planning"); report.md and report.html
    only: planning figures, not the run's result."""
    return Section(POWER_TITLE, lines=power_lines(power), in_terminal=False)


def ranking_section(ranking: dict[str, Any]) -> Section:
    return Section(RANKING_TITLE, lines=ranking_lines(ranking))


def regressions_section(summary: RunSummary) -> Section:
    """First in every report when a regression task failed: these block (exit 14)."""
    failures = summary.regression_failures
    section = Section(f"REGRESSIONS FAILED: {len(failures)} item(s) of regression tasks")
    section.lines.append(
        f"regression tasks ({', '.join(summary.regression_tasks)}) must pass every case for "
        "every model"
    )
    rows = [(r.task, r.case, r.shown_model, r.outcome, failure_reason(r)) for r in failures]
    section.tables.append((("task", "case", "model", "outcome", "why"), rows))
    return section


def report_sections(summary: RunSummary) -> list[Section]:
    """regressions (when one failed), calibration, win rates, binary judges, release gate,
    scorecard, per task, exclusions, label next, paired comparison, power, what changed."""
    headline = summary.headline
    sections: list[Section] = []
    if summary.regression_failures:
        sections.append(regressions_section(summary))
    if headline is not None:
        sections.append(calibration_section(headline))
        if headline.panel is not None:
            panel = headline.panel.to_dict()
            lines = panel_lines(panel, headline.calibration.kappa.value)
            sections.append(Section(PANEL_TITLE, lines=lines))
        sections.append(win_rate_section(headline, summary.scores))
    elif summary.score_only:
        sections.append(scores_section(summary))
    elif summary.judge_note:
        sections.append(Section("Judge", lines=[summary.judge_note]))
    if summary.binary is not None:
        sections.append(binary_section(summary.binary.to_dict()))
    elif summary.binary_note:
        sections.append(Section("Binary judges (PASS/FAIL per criterion)", [summary.binary_note]))
    if summary.gate is not None:
        sections.append(gate_section(summary.gate.to_dict()))
    sections.append(scorecard_section(summary))
    if headline is not None:
        sections += [
            per_task_section(headline),
            exclusions_section(headline),
            label_next_section(headline, summary.label_suggestions),
        ]
    if len(summary.models) > 1:
        sections.append(paired_section([c.to_dict() for c in summary.paired]))
    if summary.ranking is not None:
        sections.append(ranking_section(summary.ranking))
    sections.append(power_section(summary.power))
    if summary.changes is not None:
        sections.append(changes_section(summary.changes))
    return sections
