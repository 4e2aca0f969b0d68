"""The ranking of every model and its cost beside its quality (spec: "Ranking and cost"):
report.json's ``ranking``, its lines in the terminal and report.md, and the chart in
report.html.

The figures are built once from a ``RunSummary`` (``summary_ranking``, cached on the summary)
and rendered from report.json's dict, so ``evalmine report RUN`` renders the same.
"""

from __future__ import annotations

import math
from typing import Any

from ..judging.headline import DAGGER
from ..scoring.paired import (
    ALL_PASS,
    all_pass_score,
    answers_by_case,
    compare_answers,
    pair_answers,
)
from ..stats.estimators import CONFIDENCE, Interval, seed_from
from ..stats.ranking import (
    RANKING_RESAMPLES,
    BetterThan,
    Comparison,
    CostQuality,
    RankedModel,
    bradley_terry,
    dominated_by,
    not_ranked,
    overlap,
)
from .render import money, percent

TITLE = "Ranking and cost (Bradley-Terry; quality against cost per case)"
QUALITIES = {"strength": "ranking strength", "all_pass": "all checks pass"}


def summary_ranking(summary: Any) -> dict[str, Any] | None:
    """report.json's ``ranking`` for a run of two or more models (None otherwise). The
    summary is not imported: it imports this module."""
    models = list(summary.models)
    if len(models) < 2:
        return None
    headline = summary.headline
    strengths: list[dict[str, Any]] = []
    judge_aware = None
    eligible, reasons = False, ["no judged pairs"]
    unranked: str | None = "no judged pairs"
    ranked: list[RankedModel] = []
    if headline is not None:
        comparisons = [
            Comparison(f"{p.task}/{p.case}", p.candidate, p.baseline, p.score)
            for p in headline.all_pairs
            if p.judged and p.score is not None
        ]
        ranked = bradley_terry(comparisons, models, seed=seed_from(summary.suite_hash, "ranking"))
        # A degenerate fit (every pair a flip, zero-width intervals) is said, never ranked.
        unranked = not_ranked(comparisons, ranked)
        if unranked is not None:
            ranked = []
        strengths = [dict(r.to_dict(), rank=i + 1) for i, r in enumerate(ranked)]
        # The ranking is built from the win rates' pairs: it may be a headline only when each
        # of them may.
        eligible = headline.headline_eligible and bool(strengths)
        reasons = [
            f"{rate.candidate}: {reason}"
            for rate in headline.overall
            for reason in rate.ineligible_reasons
        ]
        if not strengths:
            reasons.append(unranked or "no judged pairs")
        judge_aware = _judge_aware(headline, models, summary.suite_hash)
    win_rates = {r.candidate: r.win_rate for r in headline.overall} if headline else {}
    strength_of = {row["model"]: row["strength"] for row in strengths}
    rows = []
    for score in summary.scores:
        cases = len({(r.task, r.case) for r in summary.records if r.model == score.model})
        rows.append(
            {
                "model": score.model,
                "baseline": score.model == models[0],
                "cases": cases,
                # what the answers cost uncached: a cached rerun still says what a model costs
                "cost_per_case_usd": score.cost_if_uncached_usd / cases if cases else None,
                "cost_lower_bound": score.cost_lower_bound,
                "win_rate": win_rates.get(score.model),
                "all_pass": score.all_pass.value,
                "strength": strength_of.get(score.model),
            }
        )
    # Dominance needs the quality told apart, as the paired comparison and the ranking tell it:
    # on the checks by the paired delta's interval, on strength by intervals that do not overlap.
    told_apart = {
        "strength": _stronger(ranked),
        "all_pass": _better_on_checks(summary, models),
    }
    dominated = {
        quality: dominated_by(
            [CostQuality(r["model"], r[quality], r["cost_per_case_usd"]) for r in rows],
            told_apart[quality],
        )
        for quality in QUALITIES
    }
    fronts = {
        quality: [model for model, by in chosen.items() if not by]
        for quality, chosen in dominated.items()
    }
    for row in rows:
        row["pareto"] = {quality: row["model"] in front for quality, front in fronts.items()}
        row["dominated_by"] = {
            quality: chosen.get(row["model"], []) for quality, chosen in dominated.items()
        }
    return {
        "method": "bradley_terry",
        "confidence": CONFIDENCE,
        "resamples": RANKING_RESAMPLES,
        "not_ranked": unranked,
        "strengths": strengths,
        "headline_eligible": eligible,
        "flag": None if eligible else "UNCALIBRATED",
        "ineligible_reasons": [] if eligible else reasons,
        "cost_quality": rows,
        "pareto_front": fronts,
        "judge_aware": judge_aware,
    }


def _judge_aware(headline: Any, models: list[str], suite_hash: str) -> dict[str, Any] | None:
    """With a panel and ``judge.pairs: all`` (pairs between candidates exist): the
    judge-aware ranking over every juror's own verdict on every judged pair (its two passes'
    score, before any check override: it measures the juror), else None."""
    if getattr(headline, "panel", None) is None or not headline.other_pairs:
        return None
    from ..stats.judge_aware import JurorComparison, judge_aware_bradley_terry

    jurors = [row.juror for row in headline.panel.jurors]
    comparisons = []
    for pair in headline.all_pairs:
        if not pair.judged:
            continue
        for juror in pair.jurors:
            share = pair.juror_view(juror).judge_score
            if share is not None:
                comparisons.append(
                    JurorComparison(
                        f"{pair.task}/{pair.case}", juror, pair.candidate, pair.baseline, share
                    )
                )
    ranking = judge_aware_bradley_terry(
        comparisons, models, jurors, seed=seed_from(suite_hash, "judge_aware_ranking")
    )
    return ranking.to_dict() if ranking else None


def _stronger(ranked: list[RankedModel]) -> BetterThan:
    """x stronger than y: a higher strength, the two intervals apart (not tied)."""
    by_model = {r.model: r for r in ranked}

    def better(x: str, y: str) -> bool:
        a, b = by_model.get(x), by_model.get(y)
        return a is not None and b is not None and a.strength > b.strength and not overlap(a, b)

    return better


def _better_on_checks(summary: Any, models: list[str]) -> BetterThan:
    """x better than y on all checks pass: the paired delta x - y with its interval above 0,
    from the run's paired comparison (``summary.paired``) for a candidate and the baseline,
    else computed by the same function for two candidates (their own seed)."""
    intervals: dict[tuple[str, str], Interval | None] = {}
    for c in summary.paired:
        if c.metric == ALL_PASS:
            intervals[(c.candidate, c.baseline)] = c.comparison.interval

    def delta_interval(x: str, y: str) -> Interval | None:
        if (x, y) in intervals:
            return intervals[(x, y)]
        if (y, x) in intervals:
            flipped = intervals[(y, x)]
            return None if flipped is None else Interval(-flipped.high, -flipped.low)
        cases = sorted({(r.task, r.case) for r in summary.records})
        paired = pair_answers(
            answers_by_case(summary.records, y),
            answers_by_case(summary.records, x),
            cases,
            all_pass_score,
        )
        seed = seed_from(summary.suite_hash, "paired", x, ALL_PASS, "against", y)
        result = compare_answers(paired, ALL_PASS, seed=seed, baseline=y, candidate=x)
        intervals[(x, y)] = result.comparison.interval
        return intervals[(x, y)]

    def better(x: str, y: str) -> bool:
        interval = delta_interval(x, y)
        return interval is not None and interval.low > 0

    return better


def _strength_text(value: Any) -> str:
    return "-" if value is None else f"{value:+.2f}"


def ranking_lines(ranking: dict[str, Any]) -> list[str]:
    """The ranking, then each model's quality and cost, then the Pareto fronts: a few lines
    for the terminal and report.md."""
    lines = []
    # attached to the figure it flags, as a win rate's is (the terminal never splits the two)
    flag = "" if ranking.get("headline_eligible") else f"{DAGGER} UNCALIBRATED"
    strengths = ranking.get("strengths") or []
    for row in strengths:
        interval = row.get("interval") or {}
        shown = (
            f" [{interval['low']:+.2f}, {interval['high']:+.2f}]"
            if interval.get("low") is not None
            else ""
        )
        tied = row.get("tied_with") or []
        tie = f", statistically tied with {', '.join(tied)}" if tied else ""
        lines.append(
            f"{row['rank']}. {row['model']}: strength {_strength_text(row['strength'])}{shown}"
            f"{flag} over {row['pairs']} pairs{tie}"
        )
    if not strengths and ranking.get("not_ranked"):
        lines.append(f"no ranking: {ranking['not_ranked']}")
    if strengths and not ranking.get("headline_eligible"):
        reasons = "; ".join(ranking.get("ineligible_reasons") or [])
        lines.append(f"  {DAGGER} not a headline: {reasons}")
    for row in ranking.get("cost_quality") or []:
        cost = row.get("cost_per_case_usd")
        cost_text = "-" if cost is None else money(cost) + ("+" if row["cost_lower_bound"] else "")
        win = "baseline" if row["baseline"] else f"win rate {percent(row['win_rate'])}"
        front = [QUALITIES[q] for q, on in row["pareto"].items() if on]
        by = row.get("dominated_by") or {}
        beaten = "; ".join(
            f"{QUALITIES[q]} by {', '.join(models)}" for q, models in by.items() if models
        )
        lines.append(
            f"{row['model']}: {cost_text}/case; {win}, all pass {percent(row['all_pass'])}, "
            f"strength {_strength_text(row['strength'])}"
            + (f"; Pareto front ({', '.join(front)})" if front else "; dominated")
            + (f"; dominated on {beaten}" if front and beaten else "")
            + (f" ({beaten})" if not front and beaten else "")
        )
    lines.extend(judge_aware_lines(ranking.get("judge_aware")))
    fronts = ranking.get("pareto_front") or {}
    shown_fronts = [
        f"{QUALITIES[q]}: {', '.join(models)}" for q, models in fronts.items() if models
    ]
    if shown_fronts:
        lines.append(
            "Pareto front (no model told apart as better for no more): " + "; ".join(shown_fronts)
        )
    return lines


def _shown(interval: dict[str, Any] | None, signed: bool = True) -> str:
    if not interval or interval.get("low") is None:
        return ""
    form = "+.2f" if signed else ".2f"
    return f" [{interval['low']:{form}}, {interval['high']:{form}}]"


def judge_aware_lines(judge_aware: dict[str, Any] | None) -> list[str]:
    """The judge-aware ranking's strengths and each juror's weight (the weights average 1;
    near 0: the juror's verdicts carry no information about the models)."""
    if not judge_aware:
        return []
    lines = ["Judge-aware ranking (each juror weighted by how consistently it separates them):"]
    for row in judge_aware["strengths"]:
        lines.append(
            f"  {row['rank']}. {row['model']}: strength {_strength_text(row['strength'])}"
            f"{_shown(row['interval'])}"
        )
    for row in judge_aware["juror_weights"]:
        lines.append(
            f"  juror {row['juror']}: weight {row['weight']:.2f}"
            f"{_shown(row['interval'], signed=False)} over {row['verdicts']} verdicts"
        )
    return lines


def cost_quality_svg(ranking: dict[str, Any]) -> str:
    """Each model as a point, cost per case (log scale) across, ranking strength (or the
    all-pass rate when nothing was judged) up, the Pareto front joined by a line. viewBox
    sized: it scales with the page and needs nothing outside it."""
    from html import escape

    quality = "strength" if ranking.get("strengths") else "all_pass"
    rows = [
        r
        for r in ranking.get("cost_quality") or []
        if r.get(quality) is not None and r.get("cost_per_case_usd")
    ]
    width, height, left, right, top, bottom = 760, 320, 70, 30, 20, 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        'role="img" class="cost-quality" font-size="12" style="max-width:100%;height:auto">'
        f"<title>{escape(QUALITIES[quality])} against cost per case</title>"
    ]
    if not rows:
        parts.append(f'<text x="{left}" y="{top + 20}">no priced model with a quality</text>')
        return "".join(parts) + "</svg>"
    costs = [math.log10(r["cost_per_case_usd"]) for r in rows]
    values = [r[quality] for r in rows]
    c_low, c_high = min(costs) - 0.1, max(costs) + 0.1
    v_low, v_high = min(values), max(values)
    pad = (v_high - v_low) * 0.1 or 0.1
    v_low, v_high = v_low - pad, v_high + pad
    plot_w, plot_h = width - left - right, height - top - bottom

    def x_of(cost: float) -> float:
        return left + plot_w * (math.log10(cost) - c_low) / (c_high - c_low)

    def y_of(value: float) -> float:
        return top + plot_h * (1 - (value - v_low) / (v_high - v_low))

    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#9ca3af"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#9ca3af"/>'
        f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">'
        "cost per case (USD, log scale)</text>"
        f'<text x="14" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2})">{escape(QUALITIES[quality])}</text>'
    )
    front = sorted(
        (r for r in rows if r["pareto"].get(quality)), key=lambda r: r["cost_per_case_usd"]
    )
    if len(front) > 1:
        points = " ".join(
            f"{x_of(r['cost_per_case_usd']):.1f},{y_of(r[quality]):.1f}" for r in front
        )
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="#166534" stroke-dasharray="4 3"/>'
        )
    for row in rows:
        x, y = x_of(row["cost_per_case_usd"]), y_of(row[quality])
        on_front = row["pareto"].get(quality)
        colour = "#166534" if on_front else "#6b7280"
        label = f"{row['model']} {money(row['cost_per_case_usd'])}"
        # labels of points right of the middle run leftwards, so they stay inside the box
        right_half = x > left + plot_w / 2
        anchor, text_x = ("end", x - 9) if right_half else ("start", x + 9)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="{colour}"/>'
            f'<text x="{text_x:.1f}" y="{y + 4:.1f}" text-anchor="{anchor}">{escape(label)}'
            f"{'' if on_front else ' (dominated)'}</text>"
        )
    if quality == "strength" and not ranking.get("headline_eligible"):
        parts.append(
            f'<text x="{left + 6}" y="{top + 12}" fill="#b45309">{DAGGER} UNCALIBRATED: '
            "strengths from win rates that are not headline-eligible</text>"
        )
    return "".join(parts) + "</svg>"
