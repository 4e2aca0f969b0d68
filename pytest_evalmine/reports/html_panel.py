"""The judge panel's section of report.html (spec: "Judge panel"): one table row per juror
(its kappa with interval, flips, position bias and cost per judged pair), the jurors that do
not agree with the labels and the biased ones named, then the panel's gain, ties and
cheapest passing choice as report.md says them. Drawn from report.json's
``headline.panel``: nothing fetched."""

from __future__ import annotations

from typing import Any

from .html_markup import esc, num, pct, table, usd
from .panel_section import TITLE, panel_lines


def _kappa(calibration: dict[str, Any]) -> str:
    interval = calibration.get("kappa_interval") or {}
    shown = f" [{num(interval.get('low'))}, {num(interval.get('high'))}]" if interval else ""
    return f"{num(calibration.get('kappa'))}{shown}"


def panel_html(headline: dict[str, Any]) -> str:
    """The section, or "" without a panel."""
    panel = headline.get("panel")
    if not panel:
        return ""
    rows = []
    for row in panel["jurors"]:
        calibration, bias = row["calibration"], row["position_bias"]
        cost = row.get("cost_per_judged_pair_usd")
        rows.append(
            [
                row["juror"],
                "yes" if row["agrees_with_labels"] else f"no ({calibration['status']})",
                _kappa(calibration),
                str(calibration.get("n", 0)),
                pct(row.get("flip_rate")),
                f"{pct(bias.get('slot_1_share'))} slot 1"
                + ("; POSITION-BIASED" if bias.get("flagged") else ""),
                "-" if cost is None else usd(cost),
            ]
        )
    named = []
    if panel["disagree_with_labels"]:
        named.append(
            "Jurors that do NOT agree with your labels: " + ", ".join(panel["disagree_with_labels"])
        )
    if panel["position_biased"]:
        named.append("Position-biased jurors: " + ", ".join(panel["position_biased"]))
    kappa = (headline.get("calibration") or {}).get("kappa")
    lines = panel_lines(panel, kappa)
    return "".join(
        [
            f'<section id="panel"><h2>{esc(TITLE)}</h2>',
            f"<p>{esc(lines[0])}</p>",
            table(
                [
                    "juror",
                    "agrees with your labels",
                    "kappa [95 %]",
                    "labels",
                    "flip rate",
                    "position bias",
                    "cost per judged pair",
                ],
                rows,
            ),
            *(f'<p class="panel-named"><strong>{esc(text)}</strong></p>' for text in named),
            *(f"<p>{esc(line)}</p>" for line in lines[1 + len(panel["jurors"]) :]),
            "</section>",
        ]
    )
