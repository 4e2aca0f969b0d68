"""The page's charts, SVG written here: the judge's confusion matrix against your labels and
the win rates with their intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..judging.headline import DAGGER
from .html_markup import as_float, as_int, cases_href, esc, pct

CATEGORIES = ("baseline", "tie", "candidate")


def confusion_svg(matrix: Sequence[Sequence[Any]]) -> str:
    """The 3x3 confusion matrix (rows human, columns judge) as a heatmap; the diagonal,
    where judge and human agree, is outlined."""
    cell_w, cell_h, left, top = 96, 44, 130, 40
    counts = [[as_int(v) for v in row] for row in matrix]
    peak = max((v for row in counts for v in row), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {left + 3 * cell_w + 10} '
        f'{top + 3 * cell_h + 10}" role="img" id="confusion-heatmap" class="heatmap" '
        f'style="max-width:{left + 3 * cell_w + 10}px">'
        "<title>Confusion matrix: rows are your labels, columns the judge</title>"
    ]
    for j, name in enumerate(CATEGORIES):
        x = left + j * cell_w + cell_w / 2
        parts.append(f'<text x="{x}" y="{top - 22}" text-anchor="middle">judge:</text>')
        parts.append(f'<text x="{x}" y="{top - 8}" text-anchor="middle">{name}</text>')
    for i, name in enumerate(CATEGORIES):
        y = top + i * cell_h
        parts.append(
            f'<text x="{left - 8}" y="{y + cell_h / 2 + 4}" text-anchor="end">you: {name}</text>'
        )
        for j in range(3):
            value = counts[i][j] if i < len(counts) and j < len(counts[i]) else 0
            alpha = 0.08 + 0.82 * value / peak
            x = left + j * cell_w
            stroke = ' stroke="#166534" stroke-width="3"' if i == j else ' stroke="#fff"'
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell_w}" height="{cell_h}" '
                f'fill="rgba(29,78,216,{alpha:.2f})"{stroke}/>'
            )
            ink = "#fff" if alpha > 0.5 else "#111827"
            parts.append(
                f'<text x="{x + cell_w / 2}" y="{y + cell_h / 2 + 5}" text-anchor="middle" '
                f'style="fill:{ink};font-size:15px">{value}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def win_rate_svg(rates: Sequence[dict[str, Any]], title: str, *, with_task: bool) -> str:
    """One row per win rate: its interval as a bar, the rate as a dot, 50 % dashed. Each row
    is a grid of three cells, the name (a link to the cases view filtered to its task and
    candidate), the plot (an SVG whose ``viewBox`` stretches to the cell's width) and the
    figures; the names and figures are text, so they stay readable at any width, and on a
    narrow screen the cells stack."""
    ticks = "".join(
        f'<span style="left:{int(tick * 100)}%">{int(tick * 100)}%</span>'
        for tick in (0, 0.25, 0.5, 0.75, 1)
    )
    parts = [
        f'<div class="win-rates" role="img" aria-label="{esc(title)}">'
        f'<div class="wr-row wr-axis"><span></span><div class="wr-ticks">{ticks}</div>'
        "<span></span></div>"
    ]
    if not rates:
        parts.append('<p class="muted">no win rates</p>')
    for rate in rates:
        name = str(rate.get("candidate", "?"))
        task = rate.get("task") if with_task else None
        if with_task:
            name = f"{rate.get('task') or '?'} ({name})"
        eligible = bool(rate.get("headline_eligible"))
        colour = "#166534" if eligible else "#b45309"
        interval = rate.get("interval") or {}
        low, high = as_float(interval.get("low")), as_float(interval.get("high"))
        value = as_float(rate.get("win_rate"))
        plot = [
            f'<line x1="{tick * PLOT_W:.1f}" y1="0" x2="{tick * PLOT_W:.1f}" y2="{PLOT_H}" '
            'stroke="#9ca3af" vector-effect="non-scaling-stroke"'
            + (' stroke-dasharray="4 3"/>' if tick == 0.5 else "/>")
            for tick in (0, 0.25, 0.5, 0.75, 1)
        ]
        if low is not None and high is not None:
            plot.append(
                f'<line x1="{_x(low)}" y1="{PLOT_H / 2}" x2="{_x(high)}" y2="{PLOT_H / 2}" '
                f'stroke="{colour}" stroke-width="4" stroke-linecap="round" '
                'vector-effect="non-scaling-stroke"/>'
            )
        if value is not None:
            # A zero-length line with a round cap: a dot that stays round when the plot
            # stretches (its stroke does not scale).
            plot.append(
                f'<line class="wr-dot" x1="{_x(value)}" y1="{PLOT_H / 2}" x2="{_x(value)}" '
                f'y2="{PLOT_H / 2}" stroke="{colour}" stroke-width="12" stroke-linecap="round" '
                'vector-effect="non-scaling-stroke"/>'
            )
        text = f"{pct(value)} n={as_int(rate.get('n'))}"
        if low is not None and high is not None:
            text = f"{pct(value)} [{pct(low)}, {pct(high)}] n={as_int(rate.get('n'))}"
        if not eligible:
            text += f" {DAGGER} UNCALIBRATED"
        href = cases_href(task=task, model=str(rate.get("candidate") or ""))
        parts.append(
            f'<div class="wr-row"><a class="wr-name" href="{href}">{esc(name)}</a>'
            f'<svg xmlns="http://www.w3.org/2000/svg" class="wr-plot" viewBox="0 0 {PLOT_W} '
            f'{PLOT_H}" preserveAspectRatio="none" role="presentation">{"".join(plot)}</svg>'
            f'<span class="wr-value">{esc(text)}</span></div>'
        )
    parts.append("</div>")
    return "".join(parts)


PLOT_W, PLOT_H = 320, 26


def _x(value: float) -> str:
    return f"{PLOT_W * min(1.0, max(0.0, value)):.1f}"
