"""The judge panel's lines (spec: "Judge panel"): which jurors agree with the labels and which
do not, the panel's gain over its best juror, the cost per judged pair of each juror and of
the panel, and the cheapest panel or juror that passes the floor. Rendered from report.json's
``panel`` dict, so ``evalmine report RUN`` renders the same; also the reference-answer split
of kappa (spec: "Reference answers")."""

from __future__ import annotations

from typing import Any

from .render import money, number

TITLE = "Judge panel (each juror calibrated against your labels)"


def _interval(interval: dict[str, float] | None) -> str:
    return f" [{number(interval['low'])}, {number(interval['high'])}]" if interval else ""


def _cost(value: float | None) -> str:
    return "-" if value is None else money(value)


def panel_lines(panel: dict[str, Any], panel_kappa: float | None) -> list[str]:
    lines = [
        f"vote: {panel['vote']} of {len(panel['jurors'])} jurors; panel kappa "
        f"{number(panel_kappa)}; cost per judged pair {_cost(panel['cost_per_judged_pair_usd'])}"
    ]
    for row in panel["jurors"]:
        cal = row["calibration"]
        bias = row["position_bias"]
        verdict = (
            "agrees with your labels"
            if row["agrees_with_labels"]
            else "does NOT agree"
            if cal["status"] in ("below_floor", "undefined")
            else f"not measured ({cal['status']})"
        )
        share = bias["slot_1_share"]
        biased = (
            f"; POSITION-BIASED: slot 1 won {100 * share:.0f}% of its decisive passes"
            if bias["flagged"] and share is not None
            else ""
        )
        lines.append(
            f"  juror {row['juror']}: {verdict} (kappa {number(cal['kappa'])}"
            f"{_interval(cal['kappa_interval'])}, n={cal['n']}, {cal['status']}); flip rate "
            f"{number(row['flip_rate'])}; {_cost(row['cost_per_judged_pair_usd'])} per judged "
            f"pair{biased}"
        )
    gain = panel["gain_over_best_juror"]
    if gain is not None and gain["difference"] is not None:
        lines.append(
            f"panel minus its best juror ({panel['best_juror']}): kappa "
            f"{gain['difference']:+.2f}{_interval(gain['interval'])} on the same {gain['n']} labels"
        )
    lines.append(
        f"pairs without a majority (a tie): {panel['no_majority_pairs']}; pairs where the "
        f"jurors disagreed: {panel['disagreement_pairs']}"
    )
    lines.append(cheapest_line(panel["cheapest_passing"]))
    return lines


def cheapest_line(cheapest: dict[str, Any] | None) -> str:
    """The cheapest panel or single juror that passes the floor, as the report and
    ``evalmine plan`` say it."""
    if cheapest is None:
        return "no juror or smaller panel passes the calibration floor on these labels"
    who = cheapest["jurors"]
    kind = f"juror {who[0]} alone" if len(who) == 1 else f"panel {', '.join(who)}"
    return (
        f"cheapest that passes the floor on these labels: {kind} (kappa "
        f"{number(cheapest['kappa'])} on {cheapest['n']}, "
        f"{_cost(cheapest['cost_per_judged_pair_usd'])} per judged pair)"
    )


def reference_lines(split: dict[str, Any]) -> list[str]:
    """kappa with and without reference answers, where both exist among the labels."""
    parts = []
    for key, name in (("with_reference", "with"), ("without_reference", "without")):
        row = split[key]
        parts.append(
            f"{name} a reference answer: kappa {number(row['kappa'])}"
            f"{_interval(row['kappa_interval'])}, n={row['n']}"
        )
    return ["; ".join(parts)]
