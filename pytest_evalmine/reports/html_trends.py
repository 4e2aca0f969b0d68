"""The suite's index's trend charts (spec: "The suite's index"): one small SVG per figure
over the suite's runs, oldest on the left, drawn by the code (no network, no library). A
series is a model's or a candidate's figure; a flagged point (a win rate that is not
headline-eligible) is drawn hollow and its title says UNCALIBRATED."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..judging.headline import DAGGER
from .html_markup import esc

COLOURS = ("#1d4ed8", "#b45309", "#047857", "#7c3aed", "#be123c", "#0e7490")
WIDTH, HEIGHT = 260, 84
LEFT, RIGHT, TOP, BOTTOM = 46, 8, 8, 16


@dataclass
class Series:
    """One line of a chart: ``values`` one per run, oldest first (None: the run has none)."""

    name: str
    values: list[float | None]
    flagged: list[bool] = field(default_factory=list)


def trend_chart(
    title: str,
    series: Sequence[Series],
    run_ids: Sequence[str],
    shown: Callable[[float], str],
    bounds: tuple[float, float] | None = None,
) -> str:
    """A figure with its title, its chart and its legend; ``bounds``: the y axis's range
    (else the values' own, from 0). A chart with no value says so instead."""
    values = [v for s in series for v in s.values if v is not None]
    head = f'<figure class="trend" data-figure="{esc(title)}"><figcaption>{esc(title)}</figcaption>'
    if not values:
        return head + '<p class="muted">no run has this figure</p></figure>'
    low, high = bounds or (min(0.0, min(values)), max(values))
    low, high = min(low, min(values)), max(high, max(values))
    if high == low:
        high = low + 1.0
    span_x = max(1, len(run_ids) - 1)

    def x(index: int) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * (index / span_x if len(run_ids) > 1 else 0.5)

    def y(value: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (high - value) / (high - low)

    parts = [
        f'<svg class="trend-svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{esc(title)} over {len(run_ids)} runs, oldest first">',
        f'<line x1="{LEFT}" y1="{y(high):.1f}" x2="{LEFT}" y2="{y(low):.1f}" stroke="#d1d5db"/>',
        f'<line x1="{LEFT}" y1="{y(low):.1f}" x2="{WIDTH - RIGHT}" y2="{y(low):.1f}" '
        'stroke="#d1d5db"/>',
        f'<text x="{LEFT - 3}" y="{y(high) + 4:.1f}" text-anchor="end" class="dim">'
        f"{esc(shown(high))}</text>",
        f'<text x="{LEFT - 3}" y="{y(low) + 4:.1f}" text-anchor="end" class="dim">'
        f"{esc(shown(low))}</text>",
        f'<text x="{LEFT}" y="{HEIGHT - 3}" class="dim">oldest</text>',
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 3}" text-anchor="end" class="dim">newest</text>',
    ]
    legend = []
    for number, line in enumerate(series):
        colour = COLOURS[number % len(COLOURS)]
        points = [(i, v) for i, v in enumerate(line.values) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}"/>')
        for i, value in points:
            flagged = i < len(line.flagged) and line.flagged[i]
            label = f"{line.name}, run {run_ids[i]}: {shown(value)}"
            label += f"{DAGGER} UNCALIBRATED" if flagged else ""
            parts.append(
                f'<circle class="point{" flagged" if flagged else ""}" cx="{x(i):.1f}" '
                f'cy="{y(value):.1f}" r="3" stroke="{colour}" '
                f'fill="{"#fff" if flagged else colour}"><title>{esc(label)}</title></circle>'
            )
        last = points[-1][1] if points else None
        legend.append(
            f'<li><span class="swatch" style="background:{colour}"></span>{esc(line.name)}'
            f"{': ' + esc(shown(last)) if last is not None else ''}</li>"
        )
    parts.append("</svg>")
    return head + "".join(parts) + f'<ul class="legend">{"".join(legend)}</ul></figure>'
