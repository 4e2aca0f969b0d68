"""The page's summary sections, from report.json: calibration, win rates, the scorecard, the
exclusions, label next, and the sections report.md shares (``sections``) as HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..judging.headline import DAGGER
from ..scoring.sandbox import SANDBOX_LINES
from .html_charts import confusion_svg, win_rate_svg
from .html_markup import cases_href, esc, ms, num, pct, table, usd
from .labelling import KIND_TAGS
from .sections import Section

LABEL_NEXT_LISTED = 50


def calibration_html(headline: dict[str, Any]) -> str:
    cal = headline.get("calibration") or {}
    judge = (headline.get("judge") or {}).get("model", "?")
    interval = cal.get("kappa_interval") or {}
    interval_text = (
        f" [{num(interval.get('low'))}, {num(interval.get('high'))}]" if interval else ""
    )
    parts = [
        '<section id="calibration"><h2>Calibration</h2>',
        f"<p>Judge {esc(judge)} vs your labels: kappa <strong>{num(cal.get('kappa'))}"
        f"{interval_text}</strong> ({esc(cal.get('band') or 'undefined')}), raw agreement "
        f"{pct(cal.get('observed_agreement'))}, n={esc(cal.get('n', 0))} of "
        f"{esc(cal.get('labels_total', 0))} labels. Status <strong>"
        f"{esc(str(cal.get('status', '?')).upper())}</strong>: {esc(cal.get('reason', ''))}.</p>",
    ]
    for pair in cal.get("unmatched_model_pairs") or []:
        parts.append(
            f"<p>{esc(pair.get('labels'))} labels compare {esc(pair.get('baseline'))} with "
            f"{esc(pair.get('candidate'))}, which this run did not compare: "
            f"<code>--evalmine-models={esc(pair.get('baseline'))},{esc(pair.get('candidate'))}"
            "</code> would match them.</p>"
        )
    confusion = cal.get("confusion") or {}
    matrix = confusion.get("matrix")
    if matrix:
        parts.append(f'<div class="chart">{confusion_svg(matrix)}</div>')
    rows = [
        (
            str(row.get("task")),
            str(row.get("n")),
            pct(row.get("agreement")),
            num(row.get("kappa")) if row.get("kappa") is not None else "suppressed (<5)",
        )
        for row in cal.get("per_task") or []
    ]
    if rows:
        parts.append(table(("task", "labels", "agreement", "kappa"), rows, task_links=True))
    parts.append("</section>")
    return "".join(parts)


def win_rates_html(headline: dict[str, Any]) -> str:
    overall = headline.get("win_rates") or []
    per_task = headline.get("win_rates_per_task") or []
    bias = headline.get("position_bias") or {}
    parts = [
        '<section id="win-rates"><h2>Win rates (candidate vs baseline)</h2>',
        '<p class="muted">Dot: win rate over schema-passing pairs; bar: 95 % bootstrap '
        f"interval; dashed line: 50 %. {DAGGER} UNCALIBRATED: not a headline.</p>",
        f'<div class="chart">{win_rate_svg(overall, "Overall win rates", with_task=False)}</div>',
    ]
    if per_task:
        parts += [
            "<h3>Per task, worst first</h3>",
            f'<div class="chart">{win_rate_svg(per_task, "Win rates per task", with_task=True)}'
            "</div>",
        ]
    for ppi in (headline.get("ppi") or {}).values():
        flag = (
            ""
            if ppi.get("headline_eligible")
            else f" {DAGGER} not a headline: " + "; ".join(ppi.get("ineligible_reasons") or [])
        )
        parts.append(
            f"<p>{esc(ppi.get('candidate'))}: {esc(ppi.get('text'))}; audit sample: "
            f"{esc(ppi.get('audit_labels'))} of {esc(ppi.get('sample_pairs'))} pairs labelled"
            f"{esc(flag)}</p>"
        )
    parts.append(
        f"<p>Judge position bias: slot 1 won {pct(bias.get('slot_1_share'))} of "
        f"{esc(bias.get('decisive_passes', 0))} decisive passes.</p></section>"
    )
    return "".join(parts)


def scorecard_html(report: dict[str, Any]) -> str:
    rows = []
    # each model's row links to its answers in the cases view
    models = [cases_href(model=str(row.get("model"))) for row in report.get("scorecard") or []]
    for row in report.get("scorecard") or []:
        schema = row.get("schema_all") or {}
        rows.append(
            (
                str(row.get("model")) + (" (baseline)" if row.get("baseline") else ""),
                f"{row.get('passed', 0)}/{row.get('items', 0)}",
                f"{schema.get('passed', 0)}/{schema.get('n', 0)}" if schema.get("n") else "-",
                ms(row.get("latency_p50_s")),
                ms(row.get("latency_p95_s")),
                usd(row.get("cost_usd")),
                usd(row.get("cost_if_uncached_usd")),
            )
        )
    cost = report.get("cost") or {}
    headers = ("model", "passed", "schema", "p50", "p95", "cost run", "if uncached")
    sandbox = report.get("exec_sandbox")  # which sandbox ran the execution checks, if any
    sandbox_p = f"<p>{esc(SANDBOX_LINES[sandbox])}</p>" if sandbox in SANDBOX_LINES else ""
    return (
        '<section id="scorecard"><h2>Scorecard</h2>'
        + table(headers, rows, links=models)
        + f"<p>Cost {usd(cost.get('spent_usd'))} this run, {_if_uncached(cost)}"
        f"; cap {usd(cost.get('cap_usd'))} ({esc(cost.get('cap_source', ''))}); "
        f"prices pinned {esc(cost.get('prices_pinned', ''))}.</p>{sandbox_p}</section>"
    )


def _if_uncached(cost: dict[str, Any]) -> str:
    """As the text says it: today's prices, and the recorded figure when it differs."""
    today, recorded = usd(cost.get("if_uncached_usd")), usd(cost.get("if_uncached_recorded_usd"))
    if "if_uncached_recorded_usd" not in cost or today == recorded:
        return f"{today} if uncached"
    return f"{today} if uncached at today's prices (recorded {recorded})"


def exclusions_html(headline: dict[str, Any]) -> str:
    rows = [
        (str(candidate), str(reason), str(n))
        for candidate, reasons in (headline.get("exclusions") or {}).items()
        for reason, n in (reasons or {}).items()
    ]
    body = table(("candidate", "reason", "pairs"), rows) if rows else "<p>none</p>"
    return f'<section id="exclusions"><h2>Exclusions (pairs not judged)</h2>{body}</section>'


def section_html(section: Section, anchor: str) -> str:
    parts = [f'<section id="{anchor}"><h2>{esc(section.title)}</h2>']
    parts += [f"<p>{esc(line)}</p>" for line in section.lines + section.detail_lines]
    parts += [table(h, r) for h, r in section.tables + section.detail_tables]
    parts += [f"<p>{esc(line)}</p>" for line in section.footer]
    return "".join(parts) + "</section>"


def label_next_html(suggestions: Sequence[Any], nothing: str) -> str:
    """The suggestions, or ``nothing``: why there are none, as report.md and the terminal
    say it."""
    items = "".join(
        f'<li><a href="{cases_href(task=s.task, case=s.case)}"><code>{esc(s.task)}/'
        f"{esc(s.case)}</code></a> "
        f'<span class="tags">{"".join(f"<span>{esc(KIND_TAGS[k])}</span>" for k in s.kinds)}'
        "</span></li>"
        for s in suggestions[:LABEL_NEXT_LISTED]
    )
    more = (
        f"<p class='muted'>and {len(suggestions) - LABEL_NEXT_LISTED} more, in this order in "
        "the labelling view below</p>"
        if len(suggestions) > LABEL_NEXT_LISTED
        else ""
    )
    body = f"<ol>{items}</ol>{more}" if items else f"<p>{esc(nothing)}</p>"
    return f'<section id="label-next"><h2>Label next</h2>{body}</section>'
